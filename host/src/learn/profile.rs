//! The learned profile as text: the profile-file format (`description`, `default_action`,
//! `allow`), one allowed call per line with a comment naming the programs that made it, and
//! the paths the run wrote as comments (the profile format has no paths; they are what to give
//! `--allow-write`).

use crate::exec::record::Recording;
use crate::policy::NATIVE;
use crate::sandbox::HANDOVER_CALLS;

/// Programs named per call before the comment says "and N more".
const PROGRAMS_SHOWN: usize = 4;

/// The profile allowing exactly what `rec` recorded. `command` is the learned command line,
/// `base` the name of the profile new calls were compared with.
pub fn profile_text(rec: &Recording, command: &str, base: &str) -> String {
    let mut out = String::new();
    out += &format!("# Learned by `sandbox learn` from: {}\n", comment(command));
    out += "# Every system call the command and its descendants made, by name (arguments are not\n";
    out += "# learned), with the programs that made it and how often; \"new\" marks calls the\n";
    out += &format!(
        "# base profile {} refuses. Use: sandbox run --profile THIS-FILE -- ...\n",
        comment(base)
    );
    out += &format!(
        "description = {}\n",
        toml_string(&format!("Learned from {command}"))
    );
    out += "allow = [\n";
    out +=
        "  # Needed by the sandbox itself between attaching the filter and exec (every program\n";
    out += "  # makes them too), so never recorded:\n";
    out += "  ";
    out += &HANDOVER_CALLS
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    out += ",\n";
    out += "  # What the dynamic loader, libc start-up and the sandbox's preload need (read-only\n";
    out += "  # opens only); with it the outer filter enforces this profile exactly:\n";
    out += "  \"@loader\",\n";
    let mut rows: Vec<(&str, String)> = rec
        .calls
        .iter()
        .filter_map(|(nr, call)| {
            let name = NATIVE.syscall_name(*nr)?;
            if HANDOVER_CALLS.contains(&name) {
                return None;
            }
            let mut programs: Vec<String> = call
                .programs
                .iter()
                .take(PROGRAMS_SHOWN)
                .map(|p| comment(p))
                .collect();
            if call.programs.len() > PROGRAMS_SHOWN {
                programs.push(format!("and {} more", call.programs.len() - PROGRAMS_SHOWN));
            }
            let times = if call.count == 1 {
                "1 call".to_string()
            } else {
                format!("{} calls", call.count)
            };
            let new = if call.new { "new; " } else { "" };
            Some((name, format!("{new}{times}: {}", programs.join(", "))))
        })
        .collect();
    rows.sort();
    let width = rows.iter().map(|(n, _)| n.len() + 3).max().unwrap_or(0);
    for (name, note) in rows {
        let quoted = format!("\"{name}\",");
        out += &format!("  {quoted:width$} # {note}\n");
    }
    out += "]\n";
    let unknown: Vec<String> = rec
        .calls
        .keys()
        .filter(|nr| NATIVE.syscall_name(**nr).is_none())
        .map(|nr| nr.to_string())
        .collect();
    if !unknown.is_empty() {
        out += &format!(
            "# Calls this sandbox has no name for (not allowed above): {}\n",
            unknown.join(", ")
        );
    }
    if rec.written.is_empty() {
        out += "# Paths written: none.\n";
    } else {
        out += "#\n# Paths written (give them to `sandbox run --allow-write PATH` or a request's\n";
        out += "# writable_paths; the profile's filter does not decide paths):\n";
        for (path, programs) in &rec.written {
            let programs: Vec<String> = programs.iter().map(|p| comment(p)).collect();
            out += &format!(
                "#   {}  ({})\n",
                comment(&path.display().to_string()),
                programs.join(", ")
            );
        }
    }
    out
}

/// `text` safe inside a `#` comment: control characters (a newline would end it) shown as `?`.
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut s = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => s += "\\\"",
            '\\' => s += "\\\\",
            c if c.is_control() => s += &format!("\\u{:04X}", c as u32),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::record::Call;
    use crate::policy::profile::Profile;

    #[test]
    fn the_text_is_a_profile_allowing_exactly_the_recorded_calls() {
        let mut rec = Recording::default();
        for name in ["read", "openat", "socket"] {
            let nr = NATIVE.syscall_number(name).unwrap();
            rec.calls.insert(
                nr,
                Call {
                    count: 2,
                    programs: ["/bin/x\nnewline".to_string()].into(),
                    new: name == "socket",
                },
            );
        }
        rec.written
            .insert("/tmp/o\"ut".into(), ["/bin/x".to_string()].into());
        let text = profile_text(&rec, "x 'a\"b\\c\n'", "minimal");
        let p = Profile::from_toml("learned", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut allow = p.allow().unwrap().to_vec();
        allow.sort();
        let mut want: Vec<String> = ["read", "openat", "socket", "@loader"]
            .iter()
            .chain(HANDOVER_CALLS)
            .map(|s| s.to_string())
            .collect();
        want.sort();
        assert_eq!(allow, want);
        assert!(p.description().contains("a\"b\\c\n"));
        assert!(
            text.contains("\"socket\", # new; 2 calls: /bin/x?newline"),
            "{text}"
        );
        assert!(text.contains("#   /tmp/o\"ut  (/bin/x)"), "{text}");
    }
}
