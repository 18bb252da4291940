//! The text of a tool result: what happened, the program's output, and the sandbox's own
//! lines, laid out as an agent reads a terminal.
//!
//! ```text
//! exit status 1
//! --- stdout ---
//! ...
//! --- stderr ---
//! cat: /home/me/.ssh/id_rsa: Permission denied
//! --- sandbox ---
//! sandbox: refused: reading /home/me/.ssh/id_rsa: /home/me/.ssh is on the credential list (...)
//! ```
//!
//! The sandbox's lines are those `sandbox run` prints on stderr (the result's warnings, the
//! proxy's refusals, each refused call with the change that allows it), escaped the same way:
//! they are the host's words, so nothing of the job may start a line of its own among them.

use crate::exec::ExecResult;

/// The text content of a call's result.
pub fn render(r: &ExecResult, timeout_s: f64) -> String {
    let mut out = status(r, timeout_s);
    out.push('\n');
    section(&mut out, "stdout", &r.stdout, r.stdout_truncated);
    section(&mut out, "stderr", &r.stderr, r.stderr_truncated);
    let lines = sandbox_lines(r, timeout_s);
    if !lines.is_empty() {
        out.push_str("--- sandbox ---\n");
        for l in lines {
            out.push_str(&crate::escape::line(l));
            out.push('\n');
        }
    }
    out
}

/// The first line: how the program ended.
pub(super) fn status(r: &ExecResult, timeout_s: f64) -> String {
    if r.timed_out {
        return format!(
            "timed out after {timeout_s} s: the program and every process it started were killed"
        );
    }
    match (r.exit_code, r.signal) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}{}", signal_name(s)),
        (None, None) => "ended without an exit status".to_string(),
    }
}

/// ` (SIGKILL)` for the signals a sandboxed job is commonly ended by.
fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGHUP => " (SIGHUP)",
        libc::SIGQUIT => " (SIGQUIT)",
        libc::SIGSYS => " (SIGSYS)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGXCPU => " (SIGXCPU)",
        libc::SIGXFSZ => " (SIGXFSZ)",
        _ => "",
    }
}

/// `--- name ---` and the text (with a final newline), when there is any.
pub(super) fn section(out: &mut String, name: &str, text: &str, truncated: bool) {
    if text.is_empty() && !truncated {
        return;
    }
    out.push_str(&format!("--- {name} ---\n"));
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    if truncated {
        out.push_str(&format!(
            "[{name} truncated: more was written than is kept]\n"
        ));
    }
}

/// The sandbox's lines, each with its `sandbox: ` prefix.
pub(super) fn sandbox_lines(r: &ExecResult, timeout_s: f64) -> Vec<String> {
    let program = std::path::Path::new(&r.program);
    let mut lines: Vec<String> = r
        .warnings
        .iter()
        // The timeout has its own line, below, as in `sandbox run`.
        .filter(|w| !(r.timed_out && w.starts_with("sandbox: limit hit: time:")))
        .cloned()
        .collect();
    let prefixed = |l: String| format!("sandbox: {l}");
    lines.extend(crate::run::proxy_lines(r).into_iter().map(prefixed));
    if r.timed_out {
        // A program that waited for what a refused call would have given is named as such:
        // a longer timeout is then the wrong change.
        let calls: Vec<&str> = r.violations.iter().map(|v| v.syscall.as_str()).collect();
        let then = crate::exec::refused_first(&calls)
            .unwrap_or_else(|| "a call may ask for up to the server's --timeout".to_string());
        lines.push(format!(
            "sandbox: {} timed out after {timeout_s} s; it and every process it started were \
             killed; {then}",
            crate::escape::path(program)
        ));
    }
    lines.extend(
        crate::run::violation_lines(r, program)
            .into_iter()
            .map(prefixed),
    );
    lines
}
