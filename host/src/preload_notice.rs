//! The one line `sandbox env` prints about what the preload route cannot stop.
//!
//! The route confines a program from its preload's constructor on; what runs before it, what
//! ignores `LD_PRELOAD` and what outlives the command are not confined (docs/security.md,
//! "What the preload route cannot stop"). A caller should hear that once, not on every
//! command: agents evaluate `sandbox env` before each one. So the line is printed the first
//! time for each user and remembered by a file in the per-user state directory; `--quiet`
//! leaves it out. Without a state directory the line is printed every time (said rather than
//! lost). The memory is the state directory's: a user whose state directory changes (its
//! `~/.cache` appears, a session sets `XDG_RUNTIME_DIR`) is told once more there.

use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt;

/// The line, printed on stderr.
pub const LINE: &str = "sandbox: note: the preload route does not confine code that runs \
before its constructor (.preinit_array, other libraries' constructors), setuid or static \
programs (LD_PRELOAD does not reach them), or daemons that outlive the command; sandbox run \
and sandbox exec do (docs/security.md, \"What the preload route cannot stop\"); printed once, \
--quiet leaves it out";

/// The line every `sandbox env` prints where its commands may write and `--isolation off` was
/// not given: the route has no namespaces and no check after the command, so what
/// `--isolation preferred` promises (read-only `.git/hooks`, the repository's and the agents'
/// control files put back after the command) does not hold.
pub const UNGUARDED: &str = "sandbox: warning: the preload route cannot guard the repository or \
the agents' control files: a command may leave git hooks, core.fsmonitor, .claude/ or .mcp.json \
that run later outside the sandbox (sandbox run and sandbox exec put them back); pass \
--isolation off to say this is known";

/// The file that records that the line was printed, in the state directory.
const MARK: &str = "preload-notice-shown";

/// Whether the line is due: true the first time for this user (the mark is created now), and
/// whenever the state directory or the mark cannot be made.
pub fn due() -> bool {
    let Ok(dir) = crate::state_dir::get() else {
        return true;
    };
    // O_EXCL: of two first calls at once, one prints. O_NOFOLLOW: a link planted at the
    // name is not followed (in a directory only the user may write, only the user could).
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(MARK));
    match made {
        Ok(_) => true,
        Err(e) => e.kind() != ErrorKind::AlreadyExists,
    }
}
