//! The list grammar: one named test per error case (kind, entry, token, one-line message
//! naming the variable), positive parses of every form, and `Action::parse`.

mod common;

use sandbox_policy::policy::{MAX_CONDS, MAX_RULES};
use sandbox_policy::{
    grammar, Action, Arch, CmpOp, Cond, Error, ErrorKind, Mode, Policy, Source, Width, MAX_ENTRIES,
    MAX_VALUE_LEN,
};

const X86: Arch = Arch::X86_64;

fn parse(source: Source, text: &str) -> Result<Policy, Error> {
    let mut p = Policy::new(X86, Mode::AllowList, Action::Kill);
    let action = if source == Source::Allow {
        Action::Allow
    } else {
        Action::Kill
    };
    grammar::parse_list(&mut p, source, text, action)?;
    Ok(p)
}

fn parse_err(source: Source, text: &str) -> Error {
    match parse(source, text) {
        Ok(_) => panic!("{text:?} parsed, expected an error"),
        Err(e) => e,
    }
}

/// Parses `text` as the allow list and checks the error: kind, 1-based entry, token, and a
/// single-line message that names the variable and the offending text.
fn err(text: &str, kind: ErrorKind, entry: usize, token: &str) -> Error {
    let e = parse_err(Source::Allow, text);
    assert_eq!(e.kind, kind, "{text}: {e}");
    assert_eq!(e.entry, entry, "{text}: {e}");
    assert_eq!(e.token.as_str(), token, "{text}: {e}");
    assert_eq!(e.source, Source::Allow);
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(msg.starts_with("SECCOMP_SYSCALL_ALLOW"), "{msg}");
    if !token.is_empty() {
        assert!(msg.contains(&format!("`{token}")), "{msg}");
    }
    if entry > 0 {
        assert!(msg.contains(&format!("entry {entry} ")), "{msg}");
    }
    // The same input in the deny list names the other variable.
    let d = parse_err(Source::Deny, text);
    assert_eq!((d.kind, d.entry), (kind, entry));
    assert!(d.to_string().starts_with("SECCOMP_SYSCALL_DENY"), "{d}");
    e
}

fn syntax(text: &str, entry: usize, token: &str) -> &'static str {
    match err_kind(text) {
        ErrorKind::Syntax(what) => {
            let e = parse_err(Source::Allow, text);
            assert_eq!((e.entry, e.token.as_str()), (entry, token));
            assert!(e.to_string().contains(what));
            what
        }
        k => panic!("{text}: expected a syntax error, got {k:?}"),
    }
}

fn err_kind(text: &str) -> ErrorKind {
    parse_err(Source::Allow, text).kind
}

#[test]
fn unknown_syscall() {
    let e = err("read:wirte:close", ErrorKind::UnknownSyscall, 2, "wirte");
    assert!(e.to_string().contains("unknown syscall"), "{e}");
    err(
        "read(a0 == 1):frobnicate(a0 == 1)",
        ErrorKind::UnknownSyscall,
        2,
        "frobnicate(a0 == 1)",
    );
}

#[test]
fn unknown_group() {
    let e = err("read:@nope", ErrorKind::UnknownGroup, 2, "@nope");
    assert!(e.to_string().contains("unknown group"));
    err("@", ErrorKind::UnknownGroup, 1, "@");
}

#[test]
fn unknown_action() {
    let e = err("read=bogus", ErrorKind::UnknownAction, 1, "read=bogus");
    assert!(e.to_string().contains("unknown action"));
    err("read:write=", ErrorKind::UnknownAction, 2, "write=");
    err(
        "openat(a2 == 0)=eacces",
        ErrorKind::UnknownAction,
        1,
        "openat(a2 == 0)=eacces",
    );
}

#[test]
fn errno_colon_form_splits_the_list() {
    // `:` separates entries, so `=errno:NAME` cannot be written in a list: the name becomes the
    // next entry and is reported as an unknown syscall rather than silently dropped.
    for (text, token) in [
        ("read=errno:EACCES", "EACCES"),
        ("openat(a2 == 0)=errno:13", "13"),
        ("@base=errno:0", "0"),
    ] {
        let what = syntax(text, 2, token);
        assert!(what.contains("=NAME"), "{what}");
    }
    // A real syscall after a plain `=errno` entry is fine.
    assert!(parse(Source::Allow, "read=errno:write").is_ok());
}

#[test]
fn unknown_constant() {
    let e = err(
        "socket(a0 == AF_NOPE)",
        ErrorKind::UnknownConstant,
        1,
        "socket(a0 == AF_NOPE)",
    );
    assert!(e.to_string().contains("unknown constant"));
    err(
        "openat(a2 & O_BOGUS == 0)",
        ErrorKind::UnknownConstant,
        1,
        "openat(a2 & O_BOGUS == 0)",
    );
    err(
        "read(a0 == af_unix)",
        ErrorKind::UnknownConstant,
        1,
        "read(a0 == af_unix)",
    );
}

#[test]
fn bad_number() {
    for text in [
        "read(a0 == 0xZZ)",
        "read(a0 == 12abc)",
        "read(a0 == 0x)",
        "read(a0 == 0o8)",
        "read(a0 == 0b1)",
        "read(a0.64 == 0x10000000000000000)",
        "read(a0 == 0755)",
        "read(a0 == 00)",
    ] {
        let e = err(text, ErrorKind::BadNumber, 1, text);
        assert!(e.to_string().contains("malformed number"));
    }
}

#[test]
fn bad_argument_index() {
    for text in [
        "read(a6 == 1)",
        "read(b0 == 1)",
        "read(a-1 == 1)",
        "read(a0.32 == 1)",
        "read(a == 1)",
        "read(a00 == 1)",
        "read(A0 == 1)",
    ] {
        let e = err(text, ErrorKind::BadArgument, 1, text);
        assert!(e.to_string().contains("a0..a5"), "{e}");
    }
}

#[test]
fn value_too_wide_for_32_bits() {
    for text in [
        "read(a0 == 0x100000000)",
        "read(a0 & 0x100000000 == 0)",
        "read(a0 == -0x80000001)",
        "read(a0 == 1|0x100000000)",
        "read(a0.64 == -0x8000000000000001)",
    ] {
        let e = err(text, ErrorKind::ValueTooWide, 1, text);
        assert!(
            e.to_string().contains("32 bits") || text.contains(".64"),
            "{e}"
        );
    }
}

#[test]
fn unbalanced_missing_close() {
    let what = syntax("read:openat(a2 == 0", 2, "openat(a2 == 0");
    assert!(what.contains("missing `)`"), "{what}");
}

#[test]
fn unbalanced_extra_close() {
    let what = syntax("read)", 1, "read)");
    assert!(what.contains("`)`"), "{what}");
    let what = syntax("read(a0 == 1))", 1, "read(a0 == 1))");
    assert!(what.contains("unbalanced"), "{what}");
}

#[test]
fn unbalanced_nested() {
    let what = syntax("read((a0 == 1))", 1, "read((a0 == 1))");
    assert!(what.contains("nested"), "{what}");
    syntax("read(a0 == (1))", 1, "read(a0 == (1))");
}

#[test]
fn text_after_parentheses() {
    syntax("read(a0 == 1)x", 1, "read(a0 == 1)x");
}

#[test]
fn empty_parentheses() {
    let what = syntax("read()", 1, "read()");
    assert!(what.contains("empty parentheses"));
    syntax("read(  )", 1, "read(  )");
}

#[test]
fn empty_entries_are_ignored_as_cloudflare_does() {
    // `::ptrace::` denies ptrace and nothing else; `::::` is an empty list.
    for (text, same_as) in [
        ("::ptrace::", "ptrace"),
        (":read", "read"),
        ("read:", "read"),
        ("read::write", "read:write"),
        ("::::", ""),
    ] {
        let (a, b) = (
            parse(Source::Deny, text).unwrap(),
            parse(Source::Deny, same_as).unwrap(),
        );
        for nr in 0..450 {
            assert_eq!(a.decide(nr, &[0; 6]), b.decide(nr, &[0; 6]), "{text} {nr}");
        }
    }
}

#[test]
fn whitespace_outside_parentheses() {
    for (text, entry, token) in [
        ("read: write", 2, " write"),
        ("read ", 1, "read "),
        ("read (a0 == 1)", 1, "read (a0 == 1)"),
        ("read(a0 == 1) =EPERM", 1, "read(a0 == 1) =EPERM"),
        ("read\n", 1, "read?"),
        ("read\t", 1, "read?"),
    ] {
        let e = err(text, ErrorKind::Whitespace, entry, token);
        assert!(e.to_string().contains("whitespace"), "{e}");
    }
    // Inside parentheses spaces and tabs are fine, newlines are not.
    assert!(parse(Source::Allow, "read(\ta0  ==\t1 )").is_ok());
    assert_eq!(err_kind("read(a0 ==\n1)"), ErrorKind::Whitespace);
}

#[test]
fn non_ascii() {
    let e = err("read:réad", ErrorKind::NotAscii, 2, "r??ad");
    assert!(e.to_string().contains("ASCII"), "{e}");
    err(
        "read(a0 == 1\u{7f})",
        ErrorKind::NotAscii,
        1,
        "read(a0 == 1?)",
    );
    err(
        "read(a0 == \u{fffd})",
        ErrorKind::NotAscii,
        1,
        "read(a0 == ???)",
    );
}

#[test]
fn too_long() {
    let text = "a".repeat(100_000);
    let e = parse_err(Source::Allow, &text);
    assert_eq!((e.kind, e.entry), (ErrorKind::TooLong, 0));
    let msg = e.to_string();
    assert!(!msg.contains('\n') && msg.len() < 200, "{msg}");
    assert!(
        msg.starts_with("SECCOMP_SYSCALL_ALLOW") && msg.contains("65536"),
        "{msg}"
    );
    // Exactly at the limit is not too long (it fails for another reason).
    let at = "a".repeat(MAX_VALUE_LEN);
    assert_eq!(err_kind(&at), ErrorKind::UnknownSyscall);
}

#[test]
fn too_many_entries() {
    let text = vec!["read"; 10_000].join(":");
    let e = parse_err(Source::Deny, &text);
    assert_eq!(
        (e.kind, e.entry, e.source),
        (ErrorKind::TooManyEntries, 0, Source::Deny)
    );
    assert_eq!(
        e.to_string(),
        format!("SECCOMP_SYSCALL_DENY: more than {MAX_ENTRIES} entries")
    );
    // The limit itself is accepted.
    assert!(parse(Source::Allow, &vec!["read"; MAX_ENTRIES].join(":")).is_ok());
    assert_eq!(
        err_kind(&vec!["read"; MAX_ENTRIES + 1].join(":")),
        ErrorKind::TooManyEntries
    );
}

#[test]
fn too_many_rules() {
    // Every `=ACTION` entry is a rule.
    let names: Vec<&str> = sandbox_policy::syscalls::all(X86)
        .map(|e| e.0)
        .cycle()
        .take(MAX_RULES + 1)
        .collect();
    let text: Vec<String> = names.iter().map(|n| format!("{n}=EPERM")).collect();
    let e = parse_err(Source::Allow, &text.join(":"));
    assert_eq!(e.kind, ErrorKind::TooManyRules);
    assert_eq!(e.entry, MAX_RULES + 1);
    assert!(e.to_string().contains("too many"), "{e}");
    assert!(parse(Source::Allow, &text[..MAX_RULES].join(":")).is_ok());
}

#[test]
fn too_many_conditions() {
    // 16 conditions per alternative, 16 alternatives per entry.
    let conj = vec!["a0 != 1"; 17].join(" && ");
    assert_eq!(err_kind(&format!("read({conj})")), ErrorKind::TooManyRules);
    let alts = vec!["a0 == 1"; 17].join(" || ");
    assert_eq!(err_kind(&format!("read({alts})")), ErrorKind::TooManyRules);
    assert!(parse(
        Source::Allow,
        &format!("read({})", vec!["a0 != 1"; 16].join(" && "))
    )
    .is_ok());
    // And over the whole policy.
    let entry = format!("read({})", vec!["a0 != 1"; 16].join(" && "));
    let n = MAX_CONDS / 16;
    assert!(parse(Source::Allow, &vec![entry.as_str(); n].join(":")).is_ok());
    let e = parse_err(Source::Allow, &vec![entry.as_str(); n + 1].join(":"));
    assert_eq!((e.kind, e.entry), (ErrorKind::TooManyRules, n + 1));
}

#[test]
fn single_equals_inside_conditions() {
    let what = syntax("read(a0 = 1)", 1, "read(a0 = 1)");
    assert!(what.contains("=="), "{what}");
    syntax(
        "read(a0 == 1 && a1 = 2)=EPERM",
        1,
        "read(a0 == 1 && a1 = 2)=EPERM",
    );
}

#[test]
fn conditions_on_a_group() {
    let e = err(
        "@base(a0 == 1)",
        ErrorKind::ConditionOnGroup,
        1,
        "@base(a0 == 1)",
    );
    assert!(e.to_string().contains("group"), "{e}");
}

#[test]
fn other_syntax_errors() {
    syntax("read(a0)", 1, "read(a0)");
    syntax("read(a0 ==)", 1, "read(a0 ==)");
    syntax("read(a0 == 1 ||)", 1, "read(a0 == 1 ||)");
    syntax("read(a0 == 1 a1 == 2)", 1, "read(a0 == 1 a1 == 2)");
    syntax("read(a0 == 1 + 2)", 1, "read(a0 == 1 + 2)");
    syntax("(a0 == 1)", 1, "(a0 == 1)");
    syntax("Read", 1, "Read");
    syntax("read-x", 1, "read-x");
}

#[test]
fn long_tokens_are_truncated_in_messages() {
    let name = "x".repeat(200);
    let e = parse_err(Source::Allow, &name);
    assert_eq!(e.token.as_str().len(), 48);
    assert!(e.to_string().contains("..."), "{e}");
}

// ---- Positive parses ----

fn only_rule(p: &Policy, name: &str) -> (Action, Vec<Vec<Cond>>) {
    let nr = X86.syscall_number(name).unwrap();
    let rules = p.rules_for(nr);
    assert_eq!(rules.len(), 1, "{name}");
    (
        rules[0].action,
        p.alternatives(&rules[0]).map(|a| a.to_vec()).collect(),
    )
}

fn c(arg: u8, width: Width, mask: u64, op: CmpOp, value: u64) -> Cond {
    Cond {
        arg,
        width,
        mask,
        op,
        value,
    }
}

#[test]
fn every_operator_parses() {
    for (sym, op) in [
        ("==", CmpOp::Eq),
        ("!=", CmpOp::Ne),
        ("<", CmpOp::Lt),
        ("<=", CmpOp::Le),
        (">", CmpOp::Gt),
        (">=", CmpOp::Ge),
    ] {
        let p = parse(
            Source::Allow,
            &format!("read(a0 {sym} 7):write(a5.64{sym}0x100000000)"),
        )
        .unwrap();
        assert_eq!(
            only_rule(&p, "read"),
            (Action::Allow, vec![vec![c(0, Width::W32, u64::MAX, op, 7)]])
        );
        assert_eq!(
            only_rule(&p, "write"),
            (
                Action::Allow,
                vec![vec![c(5, Width::W64, u64::MAX, op, 0x1_0000_0000)]]
            )
        );
        assert_eq!(op.symbol(), sym);
    }
}

#[test]
fn action_suffixes() {
    let p = parse(Source::Allow, "creat=EROFS").unwrap();
    assert_eq!(only_rule(&p, "creat"), (Action::Errno(30), vec![]));

    let p = parse(Source::Allow, "openat(a2 & O_ACCMODE == O_WRONLY)=EACCES").unwrap();
    assert_eq!(
        only_rule(&p, "openat"),
        (
            Action::Errno(13),
            vec![vec![c(2, Width::W32, 3, CmpOp::Eq, 1)]]
        )
    );

    let p = parse(
        Source::Allow,
        "read=kill:write=trap:close=log:dup=errno:fstat=allow",
    )
    .unwrap();
    assert_eq!(only_rule(&p, "read").0, Action::Kill);
    assert_eq!(only_rule(&p, "write").0, Action::Trap);
    assert_eq!(only_rule(&p, "close").0, Action::Log);
    assert_eq!(only_rule(&p, "dup").0, Action::Errno(1));
    let fstat = X86.syscall_number("fstat").unwrap();
    assert!(p.rules_for(fstat).is_empty() && p.is_allowed(fstat));
}

#[test]
fn or_of_alternatives() {
    let p = parse(Source::Allow, "socket(a0 == AF_UNIX || a0 == AF_INET)").unwrap();
    assert_eq!(
        only_rule(&p, "socket"),
        (
            Action::Allow,
            vec![
                vec![c(0, Width::W32, u64::MAX, CmpOp::Eq, 1)],
                vec![c(0, Width::W32, u64::MAX, CmpOp::Eq, 2)]
            ]
        )
    );
}

#[test]
fn and_binds_tighter_than_or() {
    let p = parse(
        Source::Allow,
        "socket(a0 == AF_INET || a0 == AF_NETLINK && a2 == NETLINK_ROUTE)",
    )
    .unwrap();
    let (_, alts) = only_rule(&p, "socket");
    assert_eq!(alts.len(), 2);
    assert_eq!(alts[1].len(), 2);
    assert_eq!(alts[1][0].value, 16);
    assert_eq!(alts[1][1].arg, 2);
}

#[test]
fn group_with_action() {
    let p = parse(Source::Allow, "@fs-write=EROFS").unwrap();
    for name in ["creat", "unlinkat", "mkdir", "file_setattr"] {
        assert_eq!(only_rule(&p, name), (Action::Errno(30), vec![]), "{name}");
    }
    assert!(!p.is_allowed(X86.syscall_number("creat").unwrap()));
}

#[test]
fn negative_numbers() {
    let p = parse(
        Source::Allow,
        "openat(a0 == -100):read(a0.64 == -100):write(a0 == -0x80000000)",
    )
    .unwrap();
    assert_eq!(only_rule(&p, "openat").1[0][0].value, 0xffff_ff9c);
    assert_eq!(
        sandbox_policy::consts::constant(X86, "AT_FDCWD"),
        Some(0xffff_ff9c)
    );
    assert_eq!(only_rule(&p, "read").1[0][0].value, (-100i64) as u64);
    assert_eq!(only_rule(&p, "write").1[0][0].value, 0x8000_0000);
    let p = parse(Source::Allow, "read(a0.64 == -0x8000000000000000)").unwrap();
    assert_eq!(only_rule(&p, "read").1[0][0].value, 0x8000_0000_0000_0000);
}

#[test]
fn hex_octal_decimal_and_or_of_terms() {
    let p = parse(
        Source::Allow,
        "read(a0 == 0x1F):write(a0 == 0o17):close(a0 == 0):dup(a0 == O_CREAT|O_TRUNC|0x4)",
    )
    .unwrap();
    assert_eq!(only_rule(&p, "read").1[0][0].value, 0x1f);
    assert_eq!(only_rule(&p, "write").1[0][0].value, 0o17);
    assert_eq!(only_rule(&p, "close").1[0][0].value, 0);
    assert_eq!(only_rule(&p, "dup").1[0][0].value, 0o1100 | 4);
}

#[test]
fn masks() {
    let p = parse(
        Source::Allow,
        "clone(a0 & CLONE_THREAD|CLONE_NEWALL == CLONE_THREAD)",
    )
    .unwrap();
    let cond = only_rule(&p, "clone").1[0][0];
    assert_eq!(cond.mask, 0x10000 | 0x7e02_0080);
    assert_eq!(cond.value, 0x10000);
}

#[test]
fn empty_list_is_valid() {
    let p = parse(Source::Allow, "").unwrap();
    assert!(p.rules().is_empty());
    assert!((0..1024).all(|n| !p.is_allowed(n)));
}

#[test]
fn action_parse() {
    assert_eq!(Action::parse("kill"), Some(Action::Kill));
    assert_eq!(Action::parse("trap"), Some(Action::Trap));
    assert_eq!(Action::parse("log"), Some(Action::Log));
    assert_eq!(Action::parse("allow"), Some(Action::Allow));
    assert_eq!(Action::parse("errno"), Some(Action::Errno(1)));
    assert_eq!(Action::parse("errno:EACCES"), Some(Action::Errno(13)));
    assert_eq!(Action::parse("errno:13"), Some(Action::Errno(13)));
    assert_eq!(Action::parse("errno:4095"), Some(Action::Errno(4095)));
    assert_eq!(Action::parse("EROFS"), Some(Action::Errno(30)));
    for bad in [
        "errno:0",
        "errno:4096",
        "errno:+1",
        "errno:-1",
        "errno:",
        "errno:EBOGUS",
        "Kill",
        "KILL",
        "kill_thread",
        "",
        "13",
        "errno:13 ",
        "eacces",
    ] {
        assert_eq!(Action::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn action_display_round_trips() {
    for a in [
        Action::Kill,
        Action::Trap,
        Action::Log,
        Action::Allow,
        Action::Errno(1),
        Action::Errno(13),
        Action::Errno(4000),
    ] {
        assert_eq!(Action::parse(&a.to_string()), Some(a), "{a}");
        assert_eq!(Action::from_ret(a.ret()), Some(a));
    }
    assert_eq!(Action::Errno(13).to_string(), "errno:EACCES");
    assert_eq!(Action::from_ret(0x1234_0000), None);
}

#[test]
fn allow_is_not_a_default_action() {
    let mut p = Policy::new(X86, Mode::DenyList, Action::Kill);
    let e = grammar::from_env(X86, Some("read"), None, Some("allow"), &mut p).unwrap_err();
    assert_eq!(
        (e.kind, e.source, e.entry),
        (ErrorKind::UnknownAction, Source::DefaultAction, 0)
    );
    let msg = e.to_string();
    assert!(msg.starts_with("SECCOMP_DEFAULT_ACTION `allow`"), "{msg}");
    assert!(msg.contains("allow is not a default"), "{msg}");
    assert!(!msg.contains('\n'));
    for bad in ["errno:0", "errno:4096", "errno:+1", "bogus", ""] {
        let e = grammar::from_env(X86, Some("read"), None, Some(bad), &mut p).unwrap_err();
        assert_eq!(e.source, Source::DefaultAction, "{bad}");
    }
}

/// `aN` compares what the kernel reads of the argument: all of a pointer or size, the low 32
/// bits of an `int`, the low 16 of a `umode_t`. `sendto(a4 == 0)` once compared only the low
/// half of the destination address, so an address at 0x200000000 passed it.
#[test]
fn bare_arguments_take_the_width_the_kernel_reads() {
    let p = parse(
        Source::Allow,
        "sendto(a4 == 0):socket(a0 == AF_UNIX):openat(a3 & 0o7000 == 0):mkdir(a1 == 0o755):\
         mmap(a2 < 8):read(a2.64 > 1):getpid(a0 == 1)",
    )
    .unwrap();
    let eq = CmpOp::Eq;
    assert_eq!(
        only_rule(&p, "sendto").1,
        vec![vec![c(4, Width::W64, u64::MAX, eq, 0)]]
    );
    assert_eq!(
        only_rule(&p, "socket").1,
        vec![vec![c(0, Width::W32, u64::MAX, eq, 1)]]
    );
    assert_eq!(
        only_rule(&p, "openat").1,
        vec![vec![c(3, Width::W32, 0o7000, eq, 0)]]
    );
    assert_eq!(
        only_rule(&p, "mkdir").1,
        vec![vec![c(1, Width::W32, 0xffff, eq, 0o755)]]
    );
    assert_eq!(
        only_rule(&p, "mmap").1,
        vec![vec![c(2, Width::W64, u64::MAX, CmpOp::Lt, 8)]]
    );
    assert_eq!(
        only_rule(&p, "read").1,
        vec![vec![c(2, Width::W64, u64::MAX, CmpOp::Gt, 1)]]
    );
    // An argument the call does not have: the whole register, nothing dropped.
    assert_eq!(
        only_rule(&p, "getpid").1,
        vec![vec![c(0, Width::W64, u64::MAX, eq, 1)]]
    );
    // A 64-bit argument takes 64-bit values; negative ones are 64-bit two's complement.
    let p = parse(Source::Allow, "sendto(a4 == 0x200000000):lseek(a1 == -1)").unwrap();
    assert_eq!(only_rule(&p, "sendto").1[0][0].value, 0x2_0000_0000);
    assert_eq!(only_rule(&p, "lseek").1[0][0].value, u64::MAX);
}

#[test]
fn values_wider_than_a_narrow_argument_are_refused() {
    for text in [
        "socket(a0 == 0x100000000)",
        "mkdir(a1 == 0x10000)",
        "mkdir(a1 & 0x10000 == 0x10000)",
        "openat(a3 == -1)",
        "chmod(a1 == 0o1000000)",
    ] {
        let e = err(text, ErrorKind::ValueTooWide, 1, text);
        assert!(e.to_string().contains("32 bits"), "{e}");
    }
    // The whole register is still there when asked for.
    assert!(parse(Source::Allow, "mkdir(a1.64 == 0x10000)").is_ok());
}
