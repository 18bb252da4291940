//! `cargo xtask dist`: the bundle unpacked somewhere else runs, is named for the binary it
//! holds, holds what it says it holds (the docs its help points to among them), and carries no
//! path of the machine that built it. Built with the dev profile (faster, and
//! its debug information would show a missed path remapping first).

use std::path::Path;
use std::process::Command;

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What `program args` prints on stdout.
fn text_of(program: &Path, args: &[&str]) -> String {
    let o = Command::new(program).args(args).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_bundle_works_unpacked_elsewhere_without_build_paths() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = tempfile::tempdir().unwrap();
    let opts = xtask::dist::DistOptions {
        profile: "dev".into(),
        out: out.path().to_path_buf(),
    };
    let dist = xtask::dist::dist(root, &opts).unwrap();
    let tarball = dist.bundle;
    let name = tarball.file_name().unwrap().to_string_lossy().into_owned();
    // Named for the binary it holds: the static build is not a `-gnu` one.
    let musl = xtask::dist::static_target("x86_64-unknown-linux-gnu").unwrap();
    let static_build = cfg!(target_arch = "x86_64") && xtask::dist::std_installed(&musl);
    assert_eq!(dist.built.fully_static, static_build);
    let target = if static_build {
        musl.clone()
    } else {
        xtask::dist::host_triple().unwrap()
    };
    assert_eq!(
        name,
        format!("sandbox-{}-{target}.tar.gz", env!("CARGO_PKG_VERSION"))
    );
    // One line per file written: the bundle, the wheel, the npm tarball.
    let sums = std::fs::read_to_string(out.path().join("SHA256SUMS")).unwrap();
    for f in [&tarball, &dist.wheel, &dist.npm] {
        let f = f.file_name().unwrap().to_string_lossy();
        assert_eq!(
            sums.lines()
                .filter(|l| l.ends_with(&format!("  {f}")))
                .count(),
            1,
            "{sums}"
        );
    }

    let place = tempfile::tempdir().unwrap();
    let o = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(place.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let top = place.path().join(name.trim_end_matches(".tar.gz"));
    let check = Command::new("sha256sum")
        .args(["--quiet", "-c", "SHA256SUMS"])
        .current_dir(&top)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");

    // One man page per subcommand plus sandbox.1; completions for three shells; profiles.
    let subcommands = [
        "run",
        "env",
        "extract",
        "check",
        "profiles",
        "inspect",
        "exec",
        "serve",
        "export",
        "import",
        "completions",
    ];
    for s in subcommands {
        assert!(
            top.join(format!("share/man/man1/sandbox-{s}.1")).is_file(),
            "{s}"
        );
    }
    for f in [
        "share/man/man1/sandbox.1",
        "share/bash-completion/completions/sandbox",
        "share/zsh/site-functions/_sandbox",
        "share/fish/vendor_completions.d/sandbox.fish",
        "share/sandbox/profiles/minimal.toml",
        "lib/libsandbox.so",
        "README.md",
        "LICENSE-MIT",
        "LICENSE-APACHE",
    ] {
        assert!(top.join(f).is_file(), "{f}");
    }
    // The pages the help points to, at the same place relative to README as in the repository.
    let help = text_of(&top.join("bin/sandbox"), &["--help"]);
    assert!(help.contains("docs/containers.md"), "{help}");
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = entry.unwrap().path();
        let shipped = top.join("docs").join(p.file_name().unwrap());
        assert_eq!(
            std::fs::read(&shipped).ok(),
            std::fs::read(&p).ok(),
            "{}",
            p.display()
        );
    }

    // It runs from there, with a bare environment.
    let sandbox = top.join("bin/sandbox");
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(&sandbox)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home.path())
            .env("LANG", "C.UTF-8")
            .current_dir(place.path())
            .output()
            .unwrap()
    };
    let o = run(&["run", "--allow-root", "--", "/bin/echo", "hi"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hi\n", "{o:?}");
    let o = run(&["env"]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("export LD_PRELOAD="),
        "{o:?}"
    );

    // Fully static where the musl target is installed: no program interpreter to load at every
    // start (admission's own ELF reading says so; a dynamically linked build is `Ok`).
    if static_build {
        use sandbox_host::admission::{classify, Unconfinable};
        let verdict = classify(&sandbox);
        assert!(
            matches!(
                verdict.preload,
                Err(Unconfinable::StaticPie { .. } | Unconfinable::Static { .. })
            ),
            "{verdict:?}"
        );
    } else {
        eprintln!("{musl} is not installed: the bundle's binary is not the static one");
    }

    // No build path: not the workspace, not cargo's home (registry sources).
    let home_cargo = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap_or_default()));
    for f in ["bin/sandbox", "lib/libsandbox.so"] {
        let bytes = std::fs::read(top.join(f)).unwrap();
        for p in [root.to_str().unwrap(), home_cargo.as_str()] {
            assert!(!contains(&bytes, p.as_bytes()), "{f} contains {p}");
        }
    }
}
