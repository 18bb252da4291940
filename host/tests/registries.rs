//! Registry presets through the proxy, with real package managers against the real
//! registries: `pip download` with `@pypi`, `npm pack` with `@npm`, `apt-get download` with
//! `@debian` (as root and as uid 65534), `cargo fetch` with `@crates` (as root: the toolchain
//! lives under /root, which uid 65534 cannot enter). Each with its control: the same command
//! with another preset is refused at the proxy, and the result names the domain.
//!
//! A registry that does not answer from this machine (checked outside the sandbox first) is
//! skipped with a line on stderr, never silently.

use serde_json::{json, Value};
use std::path::Path;

mod common;

use common::{output_with_input, sandbox, As, BOTH, NOBODY};

/// Whether `url` answers outside the sandbox; says so on stderr when it does not.
fn reachable(url: &str) -> bool {
    let ok = std::process::Command::new("curl")
        .args(["-fsS", "-o", "/dev/null", "--max-time", "10", url])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("registries: SKIPPED: {url} does not answer from this machine");
    }
    ok
}

/// A workspace `who` owns, with its data directory (the sandbox home) beside it.
fn workspace(who: As) -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    if who == As::Nobody {
        std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    }
    dir
}

/// `line` under `shell-network` in `ws` with `domains` allowed, as `who`.
fn fetch(who: As, ws: &Path, line: &str, domains: &[&str], env: Value) -> Value {
    let req = json!({
        "argv": ["/bin/bash", "-c", line],
        "profile": "shell-network",
        "cwd": ws,
        "allow_domains": domains,
        "env": env,
        "timeout_s": 180,
    });
    let mut cmd = sandbox(who);
    cmd.args(["exec", "--json"]);
    let out = output_with_input(&mut cmd, req.to_string().as_bytes());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The destinations the proxy refused.
fn refused(r: &Value) -> Vec<String> {
    r["network"]["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["allowed"] == false)
        .map(|d| d["host"].as_str().unwrap().to_string())
        .collect()
}

fn check(who: As, line: &str, preset: &str, other: &str, host: &str, made: &str, env: Value) {
    let ws = workspace(who);
    let r = fetch(who, ws.path(), line, &[preset], env.clone());
    assert_eq!(r["exit_code"], 0, "{who:?} {preset}: {r}");
    assert!(ws.path().join(made).exists(), "{who:?} {preset}: no {made}");
    assert_eq!(refused(&r), Vec::<String>::new(), "{r}");
    // Control: another registry's preset lets nothing of this one through, and says which.
    let ws = workspace(who);
    let r = fetch(who, ws.path(), line, &[other], env);
    assert_ne!(r["exit_code"], 0, "{who:?} {other}: {r}");
    assert!(refused(&r).iter().any(|h| h == host), "{who:?}: {r}");
    // The refusal names the preset that has the host.
    let reasons = r["network"]["destinations"].to_string();
    assert!(reasons.contains(&format!("preset {preset} has it")), "{r}");
}

#[test]
fn pip_download_reaches_pypi_with_its_preset_only() {
    if !reachable("https://pypi.org/simple/toolz/") {
        return;
    }
    for who in BOTH {
        check(
            who,
            "python3 -m pip download -q --no-deps --no-binary :all: toolz==0.12.1 -d .",
            "@pypi",
            "@npm",
            "pypi.org",
            "toolz-0.12.1.tar.gz",
            json!({}),
        );
    }
}

#[test]
fn npm_pack_reaches_npm_with_its_preset_only() {
    if !reachable("https://registry.npmjs.org/is-number") {
        return;
    }
    for who in BOTH {
        check(
            who,
            "npm pack -q is-number@7.0.0",
            "@npm",
            "@pypi",
            "registry.npmjs.org",
            "is-number-7.0.0.tgz",
            json!({}),
        );
    }
}

#[test]
fn apt_get_download_reaches_debian_with_its_preset_only() {
    if !reachable("http://deb.debian.org/debian/dists/bookworm/Release") {
        return;
    }
    for who in BOTH {
        check(
            who,
            // apt drops to its `_apt` user for downloads: only root's uid is mapped in the
            // job's user namespace, so root's run keeps its own (a limit named in
            // docs/isolation.md).
            "apt-get download -qq -o APT::Sandbox::User=root hello && mv hello_*.deb hello.deb",
            "@debian",
            "@pypi",
            "deb.debian.org",
            "hello.deb",
            json!({}),
        );
    }
}

#[test]
fn cargo_fetch_reaches_crates_io_with_its_preset_only() {
    let cargo = Path::new("/root/.cargo/bin/cargo");
    if !cargo.exists() || !reachable("https://index.crates.io/config.json") {
        eprintln!("registries: SKIPPED: cargo fetch (no /root/.cargo/bin/cargo or no crates.io)");
        return;
    }
    let ws = workspace(As::Root);
    std::fs::write(
        ws.path().join("Cargo.toml"),
        "[package]\nname = \"probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nitoa = \"=1.0.11\"\n",
    )
    .unwrap();
    std::fs::create_dir(ws.path().join("src")).unwrap();
    std::fs::write(ws.path().join("src/lib.rs"), "").unwrap();
    let env = json!({
        "RUSTUP_HOME": "/root/.rustup",
        "PATH": "/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin",
    });
    let line = "/root/.cargo/bin/cargo fetch -q && ls \"$CARGO_HOME\"/registry/cache/*/";
    let r = fetch(As::Root, ws.path(), line, &["@crates"], env.clone());
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(
        r["stdout"].as_str().unwrap().contains("itoa-1.0.11.crate"),
        "{r}"
    );
    // Control: with the npm preset, crates.io's index is refused and named (a fresh home,
    // so that no cached index answers instead).
    let data = workspace(As::Root);
    let req = json!({
        "argv": ["/bin/bash", "-c", "/root/.cargo/bin/cargo fetch -q"],
        "profile": "shell-network", "cwd": ws.path(), "allow_domains": ["@npm"],
        "env": env, "timeout_s": 180,
    });
    let mut cmd = sandbox(As::Root);
    cmd.env("XDG_DATA_HOME", data.path())
        .args(["exec", "--json"]);
    let out = output_with_input(&mut cmd, req.to_string().as_bytes());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(r["exit_code"], 0, "{r}");
    assert!(refused(&r).iter().any(|h| h == "index.crates.io"), "{r}");
}

#[test]
fn presets_are_listed_and_an_unknown_one_is_refused_by_index() {
    let out = sandbox(As::Nobody)
        .args(["profiles", "registries", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for name in ["pypi", "npm", "crates", "go", "rubygems", "maven", "debian"] {
        assert!(!v[name]["domains"].as_array().unwrap().is_empty(), "{name}");
    }
    let ws = workspace(As::Nobody);
    for bad in ["@", "@PyPI", "@pypi\n", "@nope"] {
        let r = fetch(
            As::Nobody,
            ws.path(),
            "true",
            &["example.com", bad],
            json!({}),
        );
        assert_eq!(r["error"]["field"], "allow_domains[1]", "{bad:?}: {r}");
    }
    // The command line takes the same names.
    let out = sandbox(As::Nobody)
        .current_dir(ws.path())
        .args(["run", "--allow-domain", "@nope", "--", "/bin/true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("not a registry preset"),
        "{stderr}"
    );
}

/// `sandbox serve` reads the same names: a preset in a request is expanded, an unknown one
/// refused by index, and the home field is checked, each answered by id.
#[test]
fn serve_requests_take_presets_and_the_home() {
    for who in BOTH {
        let ws = workspace(who);
        let lines = [
            json!({"id": "a", "argv": ["/bin/true"], "allow_domains": ["@nope"]}),
            json!({"id": "b", "argv": ["/bin/true"], "home": "bogus"}),
            json!({"id": "c", "argv": ["/bin/sh", "-c", "echo $HOME"], "profile": "shell",
                   "cwd": ws.path(), "allow_domains": ["@pypi"], "home": "private"}),
        ];
        let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let mut cmd = sandbox(who);
        cmd.arg("serve");
        let out = output_with_input(&mut cmd, input.as_bytes());
        let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let by = |id: &str| answers.iter().find(|a| a["id"] == id).unwrap().clone();
        assert_eq!(by("a")["error"]["field"], "allow_domains[0]", "{who:?}");
        assert_eq!(by("b")["error"]["field"], "home", "{who:?}");
        let c = by("c");
        assert_eq!(c["stdout"], "/tmp\n", "{who:?}: {c}");
        assert_eq!(c["network"]["mode"], "proxy", "{who:?}: {c}");
    }
}
