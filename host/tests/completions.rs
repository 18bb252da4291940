//! `sandbox completions SHELL`: scripts generated from the command-line definition, loaded by
//! the real shells.

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

#[test]
fn bash_completes_subcommands_and_flags() {
    let o = sandbox(&["completions", "bash"]);
    assert!(o.status.success() && o.stderr.is_empty(), "{o:?}");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("sandbox.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    // What bash-completion does on `sandbox comp<TAB>` and `sandbox run --pro<TAB>`.
    let probe = format!(
        "source {}
         COMP_WORDS=(sandbox comp); COMP_CWORD=1; _sandbox sandbox comp sandbox
         echo \"1:${{COMPREPLY[*]}}\"
         COMP_WORDS=(sandbox run --pro); COMP_CWORD=2; _sandbox sandbox --pro run
         echo \"2:${{COMPREPLY[*]}}\"
         COMP_WORDS=(sandbox profiles cred); COMP_CWORD=2; _sandbox sandbox cred profiles
         echo \"3:${{COMPREPLY[*]}}\"
         COMP_WORDS=(sandbox profiles credentials --j); COMP_CWORD=3; _sandbox sandbox --j credentials
         echo \"4:${{COMPREPLY[*]}}\"",
        script.display()
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &probe])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1:completions"), "{text}");
    assert!(text.contains("2:--profile"), "{text}");
    assert!(text.contains("3:credentials"), "{text}");
    assert!(text.contains("4:--json"), "{text}");
}

#[test]
fn zsh_and_fish_scripts_parse_in_their_shells() {
    for (shell, marker) in [("zsh", "#compdef sandbox"), ("fish", "complete -c sandbox")] {
        let o = sandbox(&["completions", shell]);
        assert!(o.status.success() && o.stderr.is_empty(), "{o:?}");
        let script = String::from_utf8(o.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(
            script.contains("completions"),
            "{shell} lists the subcommands"
        );
        // zsh and fish come from Debian (.ci/run); `-n` parses without running.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("script");
        std::fs::write(&f, &script).unwrap();
        let check = Command::new(shell).arg("-n").arg(&f).output();
        let check = check.unwrap_or_else(|e| panic!("{shell} is needed (.ci/run): {e}"));
        assert!(check.status.success(), "{shell} -n: {check:?}");
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error_naming_the_choices() {
    let o = sandbox(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("tcsh") && err.contains("bash, zsh, fish"),
        "{err}"
    );
}
