//! `sandbox check`: what a default run gets here, found by doing one. The machine's checks
//! (kernel, seccomp actions, Landlock, namespaces) say what exists; a trial run of `true`
//! through the engine, with the flags of `sandbox run -- true` (the same job on the same spawn
//! path), says what a run actually gets, so that a run and `check` never disagree: the tier,
//! each layer's state, every warning the run gave. `check` fails (exit status 1) when a
//! required check fails or the trial run does not run `true` to success.

use crate::exec::ExecResult;
use crate::sandbox::Sandboxed;
use serde::Serialize;

/// A line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// `ok`, `warn` or `fail`.
    pub status: &'static str,
    /// What was checked.
    pub name: String,
    /// What was found.
    pub detail: String,
}

impl Line {
    /// A line with `status` (`ok`, `warn`, `fail`).
    pub fn new(status: &'static str, name: impl Into<String>, detail: impl Into<String>) -> Line {
        Line {
            status,
            name: name.into(),
            detail: detail.into(),
        }
    }
}

/// The lines for the trial run's outcome: its tier (`warn` below `isolated`: the run is
/// degraded), each layer's state, its warnings; one `fail` line when it did not run.
pub fn trial_lines(trial: &Result<ExecResult, String>) -> Vec<Line> {
    let r = match trial {
        Ok(r) => r,
        Err(why) => return vec![Line::new("fail", "run", why.clone())],
    };
    let mut lines = Vec::new();
    let ran = r.exit_code == Some(0);
    lines.push(if ran {
        Line::new("ok", "run", format!("{} ran (exit status 0)", r.program))
    } else {
        Line::new(
            "fail",
            "run",
            format!(
                "{} did not run to success (exit status {:?}, signal {:?}): {}",
                r.program,
                r.exit_code,
                r.signal,
                r.stderr.trim()
            ),
        )
    });
    let tier = r.tier;
    lines.push(Line::new(
        if tier == crate::exec::Tier::Isolated {
            "ok"
        } else {
            "warn"
        },
        "tier",
        format!("{tier} ({})", tier.layers()),
    ));
    let filter = match r.sandboxed.filter {
        Sandboxed::Exact => "exact",
        Sandboxed::OuterOnly => "outer filter only",
        Sandboxed::None => "none",
    };
    lines.push(Line::new(
        if r.sandboxed.filter == Sandboxed::Exact {
            "ok"
        } else {
            "warn"
        },
        "run seccomp",
        format!("profile {}: {filter}", r.sandboxed.profile),
    ));
    lines.push(match &r.landlock {
        Some(l) if !l.enforced.is_empty() && l.missing.is_empty() => Line::new(
            "ok",
            "run landlock",
            format!("ABI {}: enforced {}", l.abi.used, l.enforced_text()),
        ),
        Some(l) => Line::new(
            "warn",
            "run landlock",
            format!(
                "ABI {}: enforced {}; missing: {}",
                l.abi.used,
                l.enforced_text(),
                l.missing.join("; ")
            ),
        ),
        None => Line::new("warn", "run landlock", "off"),
    });
    lines.push(match &r.isolation {
        Some(i) if !i.namespaces.is_empty() => Line::new(
            "ok",
            "run isolation",
            format!("namespaces {}", i.namespaces.join(", ")),
        ),
        Some(i) => Line::new(
            "warn",
            "run isolation",
            format!(
                "no namespaces ({})",
                i.unavailable.as_deref().unwrap_or("unavailable")
            ),
        ),
        None => Line::new("warn", "run isolation", "off"),
    });
    lines.push(Line::new("ok", "run network", r.network.mode.to_string()));
    for w in &r.warnings {
        let w = w.strip_prefix("sandbox: ").unwrap_or(w);
        lines.push(Line::new(
            "warn",
            "run",
            w.strip_prefix("warning: ").unwrap_or(w),
        ));
    }
    lines
}

/// The whole report as `--json` prints it: whether a default run works (`ok`), its tier
/// (`null` when it did not run), every line, and the trial run's result.
pub fn json(ok: bool, lines: &[Line], trial: &Result<ExecResult, String>) -> serde_json::Value {
    serde_json::json!({
        "ok": ok,
        "tier": trial.as_ref().ok().map(|r| r.tier),
        "checks": lines,
        "run": trial.as_ref().ok(),
        "error": trial.as_ref().err(),
    })
}

/// Prints `lines` as text: `ok    name: detail`, `warn  ...`, `FAIL  ...`.
pub fn print(lines: &[Line]) {
    for l in lines {
        let tag = match l.status {
            "ok" => "ok   ",
            "warn" => "warn ",
            _ => "FAIL ",
        };
        println!("{tag} {}: {}", l.name, l.detail);
    }
}
