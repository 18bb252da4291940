//! The Debian packages of the test suite: one list (`.ci/packages`), read by `cargo xtask ci`
//! and by nothing else; a missing package stops the check naming it and the install command.

use xtask::packages::{ensure, install_command, list, missing, parse, Missing, Package};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn the_list_holds_what_the_tests_run_and_ci_run_keeps_no_list_of_its_own() {
    let pkgs = list(&root()).unwrap();
    let names: Vec<&str> = pkgs.iter().map(|p| p.name.as_str()).collect();
    for must in [
        "golang-go",
        "node-typescript",
        "gcc-multilib",
        "musl-tools",
        "zsh",
        "fish",
    ] {
        assert!(names.contains(&must), "{must}: {names:?}");
    }
    assert!(pkgs.iter().any(|p| p.name == "rustc" && p.no_recommends));
    let script = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(script.contains("cargo xtask ci"), "{script}");
    for name in &names {
        assert!(
            !script.split_whitespace().any(|w| w == *name),
            ".ci/run names {name}: the list is .ci/packages"
        );
    }
    // On this machine (the tests' own), every one is installed.
    let absent = missing(&pkgs).unwrap();
    assert!(absent.is_empty(), "{absent:?}");
}

/// A missing package is named with the one command that installs it; the control is the same
/// check passing over installed packages.
#[test]
fn a_missing_package_stops_the_check_naming_it_and_the_command() {
    let pkgs = parse("bash\nsandbox-no-such-package\nsandbox-nor-this no-recommends\n").unwrap();
    let absent = missing(&pkgs).unwrap();
    let names: Vec<&str> = absent.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["sandbox-no-such-package", "sandbox-nor-this"]);
    let err = ensure(&pkgs, Missing::Fail).unwrap_err().to_string();
    assert!(
        err.contains("not installed: sandbox-no-such-package sandbox-nor-this; install them with: sudo apt-get update && sudo apt-get install -y sandbox-no-such-package && sudo apt-get install -y --no-install-recommends sandbox-nor-this"),
        "{err}"
    );
    // Control: installed packages pass.
    ensure(&parse("bash\ncoreutils\n").unwrap(), Missing::Fail).unwrap();
}

/// Hostile lines are refused with their line number; comments and blank lines are not packages.
#[test]
fn the_list_format_refuses_what_is_not_a_package_name() {
    assert_eq!(
        parse("# c\n\n  zsh  # the shell\n").unwrap(),
        [Package {
            name: "zsh".into(),
            no_recommends: false,
            unless_command: None,
        }]
    );
    // A command on PATH stands for the package; control: a command nowhere does not.
    let pkgs = parse(
        "sandbox-no-such-package unless-command=sh
",
    )
    .unwrap();
    assert_eq!(pkgs[0].unless_command.as_deref(), Some("sh"));
    assert!(missing(&pkgs).unwrap().is_empty());
    let pkgs = parse(
        "sandbox-no-such-package unless-command=sandbox-no-such-command
",
    )
    .unwrap();
    assert_eq!(missing(&pkgs).unwrap().len(), 1);
    for bad in [
        "zsh; rm -rf /",
        "Zsh",
        "-y",
        "zsh extra words",
        "zsh recommends",
        "npm unless-command=",
        "npm unless-command=../bin/npm",
        "npm unless-command=a;b",
        "z",
        "pkg\u{0}x",
        "../x",
    ] {
        let e = parse(&format!("git\n{bad}\n")).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{bad:?}: {e}");
    }
    assert_eq!(
        install_command(&parse("a1\nb2 no-recommends\n").unwrap()),
        "sudo apt-get update && sudo apt-get install -y a1 && sudo apt-get install -y --no-install-recommends b2"
    );
}
