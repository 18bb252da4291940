//! What the shell front end of sessions (`sandbox session`, `sandbox run --session`) and a
//! session's daemon share: session ids, where a session's control socket is, and the messages
//! on it (one JSON object per `SOCK_SEQPACKET` datagram, descriptors alongside, as between a
//! session and its resident: module `wire`).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Hex digits in a session id: 96 random bits, enough that an id cannot be guessed, and short
/// enough to type.
pub(crate) const ID_LEN: usize = 24;

/// A new session id, from the kernel's random source.
pub(crate) fn new_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; ID_LEN / 2];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `id` when it is a session id (exactly [`ID_LEN`] lowercase hex digits); else why not, in
/// one line. Checked before anything is looked up, so a hostile value (`../x`, a NUL, a huge
/// or empty string) names no file.
pub(crate) fn check_id(id: &str) -> Result<&str, String> {
    if id.len() == ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Ok(id);
    }
    let shown: String = id.chars().take(40).collect();
    Err(format!(
        "`{}`{} is not a session id: ids are {ID_LEN} lowercase hex digits, as `sandbox session \
         start` prints them (`sandbox session list` lists this user's)",
        shown.escape_debug(),
        if id.chars().count() > 40 { "..." } else { "" }
    ))
}

/// The directory of this user's session sockets: `sessions` in the per-user state directory
/// (created 0700, checked to be the caller's with that mode before every use).
pub(crate) fn dir() -> Result<PathBuf, String> {
    crate::state_dir::sub("sessions")
        .map_err(|e| format!("the per-user state directory for session sockets: {e}"))
}

/// The control socket of session `id` (already checked with [`check_id`]).
pub(crate) fn socket_path(id: &str) -> Result<PathBuf, String> {
    Ok(dir()?.join(format!("{id}.sock")))
}

/// From a client (`sandbox run --session`, `session end`, `session list`) to a daemon.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Request {
    /// Run `argv` in the session; the caller's stdin, stdout and stderr come as descriptors.
    Run {
        argv: Vec<String>,
        /// The command's own timeout in seconds (`run --session --timeout`).
        timeout_s: Option<u64>,
        /// The command's own memory limit in bytes (`run --session --memory`).
        #[serde(default)]
        memory: Option<u64>,
        /// The command's own process limit (`run --session --processes`).
        #[serde(default)]
        processes: Option<u64>,
        /// A terminal of (columns, rows) for the command, when the caller has one: the
        /// descriptors are then the caller's terminal, and only stdin and stdout are used.
        #[serde(default)]
        tty: Option<(u16, u16)>,
        /// The caller's `PATH`: the program is looked up in it and the command gets it, as
        /// `sandbox run` keeps the caller's (toolchains of rustup, nvm, pyenv).
        #[serde(default)]
        path: Option<String>,
    },
    /// The caller's terminal changed size (only after `Run` with `tty`).
    Resize { cols: u16, rows: u16 },
    /// Send `sig` to the running command's process group (only after `Run`).
    Signal { sig: i32 },
    /// Say what the session is.
    Info,
    /// End the session.
    End,
}

/// From a daemon to a client.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Reply {
    /// The command runs.
    Started,
    /// The command ended (or never started): `run`'s stderr lines and exit status.
    Done { lines: Vec<String>, status: i32 },
    /// What the session is.
    Info(Info),
    /// The session has ended: everything in it was killed.
    Ended,
    /// The request was refused: one line saying why.
    Refused { reason: String },
}

/// One session, as `sandbox session list` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Info {
    pub id: String,
    /// The profile's name, or its file.
    pub profile: String,
    /// The workspace `--workspace` gave; `None`: the profile's default (the working
    /// directory for profiles that write, else none).
    pub workspace: Option<String>,
    /// The session's working directory (`session start`'s): where its commands run.
    pub cwd: String,
    /// Seconds since the session started.
    pub age_s: u64,
    /// Commands of `run --session` running now (background processes they left are not
    /// counted).
    pub running: usize,
    /// The idle time after which the session ends, in seconds.
    pub idle_s: u64,
    /// The control socket's path.
    pub socket: String,
}
