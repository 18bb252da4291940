//! The command matrix of `xtask/src/matrix.rs` as tests: one test per command and built-in
//! profile, asserting the outcome the profile's meaning promises (`cargo xtask matrix` writes
//! the same cells into `docs/profiles.md`).

use std::path::PathBuf;
use xtask::matrix;

fn so() -> PathBuf {
    matrix::preload().expect("building libsandbox.so")
}

fn check(command: &str, profile: &str) {
    let r = matrix::run_cell(&so(), command, profile).expect("running the cell");
    assert!(
        r.ok(),
        "{command} under {profile}: expected {}, measured {}\n{}",
        r.expected,
        r.measured,
        r.detail
    );
}

/// One module per command, one test per built-in profile.
macro_rules! cells {
    ($cmd:ident) => {
        mod $cmd {
            #[test]
            fn minimal() {
                super::check(stringify!($cmd), "minimal");
            }
            #[test]
            fn network() {
                super::check(stringify!($cmd), "network");
            }
            #[test]
            fn write() {
                super::check(stringify!($cmd), "write");
            }
            #[test]
            fn no_exec() {
                super::check(stringify!($cmd), "no-exec");
            }
            #[test]
            fn shell() {
                super::check(stringify!($cmd), "shell");
            }
            #[test]
            fn shell_network() {
                super::check(stringify!($cmd), "shell-network");
            }
            #[test]
            fn unrestricted() {
                super::check(stringify!($cmd), "unrestricted");
            }
        }
    };
}

cells!(cat);
cells!(ls_la);
cells!(grep_r);
cells!(head);
cells!(tail);
cells!(wc);
cells!(sort);
cells!(uniq);
cells!(cut);
cells!(sha256sum);
cells!(find);
cells!(stat);
cells!(du);
cells!(diff);
cells!(tar_tf);
cells!(gzip_dc);
cells!(jq);
cells!(python_json);
cells!(python_read);
cells!(git_status);
cells!(git_log);
cells!(git_diff);
cells!(curl);
cells!(touch);
cells!(mkdir);
cells!(cp);
cells!(mv);
cells!(rm);
cells!(sed_i);
cells!(sh_pipeline);
cells!(bash_c);

/// The tests above cover every command and profile of the matrix, and nothing else.
#[test]
fn every_cell_has_a_test() {
    let here = include_str!("matrix.rs");
    let listed: Vec<&str> = here
        .lines()
        .filter_map(|l| l.strip_prefix("cells!(").and_then(|r| r.strip_suffix(");")))
        .collect();
    let ids: Vec<&str> = matrix::COMMANDS.iter().map(|c| c.id).collect();
    assert_eq!(listed, ids);
    assert_eq!(
        matrix::PROFILES,
        [
            "minimal",
            "network",
            "write",
            "no-exec",
            "shell",
            "shell-network",
            "unrestricted"
        ]
    );
}

/// The classification can fail: a command whose output differs is not "runs", and a blocked
/// cell names the syscall.
#[test]
fn a_cell_can_fail() {
    let r = matrix::run_cell(&so(), "sh_pipeline", "minimal").unwrap();
    assert!(
        !matrix::Expected::Runs.accepts(&r.measured),
        "{}",
        r.measured
    );
    assert!(
        matches!(r.measured, matrix::Outcome::Blocked(_)),
        "{}",
        r.measured
    );
}
