//! OCI / Docker seccomp JSON read into a profile file (the format `--profile FILE` reads).
//!
//! Every comparison becomes a 64-bit rule (`a1.64 & 0x7e020000 == 0x0`), because that is what
//! libseccomp compares. Docker's conditional entries (`includes`, `excludes`: capabilities,
//! architectures, minimum kernel) are decided as Docker decides them for a container with its
//! default capabilities on this kernel. Names the target architecture does not have are
//! skipped, as runc skips them (Docker's profile names calls of every architecture), and listed
//! in a comment of the output. Everything else that the profile format cannot mean exactly is
//! an error naming the JSON path.

use super::eval::{parse_action, Decision, Op};
use super::names::{docker_arch_names, DOCKER_ARCHES, SCMP_ARCHES};
use crate::action::Action;
use crate::arch::Arch;
use crate::profile::Profile;
use serde_json::{Map, Value};
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

/// Largest JSON accepted (moby's default profile is about 13 KB).
pub const MAX_IMPORT_BYTES: usize = 1 << 20;

/// The capabilities Docker gives a container unless told otherwise (`includes.caps` and
/// `excludes.caps` are decided against these).
pub const DOCKER_DEFAULT_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// What Docker's `includes` / `excludes` are decided against.
#[derive(Clone, Debug)]
pub struct DockerEnv {
    /// The container's capabilities (`CAP_*`).
    pub caps: Vec<String>,
    /// The kernel's `(major, minor)`; `None` counts as newer than any `minKernel`.
    pub kernel: Option<(u32, u32)>,
}

impl DockerEnv {
    /// Docker's default capabilities on a kernel of this version.
    pub fn docker_default(kernel: Option<(u32, u32)>) -> DockerEnv {
        DockerEnv {
            caps: DOCKER_DEFAULT_CAPS.iter().map(|c| c.to_string()).collect(),
            kernel,
        }
    }
}

/// A profile read from JSON.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The profile file's text (TOML, with comments saying where it came from).
    pub toml: String,
    /// The profile, validated.
    pub profile: Profile,
    /// What was skipped or decided on the way, one sentence each (also in `toml`'s comments).
    pub notes: Vec<String>,
}

/// Why JSON cannot be imported: the JSON path of the offending value and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    /// `syscalls[3].args[0].op`; empty for the document as a whole.
    pub path: String,
    /// What is wrong and what would be accepted.
    pub reason: String,
}

impl core::fmt::Display for ImportError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

impl std::error::Error for ImportError {}

fn err(path: &str, reason: impl Into<String>) -> ImportError {
    ImportError {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// Reads seccomp JSON into a profile for `arch`. `origin` names the input in the output's
/// comments and description.
pub fn import(
    text: &str,
    origin: &str,
    arch: Arch,
    env: &DockerEnv,
) -> Result<Imported, ImportError> {
    if text.len() > MAX_IMPORT_BYTES {
        return Err(err(
            "",
            format!("larger than {MAX_IMPORT_BYTES} bytes; a seccomp profile is a few KB"),
        ));
    }
    let doc: Value = serde_json::from_str(text).map_err(|e| {
        err(
            "",
            format!(
                "not JSON: {} (line {}, column {})",
                strip_position(&e.to_string()),
                e.line(),
                e.column()
            ),
        )
    })?;
    let top = doc
        .as_object()
        .ok_or_else(|| err("", "expected a JSON object with defaultAction and syscalls"))?;
    known_keys(
        top,
        "",
        &[
            "defaultAction",
            "defaultErrnoRet",
            "architectures",
            "archMap",
            "syscalls",
            "flags",
            "listenerPath",
            "listenerMetadata",
        ],
    )?;
    let mut notes = Vec::new();
    if let Some(p) = top.get("listenerPath").and_then(Value::as_str) {
        if !p.is_empty() {
            return Err(err(
                "listenerPath",
                "a seccomp agent (SCMP_ACT_NOTIFY) is not supported",
            ));
        }
    }
    let default_errno = match top.get("defaultErrnoRet") {
        None | Some(Value::Null) => None,
        Some(v) => Some(errno_value(v, "defaultErrnoRet")?),
    };
    let default = action_at(top.get("defaultAction"), default_errno, "defaultAction")?;
    check_arches(top, &mut notes)?;
    if let Some(flags) = top.get("flags") {
        let list = flags
            .as_array()
            .ok_or_else(|| err("flags", "expected an array of SECCOMP_FILTER_FLAG_* names"))?;
        for (i, f) in list.iter().enumerate() {
            match f.as_str() {
                Some("SECCOMP_FILTER_FLAG_TSYNC") | Some("SECCOMP_FILTER_FLAG_SPEC_ALLOW") => {}
                Some("SECCOMP_FILTER_FLAG_LOG") => notes.push(
                    "flags: SECCOMP_FILTER_FLAG_LOG ignored (use the log action to audit calls)"
                        .to_string(),
                ),
                Some("SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV") => {}
                _ => {
                    return Err(err(
                        &format!("flags[{i}]"),
                        "unknown flag (SECCOMP_FILTER_FLAG_TSYNC, _LOG, _SPEC_ALLOW, _WAIT_KILLABLE_RECV)",
                    ))
                }
            }
        }
    }
    let syscalls = match top.get("syscalls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => &a[..],
        Some(_) => return Err(err("syscalls", "expected an array of entries")),
    };

    // (name, action, condition text or "", path) of every entry that applies here.
    let mut rules: Vec<(String, Action, String, String)> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for (i, entry) in syscalls.iter().enumerate() {
        let at = format!("syscalls[{i}]");
        let e = entry
            .as_object()
            .ok_or_else(|| err(&at, "expected an object with names and action"))?;
        known_keys(
            e,
            &at,
            &[
                "names", "name", "action", "errnoRet", "args", "comment", "includes", "excludes",
            ],
        )?;
        let errno = match e.get("errnoRet") {
            None | Some(Value::Null) => None,
            Some(v) => Some(errno_value(v, &format!("{at}.errnoRet"))?),
        };
        let action = action_at(e.get("action"), errno, &format!("{at}.action"))?;
        let names = names_at(e, &at)?;
        let cond = conditions(e.get("args"), &format!("{at}.args"))?;
        if !applies(e, &at, arch, env)? || action == default {
            continue;
        }
        for (name, path) in names {
            if arch.syscall_number(&name).is_none() {
                if !missing.contains(&name) {
                    missing.push(name);
                }
                continue;
            }
            rules.push((name, action, cond.clone(), path));
        }
    }

    // runc: an entry without comparisons overrides every entry with them for the same call,
    // and two of them with different actions are refused by libseccomp.
    let mut unconditional: Vec<(&str, Action, &str)> = Vec::new();
    for (name, action, cond, path) in &rules {
        if cond.is_empty() {
            match unconditional.iter().find(|(n, _, _)| n == name) {
                Some((_, a, p)) if a != action => {
                    return Err(err(
                        path,
                        format!("{name} is also given {a} without conditions at {p}; runc refuses one call with two actions"),
                    ))
                }
                Some(_) => {}
                None => unconditional.push((name, *action, path)),
            }
        }
    }
    let mut allow: Vec<String> = Vec::new();
    let mut deny: Vec<String> = Vec::new();
    for (name, action, cond, _) in &rules {
        if !cond.is_empty() && unconditional.iter().any(|(n, _, _)| n == name) {
            continue;
        }
        let head = if cond.is_empty() {
            name.clone()
        } else {
            format!("{name}({cond})")
        };
        let line = match action {
            Action::Allow => head,
            a => format!("{head}={}", action_word(*a)),
        };
        let list = if *action == Action::Allow && default != Action::Allow {
            &mut allow
        } else {
            &mut deny
        };
        if !list.contains(&line) {
            list.push(line);
        }
    }
    if !missing.is_empty() {
        notes.push(format!(
            "not {} calls, skipped as runc skips them: {}",
            arch.name(),
            missing.join(", ")
        ));
    }

    let description = format!(
        "Imported from {origin} (OCI seccomp JSON) for {}",
        arch.name()
    );
    let mut toml = String::new();
    toml += &format!(
        "# {description} by `sandbox import`.\n# Docker's includes/excludes were decided for its default capabilities{}.\n",
        match env.kernel {
            Some((a, b)) => format!(" on kernel {a}.{b}"),
            None => String::new(),
        }
    );
    for n in &notes {
        toml += &format!("# {n}\n");
    }
    toml += &format!("description = {}\n", toml_string(&description));
    let profile_default = if default == Action::Allow {
        // A deny-list profile: the default action applies to denied entries without their own
        // action, and every entry here carries one.
        Action::Kill
    } else {
        default
    };
    toml += &format!("default_action = \"{profile_default}\"\n");
    if default != Action::Allow {
        toml += &list_text("allow", &allow);
    }
    toml += &list_text("deny", &deny);
    let name = origin
        .rsplit('/')
        .next()
        .unwrap_or(origin)
        .trim_end_matches(".json");
    let profile = Profile::from_toml(name, &toml)
        .map_err(|e| err("", format!("the imported profile does not validate: {e}")))?;
    Ok(Imported {
        toml,
        profile,
        notes,
    })
}

/// serde_json's message without its own " at line L column C" (we say it once).
fn strip_position(msg: &str) -> &str {
    msg.split(" at line ").next().unwrap_or(msg)
}

fn known_keys(obj: &Map<String, Value>, at: &str, known: &[&str]) -> Result<(), ImportError> {
    for k in obj.keys() {
        if !known.contains(&k.as_str()) {
            let path = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            return Err(err(
                &path,
                format!("unknown field (known here: {})", known.join(", ")),
            ));
        }
    }
    Ok(())
}

fn errno_value(v: &Value, at: &str) -> Result<u16, ImportError> {
    v.as_u64()
        .filter(|n| (1..=u64::from(crate::action::MAX_ERRNO)).contains(n))
        .map(|n| n as u16)
        .ok_or_else(|| err(at, "expected an errno number from 1 to 4095"))
}

fn action_at(v: Option<&Value>, errno: Option<u16>, at: &str) -> Result<Action, ImportError> {
    let name = v
        .and_then(Value::as_str)
        .ok_or_else(|| err(at, "expected an SCMP_ACT_* name"))?;
    match parse_action(name, errno) {
        Some(Decision::Action(a)) => Ok(a),
        Some(Decision::Other) => Err(err(
            at,
            format!("{name} is not supported (it needs a tracer or a seccomp agent)"),
        )),
        None => Err(err(
            at,
            format!("unknown action `{name}` (SCMP_ACT_ALLOW, _ERRNO, _KILL, _KILL_PROCESS, _KILL_THREAD, _TRAP, _LOG)"),
        )),
    }
}

/// How an action is written after `=` in a list entry.
fn action_word(a: Action) -> String {
    match a {
        Action::Errno(e) => match crate::consts::errno_name(e) {
            Some(n) => n.to_string(),
            None => format!("errno:{e}"),
        },
        other => other.to_string(),
    }
}

fn check_arches(top: &Map<String, Value>, notes: &mut Vec<String>) -> Result<(), ImportError> {
    let mut listed: Vec<(String, String)> = Vec::new();
    match top.get("architectures") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => {
            for (i, v) in a.iter().enumerate() {
                let at = format!("architectures[{i}]");
                let s = v
                    .as_str()
                    .ok_or_else(|| err(&at, "expected an SCMP_ARCH_* name"))?;
                listed.push((s.to_string(), at));
            }
        }
        Some(_) => {
            return Err(err(
                "architectures",
                "expected an array of SCMP_ARCH_* names",
            ))
        }
    }
    match top.get("archMap") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => {
            for (i, m) in a.iter().enumerate() {
                let at = format!("archMap[{i}]");
                let m = m
                    .as_object()
                    .ok_or_else(|| err(&at, "expected an object with architecture"))?;
                known_keys(m, &at, &["architecture", "subArchitectures"])?;
                let arch = m
                    .get("architecture")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        err(
                            &format!("{at}.architecture"),
                            "expected an SCMP_ARCH_* name",
                        )
                    })?;
                listed.push((arch.to_string(), format!("{at}.architecture")));
                if let Some(subs) = m.get("subArchitectures").filter(|v| !v.is_null()) {
                    let subs = subs.as_array().ok_or_else(|| {
                        err(&format!("{at}.subArchitectures"), "expected an array")
                    })?;
                    for (j, s) in subs.iter().enumerate() {
                        let sat = format!("{at}.subArchitectures[{j}]");
                        let s = s
                            .as_str()
                            .ok_or_else(|| err(&sat, "expected an SCMP_ARCH_* name"))?;
                        listed.push((s.to_string(), sat));
                    }
                }
            }
        }
        Some(_) => return Err(err("archMap", "expected an array")),
    }
    for (name, at) in &listed {
        if !SCMP_ARCHES.contains(&name.as_str()) {
            return Err(err(
                at,
                format!("unknown architecture `{name}` (SCMP_ARCH_X86_64, SCMP_ARCH_AARCH64, SCMP_ARCH_X86, ...)"),
            ));
        }
    }
    if listed
        .iter()
        .any(|(n, _)| n == "SCMP_ARCH_X86" || n == "SCMP_ARCH_X32" || n == "SCMP_ARCH_ARM")
    {
        notes.push(
            "32-bit and x32 calls, which the JSON lets through its own rules, are stopped by every \
             filter of this sandbox"
                .to_string(),
        );
    }
    Ok(())
}

/// The entry's names with their paths (`names`, or Docker's older single `name`).
fn names_at(e: &Map<String, Value>, at: &str) -> Result<Vec<(String, String)>, ImportError> {
    let mut out = Vec::new();
    let mut push = |v: &Value, path: String| -> Result<(), ImportError> {
        let s = v
            .as_str()
            .ok_or_else(|| err(&path, "expected a syscall name"))?;
        if s.is_empty()
            || s.len() > 64
            || !s
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(err(
                &path,
                format!(
                    "`{}` is not a syscall name (lower-case letters, digits, _)",
                    s.escape_debug()
                ),
            ));
        }
        out.push((s.to_string(), path));
        Ok(())
    };
    match (e.get("names"), e.get("name")) {
        (Some(Value::Array(list)), None) if !list.is_empty() => {
            for (j, v) in list.iter().enumerate() {
                push(v, format!("{at}.names[{j}]"))?;
            }
        }
        (None, Some(v)) => push(v, format!("{at}.name"))?,
        (Some(_), Some(_)) => return Err(err(at, "give names or name, not both")),
        _ => {
            return Err(err(
                &format!("{at}.names"),
                "expected a non-empty array of syscall names",
            ))
        }
    }
    Ok(out)
}

/// The entry's comparisons as a condition of the list grammar (`a0.64 == 0x1 && ...`).
fn conditions(args: Option<&Value>, at: &str) -> Result<String, ImportError> {
    let list = match args {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(err(at, "expected an array of comparisons")),
    };
    let mut seen = Vec::new();
    let mut parts = Vec::new();
    for (k, a) in list.iter().enumerate() {
        let aat = format!("{at}[{k}]");
        let a = a
            .as_object()
            .ok_or_else(|| err(&aat, "expected an object with index, value and op"))?;
        known_keys(a, &aat, &["index", "value", "valueTwo", "op"])?;
        let index = a
            .get("index")
            .and_then(Value::as_u64)
            .filter(|i| *i <= 5)
            .ok_or_else(|| {
                err(
                    &format!("{aat}.index"),
                    "expected an argument index from 0 to 5",
                )
            })?;
        if seen.contains(&index) {
            return Err(err(
                &format!("{aat}.index"),
                format!("argument {index} is compared twice in one entry; runc turns that into separate rules that each allow alone, which no profile means: write one entry per comparison"),
            ));
        }
        seen.push(index);
        let num = |key: &str| -> Result<u64, ImportError> {
            match a.get(key) {
                None | Some(Value::Null) => Ok(0),
                Some(v) => v.as_u64().ok_or_else(|| {
                    err(
                        &format!("{aat}.{key}"),
                        "expected an integer from 0 to 18446744073709551615",
                    )
                }),
            }
        };
        let value = num("value")?;
        let two = num("valueTwo")?;
        let op_name = a
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| err(&format!("{aat}.op"), "expected an SCMP_CMP_* name"))?;
        let op = Op::from_name(op_name).ok_or_else(|| {
            err(
                &format!("{aat}.op"),
                format!("unknown comparison `{op_name}` (SCMP_CMP_EQ, _NE, _LT, _LE, _GT, _GE, _MASKED_EQ)"),
            )
        })?;
        let sym = match op {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::MaskedEq => {
                parts.push(format!("a{index}.64 & {value:#x} == {two:#x}"));
                continue;
            }
        };
        parts.push(format!("a{index}.64 {sym} {value:#x}"));
    }
    Ok(parts.join(" && "))
}

/// Whether Docker applies the entry here: `includes` all hold and no `excludes` does.
fn applies(
    e: &Map<String, Value>,
    at: &str,
    arch: Arch,
    env: &DockerEnv,
) -> Result<bool, ImportError> {
    let mut keep = true;
    for (key, include) in [("includes", true), ("excludes", false)] {
        let Some(v) = e.get(key) else { continue };
        let kat = format!("{at}.{key}");
        let m = v
            .as_object()
            .ok_or_else(|| err(&kat, "expected an object with caps, arches or minKernel"))?;
        known_keys(m, &kat, &["caps", "arches", "minKernel"])?;
        let strings = |k: &str| -> Result<Vec<&str>, ImportError> {
            match m.get(k) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(a)) => a
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        s.as_str()
                            .ok_or_else(|| err(&format!("{kat}.{k}[{i}]"), "expected a string"))
                    })
                    .collect(),
                Some(_) => Err(err(&format!("{kat}.{k}"), "expected an array of strings")),
            }
        };
        let arches = strings("arches")?;
        for (i, a) in arches.iter().enumerate() {
            if !DOCKER_ARCHES.contains(a) {
                return Err(err(
                    &format!("{kat}.arches[{i}]"),
                    format!("unknown architecture `{a}` (amd64, arm64, x86, x32, arm, ...)"),
                ));
            }
        }
        let caps = strings("caps")?;
        for (i, c) in caps.iter().enumerate() {
            if !c.starts_with("CAP_")
                || !c[4..].bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
            {
                return Err(err(
                    &format!("{kat}.caps[{i}]"),
                    format!("`{c}` is not a CAP_* name"),
                ));
            }
        }
        let ours = docker_arch_names(arch);
        let arch_hit = arches.iter().any(|a| ours.contains(a));
        let has_cap = |c: &&str| env.caps.iter().any(|x| x == c);
        let kernel_ok = match m.get("minKernel") {
            None | Some(Value::Null) => None,
            Some(v) => {
                let s = v.as_str().unwrap_or("");
                let min = parse_kernel(s).ok_or_else(|| {
                    err(
                        &format!("{kat}.minKernel"),
                        "expected a kernel version like \"4.8\"",
                    )
                })?;
                Some(env.kernel.is_none_or(|k| k >= min))
            }
        };
        if include {
            keep &= arches.is_empty() || arch_hit;
            keep &= caps.iter().all(has_cap);
            keep &= kernel_ok.unwrap_or(true);
        } else {
            keep &= arches.is_empty() || !arch_hit;
            keep &= !caps.iter().any(has_cap);
            keep &= !kernel_ok.unwrap_or(false);
        }
    }
    Ok(keep)
}

/// `"4.8"` or `"6.1.0-18-amd64"` (a kernel release) as (major, minor).
pub fn parse_kernel(s: &str) -> Option<(u32, u32)> {
    let mut it = s.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next().map_or(Some(0), |m| {
        let digits: String = m.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })?;
    Some((major, minor))
}

fn toml_string(s: &str) -> String {
    // A TOML basic string: JSON's escaping is a subset TOML accepts.
    serde_json::to_string(s).unwrap_or_default()
}

fn list_text(key: &str, items: &[String]) -> String {
    if items.is_empty() {
        return format!("{key} = []\n");
    }
    let mut s = format!("{key} = [\n");
    for i in items {
        s += &format!("  {},\n", toml_string(i));
    }
    s += "]\n";
    s
}
