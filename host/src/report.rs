//! The report channel between the preload and the host: a pipe whose write end the child
//! inherits as `SECCOMP_REPORT_FD`. The preload writes `ready N` just before installing its
//! filter (or `armed` when it only arms its handler for the host's exact outer filter),
//! `violation NR NAME` from its SIGSYS handler, `error TEXT` when it fails. The program's stdout
//! and stderr never reach it, so its own output cannot forge a report.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

/// What the preload said about one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    /// The preload was about to install its filter (`ready`).
    pub ready: bool,
    /// The preload armed its SIGSYS handler without a filter of its own (`armed`).
    pub armed: bool,
    /// The last violation reported by the trap handler: (number, name).
    pub violation: Option<(u32, String)>,
    /// The preload's error, when it refused to run the program.
    pub error: Option<String>,
}

impl Report {
    /// Parses the lines the preload wrote; unknown lines are ignored.
    pub fn parse(text: &str) -> Report {
        let mut r = Report::default();
        for line in text.lines() {
            if line == "armed" {
                r.armed = true;
            } else if let Some(rest) = line.strip_prefix("ready ") {
                r.ready = rest.parse::<u32>().is_ok();
            } else if let Some(rest) = line.strip_prefix("violation ") {
                let mut it = rest.splitn(2, ' ');
                if let (Some(nr), Some(name)) = (it.next(), it.next()) {
                    if let Ok(nr) = nr.parse() {
                        r.violation = Some((nr, name.to_string()));
                    }
                }
            } else if let Some(rest) = line.strip_prefix("error ") {
                r.error = Some(rest.to_string());
            }
        }
        r
    }
}

/// A pipe: the parent keeps the read end, the child inherits the write end.
#[derive(Debug)]
pub struct ReportPipe {
    read: OwnedFd,
    write: Option<OwnedFd>,
    write_raw: RawFd,
}

impl ReportPipe {
    /// Creates the pipe, both ends close-on-exec (the child clears it on its own copy).
    pub fn new() -> std::io::Result<ReportPipe> {
        let (read, write) = crate::sys::pipe2(libc::O_CLOEXEC | libc::O_NONBLOCK)?;
        // The child's end must block: a full pipe then stalls only a program that spams it.
        crate::sys::set_status_flags(write.as_fd(), 0)?;
        let write_raw = write.as_raw_fd();
        Ok(ReportPipe {
            read,
            write: Some(write),
            write_raw,
        })
    }

    /// The descriptor number the child sees.
    pub fn child_fd(&self) -> RawFd {
        self.write_raw
    }

    /// Drops the parent's write end.
    pub fn close_writer(&mut self) {
        self.write = None;
    }

    /// Reads what is in the pipe now, without waiting (at most 64 KiB), and closes it.
    pub fn read_available(self) -> Report {
        drop(self.write);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let mut f = std::fs::File::from(self.read);
        while buf.len() < 65536 {
            match f.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        Report::parse(&String::from_utf8_lossy(&buf))
    }
}
