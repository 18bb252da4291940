//! The job's home (`home` in requests): the persistent per-user home keeps files and caches
//! between commands, holds the user's git identity and nothing else of the real global
//! configuration, and what one job plants there to run in the next (shell start-up files, git
//! configuration) does not run. Each as root and as uid 65534, through `bash -c`, with the
//! request agents send; each protection with its control.

use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

mod common;

use common::{output_with_input, sandbox, As, BOTH, NOBODY};

/// A directory `who` owns (mode 0700 in a 0755 parent), holding that user's data directory.
struct Place {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Place {
    fn new(who: As) -> Place {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().join("user");
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&root, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        Place { _dir: dir, root }
    }

    /// A workspace directory of `who`'s below the place.
    fn workspace(&self, who: As) -> PathBuf {
        let w = self._dir.path().join("ws");
        std::fs::create_dir_all(&w).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&w, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        w
    }
}

/// `sandbox exec --json` as `who` with XDG_DATA_HOME (and HOME, when given) set.
fn exec(who: As, data: &Path, home: Option<&Path>, request: Value) -> Value {
    let mut cmd = sandbox(who);
    cmd.env("XDG_DATA_HOME", data).args(["exec", "--json"]);
    if let Some(h) = home {
        cmd.env("HOME", h);
    }
    let out = output_with_input(&mut cmd, request.to_string().as_bytes());
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn shell(line: &str, ws: &Path) -> Value {
    json!({"argv": ["/bin/bash", "-c", line], "profile": "shell", "cwd": ws, "timeout_s": 30})
}

#[test]
fn a_persistent_home_keeps_files_between_commands_and_a_private_one_does_not() {
    for who in BOTH {
        let place = Place::new(who);
        let ws = place.workspace(who);
        let data = place.root.join("data");
        let first = exec(
            who,
            &data,
            None,
            shell("echo kept > \"$HOME/f\"; echo \"$HOME\"", &ws),
        );
        assert_eq!(first["exit_code"], 0, "{who:?}: {first}");
        let home = data
            .join("sandbox/homes")
            .join(sandbox_host::exec::home::workspace_key(&ws));
        assert_eq!(first["home"], json!(home), "{who:?}: {first}");
        assert_eq!(first["stdout"], format!("{}\n", home.display()), "{who:?}");
        assert_eq!(first["stderr"], "", "nothing on stderr when all is well");
        let second = exec(who, &data, None, shell("cat \"$HOME/f\"", &ws));
        assert_eq!(second["stdout"], "kept\n", "{who:?}: {second}");
        // Control: the private home (HOME=/tmp, the job's own) keeps nothing.
        let mut req = shell("echo x > \"$HOME/f\"; echo \"$HOME\"", &ws);
        req["home"] = json!("private");
        let private = exec(who, &data, None, req.clone());
        assert_eq!(private["stdout"], "/tmp\n", "{who:?}: {private}");
        assert_eq!(private["home"], Value::Null);
        req["argv"][2] = json!("cat \"$HOME/f\"");
        let again = exec(who, &data, None, req);
        assert_ne!(again["exit_code"], 0, "{who:?}: {again}");
        // The caches live in it.
        let vars = exec(
            who,
            &data,
            None,
            shell(
                "echo $CARGO_HOME $npm_config_cache $PIP_CACHE_DIR $GOCACHE",
                &ws,
            ),
        );
        let h = home.display();
        assert_eq!(
            vars["stdout"],
            format!("{h}/.cargo {h}/.npm {h}/.cache/pip {h}/.cache/go-build\n")
        );
    }
}

#[test]
fn the_real_home_is_readable_and_not_writable() {
    for who in BOTH {
        let place = Place::new(who);
        let ws = place.workspace(who);
        let real = place.root.join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("r"), "real\n").unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&real, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let mut req = shell("cat \"$HOME/r\"; touch \"$HOME/w\"", &ws);
        req["home"] = json!("real");
        let r = exec(who, &place.root.join("data"), Some(&real), req);
        assert_eq!(r["stdout"], "real\n", "{who:?}: {r}");
        assert_ne!(r["exit_code"], 0, "{who:?}: {r}");
        assert!(
            !real.join("w").exists(),
            "{who:?}: the real home was written"
        );
        assert_eq!(r["home"], json!(real));
    }
}

/// Git commits with the user's identity and nothing else of the real configuration; a git
/// configuration or a shell start-up file one job leaves in the home does not run in the next.
#[test]
fn the_identity_is_seeded_and_what_a_job_plants_does_not_run() {
    for who in BOTH {
        let place = Place::new(who);
        let ws = place.workspace(who);
        let data = place.root.join("data");
        let real = place.root.join("real");
        std::fs::create_dir(&real).unwrap();
        let marker = place.workspace(who).join("ran");
        std::fs::write(
            real.join(".gitconfig"),
            format!(
                "[user]\n\tname = Real Person\n\temail = real@example.org\n\
                 [alias]\n\tst = !touch {}\n",
                marker.display()
            ),
        )
        .unwrap();
        if who == As::Nobody {
            for p in [&real, &real.join(".gitconfig")] {
                std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
            }
        }
        let commit = exec(
            who,
            &data,
            Some(&real),
            shell(
                "git init -q r && cd r && echo a > a && git add a && git commit -qm one && \
                 git log -1 --format='%an <%ae>'; git st",
                &ws,
            ),
        );
        assert_eq!(
            commit["stdout"], "Real Person <real@example.org>\n",
            "{who:?}: {commit}"
        );
        assert!(!marker.exists(), "{who:?}: an alias of the real config ran");
        // One job plants; the next runs git and a login shell.
        let plant = format!(
            "printf '[alias]\\n\\tst = !touch {m}\\n' > ~/.gitconfig; \
             echo 'touch {m}' > ~/.bashrc; cp ~/.bashrc ~/.profile; cp ~/.bashrc ~/.bash_profile",
            m = marker.display()
        );
        let planted = exec(who, &data, Some(&real), shell(&plant, &ws));
        assert_eq!(planted["exit_code"], 0, "{who:?}: {planted}");
        let home = data
            .join("sandbox/homes")
            .join(sandbox_host::exec::home::workspace_key(&ws));
        // Control: the files planted do run commands, outside the sandbox.
        let control = common::command(who, "/bin/bash")
            .env("HOME", &home)
            .current_dir(ws.join("r"))
            .args(["-c", "git st"])
            .status()
            .unwrap();
        assert!(
            control.success() && marker.exists(),
            "{who:?}: control failed"
        );
        std::fs::remove_file(&marker).unwrap();
        let next = exec(
            who,
            &data,
            Some(&real),
            shell("cd r && git st; bash -l -c true; bash -i -c true", &ws),
        );
        assert!(!marker.exists(), "{who:?}: a planted file ran: {next}");
        assert!(!home.join(".gitconfig").exists());
        // `git config --global` has nowhere to write: its file is beside the home, which no
        // job may write (and never /dev/null, which a rename would replace).
        let global = exec(
            who,
            &data,
            Some(&real),
            shell("git config --global alias.st '!true'", &ws),
        );
        assert_ne!(global["exit_code"], 0, "{who:?}: {global}");
        let empty = data.join("sandbox/homes/gitconfig");
        assert_eq!(std::fs::read(&empty).unwrap(), b"", "{who:?}");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }
}

#[test]
fn hostile_home_values_are_refused_and_make_nothing() {
    let place = Place::new(As::Root);
    let ws = place.workspace(As::Root);
    let data = place.root.join("data");
    for bad in [
        json!(""),
        json!("Persistent"),
        json!("real\n"),
        json!("private\u{0}"),
        json!("/root"),
        json!(1),
        json!(["persistent"]),
    ] {
        let mut req = shell("true", &ws);
        req["home"] = bad.clone();
        let r = exec(As::Root, &data, None, req);
        assert_eq!(r["error"]["field"], "home", "{bad}: {r}");
        assert!(!data.exists(), "{bad}: a refused request made the home");
    }
}

/// A home another user could enter (its mode opened by a job of a tier without the view) is
/// refused, not used: fail closed, with the way out named.
#[test]
fn an_open_home_is_refused_by_name() {
    for who in BOTH {
        let place = Place::new(who);
        let ws = place.workspace(who);
        let data = place.root.join("data");
        let ok = exec(who, &data, None, shell("true", &ws));
        assert_eq!(ok["exit_code"], 0, "{who:?}: {ok}");
        let home = data
            .join("sandbox/homes")
            .join(sandbox_host::exec::home::workspace_key(&ws));
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o777)).unwrap();
        let r = exec(who, &data, None, shell("true", &ws));
        assert_eq!(r["error"]["field"], "home", "{who:?}: {r}");
        let reason = r["error"]["reason"].as_str().unwrap();
        assert!(reason.contains("private"), "{reason}");
        // Control: restored, it runs again.
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let r = exec(who, &data, None, shell("true", &ws));
        assert_eq!(r["exit_code"], 0, "{who:?}: {r}");
    }
}

/// `sandbox run` keeps the caller's HOME unless `--home` asks for another; `--home
/// persistent` is the same home the requests get, `--home private` keeps nothing.
#[test]
fn sandbox_run_takes_home_as_a_flag() {
    for who in BOTH {
        let place = Place::new(who);
        let ws = place.workspace(who);
        let data = place.root.join("data");
        let run = |home: Option<&str>, line: &str| {
            let mut cmd = sandbox(who);
            cmd.env("XDG_DATA_HOME", &data)
                .current_dir(&ws)
                .args(["run", "--profile", "shell"]);
            if let Some(h) = home {
                cmd.args(["--home", h]);
            }
            cmd.args(["--", "/bin/bash", "-c", line]).output().unwrap()
        };
        let out = run(
            Some("persistent"),
            "echo kept > \"$HOME/f\"; echo \"$HOME\"",
        );
        let home = data
            .join("sandbox/homes")
            .join(sandbox_host::exec::home::workspace_key(&ws));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}\n", home.display()),
            "{who:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = run(Some("persistent"), "cat \"$HOME/f\"");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "kept\n", "{who:?}");
        // Control: the default is the caller's HOME, and private is /tmp.
        let out = run(None, "echo \"$HOME\"");
        let caller = if who == As::Root {
            "/root"
        } else {
            "/nonexistent"
        };
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{caller}\n"));
        let out = run(Some("private"), "echo \"$HOME\"; cat \"$HOME/f\"");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "/tmp\n", "{who:?}");
        for bad in ["", "Persistent", "persistent\n", "/root"] {
            let out = run(Some(bad), "true");
            assert!(!out.status.success(), "{bad:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("--home"), "{bad:?}: {err}");
        }
    }
}

/// A request that sets `HOME` in its `env` chooses its home: git reads that home's
/// `.gitconfig` (the persistent home's empty configuration files are not pinned over it).
/// Control: the same request without `HOME` gets the persistent home, where git is told to
/// read an empty global configuration and the caller here has no identity to lend it.
#[test]
fn a_request_that_sets_home_gets_its_own_git_configuration() {
    for who in BOTH {
        let place = Place::new(who);
        let ws = place.workspace(who);
        let data = place.root.join("data");
        let mine = ws.join("home");
        std::fs::create_dir(&mine).unwrap();
        std::fs::write(
            mine.join(".gitconfig"),
            "[user]\n\tname = Chosen\n\temail = chosen@example.com\n",
        )
        .unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&mine, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        // The host's own HOME: an empty directory (no identity to lend).
        let host_home = place.root.join("empty");
        std::fs::create_dir(&host_home).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&host_home, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let line = "git init -q r && cd r && echo x > f && git add f && git commit -qm one \
                    && git log -1 --format=%ae";
        let mut with = shell(line, &ws);
        with["env"] = json!({"HOME": mine, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"});
        let r = exec(who, &data, Some(&host_home), with);
        assert_eq!(r["exit_code"], 0, "{who:?}: {r}");
        assert_eq!(r["stdout"], "chosen@example.com\n", "{who:?}: {r}");
        std::fs::remove_dir_all(ws.join("r")).unwrap();
        // Asking for a sandbox home as well contradicts it: refused, naming `home`, and
        // nothing runs.
        for mode in ["persistent", "private", "real"] {
            let mut both = shell("touch ran", &ws);
            both["env"] = json!({"HOME": mine, "PATH": "/usr/bin:/bin"});
            both["home"] = json!(mode);
            let r = exec(who, &data, Some(&host_home), both);
            assert_eq!(r["error"]["field"], "home", "{who:?}: {mode}: {r}");
            assert!(
                r["error"]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("env sets HOME"),
                "{who:?}: {r}"
            );
            assert!(!ws.join("ran").exists(), "{who:?}: {mode}");
        }
        let without = shell(&format!("export HOME={}; {line}", mine.display()), &ws);
        let r = exec(who, &data, Some(&host_home), without);
        assert_ne!(
            r["exit_code"], 0,
            "{who:?}: the control should find no identity: {r}"
        );
    }
}

/// Every shell's start-up files one job leaves in the persistent home are gone before the
/// next: zsh's `.zlogin`, `.zlogout` and `.zshenv`, fish's `config.fish` and `conf.d`, tcsh's
/// `.tcshrc`, a login bash's `.bash_profile`. Control: outside the sandbox, with that home,
/// each shell runs what was planted.
#[test]
fn no_shells_startup_file_a_job_plants_runs_in_the_next_job() {
    for who in BOTH {
        let place = Place::new(who);
        let ws = place.workspace(who);
        let data = place.root.join("data");
        let marker = place.workspace(who).join("ran");
        let m = marker.display().to_string();
        let plant = format!(
            "for f in .zlogin .zlogout .zshenv .zprofile .zshrc .tcshrc .cshrc .login \
             .bash_profile; do echo 'touch {m}' > ~/$f; done; \
             mkdir -p ~/.config/fish/conf.d && echo 'touch {m}' > ~/.config/fish/config.fish && \
             echo 'touch {m}' > ~/.config/fish/conf.d/x.fish"
        );
        let shells: [(&str, &[&str]); 4] = [
            ("zsh", &["-l", "-c", "true"]),
            ("fish", &["-l", "-c", "true"]),
            ("tcsh", &["-l"]),
            ("bash", &["-l", "-c", "true"]),
        ];
        let planted = exec(who, &data, None, shell(&plant, &ws));
        assert_eq!(planted["exit_code"], 0, "{who:?}: {planted}");
        let home = data
            .join("sandbox/homes")
            .join(sandbox_host::exec::home::workspace_key(&ws));
        // Control: each shell, outside with that home, runs what was planted.
        for (sh, args) in shells {
            let _ = std::fs::remove_file(&marker);
            let st = common::command(who, sh)
                .env("HOME", &home)
                .args(args)
                .stdin(std::process::Stdio::null())
                .current_dir(&ws)
                .status()
                .unwrap();
            assert!(st.success() || sh == "tcsh", "{who:?} {sh}");
            assert!(marker.exists(), "{who:?}: the control's {sh} ran nothing");
        }
        let _ = std::fs::remove_file(&marker);
        let next = exec(
            who,
            &data,
            None,
            shell(
                "zsh -l -c true; fish -l -c true; tcsh -l < /dev/null; bash -l -c true",
                &ws,
            ),
        );
        assert!(!marker.exists(), "{who:?}: a planted file ran: {next}");
        // (fish makes its own `.config/fish` as it starts: the next job's prepare removes it.)
        for f in [".zlogin", ".zlogout", ".tcshrc"] {
            assert!(!home.join(f).exists(), "{who:?}: {f}");
        }
    }
}

/// A home per workspace: what one project's job leaves in its home (a package's source in
/// cargo's registry, read as code by the next build; a cache; a start-up file) is not in
/// another project's, whose own home is kept between its commands too. Control: the same
/// workspace's next job finds it. Two workspaces with the same name get two homes.
#[test]
fn each_workspace_has_a_home_of_its_own() {
    for who in BOTH {
        let place = Place::new(who);
        let data = place.root.join("data");
        let mk = |rel: &str| {
            let w = place._dir.path().join(rel);
            std::fs::create_dir_all(&w).unwrap();
            if who == As::Nobody {
                for p in [w.parent().unwrap(), w.as_path()] {
                    std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
                }
            }
            w
        };
        let a = mk("a/proj");
        let b = mk("b/proj");
        let plant = "mkdir -p $CARGO_HOME/registry/src/x/dep-1.0 && \
                     echo 'fn main() {}' > $CARGO_HOME/registry/src/x/dep-1.0/build.rs && \
                     echo \"$HOME\"";
        let first = exec(who, &data, None, shell(plant, &a));
        assert_eq!(first["exit_code"], 0, "{who:?}: {first}");
        let look = "ls $CARGO_HOME/registry/src/x/dep-1.0 2>/dev/null; echo \"$HOME\"";
        // Control: the same workspace's next job finds what the first left.
        let same = exec(who, &data, None, shell(look, &a));
        assert_eq!(
            same["stdout"],
            format!("build.rs\n{}", first["stdout"].as_str().unwrap()),
            "{who:?}: {same}"
        );
        // Another workspace (of the same name, elsewhere) has a home of its own, without it.
        let other = exec(who, &data, None, shell(look, &b));
        assert_eq!(other["exit_code"], 0, "{who:?}: {other}");
        let other_home = other["stdout"].as_str().unwrap();
        assert_ne!(other_home, first["stdout"].as_str().unwrap(), "{who:?}");
        assert!(!other_home.contains("build.rs"), "{who:?}: {other}");
        assert!(
            other_home
                .trim_end()
                .ends_with(&sandbox_host::exec::home::workspace_key(&b)),
            "{who:?}: {other_home}"
        );
        assert!(other_home.contains("/homes/proj-"), "{who:?}: {other_home}");
    }
}
