//! The Landlock layer through the runners (the module's own tests are in
//! host/tests/landlock.rs): exec requests (`sandbox run` and static programs: host/tests/
//! layers_cli.rs), each attack with a control that shows it works with the layer off.

use sandbox_host::exec::{self, ExecResult, Request};
use sandbox_host::landlock::Mode;
use std::path::Path;
use std::process::Command;

fn req(argv: &[&str], profile: &str, cwd: &Path) -> Request {
    let mut r = Request::new(argv.iter().copied());
    r.profile = profile.into();
    r.cwd = Some(cwd.display().to_string());
    // The Landlock layer alone: namespaces (tests in host/tests/isolation.rs) would stop
    // the controls' attacks too.
    r.isolation = exec::isolation::Mode::Off;
    r
}

fn run(r: &Request) -> ExecResult {
    exec::exec(r).unwrap_or_else(|e| panic!("{:?} refused: {e}", r.argv))
}

/// Runs `r` with the layer (default) and without it (control); returns both.
fn with_and_without(mut r: Request) -> (ExecResult, ExecResult) {
    let on = run(&r);
    r.landlock = Mode::Off;
    (on, run(&r))
}

#[test]
fn a_denied_path_cannot_be_read_by_an_exec_request() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("token");
    std::fs::write(&secret, "SECRET\n").unwrap();
    let mut r = req(
        &["/bin/cat", secret.to_str().unwrap()],
        "minimal",
        dir.path(),
    );
    r.deny_read = vec![secret.display().to_string()];
    let (on, off) = with_and_without(r);
    assert_eq!(off.stdout, "SECRET\n", "control: {off:?}");
    assert_eq!(on.stdout, "", "{on:?}");
    assert!(on.stderr.contains("Permission denied"), "{on:?}");
    let status = on.landlock.expect("the layer reports itself");
    assert!(
        status.enforced.contains(&"fs-read-deny".to_string()),
        "{status:?}"
    );
}

#[test]
fn a_reused_ruleset_keeps_denying_and_sees_entries_made_between_requests() {
    // Requests of one process with the same rules reuse the prepared ruleset while the
    // directories it was built from are unchanged, and rebuild it when one changed.
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("token");
    std::fs::write(&secret, "SECRET\n").unwrap();
    let cat = |path: &Path, landlock: Mode| {
        let mut r = req(&["/bin/cat", path.to_str().unwrap()], "minimal", dir.path());
        r.deny_read = vec![secret.display().to_string()];
        r.landlock = landlock;
        run(&r)
    };
    let control = cat(&secret, Mode::Off);
    assert_eq!(control.stdout, "SECRET\n", "control: {control:?}");
    // The first request builds the ruleset, the next ones reuse it: denied every time.
    for i in 0..3 {
        let on = cat(&secret, Mode::Preferred);
        assert_eq!(on.stdout, "", "request {i}: {on:?}");
        assert!(
            on.stderr.contains("Permission denied"),
            "request {i}: {on:?}"
        );
    }
    // An entry made beside the denied path after the ruleset was built is readable, as it
    // would be with a ruleset built afresh (its directory changed: the ruleset is rebuilt).
    for (i, name) in ["new-1", "new-2"].iter().enumerate() {
        let new = dir.path().join(name);
        std::fs::write(&new, format!("PUBLIC-{i}\n")).unwrap();
        let on = cat(&new, Mode::Preferred);
        assert_eq!(on.stdout, format!("PUBLIC-{i}\n"), "{name}: {on:?}");
        let again = cat(&secret, Mode::Preferred);
        assert_eq!(again.stdout, "", "after {name}: {again:?}");
    }
}

#[test]
fn minimal_cannot_rewrite_an_existing_file_through_o_rdwr() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("existing");
    std::fs::write(&f, "data\n").unwrap();
    let script = "f = open('existing', 'r+'); f.write('X'); f.close()";
    let r = req(&["/usr/bin/python3", "-c", script], "minimal", dir.path());
    let (on, off) = with_and_without(r);
    assert_eq!(off.exit_code, Some(0), "control: {off:?}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "Xata\n");
    std::fs::write(&f, "data\n").unwrap();
    assert_ne!(on.exit_code, Some(0), "{on:?}");
    assert!(on.stderr.contains("Permission denied"), "{on:?}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "data\n");
}

#[test]
fn write_profile_writes_only_in_the_workspace_and_tmpdir() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("planted");
    let script = format!(
        "echo in > inside && echo tmp > \"$TMPDIR/t\" && cat inside \"$TMPDIR/t\"; echo out > {}",
        target.display()
    );
    let mut r = req(&["/bin/sh", "-c", &script], "shell", ws.path());
    r.timeout_s = 10.0;
    let (on, off) = with_and_without(r);
    assert!(
        off.exit_code == Some(0) && target.exists(),
        "control: {off:?}"
    );
    std::fs::remove_file(&target).unwrap();
    assert_eq!(on.stdout, "in\ntmp\n", "{on:?}");
    assert!(!target.exists(), "{on:?}");
    assert!(on.stderr.contains("Permission denied"), "{on:?}");
}

#[test]
fn a_command_cannot_signal_a_process_outside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let mut victim = Command::new("/bin/sleep").arg("30").spawn().unwrap();
    let pid = victim.id().to_string();
    let r = req(&["/bin/kill", "-0", &pid], "shell", dir.path());
    let (on, off) = with_and_without(r);
    assert_eq!(off.exit_code, Some(0), "control: {off:?}");
    assert_ne!(on.exit_code, Some(0), "{on:?}");
    assert!(on.stderr.contains("Operation not permitted"), "{on:?}");
    assert!(victim.try_wait().unwrap().is_none(), "the victim lives");
    victim.kill().unwrap();
    victim.wait().unwrap();
}

/// A change to a request, for the table of hostile values.
type Change = Box<dyn Fn(&mut Request)>;

#[test]
fn hostile_layer_fields_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let base = req(&["/bin/true"], "write", dir.path());
    let cases: Vec<(Change, &str)> = vec![
        (
            Box::new(|r| r.workspace = Some("relative".into())),
            "workspace",
        ),
        (
            Box::new(|r| r.workspace = Some("/no/such/dir".into())),
            "workspace",
        ),
        (
            Box::new(|r| r.workspace = Some("/etc/hostname".into())),
            "workspace",
        ),
        (
            Box::new(|r| r.writable_paths = vec!["/tmp/a\nb".into()]),
            "writable_paths[0]",
        ),
        (
            Box::new(|r| r.writable_paths = vec!["/no/such".into()]),
            "writable_paths[0]",
        ),
        (
            Box::new(|r| r.deny_read = vec!["rel".into()]),
            "deny_read[0]",
        ),
        (
            Box::new(|r| r.connect_ports = Some(vec![])),
            "connect_ports",
        ),
        (
            Box::new(|r| r.connect_ports = Some(vec![0])),
            "connect_ports",
        ),
        (
            Box::new(|r| r.connect_ports = Some(vec![443])),
            "connect_ports",
        ),
    ];
    for (change, field) in cases {
        let mut r = base.clone();
        change(&mut r);
        match exec::exec(&r) {
            Ok(res) => panic!("{field}: ran {res:?}"),
            Err(e) => assert_eq!(e.field(), field, "{e}"),
        }
    }
    // A denied path that does not exist is fine, and reported.
    let mut r = base.clone();
    r.deny_read = vec!["/no/such/secret".into()];
    let res = run(&r);
    let status = res.landlock.unwrap();
    assert!(status
        .deny_read_absent
        .iter()
        .any(|p| p == Path::new("/no/such/secret")));
}

#[test]
fn an_exec_request_with_port_rules_cannot_open_an_mptcp_socket() {
    let dir = tempfile::tempdir().unwrap();
    let code =
        "import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); print('open')";
    let mut r = req(&["/usr/bin/python3", "-c", code], "network", dir.path());
    // Control: without port rules, MPTCP sockets are the profile's business (allowed).
    let open = run(&r);
    assert_eq!(open.stdout, "open\n", "{open:?}");
    r.connect_ports = Some(vec![443]);
    let refused = run(&r);
    assert_ne!(refused.exit_code, Some(0), "{refused:?}");
    assert!(
        refused.stderr.contains("Protocol not supported"),
        "{refused:?}"
    );
}
