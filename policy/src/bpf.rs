//! Compiles a [`Policy`] to a classic BPF seccomp program.
//!
//! Layout, chosen from measurements on the kernel's attach cost (see docs/benchmarks.md):
//! 1. architecture check: any other `seccomp_data.arch` (i386 `int 0x80`, arm32) is killed;
//! 2. on x86_64, any number with the x32 bit (>= 0x40000000) is killed, in every mode;
//! 3. a balanced tree of `jge` over ranges of numbers sharing one decision: a constant action,
//!    or the rule block of a syscall decided by its arguments (neighbours with identical
//!    blocks form one range). Every number walks about log2(ranges) jumps to its leaf, so
//!    building the kernel's decision cache, which emulates the program for every number when
//!    it is attached, no longer walks a chain of `jeq`s before the tree (41% fewer steps for
//!    `minimal`), and a ruled call such as `openat` reaches its block in about 8 jumps;
//! 4. after the tree, one `ret` per action, shared by the leaves that decide it (about 40%
//!    fewer instructions than a `ret` per leaf; the kernel's attach cost grows with program
//!    length), then the rule blocks that several leaves reach (syscalls whose blocks are
//!    identical, such as the spawner's secret exemptions, share one). A rule block with one
//!    leaf is written at that leaf. A leaf whose shared target is beyond a conditional jump's
//!    reach (255) gets its `ret`, or a `ja` to its block, in place.
//!
//! The path of every number without argument rules uses only `ld nr/arch`, `jeq`, `jge`, `ja`
//! and `ret`, which the kernel's decision cache can follow, so argument-free decisions cost
//! nothing per call once attached.

use crate::action::{Action, RET_KILL_PROCESS};
use crate::error::ErrorKind;
use crate::policy::{CmpOp, Cond, Policy, Rule, Width, MAX_NR, MAX_RULES};

/// One classic BPF instruction, laid out as the kernel's `struct sock_filter`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset when true.
    pub jt: u8,
    /// Jump offset when false.
    pub jf: u8,
    /// Constant operand.
    pub k: u32,
}

/// The kernel's limit on a program's length (BPF_MAXINSNS).
pub const MAX_INSNS: usize = 4096;

/// `BPF_LD | BPF_W | BPF_ABS`
pub const LD_W_ABS: u16 = 0x20;
/// `BPF_ALU | BPF_AND | BPF_K`
pub const ALU_AND_K: u16 = 0x54;
/// `BPF_JMP | BPF_JA`
pub const JA: u16 = 0x05;
/// `BPF_JMP | BPF_JEQ | BPF_K`
pub const JEQ_K: u16 = 0x15;
/// `BPF_JMP | BPF_JGT | BPF_K`
pub const JGT_K: u16 = 0x25;
/// `BPF_JMP | BPF_JGE | BPF_K`
pub const JGE_K: u16 = 0x35;
/// `BPF_JMP | BPF_JSET | BPF_K`
pub const JSET_K: u16 = 0x45;
/// `BPF_RET | BPF_K`
pub const RET_K: u16 = 0x06;

/// Offset of `seccomp_data.nr`.
pub const OFF_NR: u32 = 0;
/// Offset of `seccomp_data.arch`.
pub const OFF_ARCH: u32 = 4;
/// Offset of `seccomp_data.args[i]` is `OFF_ARGS + 8 * i` (low word on little-endian targets).
pub const OFF_ARGS: u32 = 16;

/// First syscall number of the x32 ABI on x86_64.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}
const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}
const fn ret(a: Action) -> Insn {
    stmt(RET_K, a.ret())
}

/// Writes instructions, or only counts them when it has no buffer (to size jumps).
struct Out<'a> {
    buf: Option<&'a mut [Insn]>,
    len: usize,
}

impl Out<'_> {
    fn counter() -> Out<'static> {
        Out { buf: None, len: 0 }
    }
    fn push(&mut self, i: Insn) {
        if let Some(b) = self.buf.as_deref_mut() {
            if let Some(slot) = b.get_mut(self.len) {
                *slot = i;
            }
        }
        self.len += 1;
    }
}

/// What the tree decides for a range of numbers: one action for all of them, or the rule block
/// of a group of syscalls decided by their arguments (numbers next to each other whose blocks
/// are identical form one range).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leaf {
    Ret(Action),
    /// An index into [`Blocks::groups`].
    Block(usize),
}

#[derive(Clone, Copy)]
struct Range {
    start: u32,
    /// What the filter does for the syscalls of this range.
    leaf: Leaf,
}

const MAX_RANGES: usize = MAX_NR + 2;

/// One rule block and the syscalls that share it.
#[derive(Clone, Copy, Default)]
struct Group {
    /// A member whose rules [`emit_rule_block`] writes (every member's block is the same).
    nr: u32,
    /// Leaves of the tree that reach this block: a block with one is written at its leaf, a
    /// block with several once after the tree.
    leaves: usize,
    /// Length of the block.
    len: usize,
    /// Position of a block written after the tree, counted from the first such block.
    offset: usize,
}

/// The syscalls decided by their arguments, grouped by identical rule blocks.
struct Blocks {
    groups: [Group; MAX_RULES],
    n: usize,
    /// Each ruled number's group (unused for the others).
    group_of: [u16; MAX_NR],
}

impl Blocks {
    /// Groups the syscalls with argument rules. Syscalls whose blocks would be identical
    /// share one: the spawner's exemptions (the same 64-bit secret in the same argument, then
    /// the same refusal) are most of its program otherwise, and the kernel's attach cost
    /// grows with the program's length. Each block's fingerprint is taken once, so finding
    /// the groups compares numbers, and blocks only where those agree.
    fn new(policy: &Policy) -> Blocks {
        let mut b = Blocks {
            groups: [Group::default(); MAX_RULES],
            n: 0,
            group_of: [0; MAX_NR],
        };
        let mut ruled = [(0u32, 0u64); MAX_RULES];
        let mut n = 0;
        let mut last = u32::MAX;
        for rule in policy.rules() {
            let nr = u32::from(rule.nr);
            if nr == last || policy.constant_decision(nr).is_some() {
                continue;
            }
            last = nr;
            if let Some(slot) = ruled.get_mut(n) {
                *slot = (nr, fingerprint(policy, nr));
                n += 1;
            }
        }
        let ruled = &ruled[..n];
        let mut grouped = [false; MAX_RULES];
        for (i, &(nr, print)) in ruled.iter().enumerate() {
            if grouped[i] {
                continue;
            }
            let g = b.n;
            let mut c = Out::counter();
            emit_rule_block(policy, nr, &mut c);
            b.groups[g] = Group {
                nr,
                leaves: 0,
                len: c.len,
                offset: 0,
            };
            b.n += 1;
            for (j, &(other, other_print)) in ruled.iter().enumerate().skip(i) {
                if !grouped[j]
                    && (j == i || (other_print == print && same_block(policy, nr, other)))
                {
                    grouped[j] = true;
                    b.group_of[other as usize] = g as u16;
                }
            }
        }
        b
    }

    /// Counts each group's leaves in `ranges` and places the shared blocks one after another.
    fn count_leaves(&mut self, ranges: &[Range]) {
        for r in ranges {
            if let Leaf::Block(g) = r.leaf {
                self.groups[g].leaves += 1;
            }
        }
        let mut offset = 0;
        for g in self.groups[..self.n].iter_mut().filter(|g| g.leaves > 1) {
            g.offset = offset;
            offset += g.len;
        }
    }
}

/// Compiles `policy` into `out`; returns the number of instructions written.
pub fn compile(policy: &Policy, out: &mut [Insn]) -> Result<usize, ErrorKind> {
    let mut blocks = Blocks::new(policy);
    let mut ranges = [Range {
        start: 0,
        leaf: Leaf::Ret(Action::Kill),
    }; MAX_RANGES];
    let n = build_ranges(policy, &blocks, &mut ranges);
    let ranges = &ranges[..n];
    blocks.count_leaves(ranges);

    let mut o = Out {
        buf: Some(out),
        len: 0,
    };
    emit_all(policy, &blocks, ranges, &mut o);
    let cap = o.buf.as_ref().map_or(0, |b| b.len());
    if o.len > MAX_INSNS || o.len > cap {
        return Err(ErrorKind::FilterTooLarge);
    }
    Ok(o.len)
}

/// Replaces every `ret from` of a compiled program with `ret to`; returns how many it changed.
/// Only `ret` instructions carry actions, so the program's decisions change exactly from one
/// action to the other.
pub fn retarget(prog: &mut [Insn], from: u32, to: u32) -> usize {
    let mut n = 0;
    for i in prog.iter_mut().filter(|i| i.code == RET_K && i.k == from) {
        i.k = to;
        n += 1;
    }
    n
}

/// Compiles `policy` into a new vector.
#[cfg(feature = "std")]
pub fn compile_vec(policy: &Policy) -> Result<std::vec::Vec<Insn>, ErrorKind> {
    let mut buf = std::vec![Insn::default(); MAX_INSNS];
    let n = compile(policy, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

fn emit_all(policy: &Policy, blocks: &Blocks, ranges: &[Range], o: &mut Out<'_>) {
    let arch = policy.arch();
    o.push(stmt(LD_W_ABS, OFF_ARCH));
    o.push(jump(JEQ_K, arch.audit_arch(), 1, 0));
    o.push(stmt(RET_K, RET_KILL_PROCESS));
    o.push(stmt(LD_W_ABS, OFF_NR));
    if arch.has_x32() {
        o.push(jump(JGE_K, X32_SYSCALL_BIT, 0, 1));
        o.push(stmt(RET_K, RET_KILL_PROCESS));
    }
    emit_tree(policy, blocks, ranges, o);
}

/// The rules [`emit_rule_block`] writes for `nr` (those before the first unconditional one)
/// and the decision after them (that rule's, else the syscall's fallback).
fn block(policy: &Policy, nr: u32) -> (&[Rule], Action) {
    let rules = policy.rules_for(nr);
    let cut = rules
        .iter()
        .position(Policy::is_unconditional)
        .unwrap_or(rules.len());
    let last = match rules.get(cut) {
        Some(r) => r.action,
        None if policy.is_allowed(nr) => Action::Allow,
        None => policy.fallback(),
    };
    (&rules[..cut], last)
}

/// A number that is equal for syscalls whose blocks are the same ([`same_block`] decides):
/// FNV-1a over the block's rules, their conditions and the decision after them.
fn fingerprint(policy: &Policy, nr: u32) -> u64 {
    struct Fnv(u64);
    impl core::hash::Hasher for Fnv {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for b in bytes {
                self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    use core::hash::{Hash, Hasher};
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    let (rules, last) = block(policy, nr);
    last.hash(&mut h);
    for r in rules {
        r.action.hash(&mut h);
        for alt in policy.alternatives(r) {
            alt.len().hash(&mut h);
            alt.hash(&mut h);
        }
    }
    h.finish()
}

/// Whether syscalls `a` and `b` compile to the same rule block (as [`emit_rule_block`]
/// writes it): the same conditional rules in the same order, and the same decision after them
/// (an unconditional rule's, which ends the block, else the syscall's fallback). A refusal by
/// an explicit rule and one by the profile's default compile alike, so they share too.
fn same_block(policy: &Policy, a: u32, b: u32) -> bool {
    let ((ra, la), (rb, lb)) = (block(policy, a), block(policy, b));
    la == lb
        && ra.len() == rb.len()
        && ra.iter().zip(rb).all(|(x, y)| {
            x.action == y.action
                && policy.alternatives(x).count() == policy.alternatives(y).count()
                && policy
                    .alternatives(x)
                    .zip(policy.alternatives(y))
                    .all(|(p, q)| p == q)
        })
}

/// Groups syscall numbers into maximal runs with one decision: a constant action, or one rule
/// block (adjacent numbers sharing a block share its leaf too; the block reads only arguments).
fn build_ranges(policy: &Policy, blocks: &Blocks, ranges: &mut [Range; MAX_RANGES]) -> usize {
    // Every number a policy can name (not only the table's: `Policy::allow` and `add_rule`
    // accept any number below MAX_NR), then everything from MAX_NR upwards gets the fallback.
    let end = MAX_NR as u32;
    let mut n = 0;
    let mut current: Option<Leaf> = None;
    for nr in 0..=end {
        let leaf = if nr == end {
            Leaf::Ret(policy.fallback())
        } else {
            match policy.constant_decision(nr) {
                Some(a) => Leaf::Ret(a),
                None => Leaf::Block(usize::from(blocks.group_of[nr as usize])),
            }
        };
        if current != Some(leaf) {
            ranges[n] = Range {
                start: if n == 0 { 0 } else { nr },
                leaf,
            };
            n += 1;
            current = Some(leaf);
        }
    }
    n
}

/// Most distinct actions whose `ret` the tree shares.
const MAX_SHARED: usize = 16;

/// The targets placed right after the tree: one `ret` per distinct action, then the rule
/// blocks that several leaves reach. A leaf whose target is within a jump's reach (255) costs
/// no instruction of its own.
struct Shared<'a> {
    policy: &'a Policy,
    blocks: &'a Blocks,
    actions: [Action; MAX_SHARED],
    n: usize,
    /// Absolute position of the first shared `ret`.
    base: usize,
    /// Leaves (by range index) emitted in place because their target is out of reach: a `ret`,
    /// or a `ja` to their shared block.
    inline: [bool; MAX_RANGES],
}

impl<'a> Shared<'a> {
    fn new(policy: &'a Policy, blocks: &'a Blocks, ranges: &[Range]) -> Shared<'a> {
        let mut s = Shared {
            policy,
            blocks,
            actions: [Action::Kill; MAX_SHARED],
            n: 0,
            base: 0,
            inline: [false; MAX_RANGES],
        };
        for r in ranges {
            if let Leaf::Ret(a) = r.leaf {
                if !s.actions[..s.n].contains(&a) && s.n < MAX_SHARED {
                    s.actions[s.n] = a;
                    s.n += 1;
                }
            }
        }
        s
    }

    /// Where a shared block starts, or `None` when its only leaf holds it.
    fn block_at(&self, g: usize) -> Option<usize> {
        let g = self.blocks.groups[g];
        (g.leaves > 1).then_some(self.base + self.n + g.offset)
    }

    /// Where the target of a one-range subtree is, unless that leaf is emitted in place.
    fn target(&self, sub: &[Range], index: usize) -> Option<usize> {
        if sub.len() != 1 || self.inline[index] {
            return None;
        }
        match sub[0].leaf {
            Leaf::Ret(a) => {
                let i = self.actions[..self.n].iter().position(|x| *x == a)?;
                Some(self.base + i)
            }
            Leaf::Block(g) => self.block_at(g),
        }
    }

    /// Writes the shared `ret`s and blocks, in the order [`Shared::target`] assumes.
    fn emit(&self, o: &mut Out<'_>) {
        for a in &self.actions[..self.n] {
            o.push(ret(*a));
        }
        for g in self.blocks.groups[..self.blocks.n].iter() {
            if g.leaves > 1 {
                emit_rule_block(self.policy, g.nr, o);
            }
        }
    }
}

/// Emits the tree, then its shared targets. Leaves whose target turns out to be out of reach
/// are moved in place and the layout is computed again (each round moves at least one, so
/// this ends).
fn emit_tree(policy: &Policy, blocks: &Blocks, ranges: &[Range], o: &mut Out<'_>) {
    let start = o.len;
    let mut s = Shared::new(policy, blocks, ranges);
    if ranges.len() == 1 {
        emit_leaf(&ranges[0], &s, o);
        return;
    }
    loop {
        s.base = start + tree_len(ranges, 0, &s);
        let mut marks = [false; MAX_RANGES];
        let mut check = Out {
            buf: None,
            len: start,
        };
        emit_node(ranges, 0, &s, &mut check, &mut marks);
        if !marks.contains(&true) {
            break;
        }
        for (inline, mark) in s.inline.iter_mut().zip(marks) {
            *inline |= mark;
        }
    }
    // Every leaf reaches its target now: nothing is marked.
    emit_node(ranges, 0, &s, o, &mut [false; MAX_RANGES]);
    s.emit(o);
}

/// A leaf written in place: its `ret`, its rule block when no other leaf reaches it, else a
/// `ja` to the shared block after the tree (always forward, and `ja` reaches any distance).
fn emit_leaf(r: &Range, s: &Shared<'_>, o: &mut Out<'_>) {
    match r.leaf {
        Leaf::Ret(a) => o.push(ret(a)),
        Leaf::Block(g) => match s.block_at(g) {
            // While sizing, the target may not be known yet: only the length counts then.
            Some(t) => o.push(stmt(JA, t.saturating_sub(o.len + 1) as u32)),
            None => emit_rule_block(s.policy, s.blocks.groups[g].nr, o),
        },
    }
}

/// How many instructions [`emit_node`] writes for `ranges` (starting at range index `first`).
/// It depends only on which leaves are in place, not on where the subtree lands: a leaf that
/// jumps to a shared target costs nothing, one in place its `ret`, `ja` or block. Computed
/// without writing, since the layout loop sizes every left subtree on each round.
fn tree_len(ranges: &[Range], first: usize, s: &Shared<'_>) -> usize {
    if ranges.len() == 1 {
        return match ranges[0].leaf {
            Leaf::Block(g) if s.block_at(g).is_none() => s.blocks.groups[g].len,
            _ => 1,
        };
    }
    let mid = ranges.len() / 2;
    let (left, right) = ranges.split_at(mid);
    let l = s.target(left, first).is_some();
    let r = s.target(right, first + mid).is_some();
    let left_len = if l { 0 } else { tree_len(left, first, s) };
    let right_len = if r {
        0
    } else {
        tree_len(right, first + mid, s)
    };
    // The `ja` over a left subtree out of a conditional jump's reach.
    let trampoline = usize::from(!l && !r && left_len > 255);
    1 + trampoline + left_len + right_len
}

/// One node of the tree over `ranges` (which start at range index `first`): `jge` on the
/// first number of its right half. A child that is a single range jumps straight to its
/// shared target when it can; `marks` records those that cannot reach it.
fn emit_node(
    ranges: &[Range],
    first: usize,
    s: &Shared<'_>,
    o: &mut Out<'_>,
    marks: &mut [bool; MAX_RANGES],
) {
    if ranges.len() == 1 {
        emit_leaf(&ranges[0], s, o);
        return;
    }
    let mid = ranges.len() / 2;
    let (left, right) = ranges.split_at(mid);
    let k = right[0].start;
    let pc = o.len;
    // The jump offset from the `jge` at `pc` to a shared target, if it fits in a byte.
    let mut reach = |target: Option<usize>, index: usize| -> Option<u8> {
        let t = target?;
        // Before the layout is known (the sizing pass) the target may even lie behind.
        match t.checked_sub(pc + 1).and_then(|d| u8::try_from(d).ok()) {
            Some(d) => Some(d),
            None => {
                marks[index] = true;
                Some(0)
            }
        }
    };
    let l = reach(s.target(left, first), first);
    let r = reach(s.target(right, first + mid), first + mid);
    match (l, r) {
        (Some(jf), Some(jt)) => o.push(jump(JGE_K, k, jt, jf)),
        (Some(jf), None) => {
            o.push(jump(JGE_K, k, 0, jf));
            emit_node(right, first + mid, s, o, marks);
        }
        (None, Some(jt)) => {
            o.push(jump(JGE_K, k, jt, 0));
            emit_node(left, first, s, o, marks);
        }
        (None, None) => {
            let len = tree_len(left, first, s);
            if len <= 255 {
                o.push(jump(JGE_K, k, len as u8, 0));
            } else {
                o.push(jump(JGE_K, k, 0, 1));
                o.push(stmt(JA, len as u32));
            }
            emit_node(left, first, s, o, marks);
            emit_node(right, first + mid, s, o, marks);
        }
    }
}

/// Where a jump of a condition goes.
#[derive(Clone, Copy)]
enum T {
    /// The next instruction.
    Next,
    /// Past this condition: it holds, go on with the next one.
    Done,
    /// Past this alternative: it does not hold.
    Fail,
}

#[derive(Clone, Copy)]
struct Sym {
    code: u16,
    k: u32,
    jt: T,
    jf: T,
}

const NOP: Sym = Sym {
    code: 0,
    k: 0,
    jt: T::Next,
    jf: T::Next,
};

fn cond_syms(c: &Cond, s: &mut [Sym; 8]) -> usize {
    let lo_off = OFF_ARGS + 8 * u32::from(c.arg);
    let mut n = 0;
    let mut push = |x: Sym, n: &mut usize| {
        s[*n] = x;
        *n += 1;
    };
    let ld = |off| Sym {
        code: LD_W_ABS,
        k: off,
        jt: T::Next,
        jf: T::Next,
    };
    let and = |m| Sym {
        code: ALU_AND_K,
        k: m,
        jt: T::Next,
        jf: T::Next,
    };
    let j = |code, k, jt, jf| Sym { code, k, jt, jf };
    let (mlo, vlo) = (c.mask as u32, c.value as u32);
    let (mhi, vhi) = ((c.mask >> 32) as u32, (c.value >> 32) as u32);
    if c.width == Width::W32 && vhi != 0 {
        // A 32-bit operand is below any value wider than 32 bits (the grammar rejects such
        // values, but `Policy::add_rule` takes any `Cond`): the outcome is constant. A
        // conditional jump with equal targets is an unconditional one.
        let t = match c.op {
            CmpOp::Eq | CmpOp::Gt | CmpOp::Ge => T::Fail,
            CmpOp::Ne | CmpOp::Lt | CmpOp::Le => T::Done,
        };
        push(j(JEQ_K, 0, t, t), &mut n);
        return n;
    }
    if c.width == Width::W64 {
        push(ld(lo_off + 4), &mut n);
        if mhi != u32::MAX {
            push(and(mhi), &mut n);
        }
        match c.op {
            CmpOp::Eq => push(j(JEQ_K, vhi, T::Next, T::Fail), &mut n),
            CmpOp::Ne => push(j(JEQ_K, vhi, T::Next, T::Done), &mut n),
            CmpOp::Gt | CmpOp::Ge => {
                push(j(JGT_K, vhi, T::Done, T::Next), &mut n);
                push(j(JEQ_K, vhi, T::Next, T::Fail), &mut n);
            }
            CmpOp::Lt | CmpOp::Le => {
                push(j(JGT_K, vhi, T::Fail, T::Next), &mut n);
                push(j(JEQ_K, vhi, T::Next, T::Done), &mut n);
            }
        }
    }
    push(ld(lo_off), &mut n);
    if mlo != u32::MAX {
        push(and(mlo), &mut n);
    }
    let last = match c.op {
        CmpOp::Eq => j(JEQ_K, vlo, T::Done, T::Fail),
        CmpOp::Ne => j(JEQ_K, vlo, T::Fail, T::Done),
        CmpOp::Gt => j(JGT_K, vlo, T::Done, T::Fail),
        CmpOp::Ge => j(JGE_K, vlo, T::Done, T::Fail),
        CmpOp::Lt => j(JGE_K, vlo, T::Fail, T::Done),
        CmpOp::Le => j(JGT_K, vlo, T::Fail, T::Done),
    };
    push(last, &mut n);
    n
}

fn cond_len(c: &Cond) -> usize {
    cond_syms(c, &mut [NOP; 8])
}

/// Emits the decision for one syscall whose outcome depends on its arguments.
fn emit_rule_block(policy: &Policy, nr: u32, o: &mut Out<'_>) {
    for rule in policy.rules_for(nr) {
        if Policy::is_unconditional(rule) {
            o.push(ret(rule.action));
            return;
        }
        for alt in policy.alternatives(rule) {
            // Instructions left in this alternative after each condition, the `ret` included.
            let mut rest: usize = alt.iter().map(cond_len).sum::<usize>() + 1;
            for c in alt {
                let mut s = [NOP; 8];
                let len = cond_syms(c, &mut s);
                rest -= len;
                for (i, sym) in s[..len].iter().enumerate() {
                    let after = len - i - 1;
                    let resolve = |t: T| -> u8 {
                        match t {
                            T::Next => 0,
                            T::Done => after as u8,
                            T::Fail => (after + rest) as u8,
                        }
                    };
                    o.push(Insn {
                        code: sym.code,
                        jt: resolve(sym.jt),
                        jf: resolve(sym.jf),
                        k: sym.k,
                    });
                }
            }
            o.push(ret(rule.action));
        }
    }
    o.push(ret(if policy.is_allowed(nr) {
        Action::Allow
    } else {
        policy.fallback()
    }));
}
