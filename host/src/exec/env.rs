//! The environment scrub: the child gets a fixed safe list plus what the caller adds, and
//! nothing else of the host's environment. Variables that make a program load code it was not
//! asked to run are refused, whatever their value; variables that name a command a program
//! runs for the user (pagers, editors) are refused unless they name one that does nothing.
//!
//! One implementation for every front end: an exec request's `env` and `sandbox run`'s
//! `--env`/`--keep-env` go through [`check`], and both environments are built by
//! [`scrubbed`] from the same safe list.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The safe list with fixed values; `USER` (the process owner) is added to it.
pub const SAFE: &[(&str, &str)] = &[
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("HOME", "/tmp"),
    ("LANG", "C.UTF-8"),
    ("LC_ALL", "C.UTF-8"),
    ("TERM", "dumb"),
    ("SHELL", "/bin/sh"),
];

/// Settings every job gets unless the request sets them: package managers that would give the
/// files they install other names in a cache or store shared with other projects (hard
/// links) copy them instead, so that a job's own installs make no file that a later job's
/// writes would be refused for, or that would carry its writes into other projects
/// (docs/isolation.md, "Hard links").
pub const COPY_MODES: &[(&str, &str)] = &[
    ("UV_LINK_MODE", "copy"),
    ("npm_config_package_import_method", "copy"),
];

/// Set in the environment of a job whose user is root (unless the request sets it): GNU tar
/// then extracts as it does for every other user, without giving files the archive's owners.
/// Root's job holds no capabilities in the isolated tier (its namespaces' init drops them), so
/// tar's default for root (`--same-owner`) failed on every archive made by another user, a
/// PyPI sdist among them (docs/exec.md, "The environment").
pub const ROOT_TAR: (&str, &str) = ("TAR_OPTIONS", "--no-same-owner");

/// Variables refused by exact name, each with why: it makes a program load or run code it was
/// not asked to run (a library, a module search path, a start-up file, a helper command),
/// moves a program's configuration (which names such code) outside the workspace, or changes
/// how glibc itself parses its input. docs/exec.md gives the same table.
pub const INJECTING: &[(&str, &str)] = &[
    // glibc
    (
        "GCONV_PATH",
        "glibc loads character-conversion modules from it",
    ),
    (
        "GLIBC_TUNABLES",
        "glibc parses it in the loader before main",
    ),
    (
        "LOCPATH",
        "glibc loads locale files from it into its locale parser",
    ),
    (
        "HOSTALIASES",
        "redirects glibc's host name resolution to a file",
    ),
    // Python
    (
        "PYTHONPATH",
        "Python imports sitecustomize from it at start",
    ),
    ("PYTHONSTARTUP", "a file Python runs at start"),
    ("PYTHONHOME", "where Python loads its standard library from"),
    (
        "PYTHONBREAKPOINT",
        "a callable breakpoint() imports and runs",
    ),
    (
        "PYTHONINSPECT",
        "Python runs code read from stdin after the script",
    ),
    (
        "PYTHONWARNINGS",
        "a warning category names a module Python imports and runs at start",
    ),
    (
        "PYTHONUSERBASE",
        "moves the user site directory, whose .pth files run at start",
    ),
    // Node.js
    ("NODE_OPTIONS", "--require and --import preload a module"),
    ("NODE_PATH", "a module search path, refused like PYTHONPATH"),
    // Ruby
    ("RUBYOPT", "-r preloads a library"),
    ("RUBYLIB", "a library search path"),
    // Perl
    ("PERL5OPT", "-M preloads a module"),
    ("PERL5LIB", "a library search path"),
    ("PERLLIB", "a library search path"),
    ("PERL5DB", "the code the Perl debugger runs"),
    // Java
    ("JAVA_TOOL_OPTIONS", "-javaagent: loads code into every JVM"),
    ("_JAVA_OPTIONS", "-javaagent: loads code into every JVM"),
    (
        "JDK_JAVA_OPTIONS",
        "-javaagent: loads code into the java launcher's JVM",
    ),
    // Tcl
    ("TCLLIBPATH", "a package search path"),
    // shells
    (
        "BASH_ENV",
        "a file bash runs before a non-interactive script",
    ),
    ("ENV", "a file sh and bash in POSIX mode run at start"),
    ("SHELLOPTS", "bash options at start (xtrace expands PS4)"),
    ("PROMPT_COMMAND", "a command bash runs before each prompt"),
    ("ZDOTDIR", "where zsh reads its start-up files"),
    // git
    (
        "GIT_DIR",
        "moves the repository, and the config and hooks git runs, elsewhere",
    ),
    (
        "GIT_COMMON_DIR",
        "moves the repository's config and hooks elsewhere",
    ),
    (
        "GIT_WORK_TREE",
        "moves the work tree, whose .gitattributes select filters git runs",
    ),
    ("GIT_TEMPLATE_DIR", "hooks copied into every new repository"),
    ("GIT_EXEC_PATH", "where git finds its sub-commands"),
    ("GIT_SSH", "a command git runs"),
    ("GIT_SSH_COMMAND", "a command git runs"),
    ("GIT_ASKPASS", "a command git runs"),
    ("SSH_ASKPASS", "a command ssh and git run"),
    ("GIT_PROXY_COMMAND", "a command git runs"),
    ("GIT_EXTERNAL_DIFF", "a command git runs"),
    // configuration directories
    (
        "XDG_CONFIG_HOME",
        "moves git's and other programs' configuration outside the workspace",
    ),
    // less
    (
        "LESSOPEN",
        "an input preprocessor command less runs on every file",
    ),
    ("LESSCLOSE", "a command less runs after every file"),
    ("LESSEDIT", "the editor command less runs"),
    (
        "LESSKEYIN",
        "a key-binding file that can bind shell commands",
    ),
    ("LESSKEY", "a key-binding file that can bind shell commands"),
    (
        "LESSKEY_CONTENT",
        "key bindings that can bind shell commands",
    ),
    // OpenSSL
    (
        "OPENSSL_CONF",
        "OpenSSL's configuration loads providers and engines",
    ),
    ("OPENSSL_MODULES", "where OpenSSL loads providers from"),
    ("OPENSSL_ENGINES", "where OpenSSL loads engines from"),
    (
        "SSLKEYLOGFILE",
        "makes TLS libraries write session secrets to a file",
    ),
];

/// Prefixes refused, each with why: the dynamic loaders' variables, glibc's malloc tunables
/// (parsed like `GLIBC_TUNABLES`), git's configuration (`GIT_CONFIG`, `GIT_CONFIG_COUNT`/
/// `KEY_n`/`VALUE_n`, `GIT_CONFIG_GLOBAL` ...), bash's exported functions, and Lua's start-up
/// code and module paths, which have versioned forms (`LUA_INIT_5_4`, `LUA_PATH_5_4`).
pub const INJECTING_PREFIXES: &[(&str, &str)] = &[
    ("LD_", "the dynamic loader's variables load libraries"),
    ("DYLD_", "the macOS loader's variables load libraries"),
    (
        "MALLOC_",
        "glibc's malloc tunables, parsed like GLIBC_TUNABLES",
    ),
    (
        "GIT_CONFIG",
        "git configuration from the environment (aliases, hooks, commands)",
    ),
    (
        "BASH_FUNC_",
        "bash imports it as a function that replaces a command",
    ),
    ("LUA_INIT", "code Lua runs at start"),
    ("LUA_PATH", "a Lua module search path"),
    ("LUA_CPATH", "a Lua C module search path"),
];

/// Suffix refused: bash imports a variable named `name%%` as the function `name`.
pub const INJECTING_SUFFIX: &str = "%%";

/// Variables naming a command that git, less, man and others run for the user (a pager, an
/// editor). Each is accepted only with one of [`INERT_COMMANDS`]: agents set `GIT_PAGER=cat`
/// and `GIT_EDITOR=true` to keep git from waiting for a terminal, and any other value is a
/// command run under a program name the caller's `allowedCommands` approved.
pub const COMMANDS: &[(&str, &str)] = &[
    ("GIT_PAGER", "the pager git runs"),
    ("GIT_EDITOR", "the editor git runs"),
    ("GIT_SEQUENCE_EDITOR", "the editor git rebase runs"),
    ("PAGER", "the pager git, man and others run"),
    ("MANPAGER", "the pager man runs"),
    ("EDITOR", "the editor git, less and others run"),
    ("VISUAL", "the editor git, less and others run"),
];

/// The values a [`COMMANDS`] variable may have: commands that show or change nothing.
pub const INERT_COMMANDS: &[&str] = &[
    "",
    "cat",
    "true",
    ":",
    "/bin/cat",
    "/usr/bin/cat",
    "/bin/true",
    "/usr/bin/true",
];

/// The first words of every refusal of a code-injecting variable (docs and tests match it).
pub const REFUSED: &str = "refused: this variable makes the program load or run extra code";

/// Why `key` is refused as code-injecting, or `None` when it is not.
pub fn injecting_reason(key: &str) -> Option<&'static str> {
    if let Some((_, why)) = INJECTING.iter().find(|(n, _)| *n == key) {
        return Some(why);
    }
    if let Some((_, why)) = INJECTING_PREFIXES.iter().find(|(p, _)| key.starts_with(p)) {
        return Some(why);
    }
    key.ends_with(INJECTING_SUFFIX)
        .then_some("bash imports it as a function that replaces a command")
}

/// Whether `key` is refused because it makes a program load or run extra code.
pub fn is_injecting(key: &str) -> bool {
    injecting_reason(key).is_some()
}

/// The user name of the effective uid, or `uidN` when it has no passwd entry.
pub fn user() -> &'static str {
    static USER: OnceLock<String> = OnceLock::new();
    USER.get_or_init(|| {
        let uid = crate::sys::euid();
        crate::sys::user_name(uid).unwrap_or_else(|| format!("uid{uid}"))
    })
}

/// Checks a key the caller wants to add: non-empty, printable ASCII without spaces or `=` (a
/// name with a newline or a control character names nothing a program reads, and is how a
/// second variable would be smuggled into a line-based format), not code-injecting, not
/// reserved.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("empty variable name".into());
    }
    if key.contains('=') || key.contains('\0') {
        return Err("variable names must not contain `=` or NUL".into());
    }
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "variable names must be printable ASCII without spaces, newlines or control characters"
                .into(),
        );
    }
    // Before the `_` rule, so `_JAVA_OPTIONS` is refused for what it does.
    if let Some(why) = injecting_reason(key) {
        return Err(format!("{REFUSED} ({why})"));
    }
    if key.starts_with('_') {
        return Err("names starting with `_` are reserved".into());
    }
    if key.starts_with("SECCOMP_") || crate::SANDBOX_VARS.contains(&key) {
        return Err("refused: reserved for the sandbox".into());
    }
    Ok(())
}

/// Checks a value the caller wants to set.
pub fn check_value(value: &str) -> Result<(), String> {
    if value.contains('\0') {
        return Err("value must not contain NUL".into());
    }
    Ok(())
}

/// Checks one variable the caller wants to add, key and value: what every front end applies
/// to the variables it is asked to pass.
pub fn check(key: &str, value: &str) -> Result<(), String> {
    check_key(key)?;
    check_value(value)?;
    if let Some((_, what)) = COMMANDS.iter().find(|(n, _)| *n == key) {
        if !INERT_COMMANDS.contains(&value.trim()) {
            return Err(format!(
                "refused: this variable names {what}, a command run under another program's \
                 name; only an inert one is accepted ({})",
                INERT_COMMANDS[1..].join(", ")
            ));
        }
    }
    Ok(())
}

/// Where the safe list's values come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base<'a> {
    /// The fixed values of [`SAFE`] (exec requests: the host's environment is not the
    /// caller's).
    Fixed,
    /// The caller's own value of each safe name where it has one (`sandbox run`: the caller is
    /// the user at the terminal, whose `PATH` found the program and whose `HOME` holds its
    /// configuration), else the fixed value.
    Caller(&'a [(String, String)]),
}

/// The child's whole environment: the safe list from `base`, then `extra` on top (checked
/// already with [`check`]).
pub fn scrubbed(base: Base<'_>, extra: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let caller = |name: &str| match base {
        Base::Fixed => None,
        Base::Caller(vars) => vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
    };
    let mut env: BTreeMap<String, String> = SAFE
        .iter()
        .map(|(k, v)| (k.to_string(), caller(k).unwrap_or_else(|| v.to_string())))
        .collect();
    env.insert(
        "USER".into(),
        caller("USER").unwrap_or_else(|| user().to_string()),
    );
    for (k, v) in COPY_MODES {
        env.insert(k.to_string(), v.to_string());
    }
    if crate::sys::euid() == 0 {
        env.insert(ROOT_TAR.0.to_string(), ROOT_TAR.1.to_string());
    }
    for (k, v) in extra {
        env.insert(k.clone(), v.clone());
    }
    env.into_iter().collect()
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// Whether `check_key(name)` is the refusal of a code-injecting variable.
    fn refused(name: &str) -> bool {
        check_key(name).is_err_and(|e| e.starts_with(REFUSED))
    }

    #[test]
    fn every_listed_name_is_refused() {
        let names = [
            "GCONV_PATH",
            "GLIBC_TUNABLES",
            "LOCPATH",
            "HOSTALIASES",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "PYTHONHOME",
            "PYTHONBREAKPOINT",
            "PYTHONINSPECT",
            "NODE_OPTIONS",
            "NODE_PATH",
            "RUBYOPT",
            "RUBYLIB",
            "PERL5OPT",
            "PERL5LIB",
            "PERLLIB",
            "PERL5DB",
            "JAVA_TOOL_OPTIONS",
            "_JAVA_OPTIONS",
            "JDK_JAVA_OPTIONS",
            "TCLLIBPATH",
            "BASH_ENV",
            "ENV",
            "SHELLOPTS",
            "PROMPT_COMMAND",
            "ZDOTDIR",
            "GIT_EXEC_PATH",
            "GIT_SSH",
            "GIT_SSH_COMMAND",
            "GIT_ASKPASS",
            "GIT_PROXY_COMMAND",
            "GIT_EXTERNAL_DIFF",
            "OPENSSL_CONF",
            "OPENSSL_MODULES",
            "OPENSSL_ENGINES",
            "SSLKEYLOGFILE",
            // prefixes
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "DYLD_INSERT_LIBRARIES",
            "MALLOC_CHECK_",
            "MALLOC_ARENA_MAX",
            "MALLOC_TRACE",
            "GIT_CONFIG",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_SYSTEM",
            "GIT_CONFIG_PARAMETERS",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_VALUE_0",
            "BASH_FUNC_ls",
            "BASH_FUNC_ls%%",
            "LUA_INIT",
            "LUA_INIT_5_4",
            "LUA_PATH",
            "LUA_PATH_5_4",
            "LUA_CPATH",
            // bash's exported-function suffix alone
            "ls%%",
            "echo%%",
        ];
        for name in names {
            assert!(refused(name), "{name}");
        }
    }

    /// Every entry of the tables is refused, with its own reason in the message.
    #[test]
    fn every_table_entry_is_refused_with_its_reason() {
        for (name, why) in INJECTING {
            assert_eq!(check_key(name), Err(format!("{REFUSED} ({why})")), "{name}");
        }
        for (prefix, why) in INJECTING_PREFIXES {
            let name = format!("{prefix}X");
            assert_eq!(
                check_key(&name),
                Err(format!("{REFUSED} ({why})")),
                "{name}"
            );
        }
        for name in [
            "XDG_CONFIG_HOME",
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_COMMON_DIR",
            "GIT_TEMPLATE_DIR",
            "LESSOPEN",
            "LESSCLOSE",
            "PYTHONWARNINGS",
        ] {
            assert!(refused(name), "{name}");
        }
    }

    /// Pagers and editors pass only as commands that do nothing.
    #[test]
    fn command_variables_pass_only_inert_values() {
        for (name, _) in COMMANDS {
            for ok in ["cat", "true", "", "/usr/bin/cat", " cat "] {
                assert_eq!(check(name, ok), Ok(()), "{name}={ok}");
            }
            for bad in ["less", "vi", "sh -c 'touch /tmp/x'", "cat; id", "/tmp/cat"] {
                let e = check(name, bad).unwrap_err();
                assert!(e.contains("only an inert one"), "{name}={bad}: {e}");
            }
            // The name alone is not refused: the value decides.
            assert_eq!(check_key(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn ordinary_and_near_miss_names_pass() {
        for name in [
            "FOO",
            "GIT_AUTHOR_NAME",
            "GIT_INDEX_FILE",
            "PYTHONUNBUFFERED",
            "PYTHONDONTWRITEBYTECODE",
            "NODE_ENV",
            "LUA",
            "LD",
            "MALLOC",
            "JAVA_HOME",
            "A%",
            "PAGER",
        ] {
            assert_eq!(check_key(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn hostile_names_and_values_are_refused() {
        assert!(check_key("").is_err());
        assert!(check_key("A=B").is_err());
        assert!(check_key("A\0B").is_err());
        for bad in ["A\nB", "A B", "A\tB", "\u{1b}[2J", "\u{e9}T\u{e9}", "\n"] {
            assert!(
                check_key(bad).unwrap_err().contains("printable ASCII"),
                "{bad:?}"
            );
        }
        assert!(check_key("SANDBOX_LANDLOCK")
            .unwrap_err()
            .contains("reserved"));
        assert!(check_key("_X").unwrap_err().contains("reserved"));
        assert!(check_key("SECCOMP_SYSCALL_ALLOW")
            .unwrap_err()
            .contains("reserved"));
        assert!(check_value("a\0b").is_err());
        assert!(check_value("() { :; }; echo x").is_ok());
    }

    /// Runs `bash -c 'echo hi'` with one extra variable in an otherwise bare environment and
    /// says whether the marker file the variable's code creates appeared.
    fn bash_runs_marker(key: &str, value: &str, marker: &std::path::Path) -> bool {
        let status = Command::new("/bin/bash")
            .args(["-c", "echo hi"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env(key, value)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        marker.exists()
    }

    #[test]
    fn control_exported_bash_function_runs_code_and_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let key = "BASH_FUNC_echo%%";
        let value = format!("() {{ /usr/bin/touch {}; }}", marker.display());
        // Control: without the refusal, bash runs the planted function instead of echo.
        assert!(bash_runs_marker(key, &value, &marker), "control failed");
        assert!(refused(key));
    }

    /// Runs `python3 -c pass` in a bare environment plus `key=value` and says whether
    /// `marker` appeared.
    fn python_runs_marker(key: &str, value: &str, marker: &std::path::Path) -> bool {
        let status = Command::new("python3")
            .args(["-c", "pass"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env(key, value)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        let _ = status;
        marker.exists()
    }

    #[test]
    fn control_python_module_variables_run_code_and_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let code = format!("open({:?}, 'w').close()\n", marker.display().to_string());
        std::fs::write(dir.path().join("sitecustomize.py"), &code).unwrap();
        let here = dir.path().display().to_string();
        // Control: a directory in PYTHONPATH runs its sitecustomize before the program.
        assert!(
            python_runs_marker("PYTHONPATH", &here, &marker),
            "control failed"
        );
        assert!(refused("PYTHONPATH"));
        // Control: a warning category names a module Python imports (and so runs) at start,
        // before the program's first line: `this` prints the Zen of Python.
        let out = Command::new("python3")
            .args(["-c", "pass"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("PYTHONWARNINGS", "ignore::this.W")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Zen of Python"),
            "control failed"
        );
        assert!(refused("PYTHONWARNINGS"));
    }

    #[test]
    fn control_git_config_from_env_runs_code_and_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        // Control: git config given through the environment defines an alias that runs a
        // shell command.
        let status = Command::new("git")
            .args(["-C", &dir.path().display().to_string(), "x"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", dir.path())
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "alias.x")
            .env(
                "GIT_CONFIG_VALUE_0",
                format!("!/usr/bin/touch {}", marker.display()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success() && marker.exists(), "control failed");
        for key in ["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"] {
            assert!(refused(key), "{key}");
        }
    }
}
