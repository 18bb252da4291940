//! The groups of profiles/groups.toml: no typos (every name exists on some architecture), no
//! member twice, and every group parses on both architectures in both lists.

use sandbox_policy::{grammar, groups, Action, Arch, Mode, Policy};

/// The syscall or `@group` an entry names, without its conditions and action.
fn target(entry: &str) -> &str {
    let end = entry.find(['(', '=']).unwrap_or(entry.len());
    &entry[..end]
}

/// Every target named twice in `entries`.
fn duplicates<'a>(entries: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = std::collections::BTreeSet::new();
    entries
        .into_iter()
        .map(target)
        .filter(|t| !seen.insert(*t))
        .collect()
}

/// The entries of a group with nested groups expanded.
fn expand(name: &str, out: &mut Vec<&'static str>, depth: usize) {
    expand_forced(name, out, depth, &mut Vec::new(), false);
}

/// Like [`expand`], also recording whether an `=ACTION` on an enclosing `@group` applies.
fn expand_forced(
    name: &str,
    out: &mut Vec<&'static str>,
    depth: usize,
    forced: &mut Vec<bool>,
    f: bool,
) {
    assert!(depth < 4, "@{name} nests too deeply");
    let g = groups::find(name).unwrap_or_else(|| panic!("no group @{name}"));
    for e in g.entries {
        match target(e).strip_prefix('@') {
            Some(inner) => expand_forced(inner, out, depth + 1, forced, f || e.contains('=')),
            None => {
                out.push(e);
                forced.push(f);
            }
        }
    }
}

#[test]
fn the_groups_the_docs_promise_exist() {
    for name in [
        "base", "fd-io", "fs-read", "fs-write", "network", "threads", "process", "exec", "loader",
        "never",
    ] {
        let g = groups::find(name).unwrap_or_else(|| panic!("@{name}"));
        assert!(!g.doc.is_empty() && !g.entries.is_empty());
    }
    assert!(groups::find("nope").is_none());
    assert!(
        groups::find("@base").is_none(),
        "names are stored without @"
    );
}

#[test]
fn every_member_names_a_syscall_of_some_architecture() {
    let mut bad = Vec::new();
    for g in groups::all() {
        for e in g.entries {
            let t = target(e);
            let ok = match t.strip_prefix('@') {
                Some(inner) => groups::find(inner).is_some(),
                None => [Arch::X86_64, Arch::Aarch64]
                    .iter()
                    .any(|a| a.syscall_number(t).is_some()),
            };
            if !ok {
                bad.push(format!("@{}: {e}", g.name));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "unknown names in profiles/groups.toml: {bad:?}"
    );
}

#[test]
fn no_group_lists_a_syscall_twice() {
    for g in groups::all() {
        let d = duplicates(g.entries.iter().copied());
        assert!(d.is_empty(), "@{} lists {d:?} twice", g.name);
        let mut all = Vec::new();
        expand(g.name, &mut all, 0);
        let d = duplicates(all.iter().copied());
        assert!(
            d.is_empty(),
            "@{} (with nested groups) lists {d:?} twice",
            g.name
        );
    }
}

#[test]
fn the_duplicate_check_finds_duplicates() {
    assert_eq!(
        duplicates(["read", "write", "read(a0 == 1)=EPERM"]),
        ["read"]
    );
    assert_eq!(duplicates(["@base", "write", "@base=EROFS"]), ["@base"]);
    assert!(duplicates(["read", "readv", "pread64"]).is_empty());
}

#[test]
fn every_group_parses_on_both_architectures() {
    for arch in [Arch::X86_64, Arch::Aarch64] {
        for g in groups::all() {
            let entry = format!("@{}", g.name);
            for (allow, deny) in [(Some(entry.as_str()), None), (None, Some(entry.as_str()))] {
                let mut p = Policy::new(arch, Mode::DenyList, Action::Kill);
                let r = grammar::from_env(arch, allow, deny, Some("errno:EPERM"), &mut p);
                assert_eq!(r, Ok(true), "{entry} on {arch:?}");
            }
            // Names that exist on this architecture are really in the policy.
            let (mut members, mut forced) = (Vec::new(), Vec::new());
            expand_forced(g.name, &mut members, 0, &mut forced, false);
            let mut p = Policy::new(arch, Mode::AllowList, Action::Errno(1));
            grammar::parse_list(&mut p, sandbox_policy::Source::Allow, &entry, Action::Allow)
                .unwrap();
            for (m, f) in members.into_iter().zip(forced) {
                let Some(nr) = arch.syscall_number(target(m)) else {
                    continue;
                };
                let plain = !m.contains(['(', '=']) && !f;
                if plain {
                    assert!(p.is_allowed(nr), "@{}: {m} on {arch:?}", g.name);
                } else {
                    assert!(!p.rules_for(nr).is_empty(), "@{}: {m} on {arch:?}", g.name);
                }
            }
        }
    }
}

#[test]
fn x86_64_only_names_are_skipped_on_aarch64() {
    let mut p = Policy::new(Arch::Aarch64, Mode::AllowList, Action::Kill);
    grammar::parse_list(
        &mut p,
        sandbox_policy::Source::Allow,
        "@fs-read",
        Action::Allow,
    )
    .unwrap();
    assert!(p.is_allowed(Arch::Aarch64.syscall_number("openat").unwrap()));
    // But naming one directly is an error.
    let mut p = Policy::new(Arch::Aarch64, Mode::AllowList, Action::Kill);
    let e = grammar::parse_list(&mut p, sandbox_policy::Source::Allow, "open", Action::Allow)
        .unwrap_err();
    assert_eq!(e.kind, sandbox_policy::ErrorKind::UnknownSyscall);
}
