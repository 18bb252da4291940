//! The environment scrub: the child gets a fixed safe list plus what the
//! request adds, and nothing else of the host's environment. Variables that make a program
//! load code it was not asked to run are refused, whatever their value.

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

/// Variables refused by exact name: each makes a program load or run code it was not asked to
/// run (a library, a module search path, a start-up file, a helper command), or changes how
/// glibc itself parses its input. docs/exec.md gives the reason for each.
pub const INJECTING: &[&str] = &[
    // glibc
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "LOCPATH",
    "HOSTALIASES",
    // Python
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONBREAKPOINT",
    "PYTHONINSPECT",
    // Node.js
    "NODE_OPTIONS",
    "NODE_PATH",
    // Ruby
    "RUBYOPT",
    "RUBYLIB",
    // Perl
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    // Java
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    // Tcl
    "TCLLIBPATH",
    // shells
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "PROMPT_COMMAND",
    "ZDOTDIR",
    // git
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_EXTERNAL_DIFF",
    // OpenSSL
    "OPENSSL_CONF",
    "OPENSSL_MODULES",
    "OPENSSL_ENGINES",
    "SSLKEYLOGFILE",
];

/// Prefixes refused: the dynamic loaders' variables (glibc `LD_*`, macOS `DYLD_*`), glibc's
/// malloc tunables (`MALLOC_*`, parsed like `GLIBC_TUNABLES`), git's configuration
/// (`GIT_CONFIG`, `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`, `GIT_CONFIG_GLOBAL` ...), bash's exported
/// functions (`BASH_FUNC_name%%`), and Lua's start-up code and module paths, which have
/// versioned forms (`LUA_INIT_5_4`, `LUA_PATH_5_4`).
pub const INJECTING_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "MALLOC_",
    "GIT_CONFIG",
    "BASH_FUNC_",
    "LUA_INIT",
    "LUA_PATH",
    "LUA_CPATH",
];

/// Suffix refused: bash imports a variable named `name%%` as the function `name`.
pub const INJECTING_SUFFIX: &str = "%%";

/// Whether `key` is refused because it makes a program load or run extra code.
pub fn is_injecting(key: &str) -> bool {
    INJECTING.contains(&key)
        || INJECTING_PREFIXES.iter().any(|p| key.starts_with(p))
        || key.ends_with(INJECTING_SUFFIX)
}

/// The user name of the effective uid, or `uidN` when it has no passwd entry.
pub fn user() -> &'static str {
    static USER: OnceLock<String> = OnceLock::new();
    USER.get_or_init(|| {
        let uid = crate::sys::euid();
        crate::sys::user_name(uid).unwrap_or_else(|| format!("uid{uid}"))
    })
}

/// Checks a key the request wants to add.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("empty variable name".into());
    }
    if key.contains('=') || key.contains('\0') {
        return Err("variable names must not contain `=` or NUL".into());
    }
    // Before the `_` rule, so `_JAVA_OPTIONS` is refused for what it does.
    if is_injecting(key) {
        return Err("refused: this variable makes the program load or run extra code".into());
    }
    if key.starts_with('_') {
        return Err("names starting with `_` are reserved".into());
    }
    if key.starts_with("SECCOMP_") || key == "SANDBOX_LANDLOCK" {
        return Err("refused: reserved for the sandbox".into());
    }
    Ok(())
}

/// Checks a value the request wants to set.
pub fn check_value(value: &str) -> Result<(), String> {
    if value.contains('\0') {
        return Err("value must not contain NUL".into());
    }
    Ok(())
}

/// The child's whole environment: the safe list, then `extra` on top (validated already).
pub fn scrubbed(extra: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = SAFE
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.insert("USER".into(), user().to_string());
    for (k, v) in extra {
        env.insert(k.clone(), v.clone());
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    const REFUSED: &str = "refused: this variable makes the program load or run extra code";

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
            assert_eq!(check_key(name), Err(REFUSED.to_string()), "{name}");
        }
    }

    #[test]
    fn ordinary_and_near_miss_names_pass() {
        for name in [
            "FOO",
            "GIT_PAGER",
            "GIT_AUTHOR_NAME",
            "GIT_DIR",
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
        assert_eq!(check_key(key), Err(REFUSED.to_string()));
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
            assert_eq!(check_key(key), Err(REFUSED.to_string()), "{key}");
        }
    }
}
