//! The environment scrub (seed 001 section 3): the child gets a fixed safe list plus what the
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

/// Variables refused by exact name: each makes an interpreter or shell run extra code.
pub const INJECTING: &[&str] = &[
    "GCONV_PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "NODE_OPTIONS",
    "RUBYOPT",
    "PERL5OPT",
    "PERL5LIB",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "PROMPT_COMMAND",
];

/// Prefixes refused: the dynamic loaders' variables (glibc `LD_*`, macOS `DYLD_*`).
pub const INJECTING_PREFIXES: &[&str] = &["LD_", "DYLD_"];

/// The user name of the effective uid, or `uidN` when it has no passwd entry.
pub fn user() -> &'static str {
    static USER: OnceLock<String> = OnceLock::new();
    USER.get_or_init(|| {
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let mut buf = vec![0u8; 4096];
        // SAFETY: a zeroed passwd is a valid out-parameter.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: getpwuid_r writes into pw and buf (of the given length) and sets out.
        let rc =
            unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
        if rc == 0 && !out.is_null() && !pw.pw_name.is_null() {
            // SAFETY: pw_name points into buf, NUL-terminated, valid while buf lives.
            let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
            if let Ok(s) = name.to_str() {
                return s.to_string();
            }
        }
        format!("uid{uid}")
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
    if key.starts_with('_') {
        return Err("names starting with `_` are reserved".into());
    }
    if INJECTING.contains(&key) || INJECTING_PREFIXES.iter().any(|p| key.starts_with(p)) {
        return Err("refused: this variable makes the program load or run extra code".into());
    }
    if key.starts_with("SECCOMP_") {
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
