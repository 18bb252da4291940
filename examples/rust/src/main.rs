//! A confined exec tool in Rust: the engine of `sandbox exec --json` and `sandbox serve`,
//! called in-process through the `sandbox_host` library (no server, no `sandbox` binary).
//!
//! It runs what the other clients in `examples/` run and prints one line for each: an allowed
//! command line, a socket the `minimal` profile refuses (the call fails with EPERM and the
//! result names it), and a request the engine rejects before running anything.
//!
//! ```sh
//! cargo run -p sandbox-example
//! ```

use sandbox_host::exec::{ExecError, ExecResult, OnViolation, Request};
use std::time::Duration;

/// One line saying what happened to a request.
fn describe(outcome: Result<ExecResult, ExecError>) -> String {
    match outcome {
        // The error names the field it refused and why (`argv[0]: must be ...`).
        Err(e) => format!("refused: {e}"),
        Ok(r) => match (r.violations.first(), r.exit_code, r.signal) {
            (Some(v), code, _) => format!(
                "exit {}, refused: {} by {} ({})",
                code.unwrap_or(-1),
                v.syscall,
                v.program.as_deref().unwrap_or("?"),
                v.hint
            ),
            (None, Some(code), _) => format!("exit {code}: {:?}", r.stdout),
            (None, None, Some(sig)) => format!("signal {sig}"),
            (None, None, None) => "no status".to_string(),
        },
    }
}

fn main() {
    // A command line: argv, never a shell string, so the shell is named and confined too.
    let echo = Request::builder(["/bin/sh", "-c", "echo hello from the sandbox | tr a-z A-Z"])
        .profile("shell")
        .timeout(Duration::from_secs(30))
        .run();
    // `minimal` has no sockets: the call fails (report, the default) and is named.
    let socket = Request::builder(["/usr/bin/python3", "-c", "import socket; socket.socket()"])
        .profile("minimal")
        .on_violation(OnViolation::Report)
        .run();
    // Rejected before anything runs: a relative program.
    let bad = Request::builder(["relative/program"]).run();
    for (name, outcome) in [("echo", echo), ("socket", socket), ("bad", bad)] {
        println!("{name}: {}", describe(outcome));
    }
}
