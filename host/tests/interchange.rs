//! `sandbox export` and `sandbox import` on the command line: output to stdout or a file,
//! and hostile input refused with one line naming the place, leaving `--out` untouched.

use std::path::Path;
use std::process::{Command, Output};

const SANDBOX: &str = env!("CARGO_BIN_EXE_sandbox");

fn sandbox(args: &[&str]) -> Output {
    Command::new(SANDBOX)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn export_and_import_write_stdout_or_a_file_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("shell.json");
    // The one note: what was added so that runc can start the container.
    let added = "sandbox: export: added to the allow list: capset (runc's own calls";
    let o = sandbox(&["export", "--format", "oci", "--profile", "shell"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(err(&o).lines().count(), 1, "{o:?}");
    assert!(err(&o).starts_with(added), "{o:?}");
    let o2 = sandbox(&[
        "export",
        "--format",
        "oci",
        "--profile",
        "shell",
        "--out",
        json.to_str().unwrap(),
    ]);
    assert!(
        o2.status.success() && o2.stdout.is_empty() && err(&o2).starts_with(added),
        "{o2:?}"
    );
    assert_eq!(std::fs::read(&json).unwrap(), o.stdout);
    let toml = dir.path().join("shell.toml");
    let o = sandbox(&[
        "import",
        json.to_str().unwrap(),
        "--out",
        toml.to_str().unwrap(),
    ]);
    assert!(o.status.success() && o.stderr.is_empty(), "{o:?}");
    // The imported file is a profile `run` reads.
    let o = sandbox(&[
        "run",
        "--allow-root",
        "--profile",
        toml.to_str().unwrap(),
        "--",
        "/bin/echo",
        "hi",
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hi\n", "{o:?}");
}

#[test]
fn export_notes_what_a_container_loses_on_every_run() {
    let o = sandbox(&["export", "--format", "oci", "--profile", "minimal"]);
    assert!(o.status.success(), "{o:?}");
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("sandbox: export: runc needs"), "{e}");
}

fn assert_refused(args: &[&str], out: &Path, needle: &str) {
    std::fs::write(out, "previous\n").unwrap();
    let o = sandbox(args);
    assert_eq!(o.status.code(), Some(125), "{args:?}: {o:?}");
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
    assert!(e.contains(needle), "{args:?}: {e}");
    assert_eq!(
        std::fs::read_to_string(out).unwrap(),
        "previous\n",
        "{args:?}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".sandbox-out-"))
        .collect();
    assert!(leftovers.is_empty(), "{args:?}: {leftovers:?}");
}

#[test]
fn hostile_input_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let input = dir.path().join("in.json");
    let i = input.to_str().unwrap();
    let cases: &[(&str, &str)] = &[
        ("{\"defaultAction\": \"SCMP_ACT_ERRNO\",", "not JSON"),
        (
            r#"{"defaultAction":"SCMP_ACT_BOOM"}"#,
            "defaultAction: unknown action `SCMP_ACT_BOOM`",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_VAX"]}"#,
            "architectures[0]: unknown architecture",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"op":"SCMP_CMP_EQ","value":1.5}]}]}"#,
            "syscalls[0].args[0].value",
        ),
    ];
    for (json, needle) in cases {
        std::fs::write(&input, json).unwrap();
        assert_refused(&["import", i, "--out", o], &out, needle);
    }
    // 50 MB: refused without reading it all.
    std::fs::write(&input, vec![b' '; 50 << 20]).unwrap();
    assert_refused(&["import", i, "--out", o], &out, "larger than");
    std::fs::write(&input, b"\xff\xfe{}").unwrap();
    assert_refused(&["import", i, "--out", o], &out, "not UTF-8");
    assert_refused(
        &["import", "/nonexistent.json", "--out", o],
        &out,
        "/nonexistent.json",
    );
    assert_refused(
        &["export", "--format", "oci", "--arch", "vax", "--out", o],
        &out,
        "--arch: unknown `vax`",
    );
    assert_refused(
        &["export", "--format", "oci", "--profile", "nope", "--out", o],
        &out,
        "unknown profile `nope`",
    );
    assert_refused(
        &[
            "export",
            "--format",
            "oci",
            "--allow",
            "frobnicate",
            "--out",
            o,
        ],
        &out,
        "frobnicate",
    );
    // An --out whose directory does not exist.
    let o2 = sandbox(&[
        "export",
        "--format",
        "oci",
        "--out",
        "/nonexistent/dir/x.json",
    ]);
    assert_eq!(o2.status.code(), Some(125), "{o2:?}");
    assert!(err(&o2).contains("--out /nonexistent/dir/x.json"), "{o2:?}");
    // An unknown format is a usage error.
    let o2 = sandbox(&["export", "--format", "yaml"]);
    assert_eq!(o2.status.code(), Some(2), "{o2:?}");
}
