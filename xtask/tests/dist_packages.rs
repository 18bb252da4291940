//! The release packages of `cargo xtask dist` installed the way users install them, offline,
//! from the built files (nothing is uploaded): the wheel into a fresh venv with
//! `pip install --no-index`, the npm tarball into a fresh directory with
//! `npm install --offline`, and `cargo install --path host --offline`. Each installed `sandbox`
//! and each client refuses a credential read, as root and as uid 65534 (each with a HOME of its
//! own holding `.aws/credentials`); the control reads the same file without the sandbox.
//!
//! The dist is built once, with the release profile into `target/dist-build`: the very build
//! `cargo xtask ci` runs the escape suite against afterwards, so CI compiles it once.
//! They need python3-venv, nodejs and npm, and node-typescript (`.ci/run` installs them).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

const NOBODY: u32 = 65534;
const VERSION: &str = env!("CARGO_PKG_VERSION");
const SECRET: &str = "SECRET-AWS-KEY";

#[derive(Clone, Copy, Debug, PartialEq)]
enum As {
    Root,
    Nobody,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// A directory uid 65534 can reach (the target directory, not a /tmp a job may make private),
/// removed when the guard drops.
fn scratch(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The dist, built once for all the tests of this binary, into a directory of the target's
/// tmp/ that each run replaces (a static is never dropped, so no guard could remove it).
fn dist() -> &'static xtask::dist::Dist {
    static DIST: OnceLock<xtask::dist::Dist> = OnceLock::new();
    DIST.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("packages-dist");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
        let opts = xtask::dist::DistOptions {
            profile: "release".into(),
            out,
        };
        xtask::dist::dist(root(), &opts).unwrap()
    })
}

/// `program` as `who` in a bare environment (PATH, HOME, LANG), stdin /dev/null.
fn bare(who: As, program: impl AsRef<std::ffi::OsStr>, home: &Path) -> Command {
    let mut c = match who {
        As::Root => Command::new(program),
        As::Nobody => {
            let mut c = Command::new("/usr/bin/setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(program);
            c
        }
    };
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null());
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\n{}\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// A place owned by `who`: `<place>/home` with `.aws/credentials` (0600), and room beside it
/// for a venv or an npm project. The place is the workspace of the confined commands (their
/// working directory): the home inside it is not broad, the credential list covers it.
struct Place {
    _guard: tempfile::TempDir,
    dir: PathBuf,
    home: PathBuf,
    credential: PathBuf,
}

fn place(who: As, prefix: &str) -> Place {
    let guard = scratch(prefix);
    let dir = guard.path().to_path_buf();
    let home = dir.join("home");
    let credential = home.join(".aws/credentials");
    std::fs::create_dir_all(credential.parent().unwrap()).unwrap();
    std::fs::write(&credential, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(&credential, std::fs::Permissions::from_mode(0o600)).unwrap();
    if who == As::Nobody {
        for p in [
            &dir,
            &home,
            &credential.parent().unwrap().to_path_buf(),
            &credential,
        ] {
            std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
        }
    }
    // Control: the same user reads the credential without the sandbox.
    let o = bare(who, "cat", &home).arg(&credential).output().unwrap();
    assert!(text(&o.stdout).contains(SECRET), "{who:?} control: {o:?}");
    Place {
        _guard: guard,
        dir,
        home,
        credential,
    }
}

/// `sandbox run -- cat <credential>` through `bash -c`, with `bin` first on PATH: refused, the
/// secret not printed, the refusal named on stderr.
fn cli_refuses_the_credential(who: As, p: &Place, bin: &Path, launcher: &str) {
    let allow_root = if who == As::Root { " --allow-root" } else { "" };
    let shell = |script: String| {
        bare(who, "bash", &p.home)
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .arg("-c")
            .arg(script)
            .current_dir(&p.dir)
            .output()
            .unwrap()
    };
    if launcher.is_empty() {
        // The installed binary is the one the shell finds, not another `sandbox` on PATH.
        let found = ok(shell("command -v sandbox".into()), "command -v sandbox");
        assert_eq!(found.trim(), bin.join("sandbox").to_str().unwrap());
    }
    let o = shell(format!(
        "{launcher}sandbox run{allow_root} -- cat ~/.aws/credentials"
    ));
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(
        !o.status.success() && !out.contains(SECRET),
        "{who:?} {launcher}sandbox: read inside: {o:?}"
    );
    assert!(
        err.contains(&format!(
            "sandbox: refused: reading {}",
            p.credential.display()
        )),
        "{who:?} {launcher}sandbox: {err}"
    );
}

/// What a client script printed: one JSON object with the binary it used and the result of
/// `cat <credential>`.
fn client_refused(who: As, out: &str, expected_binary: &Path, credential: &Path) {
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{who:?} {e}: {out}"));
    assert_eq!(
        v["binary"].as_str().map(PathBuf::from).as_deref(),
        Some(expected_binary),
        "{who:?} {v}"
    );
    assert_ne!(v["exit_code"], 0, "{who:?} {v}");
    assert_eq!(v["leaked"], false, "{who:?} {v}");
    let wanted = format!("sandbox: refused: reading {}:", credential.display());
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.starts_with(&wanted))),
        "{who:?} {v}"
    );
}

#[test]
fn the_wheel_is_tagged_and_recorded() {
    let d = dist();
    let name = d.wheel.file_name().unwrap().to_string_lossy().into_owned();
    let platform = if d.built.fully_static {
        "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64".to_string()
    } else {
        xtask::dist_wheel::platform_tag(&d.built).unwrap()
    };
    assert_eq!(
        name,
        format!("kernel_sandbox-{VERSION}-py3-none-{platform}.whl")
    );
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&d.wheel).unwrap()).unwrap();
    let mut read = |n: &str| {
        let mut f = zip
            .by_name(n)
            .unwrap_or_else(|e| panic!("{n}: {e} in {name}"));
        let mode = f.unix_mode();
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut v).unwrap();
        (v, mode)
    };
    let info = format!("kernel_sandbox-{VERSION}.dist-info");
    let wheel = text(&read(&format!("{info}/WHEEL")).0);
    assert!(wheel.contains("Root-Is-Purelib: false\n"), "{wheel}");
    let tags: Vec<&str> = wheel
        .lines()
        .filter_map(|l| l.strip_prefix("Tag: "))
        .collect();
    let expected: Vec<String> = platform
        .split('.')
        .map(|p| format!("py3-none-{p}"))
        .collect();
    assert_eq!(tags, expected, "{wheel}");
    let metadata = text(&read(&format!("{info}/METADATA")).0);
    assert!(
        metadata.starts_with(&format!(
            "Metadata-Version: 2.1\nName: kernel-sandbox\nVersion: {VERSION}\n"
        )),
        "{metadata}"
    );
    let (binary, mode) = read(&format!("kernel_sandbox-{VERSION}.data/scripts/sandbox"));
    assert_eq!(binary, std::fs::read(&d.built.path).unwrap());
    assert_eq!(mode.map(|m| m & 0o777), Some(0o755));
    // Every file is in RECORD with its size; the hashes are checked by pip on install below
    // and by python's own reading here.
    let record = text(&read(&format!("{info}/RECORD")).0);
    let names: Vec<String> = zip.file_names().map(str::to_owned).collect();
    assert_eq!(record.lines().count(), names.len(), "{record}");
    for n in &names {
        assert!(
            record.lines().any(|l| l.starts_with(&format!("{n},"))),
            "{n} not in RECORD"
        );
    }
    let check = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(
            "import base64,csv,hashlib,io,sys,zipfile\n\
             z = zipfile.ZipFile(sys.argv[1])\n\
             rec = [n for n in z.namelist() if n.endswith('.dist-info/RECORD')][0]\n\
             for path, h, size in csv.reader(io.TextIOWrapper(z.open(rec))):\n\
             \x20   if not h: continue\n\
             \x20   data = z.read(path)\n\
             \x20   algo, digest = h.split('=', 1)\n\
             \x20   want = base64.urlsafe_b64encode(hashlib.new(algo, data).digest()).rstrip(b'=').decode()\n\
             \x20   assert digest == want and int(size) == len(data), path\n\
             print('ok')",
        )
        .arg(&d.wheel)
        .output()
        .unwrap();
    assert_eq!(ok(check, "RECORD check"), "ok\n");
}

#[test]
fn the_wheel_installs_into_a_fresh_venv_as_root_and_nobody() {
    let d = dist();
    for who in [As::Root, As::Nobody] {
        let p = place(who, "wheel");
        let venv = p.dir.join("venv");
        let start = Instant::now();
        ok(
            bare(who, "/usr/bin/python3", &p.home)
                .args(["-m", "venv"])
                .arg(&venv)
                .output()
                .unwrap(),
            "python3 -m venv (Debian python3-venv)",
        );
        let venv_s = start.elapsed().as_secs_f64();
        let installed = Instant::now();
        ok(
            bare(who, venv.join("bin/pip"), &p.home)
                .args([
                    "install",
                    "--no-index",
                    "--no-cache-dir",
                    "--disable-pip-version-check",
                    "--quiet",
                ])
                .arg(&d.wheel)
                .output()
                .unwrap(),
            "pip install",
        );
        let sandbox = venv.join("bin/sandbox");
        let version = ok(
            bare(who, &sandbox, &p.home)
                .arg("--version")
                .output()
                .unwrap(),
            "sandbox --version",
        );
        let first = installed.elapsed().as_secs_f64();
        // `sandbox 0.1.0 (commit ..., target, features: ...)`: the version first.
        assert!(
            version.starts_with(&format!("sandbox {VERSION} (commit ")),
            "{who:?}: {version}"
        );
        eprintln!(
            "{who:?}: venv {venv_s:.2} s; pip install to the first sandbox command {first:.2} s"
        );
        cli_refuses_the_credential(who, &p, &venv.join("bin"), "");

        // The client, with the venv not active (bare PATH): it finds the wheel's binary itself.
        let script = "import json, sys, kernel_sandbox\n\
                      with kernel_sandbox.SandboxServer() as sb:\n\
                      \x20   r = sb.run(['/bin/cat', sys.argv[1]])\n\
                      print(json.dumps({'binary': kernel_sandbox.binary(), 'exit_code': r.exit_code,\n\
                      \x20   'warnings': r.warnings, 'leaked': 'SECRET' in r.stdout}))";
        let out = ok(
            bare(who, venv.join("bin/python"), &p.home)
                .arg("-c")
                .arg(script)
                .arg(&p.credential)
                .current_dir(&p.dir)
                .output()
                .unwrap(),
            "python client",
        );
        client_refused(who, &out, &sandbox, &p.credential);

        // Without the binary the client refuses to start, naming where it looked, rather than
        // running whatever else is called `sandbox`.
        std::fs::remove_file(&sandbox).unwrap();
        let o = bare(who, venv.join("bin/python"), &p.home)
            .env("PATH", "/nonexistent")
            .args([
                "-c",
                "import kernel_sandbox; kernel_sandbox.SandboxServer()",
            ])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert!(
            !o.status.success()
                && err.contains(&format!(
                    "FileNotFoundError: no sandbox binary: not in {}",
                    sandbox.display()
                )),
            "{who:?}: {o:?}"
        );
    }
}

#[test]
fn the_npm_tarball_installs_offline_as_root_and_nobody() {
    let d = dist();
    let listing = ok(
        Command::new("tar")
            .arg("-tzf")
            .arg(&d.npm)
            .output()
            .unwrap(),
        "tar -tzf",
    );
    for f in [
        "package/package.json",
        "package/bin/sandbox",
        "package/dist/index.js",
        "package/dist/index.d.ts",
        "package/dist/sandbox_client.js",
        "package/dist/sandbox_client.d.ts",
        "package/README.md",
    ] {
        assert!(listing.lines().any(|l| l == f), "{f}: {listing}");
    }
    for who in [As::Root, As::Nobody] {
        let p = place(who, "npm");
        let project = p.dir.join("project");
        std::fs::create_dir(&project).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&project, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let npm = |args: &[&str]| {
            let mut c = bare(who, args[0], &p.home);
            c.args(&args[1..])
                .env("npm_config_update_notifier", "false")
                .current_dir(&project);
            c
        };
        let tgz = d.npm.to_str().unwrap();
        ok(
            npm(&[
                "npm",
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                tgz,
            ])
            .output()
            .unwrap(),
            "npm install (Debian nodejs, npm)",
        );
        let version = ok(
            npm(&["npx", "--offline", "sandbox", "--version"])
                .output()
                .unwrap(),
            "npx sandbox --version",
        );
        // `sandbox 0.1.0 (commit ..., target, features: ...)`: the version first.
        assert!(
            version.starts_with(&format!("sandbox {VERSION} (commit ")),
            "{who:?}: {version}"
        );
        cli_refuses_the_credential(who, &p, &project.join("node_modules/.bin"), "");

        let script = project.join("client.js");
        std::fs::write(
            &script,
            "const { SandboxServer, binary } = require(\"kernel-sandbox\");\n\
             const sb = new SandboxServer();\n\
             sb.run({ argv: [\"/bin/cat\", process.argv[2]] }).then(async (r) => {\n\
             \x20 await sb.close();\n\
             \x20 const leaked = r.stdout.includes(\"SECRET\");\n\
             \x20 console.log(JSON.stringify({ binary, exit_code: r.exit_code, warnings: r.warnings, leaked }));\n\
             });\n",
        )
        .unwrap();
        let out = ok(
            bare(who, "node", &p.home)
                .arg(&script)
                .arg(&p.credential)
                .current_dir(&p.dir)
                .output()
                .unwrap(),
            "node client",
        );
        let shipped = project.join("node_modules/kernel-sandbox/bin/sandbox");
        client_refused(who, &out, &shipped, &p.credential);
        // The declarations serve a TypeScript caller: it type-checks against the package alone.
        std::fs::write(
            project.join("app.ts"),
            "import { SandboxServer, ExecResult, binary } from \"kernel-sandbox\";\n\
             const exit = (r: ExecResult): number | null => r.exit_code;\n\
             export const run = (sb: SandboxServer = new SandboxServer(binary)) =>\n\
             \x20 sb.run({ argv: [\"/bin/true\"], timeout_s: 5 }).then(exit);\n",
        )
        .unwrap();
        std::fs::write(
            project.join("tsconfig.json"),
            r#"{"compilerOptions": {"strict": true, "noEmit": true, "module": "commonjs",
                "target": "es2019", "types": []}, "files": ["app.ts"]}"#,
        )
        .unwrap();
        ok(
            npm(&["tsc", "-p", "."]).output().unwrap(),
            "tsc of a caller (Debian node-typescript)",
        );
        // And `npx sandbox` in a shell, as an agent's tool would call it.
        cli_refuses_the_credential(
            who,
            &p,
            Path::new("/nonexistent"),
            &format!("cd {} && npx --offline ", project.display()),
        );
    }
}

/// `cargo install --path host --offline --locked` into a root of its own: the vendored registry
/// cache is enough, the lock file is honoured, and the installed binary confines. It installs
/// with the dist's target, profile, flags and target directory, so it reuses that build instead
/// of compiling a second one (docs/install.md gives the plain command and its time). Root only:
/// the toolchain lives in root's home.
#[test]
fn cargo_install_from_the_repository_works_offline() {
    let d = dist();
    let guard = scratch("cargo-install");
    let install_root = guard.path();
    let o = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "install",
            "--offline",
            "--locked",
            "--quiet",
            "--path",
            "host",
        ])
        .args(["--bin", "sandbox", "--profile", "release", "--target"])
        .arg(&d.built.triple)
        .arg("--target-dir")
        .arg(root().join("target/dist-build"))
        .arg("--root")
        .arg(install_root)
        .env("RUSTFLAGS", xtask::dist::remap_flags(root()))
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .current_dir(root())
        .output()
        .unwrap();
    ok(o, "cargo install --path host --offline");
    let installed = install_root.join("bin/sandbox");
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(&d.built.path).unwrap(),
        "cargo install built another binary than the dist's"
    );
    let p = place(As::Root, "cargo");
    cli_refuses_the_credential(As::Root, &p, &install_root.join("bin"), "");
}

/// The shipped binary (static where the musl target is installed) starts a session: its
/// resident is that binary itself, which the static-program check must not refuse. Control:
/// the same binary as a one-shot command is still refused by that check under the default.
#[test]
fn the_shipped_binary_starts_a_session_as_root_and_nobody() {
    let d = dist();
    let bin = &d.built.path;
    for who in [As::Root, As::Nobody] {
        let p = place(who, "session");
        let id = ok(
            bare(who, bin, &p.home)
                .args(["session", "start", "--profile", "minimal"])
                .current_dir(&p.dir)
                .output()
                .unwrap(),
            "session start",
        );
        let id = id.trim().to_string();
        let out = bare(who, bin, &p.home)
            .args(["run", "--session", &id, "--", "/bin/echo", "in the session"])
            .current_dir(&p.dir)
            .output()
            .unwrap();
        let _ = bare(who, bin, &p.home)
            .args(["session", "end", &id])
            .output();
        assert_eq!(ok(out, "run --session"), "in the session\n", "{who:?}");
        if d.built.fully_static {
            let control = bare(who, bin, &p.home)
                .args(["run", "--profile", "minimal", "--"])
                .arg(bin)
                .arg("--version")
                .current_dir(&p.dir)
                .output()
                .unwrap();
            assert!(!control.status.success(), "{who:?}: the control ran");
            assert!(
                text(&control.stderr).contains("static"),
                "{who:?}: {}",
                text(&control.stderr)
            );
        }
    }
}
