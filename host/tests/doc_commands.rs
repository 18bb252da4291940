//! Every command shown in README.md, docs/getting-started.md and docs/examples.md (the man
//! pages' EXAMPLES) is run here and its output checked against what the text claims.
//!
//! The `sh` blocks are read from the files; every command line in them must have a case in
//! [`CASES`] (the test fails when the docs gain a command without one, or keep a case whose
//! command is gone). Each runs through `bash -c` with the built `sandbox` first on PATH, in a
//! scratch project directory with a scratch HOME, stdin /dev/null, a bare environment, as root
//! and as uid 65534 unless the case says why not. A doc line followed by `#   sandbox: ...`
//! comment lines claims those words on stderr: they are checked too (`/your/project` in a claim
//! stands for the project directory the command ran in). Lines holding a
//! placeholder (`'...'`, `mytool`) run with it filled in (`run`); the few that cannot run here
//! (they build the workspace, need a release bundle or a public index) say why (`skip`).

mod common;

use common::{As, BOTH, SANDBOX};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

/// The files whose `sh` blocks are commands.
const DOCS: &[&str] = &["README.md", "docs/getting-started.md", "docs/examples.md"];

/// How one documented command is run and what it must do.
struct Case {
    /// The command as written in the docs, without its trailing comment.
    doc: &'static str,
    /// Why it is not run here, when it is not.
    skip: Option<&'static str>,
    /// The line run instead of `doc` (a placeholder filled in).
    run: Option<&'static str>,
    /// Who runs it.
    who: &'static [As],
    /// Shell commands run first in the project directory, as the same user (must succeed).
    setup: &'static str,
    /// The exit status.
    status: i32,
    /// Words stdout must hold.
    stdout: &'static [&'static str],
    /// Words stderr must hold.
    stderr: &'static [&'static str],
    /// Words stdout must not hold.
    not_stdout: &'static [&'static str],
    /// Nothing on stderr (all went well).
    quiet: bool,
    /// A shell check run after, as the same user (must succeed): the effect the doc claims.
    after: &'static str,
    /// Extra environment.
    env: &'static [(&'static str, &'static str)],
}

const C: Case = Case {
    doc: "",
    skip: None,
    run: None,
    who: &BOTH,
    setup: "",
    status: 0,
    stdout: &[],
    stderr: &[],
    not_stdout: &[],
    quiet: false,
    after: "",
    env: &[],
};

const GO_ENV: &[(&str, &str)] = &[
    ("GOFLAGS", "-mod=mod"),
    ("GOPROXY", "off"),
    ("GOTOOLCHAIN", "local"),
    (
        "GOCACHE",
        concat!(env!("CARGO_TARGET_TMPDIR"), "/doc-go-cache"),
    ),
];

/// Every command of the docs.
const CASES: &[Case] = &[
    // README.md
    Case {
        doc: "cargo run --release -p sandbox-host -- run --profile minimal -- cat /etc/hostname",
        skip: Some("builds the workspace; the same run is `sandbox run -- cat /etc/hostname`"),
        ..C
    },
    Case {
        doc: "sandbox run -- /usr/bin/python3 -c 'import socket; socket.socket()'",
        status: 1,
        stderr: &["PermissionError: [Errno 1] Operation not permitted"],
        ..C
    },
    Case {
        doc: "sandbox run --on-violation kill -- /usr/bin/python3 -c 'import socket; socket.socket()'",
        status: 159,
        ..C
    },
    Case {
        doc: "sandbox run --profile write -- touch new-file",
        quiet: true,
        after: "test -f new-file",
        ..C
    },
    Case {
        doc: "sandbox run -- cat ~/.ssh/id_rsa",
        setup: "mkdir -p ~/.ssh && echo SECRET-KEY > ~/.ssh/id_rsa && chmod 600 ~/.ssh/id_rsa",
        status: 1,
        stderr: &["Permission denied", "is on the credential list"],
        not_stdout: &["SECRET-KEY"],
        // The control: the same user reads it without the sandbox.
        after: "grep -q SECRET-KEY ~/.ssh/id_rsa",
        ..C
    },
    Case {
        doc: "sandbox run --profile shell --allow-write /tmp/out --deny-read ~/private -- sh -c '...'",
        // A private directory of the test's instead of the shared /tmp/out.
        run: Some("sandbox run --profile shell --allow-write ~/out --deny-read ~/private -- sh -c 'echo ok > ~/out/f && cat ~/private/key'"),
        setup: "mkdir -p ~/out ~/private && echo PRIVATE > ~/private/key",
        status: 1,
        stderr: &["Permission denied"],
        not_stdout: &["PRIVATE"],
        after: "grep -q ok ~/out/f && grep -q PRIVATE ~/private/key",
        ..C
    },
    Case {
        doc: "sandbox run --landlock required -- ...",
        run: Some("sandbox run --landlock required -- cat /etc/hostname"),
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox run --profile shell --read-only \"$PWD/deploy\" -- sh -c '...'",
        run: Some("sandbox run --profile shell --read-only \"$PWD/deploy\" -- sh -c 'touch ok; touch deploy/x'"),
        setup: "mkdir deploy",
        status: 1,
        stderr: &["Read-only file system"],
        after: "test -f ok && ! test -e deploy/x",
        ..C
    },
    Case {
        doc: "sandbox run --profile shell-network --allow-domain pypi.org --allow-domain '*.pythonhosted.org' -- pip download x",
        // pypi.org is not reached from the tests: pip itself runs under the profile (under
        // minimal it could not start: execve refused), the proxy is tested against local
        // servers (host/tests/proxy.rs, network.rs).
        run: Some("sandbox run --profile shell-network --allow-domain pypi.org --allow-domain '*.pythonhosted.org' -- pip --version"),
        stdout: &["pip "],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox run --profile shell --timeout 10 -- sh -c 'ls | wc -l'",
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox run --static-binary confine -- ./static-prog",
        setup: "printf 'int main(void){return 0;}\\n' > s.c && gcc -static -o static-prog s.c",
        stderr: &["outer filter"],
        ..C
    },
    Case {
        doc: "sandbox env --profile network",
        stdout: &["export LD_PRELOAD=", "SECCOMP_SYSCALL_"],
        ..C
    },
    Case {
        doc: "echo '{\"argv\":[\"/bin/echo\",\"hi\"],\"profile\":\"minimal\"}' | sandbox exec --json",
        stdout: &["\"stdout\":\"hi\\n\""],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox serve --max-concurrent 4",
        quiet: true,
        ..C
    },
    Case {
        doc: "id=$(sandbox session start --profile shell --workspace \"$PWD\"); sandbox run --session \"$id\" -- sh -c 'sleep 300 >/dev/null 2>&1 &'; sandbox run --session \"$id\" -- pgrep -cx sleep; sandbox session end \"$id\"",
        // The session's own PID namespace: its one sleep, none of the host's.
        stdout: &["1"],
        not_stdout: &["2"],
        quiet: true,
        ..C
    },
    Case {
        doc: "id=$(sandbox session start --profile shell-network --workspace \"$PWD\" --idle 600); echo \"$id\"; sandbox session end \"$id\"",
        quiet: true,
        ..C
    },
    Case {
        doc: "id=$(sandbox session start); sandbox session end \"$id\"; sandbox session list",
        quiet: true,
        ..C
    },
    Case {
        doc: "id=$(sandbox session start); sandbox session list; sandbox session list --json; sandbox session end \"$id\"",
        stdout: &["PROFILE", "minimal", "\"running\":0"],
        quiet: true,
        ..C
    },
    Case {
        // stdin is /dev/null: the server checks its policy (one trial run), reads EOF and ends.
        doc: "sandbox mcp --profile shell --workspace \"$PWD\"",
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox profiles; sandbox profiles show minimal; sandbox profiles groups",
        stdout: &["shell-network", "@fs-read"],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox learn --out mytool.toml -- mytool args",
        run: Some("sandbox learn --out mytool.toml -- ls -l"),
        after: "grep -q allow mytool.toml",
        ..C
    },
    Case {
        doc: "sandbox inspect /usr/bin/git; sandbox check; sandbox extract --to /opt/agent/libsandbox.so",
        run: Some("sandbox inspect /usr/bin/git; sandbox check; sandbox extract --to \"$PWD/agent/libsandbox.so\""),
        // extract writes into an existing directory (it refuses to create one: named).
        setup: "mkdir agent",
        stdout: &["the preload confines it", "tier"],
        after: "test -s agent/libsandbox.so",
        ..C
    },
    Case {
        doc: "cargo xtask ci",
        skip: Some("the whole suite, this test among it"),
        ..C
    },
    // docs/getting-started.md
    Case {
        doc: "python3 -m venv .venv && .venv/bin/pip install kernel_sandbox-<version>-*.whl",
        skip: Some("needs the built wheel: xtask/tests/dist_packages.rs installs it into a fresh venv and runs it"),
        ..C
    },
    Case {
        doc: "npm install ./kernel-sandbox-<version>.tgz",
        skip: Some("needs the built npm package: xtask/tests/dist_packages.rs installs it offline and runs it"),
        ..C
    },
    Case {
        doc: "tar xzf sandbox-<version>-x86_64-unknown-linux-musl.tar.gz",
        skip: Some("needs a release bundle: xtask/tests/dist.rs builds one and runs it unpacked elsewhere"),
        ..C
    },
    Case {
        doc: "export PATH=\"$PWD/sandbox-<version>-x86_64-unknown-linux-musl/bin:$PATH\"",
        skip: Some("the bundle's PATH, as above"),
        ..C
    },
    Case {
        doc: "cargo build --release -p sandbox-host && export PATH=\"$PWD/target/release:$PATH\"",
        skip: Some("builds the workspace; this test puts the built binary first on PATH"),
        ..C
    },
    Case {
        doc: "sandbox check",
        stdout: &["tier"],
        ..C
    },
    Case {
        doc: "sandbox run -- cat /etc/hostname",
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox run -- sh -c 'echo x > f'",
        status: 2,
        stderr: &["cannot create f: Read-only file system"],
        after: "! test -e f",
        ..C
    },
    Case {
        doc: "cd examples/go && go build -o bin/ ./cmd/... && ./bin/serveclient -sandbox \"$(command -v sandbox)\"",
        setup: "cp -r \"$REPO/examples\" .",
        // As root: the Go toolchain's cache is shared between the runs.
        who: &[As::Root],
        stdout: &["echo: exit 0", "socket: exit 1, refused: socket", "bad: refused"],
        after: "test -x examples/go/bin/serveclient && test -x examples/go/bin/exectool",
        env: GO_ENV,
        ..C
    },
    Case {
        doc: "./bin/exectool -profile shell 'git status --short | head'",
        run: Some("cd examples/go && ./bin/exectool -profile shell 'git status --short | head'"),
        setup: "cp -r \"$REPO/examples\" . && git init -q && (cd examples/go && go build -o bin/ ./cmd/...)",
        who: &[As::Root],
        // The repository's untracked files, listed from examples/go.
        stdout: &["\"exit_code\":0", "\"stdout\":\"?? ../"],
        env: GO_ENV,
        ..C
    },
    Case {
        doc: "sandbox learn --out mytool.toml -- mytool --its-usual-arguments",
        run: Some("sandbox learn --out mytool.toml -- ls -l"),
        after: "grep -q allow mytool.toml",
        ..C
    },
    Case {
        doc: "sandbox run --profile mytool.toml -- mytool --its-usual-arguments",
        run: Some("sandbox run --profile mytool.toml -- ls -l"),
        setup: "touch listed-file && sandbox learn --out mytool.toml -- ls -l 2>/dev/null",
        stdout: &["listed-file"],
        ..C
    },
    // docs/examples.md (the man pages' EXAMPLES)
    Case {
        doc: "sandbox profiles",
        stdout: &["minimal", "shell-network"],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox run --profile shell -- sh -c 'ls | wc -l'",
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox run --profile shell --timeout 10 -- sleep 1",
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox run --on-violation kill -- python3 -c 'import socket; socket.socket()'",
        status: 159,
        stderr: &["was stopped by the filter: syscall socket (41)"],
        ..C
    },
    Case {
        doc: "eval \"$(sandbox env --profile network --quiet)\"; ls",
        setup: "touch listed-file",
        stdout: &["listed-file"],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox extract --to ./libsandbox.so",
        after: "test -s libsandbox.so",
        ..C
    },
    Case {
        doc: "sandbox check --json",
        stdout: &["\"tier\""],
        ..C
    },
    Case {
        doc: "sandbox profiles show minimal",
        stdout: &["read"],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox profiles show shell",
        stdout: &["execve"],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox profiles groups",
        stdout: &["@network"],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox profiles registries --json",
        stdout: &["pypi.org"],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox profiles credentials --json",
        stdout: &["\"reason\""],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox profiles control-files",
        stdout: &[".claude", ".mcp.json", ".envrc"],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox inspect /usr/bin/git",
        stdout: &["the preload confines it"],
        quiet: true,
        ..C
    },
    Case {
        doc: "echo '{\"argv\":[\"/bin/echo\",\"hi\"]}' | sandbox exec --json",
        stdout: &["\"stdout\":\"hi\\n\""],
        quiet: true,
        ..C
    },
    Case {
        doc: "echo '{\"id\":\"1\",\"argv\":[\"/bin/echo\",\"hi\"]}' | sandbox serve",
        stdout: &["\"id\":\"1\"", "\"stdout\":\"hi\\n\""],
        quiet: true,
        ..C
    },
    Case {
        doc: "sandbox export --format oci --profile shell --out shell.json",
        after: "grep -q SCMP_ACT shell.json",
        // The export says what it added for runc (docs/containers.md).
        stderr: &["added to the allow list: capset"],
        ..C
    },
    Case {
        doc: "sandbox export --format oci --profile shell | sandbox import /dev/stdin --out shell.toml",
        after: "grep -q allow shell.toml",
        // The export says what it added for runc (docs/containers.md).
        stderr: &["added to the allow list: capset"],
        ..C
    },
    Case {
        doc: "sandbox learn --out ls.toml -- ls",
        after: "grep -q allow ls.toml",
        ..C
    },
    Case {
        doc: "sandbox completions bash > sandbox.bash",
        after: "grep -q _sandbox sandbox.bash",
        quiet: true,
        ..C
    },
];

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A command of the docs, with the `#   sandbox: ...` words it claims on stderr.
#[derive(Debug)]
struct DocLine {
    file: &'static str,
    command: String,
    claim: Option<String>,
}

/// The command lines of every `sh` block of `DOCS`.
fn doc_lines() -> Vec<DocLine> {
    let mut out: Vec<DocLine> = Vec::new();
    for file in DOCS {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        lines_of(file, &text, &mut out);
    }
    out
}

/// The command lines of the `sh` blocks of `text`, appended to `out`.
fn lines_of(file: &'static str, text: &str, out: &mut Vec<DocLine>) {
    let mut in_block = false;
    let mut in_claim = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block && line.trim() == "```sh";
            in_claim = false;
            continue;
        }
        if !in_block || line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.trim_start().strip_prefix('#') {
            let comment = comment.trim();
            let last = out.last_mut().expect("a comment line after a command");
            if comment.starts_with("sandbox: ") {
                in_claim = true;
                last.claim = Some(comment.to_string());
            } else if in_claim {
                let claim = last.claim.as_mut().unwrap();
                claim.push(' ');
                claim.push_str(comment);
            }
            continue;
        }
        in_claim = false;
        let command = match line.split_once("  #") {
            Some((c, _)) => c,
            None => line,
        };
        out.push(DocLine {
            file,
            command: command.trim().to_string(),
            claim: None,
        });
    }
}

/// The documented commands without a case, as `file: command`.
fn without_case(lines: &[DocLine]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| !CASES.iter().any(|c| c.doc == l.command))
        .map(|l| format!("{}: {}", l.file, l.command))
        .collect()
}

/// Every documented command has a case and every case a documented command.
#[test]
fn every_documented_command_has_a_case() {
    let lines = doc_lines();
    assert!(lines.len() > 30, "{lines:?}");
    let cases: BTreeMap<&str, &Case> = CASES.iter().map(|c| (c.doc, c)).collect();
    assert_eq!(cases.len(), CASES.len(), "a command listed twice");
    let missing = without_case(&lines);
    assert!(
        missing.is_empty(),
        "documented commands without a case in CASES: {missing:#?}"
    );
    let stale: Vec<&str> = CASES
        .iter()
        .filter(|c| !lines.iter().any(|l| l.command == c.doc))
        .map(|c| c.doc)
        .collect();
    assert!(
        stale.is_empty(),
        "cases whose command is in no doc: {stale:#?}"
    );
}

/// Collapses runs of whitespace, so a claim wrapped over comment lines compares with a line.
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Runs `script` through `bash -c` as `who` in `dir`, with the built `sandbox` first on PATH.
fn bash(who: As, script: &str, dir: &Path, home: &Path, env: &[(&str, &str)]) -> Output {
    let bin = Path::new(SANDBOX).parent().unwrap();
    let mut c = common::command(who, "bash");
    c.args(["-c", script])
        .current_dir(dir)
        .env("PATH", format!("{}:{}", bin.display(), common::PATH))
        .env("HOME", home)
        .env("REPO", repo())
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// A scratch project directory and HOME owned by `who`.
fn scratch(who: As) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = top.path().join("work");
    let home = top.path().join("home");
    for d in [&work, &home] {
        std::fs::create_dir(d).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(d, Some(common::NOBODY), Some(common::NOBODY)).unwrap();
        }
    }
    (top, work, home)
}

fn check(case: &Case, claim: Option<&str>) -> Vec<String> {
    let mut failures = Vec::new();
    let line = case.run.unwrap_or(case.doc);
    for &who in case.who {
        let (_top, work, home) = scratch(who);
        let fail = |what: String, o: &Output| {
            format!(
                "{who:?} `{line}`: {what}\n  stdout: {}\n  stderr: {}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        };
        if !case.setup.is_empty() {
            let o = bash(who, case.setup, &work, &home, case.env);
            if !o.status.success() {
                failures.push(fail(format!("setup `{}` failed", case.setup), &o));
                continue;
            }
        }
        let o = bash(who, line, &work, &home, case.env);
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.code() != Some(case.status) {
            failures.push(fail(
                format!("status {:?}, not {}", o.status, case.status),
                &o,
            ));
        }
        for w in case.stdout {
            if !out.contains(w) {
                failures.push(fail(format!("no {w:?} on stdout"), &o));
            }
        }
        for w in case.not_stdout {
            if out.contains(w) {
                failures.push(fail(format!("{w:?} on stdout"), &o));
            }
        }
        for w in case.stderr {
            if !err.contains(w) {
                failures.push(fail(format!("no {w:?} on stderr"), &o));
            }
        }
        if let Some(claim) = claim {
            let claim = claim.replace("/your/project", &work.to_string_lossy());
            if !squeeze(&err).contains(&squeeze(&claim)) {
                failures.push(fail(
                    format!("the doc's claim is not on stderr: {claim:?}"),
                    &o,
                ));
            }
        }
        if case.quiet && !err.is_empty() {
            failures.push(fail("stderr is not empty".into(), &o));
        }
        if !case.after.is_empty() {
            let a = bash(who, case.after, &work, &home, case.env);
            if !a.status.success() {
                failures.push(fail(
                    format!("the check after, `{}`, failed", case.after),
                    &o,
                ));
            }
        }
    }
    failures
}

/// Every documented command that can run here runs and does what its doc says.
#[test]
fn every_documented_command_does_what_the_doc_says() {
    let lines = doc_lines();
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in CASES.iter().filter(|c| c.skip.is_none()) {
        let claim = lines
            .iter()
            .find(|l| l.command == case.doc)
            .and_then(|l| l.claim.as_deref());
        failures.extend(check(case, claim));
        ran += 1;
    }
    assert!(ran > 30, "{ran}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The control for the claim check: a claim the program does not print is caught, and so is a
/// wrong status.
#[test]
fn a_false_claim_fails_the_check() {
    let case = Case {
        doc: "sandbox run -- /usr/bin/python3 -c 'import socket; socket.socket()'",
        who: &[As::Root],
        status: 1,
        ..C
    };
    assert!(check(&case, Some("sandbox: killed: no sockets")).len() == 1);
    let wrong_status = Case {
        status: 159,
        ..case
    };
    assert!(!check(&wrong_status, None).is_empty());
}

/// The control for the sync check: a command added to a doc without a case is reported, with
/// the claim under it; text outside `sh` blocks is not a command.
#[test]
fn a_new_documented_command_without_a_case_is_reported() {
    let text = "Prose `sandbox run -- x`.\n\n```sh\nsandbox profiles\nsandbox run --new-flag -- ls   # note\n#   sandbox: a claim\n#   continued\n```\n\n```rust\nlet x = 1;\n```\n";
    let mut lines = Vec::new();
    lines_of("new.md", text, &mut lines);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        lines[1].claim.as_deref(),
        Some("sandbox: a claim continued")
    );
    assert_eq!(
        without_case(&lines),
        ["new.md: sandbox run --new-flag -- ls"]
    );
}
