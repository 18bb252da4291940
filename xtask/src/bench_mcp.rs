//! `cargo xtask bench --mcp`: the CPU time of one MCP tool call round trip (`tools/call` of
//! `run` with `/bin/true` to one long-lived `sandbox mcp` under `minimal`) against one
//! `sandbox exec --json` of the same request (a process per request, as an agent without a
//! server runs it), in interleaved rounds.
//!
//! CPU time is user + system of everything the sandbox side runs: for `exec --json` the
//! reaped children's rusage (the `sandbox` process and its job); for the server, the growth of
//! its `/proc/PID/stat` times, its own plus its reaped jobs' (clock ticks, so a round holds
//! enough calls for the 10 ms tick to be a small part). The client's own work (writing a line,
//! reading one) is left out of both.

use crate::bench_exec::median;
use crate::bench_landlock::children_cpu;
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

/// The exec request both runners make.
const REQUEST: &str = r#"{"argv":["/bin/true"]}"#;

/// Runs `rounds` rounds of `per_round` requests of each kind; returns a Markdown section.
pub fn run(rounds: usize, per_round: usize) -> Result<String> {
    let bin = crate::bench_serve::sandbox_binary()?;
    let mut server = Server::start(&bin)?;
    // Warm-up: the server's spawner thread, the page cache, the admission cache.
    for _ in 0..20 {
        server.call()?;
        one_exec(&bin)?;
    }
    let (mut mcp, mut exec) = (Vec::new(), Vec::new());
    let (mut mcp_wall, mut exec_wall) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for k in 0..2 {
            if (round + k) % 2 == 0 {
                let (cpu0, t0) = (server.cpu()?, Instant::now());
                for _ in 0..per_round {
                    server.call()?;
                }
                mcp_wall.push(t0.elapsed().as_secs_f64() * 1e3 / per_round as f64);
                mcp.push((server.cpu()? - cpu0) * 1e3 / per_round as f64);
            } else {
                let (cpu0, t0) = (children_cpu(), Instant::now());
                for _ in 0..per_round {
                    one_exec(&bin)?;
                }
                exec_wall.push(t0.elapsed().as_secs_f64() * 1e3 / per_round as f64);
                exec.push((children_cpu() - cpu0) * 1e3 / per_round as f64);
            }
        }
    }
    server.stop()?;
    let (m, e) = (median(&mcp), median(&exec));
    let mut md = String::new();
    writeln!(md, "## mcp: a tool call against exec --json\n")?;
    writeln!(
        md,
        "`/bin/true` under `minimal`, {rounds} interleaved rounds of {per_round} requests of each kind; the figure is the median over rounds of a round's CPU time (user + system of the sandbox side: the server and its jobs, or each `exec --json` process and its job) per request. The MCP server is started and initialized once, outside the rounds; the client's own work is not counted.\n"
    )?;
    writeln!(md, "| runner | CPU per request | wall per request |")?;
    writeln!(md, "|---|---|---|")?;
    writeln!(
        md,
        "| `sandbox exec --json` (a process per request) | {e:.2} ms | {:.2} ms |",
        median(&exec_wall)
    )?;
    writeln!(
        md,
        "| `tools/call` `run` to one `sandbox mcp` | {m:.2} ms | {:.2} ms |",
        median(&mcp_wall)
    )?;
    writeln!(
        md,
        "\nA tool call costs {:.2}x the CPU of `exec --json` of the same request.\n",
        m / e
    )?;
    Ok(md)
}

/// One `sandbox exec --json` of [`REQUEST`].
fn one_exec(bin: &Path) -> Result<()> {
    let mut child = Command::new(bin)
        .args(["exec", "--json"])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .current_dir("/tmp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("spawning sandbox exec --json")?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(REQUEST.as_bytes())?;
    let o = child.wait_with_output()?;
    if !o.status.success() || !o.stdout.starts_with(b"{\"program\"") {
        bail!(
            "exec --json failed: {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stdout)
        );
    }
    Ok(())
}

/// One `sandbox mcp` on pipes, initialized.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
    id: u64,
}

impl Server {
    fn start(bin: &Path) -> Result<Server> {
        let mut child = Command::new(bin)
            .arg("mcp")
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .current_dir("/tmp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("spawning sandbox mcp")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        let mut s = Server {
            child,
            stdin,
            stdout,
            line: String::new(),
            id: 0,
        };
        s.send(r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#)?;
        writeln!(
            s.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )?;
        Ok(s)
    }

    /// Sends one request (`body`: its fields after `id`) and reads its one-line reply.
    fn send(&mut self, body: &str) -> Result<()> {
        self.id += 1;
        writeln!(self.stdin, r#"{{"jsonrpc":"2.0","id":{},{body}}}"#, self.id)?;
        self.stdin.flush()?;
        self.line.clear();
        self.stdout.read_line(&mut self.line)?;
        if !self.line.contains("\"result\"") || self.line.contains("\"isError\":true") {
            bail!("sandbox mcp: {}", self.line.trim_end());
        }
        Ok(())
    }

    /// One `tools/call` of `run` with `/bin/true`.
    fn call(&mut self) -> Result<()> {
        self.send(&format!(
            r#""method":"tools/call","params":{{"name":"run","arguments":{}}}"#,
            REQUEST
        ))
    }

    /// The server's CPU seconds so far, its reaped jobs' included.
    fn cpu(&self) -> Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        // The fields after the command name (which may hold spaces) start at state (3rd);
        // utime, stime, cutime and cstime are the 14th to 17th.
        let rest = stat.rsplit_once(") ").context("/proc stat")?.1;
        let f: Vec<&str> = rest.split(' ').collect();
        let ticks: f64 = f[11..15]
            .iter()
            .map(|v| v.parse::<f64>().unwrap_or(0.0))
            .sum();
        // SAFETY: sysconf has no memory effects.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Ok(ticks / hz)
    }

    fn stop(mut self) -> Result<()> {
        drop(self.stdin);
        let st = self.child.wait()?;
        if !st.success() {
            bail!("sandbox mcp exited with {st}");
        }
        Ok(())
    }
}
