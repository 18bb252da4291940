//! The man pages of the release bundle: one per subcommand at every level, each with EXIT
//! STATUS and EXAMPLES, no reference to a page that is not shipped, and clean under groff.

use std::collections::BTreeSet;
use std::process::Command;

/// The `NAME(1)` references of a page (clap_mangen writes its subcommands so).
fn references(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace())
        .filter_map(|w| w.strip_suffix("(1)"))
        .filter(|w| w.starts_with("sandbox"))
        // roff escapes the hyphen: `sandbox\-run(1)`.
        .map(|w| format!("{}.1", w.replace("\\-", "-")))
        .collect()
}

#[test]
fn every_reference_is_a_shipped_page_and_every_page_has_exit_status_and_examples() {
    let pages = xtask::man::pages().unwrap();
    let names: BTreeSet<String> = pages.iter().map(|(n, _)| n.clone()).collect();
    for must in [
        "sandbox.1",
        "sandbox-run.1",
        "sandbox-learn.1",
        "sandbox-profiles.1",
        "sandbox-profiles-show.1",
        "sandbox-profiles-credentials.1",
    ] {
        assert!(names.contains(must), "{must}: {names:?}");
    }
    assert!(!names.iter().any(|n| n.contains("help")), "{names:?}");
    for (name, text) in &pages {
        for r in references(text) {
            assert!(
                names.contains(&r),
                "{name} points to {r}, which is not shipped"
            );
        }
        assert!(text.contains(".SH \"EXIT STATUS\""), "{name}");
        assert!(text.contains(".SH EXAMPLES"), "{name}");
        // Every page names the usage-error and refusal statuses.
        assert!(
            text.contains("\\fB2\\fR") && text.contains("\\fB125\\fR"),
            "{name}"
        );
    }
    let run = &pages.iter().find(|(n, _)| n == "sandbox-run.1").unwrap().1;
    for status in ["124", "126", "127", "128+N"] {
        assert!(run.contains(&format!("\\fB{status}\\fR")), "run: {status}");
    }
    let top = &pages.iter().find(|(n, _)| n == "sandbox.1").unwrap().1;
    assert!(top.contains("sandbox check"), "{top}");
}

/// The control: clap_mangen's own rendering of the same definition lists clap's implicit
/// `help` subcommand as `sandbox-help(1)`, a page nothing ships; the check above finds it.
#[test]
fn the_reference_check_finds_the_unshipped_help_page_of_the_default_rendering() {
    use clap::CommandFactory;
    let mut text = Vec::new();
    clap_mangen::Man::new(sandbox_host::cli::Cli::command())
        .render(&mut text)
        .unwrap();
    let refs = references(&String::from_utf8(text).unwrap());
    assert!(refs.contains("sandbox-help.1"), "{refs:?}");
}

/// Rows of docs/reference.md's table reach the pages; the parse finds each status once.
#[test]
fn the_exit_statuses_are_the_reference_table() {
    let rows = xtask::man::exit_rows().unwrap();
    let statuses: Vec<&str> = rows.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(
        statuses,
        ["0", "N", "1", "2", "124", "125", "126", "127", "128+N"]
    );
}

/// groff formats every page without a warning (`-ww`: all of them).
#[test]
fn groff_formats_every_page_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    xtask::man::write_pages(dir.path()).unwrap();
    for (name, _) in xtask::man::pages().unwrap() {
        let o = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(dir.path().join(&name))
            .output()
            .expect("groff (Debian's groff-base)");
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // The examples are on the page as written.
    let o = Command::new("groff")
        .args(["-man", "-Tutf8", "-P-c", "-P-b", "-P-u"])
        .arg(dir.path().join("sandbox-run.1"))
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.contains("EXIT STATUS") && shown.contains("EXAMPLES"),
        "{shown}"
    );
    assert!(
        shown.contains("sandbox run --profile shell --timeout 10 -- sleep 1"),
        "{shown}"
    );
}
