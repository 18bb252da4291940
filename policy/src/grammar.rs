//! The list grammar of `SECCOMP_SYSCALL_ALLOW`, `SECCOMP_SYSCALL_DENY` and profile files.
//!
//! ```text
//! list   := "" | entry (":" entry)*
//! entry  := target [ "(" alts ")" ] [ "=" action ]
//! target := NAME | "@" GROUP
//! alts   := conj ("||" conj)*          any alternative holding makes the entry match
//! conj   := cond ("&&" cond)*          every condition must hold
//! cond   := arg [ "&" value ] op value  (arg & mask) op value, unsigned
//! arg    := "a0".."a5"                 as the kernel reads it (below); "a0.64".."a5.64": all 64 bits
//! op     := "==" | "!=" | "<" | "<=" | ">" | ">="
//! value  := term ("|" term)*           terms are ORed: O_CREAT|O_TRUNC
//! term   := NUMBER | "-" NUMBER | CONST  decimal, 0x hex, 0o octal (no leading 0 on decimals);
//!                                       CONST from consts.rs
//! action := kill | trap | log | allow | errno | ERRNO-NAME
//! ```
//! `aN` compares the bits the kernel reads of that argument, from its declared type
//! ([`Arch::arg_bits`]): all 64 bits of a pointer, `long` or size (a rule on the low half of an
//! address is passed by an address above 4 GiB), the low 32 of an `int` or `unsigned int` (the
//! kernel drops the upper half, so high bits neither pass nor wrongly fail a rule), the low 16
//! of a `umode_t`. A value wider than that is refused. `aN.64` compares the whole register
//! whatever the type, as libseccomp does (OCI profiles are imported that way).
//!
//! Whitespace is allowed inside parentheses only. Example:
//! `openat:socket(a0 == AF_UNIX || a0 == AF_INET):creat=EROFS`.

use crate::action::Action;
use crate::arch::Arch;
use crate::consts;
use crate::error::{Error, ErrorKind, Source, Token};
use crate::groups;
pub use crate::limits::{MAX_ENTRIES, MAX_VALUE_LEN};
use crate::policy::{CmpOp, Cond, Policy, Width, MAX_CONDS_PER_ALT};

const MAX_GROUP_DEPTH: usize = 4;
const MAX_ALTS_PER_ENTRY: usize = 16;

/// Parses one list into `policy`. Entries without `=action` get `list_action`: allow for the
/// allow list, the default action for the deny list.
pub fn parse_list(
    policy: &mut Policy,
    source: Source,
    text: &str,
    list_action: Action,
) -> Result<(), Error> {
    parse_entries(policy, source, text, list_action, false)
}

/// Parses allow entries as exemptions ([`Policy::exempt`]): allowed before any rule of the
/// policy applies. Entries with an `=action` other than allow are refused.
pub fn parse_exemptions(policy: &mut Policy, source: Source, text: &str) -> Result<(), Error> {
    parse_entries(policy, source, text, Action::Allow, true)
}

fn parse_entries(
    policy: &mut Policy,
    source: Source,
    text: &str,
    list_action: Action,
    exempt: bool,
) -> Result<(), Error> {
    if text.len() > MAX_VALUE_LEN {
        return Err(Error {
            source,
            entry: 0,
            token: Token::new(text),
            kind: ErrorKind::TooLong,
        });
    }
    if text.is_empty() {
        return Ok(());
    }
    if text.split(':').count() > MAX_ENTRIES {
        return Err(Error::whole(source, ErrorKind::TooManyEntries));
    }
    let mut previous = "";
    for (i, entry) in text.split(':').enumerate() {
        let err = |kind| Error {
            source,
            entry: i + 1,
            token: Token::new(entry),
            kind,
        };
        // `read=errno:EACCES` splits into `read=errno` and `EACCES`: say why.
        if previous.ends_with("=errno") && is_errno_value(entry) {
            return Err(err(ErrorKind::Syntax(
                "`=errno:NAME` cannot be used in a list, `:` separates entries; write `=NAME` (`=EACCES`)",
            )));
        }
        // Empty entries (`::ptrace::`, a leading or trailing `:`) are ignored, as Cloudflare's
        // library ignores them.
        if entry.is_empty() {
            continue;
        }
        previous = entry;
        parse_entry(policy, entry, list_action, None, 0, exempt).map_err(err)?;
    }
    Ok(())
}

/// An errno name or number, as written after `errno:`.
fn is_errno_value(entry: &str) -> bool {
    consts::errno(entry).is_some()
        || (!entry.is_empty() && entry.bytes().all(|b| b.is_ascii_digit()))
}

/// Checks every byte of an entry before anything else looks at it.
fn check_bytes(entry: &str) -> Result<(), ErrorKind> {
    let mut depth = 0usize;
    for b in entry.bytes() {
        match b {
            b'(' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            b' ' | b'\t' if depth > 0 => {}
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => return Err(ErrorKind::Whitespace),
            0x21..=0x7e => {}
            _ => return Err(ErrorKind::NotAscii),
        }
    }
    Ok(())
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
}

fn parse_entry(
    policy: &mut Policy,
    entry: &str,
    list_action: Action,
    forced: Option<Action>,
    depth: usize,
    exempt: bool,
) -> Result<(), ErrorKind> {
    if entry.is_empty() {
        return Err(ErrorKind::EmptyEntry);
    }
    check_bytes(entry)?;
    let (head, action_text) = match entry.rfind('=') {
        // `=` inside the parentheses belongs to `==`, `<=` ...; the action suffix follows `)`.
        Some(i) if !entry[i..].contains(')') && !entry[..i].ends_with(['=', '!', '<', '>']) => {
            (&entry[..i], Some(&entry[i + 1..]))
        }
        _ => (entry, None),
    };
    let action = match action_text {
        Some(t) => Action::parse(t).ok_or(ErrorKind::UnknownAction)?,
        None => forced.unwrap_or(list_action),
    };
    let (target, conds) = match head.find('(') {
        Some(open) => {
            let inner = &head[open + 1..];
            let close = inner
                .rfind(')')
                .ok_or(ErrorKind::Syntax("unbalanced brackets: missing `)`"))?;
            if close + 1 != inner.len() {
                return Err(ErrorKind::Syntax("unexpected text after `)`"));
            }
            let inner = &inner[..close];
            if inner.contains(['(', ')']) {
                return Err(ErrorKind::Syntax("unbalanced brackets: nested `(` or `)`"));
            }
            (&head[..open], Some(inner))
        }
        None if head.contains(')') => {
            return Err(ErrorKind::Syntax("unbalanced brackets: `)` without `(`"))
        }
        None => (head, None),
    };

    if let Some(group) = target.strip_prefix('@') {
        if conds.is_some() {
            return Err(ErrorKind::ConditionOnGroup);
        }
        if depth >= MAX_GROUP_DEPTH {
            return Err(ErrorKind::GroupTooDeep);
        }
        let g = groups::find(group).ok_or(ErrorKind::UnknownGroup)?;
        let forced = action_text.map(|_| action).or(forced);
        for member in g.entries {
            match parse_entry(policy, member, list_action, forced, depth + 1, exempt) {
                // A group may name calls another architecture lacks (`open` on aarch64).
                Err(ErrorKind::UnknownSyscall) => {}
                r => r?,
            }
        }
        return Ok(());
    }

    if target.is_empty() {
        return Err(ErrorKind::Syntax("missing syscall name"));
    }
    if !target.bytes().all(is_name_byte) {
        return Err(ErrorKind::Syntax(
            "a syscall name is lower-case letters, digits and `_`",
        ));
    }
    let nr = policy
        .arch()
        .syscall_number(target)
        .ok_or(ErrorKind::UnknownSyscall)?;
    if exempt && action != Action::Allow {
        return Err(ErrorKind::Syntax("an exemption can only allow"));
    }

    match conds {
        None if exempt => policy.exempt(nr, &[]).map_err(|_| ErrorKind::TooManyRules),
        None if action == Action::Allow => {
            policy.allow(nr);
            Ok(())
        }
        None => policy
            .add_rule(nr, action, &[])
            .map_err(|_| ErrorKind::TooManyRules),
        Some(text) => {
            let mut store = [[NO_COND; MAX_CONDS_PER_ALT]; MAX_ALTS_PER_ENTRY];
            let mut lens = [0usize; MAX_ALTS_PER_ENTRY];
            let n = parse_conditions(policy.arch(), nr, text, &mut store, &mut lens)?;
            let mut alts: [&[Cond]; MAX_ALTS_PER_ENTRY] = [&[]; MAX_ALTS_PER_ENTRY];
            for i in 0..n {
                alts[i] = &store[i][..lens[i]];
            }
            if exempt {
                policy.exempt(nr, &alts[..n])
            } else {
                policy.add_rule(nr, action, &alts[..n])
            }
            .map_err(|_| ErrorKind::TooManyRules)
        }
    }
}

const NO_COND: Cond = Cond {
    arg: 0,
    width: Width::W32,
    mask: u64::MAX,
    op: CmpOp::Eq,
    value: 0,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tok<'a> {
    Word(&'a str),
    Op(CmpOp),
    And,
    Or,
    Amp,
    Pipe,
    Minus,
}

/// Splits the text inside parentheses into tokens.
struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn next(&mut self) -> Result<Option<Tok<'a>>, ErrorKind> {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && (bytes[self.pos] == b' ' || bytes[self.pos] == b'\t') {
            self.pos += 1;
        }
        if self.pos == bytes.len() {
            return Ok(None);
        }
        let two = |s: &str| self.text[self.pos..].starts_with(s);
        let (tok, len) = if two("==") {
            (Tok::Op(CmpOp::Eq), 2)
        } else if two("!=") {
            (Tok::Op(CmpOp::Ne), 2)
        } else if two("<=") {
            (Tok::Op(CmpOp::Le), 2)
        } else if two(">=") {
            (Tok::Op(CmpOp::Ge), 2)
        } else if two("&&") {
            (Tok::And, 2)
        } else if two("||") {
            (Tok::Or, 2)
        } else {
            match bytes[self.pos] {
                b'<' => (Tok::Op(CmpOp::Lt), 1),
                b'>' => (Tok::Op(CmpOp::Gt), 1),
                b'&' => (Tok::Amp, 1),
                b'|' => (Tok::Pipe, 1),
                b'-' => (Tok::Minus, 1),
                b if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' => {
                    let start = self.pos;
                    let mut end = start;
                    while end < bytes.len()
                        && (bytes[end].is_ascii_alphanumeric()
                            || bytes[end] == b'_'
                            || bytes[end] == b'.')
                    {
                        end += 1;
                    }
                    self.pos = end;
                    return Ok(Some(Tok::Word(&self.text[start..end])));
                }
                b'=' => {
                    return Err(ErrorKind::Syntax(
                        "`=` inside a condition; comparisons use `==`",
                    ))
                }
                _ => return Err(ErrorKind::Syntax("unexpected character in a condition")),
            }
        };
        self.pos += len;
        Ok(Some(tok))
    }

    fn peek(&mut self) -> Result<Option<Tok<'a>>, ErrorKind> {
        let save = self.pos;
        let t = self.next();
        self.pos = save;
        t
    }
}

/// Parses `alts` into `store`; returns the number of alternatives.
fn parse_conditions(
    arch: Arch,
    nr: u32,
    text: &str,
    store: &mut [[Cond; MAX_CONDS_PER_ALT]; MAX_ALTS_PER_ENTRY],
    lens: &mut [usize; MAX_ALTS_PER_ENTRY],
) -> Result<usize, ErrorKind> {
    let mut lx = Lexer { text, pos: 0 };
    if lx.peek()?.is_none() {
        return Err(ErrorKind::Syntax("empty parentheses"));
    }
    let mut alt = 0;
    loop {
        if alt == MAX_ALTS_PER_ENTRY {
            return Err(ErrorKind::TooManyRules);
        }
        let mut n = 0;
        loop {
            if n == MAX_CONDS_PER_ALT {
                return Err(ErrorKind::TooManyRules);
            }
            store[alt][n] = parse_cond(arch, nr, &mut lx)?;
            n += 1;
            if lx.peek()? == Some(Tok::And) {
                lx.next()?;
            } else {
                break;
            }
        }
        lens[alt] = n;
        alt += 1;
        match lx.next()? {
            None => return Ok(alt),
            Some(Tok::Or) => {}
            Some(_) => {
                return Err(ErrorKind::Syntax(
                    "expected `&&`, `||` or `)` after a condition",
                ))
            }
        }
    }
}

fn parse_cond(arch: Arch, nr: u32, lx: &mut Lexer<'_>) -> Result<Cond, ErrorKind> {
    let (arg, whole) = match lx.next()? {
        Some(Tok::Word(w)) => parse_arg(w)?,
        _ => {
            return Err(ErrorKind::Syntax(
                "a condition starts with an argument, a0..a5",
            ))
        }
    };
    let bits = if whole { 64 } else { arch.arg_bits(nr, arg) };
    let width = if bits == 64 { Width::W64 } else { Width::W32 };
    let mut mask = u64::MAX;
    if lx.peek()? == Some(Tok::Amp) {
        lx.next()?;
        mask = parse_value(arch, lx, width)?;
    }
    let op = match lx.next()? {
        Some(Tok::Op(op)) => op,
        _ => return Err(ErrorKind::Syntax("expected a comparison: == != < <= > >=")),
    };
    let value = parse_value(arch, lx, width)?;
    if bits == 16 {
        // A 16-bit argument (`umode_t`) compares as a 32-bit one whose upper 16 bits are
        // masked off: the kernel truncates the register to 16 bits.
        if value > 0xffff {
            return Err(ErrorKind::ValueTooWide);
        }
        mask &= 0xffff;
    }
    Ok(Cond {
        arg,
        width,
        mask,
        op,
        value,
    })
}

/// The argument index, and whether `.64` asked for the whole register.
fn parse_arg(word: &str) -> Result<(u8, bool), ErrorKind> {
    let (base, whole) = match word.strip_suffix(".64") {
        Some(b) => (b, true),
        None => (word, false),
    };
    let b = base.as_bytes();
    if b.len() == 2 && (b[0] == b'a') && (b'0'..=b'5').contains(&b[1]) {
        Ok((b[1] - b'0', whole))
    } else {
        Err(ErrorKind::BadArgument)
    }
}

fn parse_value(arch: Arch, lx: &mut Lexer<'_>, width: Width) -> Result<u64, ErrorKind> {
    let mut value = 0u64;
    loop {
        let negative = if lx.peek()? == Some(Tok::Minus) {
            lx.next()?;
            true
        } else {
            false
        };
        let term = match lx.next()? {
            Some(Tok::Word(w)) => parse_term(arch, w)?,
            _ => return Err(ErrorKind::Syntax("expected a number or a constant")),
        };
        let term = if negative {
            let t = term.wrapping_neg();
            match width {
                Width::W32 if term <= 0x8000_0000 => t & 0xffff_ffff,
                Width::W64 if term <= 0x8000_0000_0000_0000 => t,
                // Below the most negative value of the compared width.
                _ => return Err(ErrorKind::ValueTooWide),
            }
        } else {
            term
        };
        if width == Width::W32 && term > 0xffff_ffff {
            return Err(ErrorKind::ValueTooWide);
        }
        value |= term;
        if lx.peek()? == Some(Tok::Pipe) {
            lx.next()?;
        } else {
            return Ok(value);
        }
    }
}

fn parse_term(arch: Arch, word: &str) -> Result<u64, ErrorKind> {
    let first = word.as_bytes()[0];
    if first.is_ascii_digit() {
        let (digits, radix) = if let Some(h) = word.strip_prefix("0x") {
            (h, 16)
        } else if let Some(o) = word.strip_prefix("0o") {
            (o, 8)
        } else {
            (word, 10)
        };
        if digits.is_empty() || digits.starts_with('+') {
            return Err(ErrorKind::BadNumber);
        }
        // `0644` would be read as decimal 644 where C readers expect octal: refuse the
        // ambiguity, `0o644` says it.
        if radix == 10 && digits.len() > 1 && digits.starts_with('0') {
            return Err(ErrorKind::BadNumber);
        }
        u64::from_str_radix(digits, radix).map_err(|_| ErrorKind::BadNumber)
    } else {
        consts::constant(arch, word).ok_or(ErrorKind::UnknownConstant)
    }
}

/// Builds a policy from the three environment values, as the preload reads them. `None` when
/// neither list is set: no filter is wanted.
pub fn from_env(
    arch: Arch,
    allow: Option<&str>,
    deny: Option<&str>,
    default_action: Option<&str>,
    policy: &mut Policy,
) -> Result<bool, Error> {
    let action = match default_action {
        None => Action::Kill,
        Some(t) => Action::parse(t)
            .filter(|a| *a != Action::Allow)
            .ok_or(Error {
                source: Source::DefaultAction,
                entry: 0,
                token: Token::new(t),
                kind: ErrorKind::UnknownAction,
            })?,
    };
    let mode = match (allow, deny) {
        (None, None) => return Ok(false),
        (Some(_), _) => crate::policy::Mode::AllowList,
        (None, Some(_)) => crate::policy::Mode::DenyList,
    };
    policy.reset(arch, mode, action);
    if let Some(a) = allow {
        parse_list(policy, Source::Allow, a, Action::Allow)?;
    }
    if let Some(d) = deny {
        parse_list(policy, Source::Deny, d, action)?;
    }
    policy.add_trap_support();
    Ok(true)
}
