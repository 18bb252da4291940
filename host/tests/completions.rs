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
         echo \"4:${{COMPREPLY[*]}}\"
         COMP_WORDS=(sandbox sess); COMP_CWORD=1; _sandbox sandbox sess sandbox
         echo \"5:${{COMPREPLY[*]}}\"
         COMP_WORDS=(sandbox session st); COMP_CWORD=2; _sandbox sandbox st session
         echo \"6:${{COMPREPLY[*]}}\"
         COMP_WORDS=(sandbox run --sess); COMP_CWORD=2; _sandbox sandbox --sess run
         echo \"7:${{COMPREPLY[*]}}\"
         COMP_WORDS=(sandbox session start --id); COMP_CWORD=3; _sandbox sandbox --id start
         echo \"8:${{COMPREPLY[*]}}\"",
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
    assert!(text.contains("5:session"), "{text}");
    assert!(text.contains("6:start"), "{text}");
    assert!(text.contains("7:--session"), "{text}");
    assert!(text.contains("8:--idle"), "{text}");
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
        // zsh and fish come from Debian (.ci/packages); `-n` parses without running.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("script");
        std::fs::write(&f, &script).unwrap();
        let check = Command::new(shell).arg("-n").arg(&f).output();
        let check = check.unwrap_or_else(|e| panic!("{shell} is needed (.ci/packages): {e}"));
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

/// What bash-completion offers after `sandbox WORDS... <TAB>` with `cur` typed.
fn bash_offers(script: &std::path::Path, words: &[&str], cur: &str) -> String {
    let prev = words.last().copied().unwrap_or("sandbox");
    let all: Vec<String> = words
        .iter()
        .chain([&cur])
        .map(|w| format!("'{w}'"))
        .collect();
    let probe = format!(
        "source {}; COMP_WORDS=({}); COMP_CWORD={}; _sandbox sandbox '{cur}' '{prev}'; echo \"${{COMPREPLY[*]}}\"",
        script.display(),
        all.join(" "),
        words.len()
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &probe])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `--profile`, `--base` and `profiles show` offer the built-in profiles (the list in
/// `profiles/`); the mode flags offer their modes. The control: a flag that takes a free value
/// (`--allow-domain`) offers none of them.
#[test]
fn completions_offer_profile_names_and_mode_values() {
    let o = sandbox(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("sandbox.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    let profiles: Vec<String> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles"))
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".toml").map(String::from)
            })
            // groups.toml, credentials.toml, registries.toml and control-files.toml are data,
            // not profiles.
            .filter(|n| {
                !["groups", "credentials", "registries", "control-files"].contains(&n.as_str())
            })
            .collect();
    assert!(profiles.len() >= 7, "{profiles:?}");
    for words in [
        &["sandbox", "run", "--profile"][..],
        &["sandbox", "env", "--profile"],
        &["sandbox", "export", "--profile"],
        &["sandbox", "learn", "--base"],
        &["sandbox", "profiles", "show"],
    ] {
        let offered = bash_offers(&script, words, "");
        for p in &profiles {
            assert!(
                offered.split(' ').any(|w| w == p),
                "{words:?} offers {offered:?}, not {p}"
            );
        }
    }
    assert_eq!(
        bash_offers(&script, &["sandbox", "run", "--profile"], "shell"),
        "shell shell-network"
    );
    for (flag, modes) in [
        ("--landlock", "required preferred off"),
        ("--isolation", "required preferred off"),
        ("--network", "host none proxy"),
        ("--static-binary", "block warn allow confine"),
        ("--on-violation", "report kill trap log errno"),
    ] {
        assert_eq!(
            bash_offers(&script, &["sandbox", "run", flag], ""),
            modes,
            "{flag}"
        );
    }
    assert_eq!(
        bash_offers(&script, &["sandbox", "export", "--on-violation"], ""),
        "kill trap log errno"
    );
    // Control: a free value is not completed from a list.
    let free = bash_offers(&script, &["sandbox", "run", "--allow-domain"], "");
    assert!(
        !free.contains("minimal") && !free.contains("preferred"),
        "{free:?}"
    );
    // zsh and fish carry the same values.
    for shell in ["zsh", "fish"] {
        let script = String::from_utf8(sandbox(&["completions", shell]).stdout).unwrap();
        for v in [
            "shell-network",
            "unrestricted",
            "preferred",
            "proxy",
            "confine",
        ] {
            assert!(script.contains(v), "{shell}: {v}");
        }
    }
}
