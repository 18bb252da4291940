//! The Landlock layer through `sandbox run`: degraded kernels (forced lower ABI) and static
//! programs under `--static-binary confine`, each with a control.

use std::process::Command;

#[test]
fn required_refuses_what_the_kernel_cannot_enforce() {
    // As on a kernel with ABI 3 (no TCP rules, no scopes): `required` refuses, `preferred`
    // runs and says what is missing. The limit is read by the host, in a child process.
    let dir = tempfile::tempdir().unwrap();
    let sandbox = env!("CARGO_BIN_EXE_sandbox");
    let go = |mode: &str| {
        Command::new(sandbox)
            .args(["run", "--allow-root", "--landlock", mode, "--", "/bin/true"])
            .current_dir(dir.path())
            .env("SANDBOX_LANDLOCK_MAX_ABI", "3")
            .output()
            .unwrap()
    };
    let o = go("required");
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("ABI 6") && e.contains("signal"), "{e}");
    let o = go("preferred");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("Landlock protections missing"), "{e}");
}

#[test]
fn a_static_program_under_confine_gets_the_layer() {
    let dir = tempfile::tempdir().unwrap();
    let src = r#"#include <stdio.h>
int main(int c, char **v) { FILE *f = fopen(v[1], "r"); if (!f) { perror("open"); return 3; }
  char b[64]; size_t n = fread(b, 1, sizeof b, f); fwrite(b, 1, n, stdout); return 0; }
"#;
    let c = dir.path().join("static-read.c");
    std::fs::write(&c, src).unwrap();
    let prog = dir.path().join("static-read");
    let cc = Command::new("gcc")
        .args(["-static", "-o"])
        .arg(&prog)
        .arg(&c)
        .output()
        .expect("gcc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "SECRET\n").unwrap();
    let go = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sandbox"))
            .args(["run", "--allow-root", "--static-binary", "confine"])
            .args(["--deny-read", secret.to_str().unwrap()])
            .args(extra)
            .arg("--")
            .arg(&prog)
            .arg(&secret)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let off = go(&["--landlock", "off"]);
    assert_eq!(
        String::from_utf8_lossy(&off.stdout),
        "SECRET\n",
        "control: {off:?}"
    );
    let on = go(&[]);
    assert_eq!(on.status.code(), Some(3), "{on:?}");
    assert!(
        String::from_utf8_lossy(&on.stderr).contains("Permission denied"),
        "{on:?}"
    );
}
