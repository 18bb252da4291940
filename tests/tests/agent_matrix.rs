//! The agent matrix of `xtask/src/agent_matrix.rs`: every command as agents run it (`bash -c`
//! with stdin `/dev/null`, `sh -c` with a pipe; only PATH, HOME and LANG) under every built-in
//! profile, each cell checked against what the profile is for; and `docs/profiles.md` shows
//! exactly this data.

use xtask::agent_matrix::{self as m, Expected, Via};

/// Runs every cell of `profile` (two at a time) and fails listing each mismatch.
fn profile(profile: &'static str) {
    let cells = m::run_all(&[profile], 2).expect("running the cells");
    let bad: Vec<String> = cells
        .iter()
        .filter_map(|c| {
            c.mismatch
                .as_ref()
                .map(|d| format!("{} via {:?} under {}: {d}", c.command, c.via, c.profile))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} cells differ:\n{}",
        bad.len(),
        cells.len(),
        bad.join("\n\n")
    );
}

#[test]
fn minimal() {
    profile("minimal");
}
#[test]
fn network() {
    profile("network");
}
#[test]
fn write() {
    profile("write");
}
#[test]
fn no_exec() {
    profile("no-exec");
}
#[test]
fn shell() {
    profile("shell");
}
#[test]
fn shell_network() {
    profile("shell-network");
}
#[test]
fn unrestricted() {
    profile("unrestricted");
}

/// Every built-in profile is in the matrix with a stated purpose.
#[test]
fn every_profile_has_a_purpose() {
    for name in sandbox_policy::profile::Profile::builtin_names() {
        assert!(
            m::PROFILES.contains(&name),
            "{name} is not in the agent matrix"
        );
        assert!(m::purpose(name).is_some(), "{name} has no purpose");
    }
    assert!(m::COMMANDS.len() >= 60);
}

/// The generated section of docs/profiles.md is the matrix's own data.
#[test]
fn the_document_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/profiles.md");
    let doc = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        doc,
        m::updated_doc(&doc).unwrap(),
        "docs/profiles.md is stale: run `cargo xtask matrix`"
    );
}

/// A cell can fail both ways: a refused command is not "works" (control: the same command works
/// where the profile allows it), and a command that works is not "refused".
#[test]
fn a_cell_can_fail() {
    let cat = m::COMMANDS.iter().find(|c| c.id == "cat").unwrap();
    let refused = m::run_cell(cat, "minimal", Via::BashNull).unwrap();
    assert_eq!(refused.expected, Expected::Refused);
    assert!(refused.mismatch.is_none(), "{:?}", refused.mismatch);
    let works = m::run_cell(cat, "shell", Via::BashNull).unwrap();
    assert_eq!(works.expected, Expected::Works);
    assert!(works.mismatch.is_none(), "{:?}", works.mismatch);
    // The same command judged against the other expectation is a mismatch.
    let bogus = m::Cmd {
        id: "cat_bogus",
        script: "cat data/fruits.txt",
        needs: 0,
        expect: "banana",
        heavy: false,
    };
    let bogus: &'static m::Cmd = Box::leak(Box::new(bogus));
    assert!(m::run_cell(bogus, "minimal", Via::BashNull)
        .unwrap()
        .mismatch
        .is_some());
    let wrong_output = m::Cmd {
        expect: "no such text",
        ..*bogus
    };
    let wrong_output: &'static m::Cmd = Box::leak(Box::new(wrong_output));
    assert!(m::run_cell(wrong_output, "shell", Via::BashNull)
        .unwrap()
        .mismatch
        .is_some());
}
