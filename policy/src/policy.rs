//! The policy IR: what happens to each syscall number and argument pattern. Fixed capacity and
//! no allocation, so the preload can build one on its stack before `main`.

use crate::action::Action;
use crate::arch::Arch;

/// Syscall numbers a policy can name (every table entry is below this).
pub const MAX_NR: usize = 1024;
/// Argument rules (entries with conditions, or with an action other than allow) per policy.
pub const MAX_RULES: usize = 384;
/// Alternatives (`||`-separated) over all rules of a policy.
pub const MAX_ALTS: usize = 384;
/// Conditions over all rules of a policy.
pub const MAX_CONDS: usize = 768;
/// Conditions in one alternative (keeps every jump of a rule block short).
pub const MAX_CONDS_PER_ALT: usize = 16;

/// How many bits of an argument a condition compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    /// The low 32 bits: what the kernel reads for `int` arguments (flags, families, requests),
    /// so setting high bits cannot slip past a rule.
    W32,
    /// All 64 bits: what the kernel reads for pointers, sizes and `long` arguments (a bare `aN`
    /// of such an argument), and `aN.64` for any argument.
    W64,
}

/// A comparison operator; all comparisons are unsigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// The operator as written in the grammar.
    pub const fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// One comparison on one argument: `(aN & mask) OP value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cond {
    /// Argument index, 0..=5.
    pub arg: u8,
    /// Bits compared.
    pub width: Width,
    /// Mask applied before comparing (all ones when the rule has no `&`).
    pub mask: u64,
    /// Operator.
    pub op: CmpOp,
    /// Right-hand side.
    pub value: u64,
}

impl Cond {
    /// Whether the condition holds for these syscall arguments.
    pub fn matches(&self, args: &[u64; 6]) -> bool {
        let mut a = args[self.arg as usize] & self.mask;
        if self.width == Width::W32 {
            a &= 0xffff_ffff;
        }
        let v = self.value;
        match self.op {
            CmpOp::Eq => a == v,
            CmpOp::Ne => a != v,
            CmpOp::Lt => a < v,
            CmpOp::Le => a <= v,
            CmpOp::Gt => a > v,
            CmpOp::Ge => a >= v,
        }
    }
}

/// An action for one syscall, taken when any of its alternatives holds (always, if none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Syscall number.
    pub nr: u16,
    /// What happens when the rule matches.
    pub action: Action,
    alt_start: u16,
    alt_len: u16,
    order: u16,
    exempt: bool,
}

/// Whether unlisted syscalls run (deny list) or get the default action (allow list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `SECCOMP_SYSCALL_ALLOW` was given: anything not allowed gets the default action.
    AllowList,
    /// Only `SECCOMP_SYSCALL_DENY` was given: anything not denied runs.
    DenyList,
}

/// A complete syscall policy for one architecture.
#[derive(Clone)]
pub struct Policy {
    arch: Arch,
    mode: Mode,
    default_action: Action,
    allow: [u64; MAX_NR / 64],
    /// The syscalls that have at least one rule: most have none, and the compiler asks about
    /// every number, so [`Policy::rules_for`] answers those without a search.
    ruled: [u64; MAX_NR / 64],
    rules: [Rule; MAX_RULES],
    n_rules: usize,
    alts: [(u16, u16); MAX_ALTS],
    n_alts: usize,
    conds: [Cond; MAX_CONDS],
    n_conds: usize,
}

const NO_RULE: Rule = Rule {
    nr: 0,
    action: Action::Allow,
    alt_start: 0,
    alt_len: 0,
    order: 0,
    exempt: false,
};
const NO_COND: Cond = Cond {
    arg: 0,
    width: Width::W32,
    mask: 0,
    op: CmpOp::Eq,
    value: 0,
};

impl core::fmt::Debug for Policy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Policy")
            .field("arch", &self.arch)
            .field("mode", &self.mode)
            .field("default_action", &self.default_action)
            .field("rules", &self.rules())
            .finish_non_exhaustive()
    }
}

/// Capacity exhausted while adding a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

impl Policy {
    /// An empty policy: nothing allowed beyond what `mode` implies.
    pub fn new(arch: Arch, mode: Mode, default_action: Action) -> Policy {
        Policy {
            arch,
            mode,
            default_action,
            allow: [0; MAX_NR / 64],
            ruled: [0; MAX_NR / 64],
            rules: [NO_RULE; MAX_RULES],
            n_rules: 0,
            alts: [(0, 0); MAX_ALTS],
            n_alts: 0,
            conds: [NO_COND; MAX_CONDS],
            n_conds: 0,
        }
    }

    /// Empties the policy for reuse, touching only its live parts (the rule, alternative and
    /// condition slots past their counts are never read): the preload starts from one value.
    pub fn reset(&mut self, arch: Arch, mode: Mode, default_action: Action) {
        self.arch = arch;
        self.mode = mode;
        self.default_action = default_action;
        self.allow = [0; MAX_NR / 64];
        self.ruled = [0; MAX_NR / 64];
        self.n_rules = 0;
        self.n_alts = 0;
        self.n_conds = 0;
    }

    /// Target architecture.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Allow list or deny list.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The action for calls nothing else decides (allow-list mode), and for denied entries.
    pub fn default_action(&self) -> Action {
        self.default_action
    }

    /// What a syscall gets when no rule matches and it is not allowed outright.
    pub fn fallback(&self) -> Action {
        match self.mode {
            Mode::AllowList => self.default_action,
            Mode::DenyList => Action::Allow,
        }
    }

    /// Allows `nr` unconditionally (unless a deny rule for it matches first).
    pub fn allow(&mut self, nr: u32) {
        if (nr as usize) < MAX_NR {
            self.allow[nr as usize / 64] |= 1 << (nr % 64);
        }
    }

    /// Whether `nr` is allowed unconditionally.
    pub fn is_allowed(&self, nr: u32) -> bool {
        (nr as usize) < MAX_NR && self.allow[nr as usize / 64] & (1 << (nr % 64)) != 0
    }

    /// Adds a rule for `nr`: `action` when any alternative (a list of ANDed conditions) holds;
    /// with no alternatives, always.
    pub fn add_rule(&mut self, nr: u32, action: Action, alts: &[&[Cond]]) -> Result<(), Full> {
        self.insert_rule(nr, action, alts, false)
    }

    /// Adds an exemption: `nr` is allowed when any alternative holds (always, with none),
    /// before any other rule of the policy is looked at. The host's outer filter uses it for
    /// what exec, the loader and the preload's installation need.
    pub fn exempt(&mut self, nr: u32, alts: &[&[Cond]]) -> Result<(), Full> {
        self.insert_rule(nr, Action::Allow, alts, true)
    }

    fn insert_rule(
        &mut self,
        nr: u32,
        action: Action,
        alts: &[&[Cond]],
        exempt: bool,
    ) -> Result<(), Full> {
        let n_conds: usize = alts.iter().map(|a| a.len()).sum();
        if self.n_rules == MAX_RULES
            || self.n_alts + alts.len() > MAX_ALTS
            || self.n_conds + n_conds > MAX_CONDS
            || alts
                .iter()
                .any(|a| a.is_empty() || a.len() > MAX_CONDS_PER_ALT)
            || alts.iter().flat_map(|a| a.iter()).any(|c| c.arg > 5)
            || nr as usize >= MAX_NR
        {
            return Err(Full);
        }
        let alt_start = self.n_alts as u16;
        for alt in alts {
            self.alts[self.n_alts] = (self.n_conds as u16, alt.len() as u16);
            self.n_alts += 1;
            for c in alt.iter() {
                self.conds[self.n_conds] = *c;
                self.n_conds += 1;
            }
        }
        let rule = Rule {
            nr: nr as u16,
            action,
            alt_start,
            alt_len: alts.len() as u16,
            order: self.n_rules as u16,
            exempt,
        };
        // Keep the rules in evaluation order at all times (insertion after every rule that
        // sorts before or equal), so `decide`, `rules_for` and the compiler, which only borrow
        // the policy, never see an unsorted list.
        let at = self.rules[..self.n_rules]
            .partition_point(|r| Self::eval_key(r) <= Self::eval_key(&rule));
        self.rules.copy_within(at..self.n_rules, at + 1);
        self.rules[at] = rule;
        self.n_rules += 1;
        self.ruled[nr as usize / 64] |= 1 << (nr % 64);
        Ok(())
    }

    /// The evaluation order: by syscall, exemptions first, then strictest action first, then
    /// as written.
    fn eval_key(r: &Rule) -> (u16, bool, core::cmp::Reverse<u8>, u16) {
        (
            r.nr,
            !r.exempt,
            core::cmp::Reverse(r.action.severity()),
            r.order,
        )
    }

    /// All rules, in evaluation order: by syscall, then strictest action first (allow rules last),
    /// then in the order they were written ([`Policy::add_rule`] keeps that order).
    pub fn rules(&self) -> &[Rule] {
        &self.rules[..self.n_rules]
    }

    /// The rules for one syscall, in evaluation order.
    pub fn rules_for(&self, nr: u32) -> &[Rule] {
        if self
            .ruled
            .get(nr as usize / 64)
            .is_none_or(|w| w & (1 << (nr % 64)) == 0)
        {
            return &[];
        }
        let rules = self.rules();
        let start = rules.partition_point(|r| u32::from(r.nr) < nr);
        let end = rules.partition_point(|r| u32::from(r.nr) <= nr);
        &rules[start..end]
    }

    /// The alternatives of a rule, each a list of conditions that must all hold.
    pub fn alternatives<'a>(&'a self, rule: &Rule) -> impl Iterator<Item = &'a [Cond]> + 'a {
        let alts = &self.alts[rule.alt_start as usize..(rule.alt_start + rule.alt_len) as usize];
        alts.iter()
            .map(move |(s, l)| &self.conds[*s as usize..(*s + *l) as usize])
    }

    /// Whether a rule holds unconditionally.
    pub fn is_unconditional(rule: &Rule) -> bool {
        rule.alt_len == 0
    }

    /// The decision for a syscall when it does not depend on arguments, or `None` when rules
    /// with conditions must look at them.
    pub fn constant_decision(&self, nr: u32) -> Option<Action> {
        let rules = self.rules_for(nr);
        match rules.first() {
            None => Some(if self.is_allowed(nr) {
                Action::Allow
            } else {
                self.fallback()
            }),
            Some(r) if Self::is_unconditional(r) => Some(r.action),
            Some(_) => None,
        }
    }

    /// The reference semantics every compiled program must agree with.
    pub fn decide(&self, nr: u32, args: &[u64; 6]) -> Action {
        for rule in self.rules_for(nr) {
            if Self::is_unconditional(rule)
                || self
                    .alternatives(rule)
                    .any(|alt| alt.iter().all(|c| c.matches(args)))
            {
                return rule.action;
            }
        }
        if self.is_allowed(nr) {
            Action::Allow
        } else {
            self.fallback()
        }
    }

    /// Whether any decision of this policy can be `action`.
    pub fn uses(&self, action: Action) -> bool {
        self.fallback() == action || self.rules().iter().any(|r| r.action == action)
    }
}

impl Policy {
    /// In trap mode the SIGSYS handler needs `write` (for its message) and `rt_sigreturn`;
    /// an allow list gets both by itself.
    pub fn add_trap_support(&mut self) {
        if self.mode == Mode::AllowList && self.uses(Action::Trap) {
            for name in ["write", "rt_sigreturn"] {
                if let Some(nr) = self.arch.syscall_number(name) {
                    self.allow(nr);
                }
            }
        }
    }
}
