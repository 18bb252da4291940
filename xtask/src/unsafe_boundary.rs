//! Where `unsafe` may appear: in each crate's system-call boundary module only, so that a
//! reviewer reads one file per crate to see every promise the code makes to the compiler. This
//! module's test keeps it so (`cargo test -p xtask --lib`).

use crate::rust_tokens::{tokenize, Tok};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The Rust files under `dir` (recursively) whose code, comments and strings left out, holds
/// the keyword `unsafe`, as paths relative to `dir`, sorted.
pub fn files_with_unsafe(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let path = e?.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let src = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                if tokenize(&src)
                    .iter()
                    .any(|t| matches!(t, Tok::Ident(w) if w == "unsafe"))
                {
                    out.push(path.strip_prefix(dir).unwrap_or(&path).to_path_buf());
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::files_with_unsafe;
    use std::path::Path;

    /// Each crate's source directory and the files allowed to hold `unsafe`: the boundary
    /// module first, then the exceptions, each with its reason.
    const ALLOWED: &[(&str, &[(&str, &str)])] = &[
        ("host/src", HOST),
        (
            "preload/src",
            &[
                (
                    "env.rs",
                    "reads the environment block the loader hands over, before libc",
                ),
                (
                    "landlock.rs",
                    "its `sys` module: the Landlock system calls, no_std",
                ),
                ("out.rs", "write and _exit without libc's buffered streams"),
                ("trap.rs", "the SIGSYS handler and its sigaction"),
            ],
        ),
        (
            "policy/src",
            &[("install.rs", "prctl and seccomp(2) to install a filter")],
        ),
    ];

    /// The host: `sys/` is the boundary (one module per concept); the rest runs between `clone` and `exec` or owns
    /// memory shared with a cloned child, and is listed with why it stays.
    const HOST: &[(&str, &str)] = &[
        ("sys/arena.rs", "the boundary module's part for the binary's allocator"),
        ("sys/fd.rs", "the boundary module's part for descriptors"),
        ("sys/fs.rs", "the boundary module's part for files and paths"),
        ("sys/notif.rs", "the boundary module's part for the seccomp listener"),
        ("sys/pidfd.rs", "the boundary module's part for process descriptors"),
        ("sys/probe.rs", "the boundary module's part for the machine's probes"),
        ("sys/process.rs", "the boundary module's part for this process and its children"),
        ("sys/pty.rs", "the boundary module's part for terminals"),
        ("sys/rlimit.rs", "the boundary module's part for resource limits"),
        ("sys/socket.rs", "the boundary module's part for sockets"),
        (
            "sys/raw.rs",
            "the boundary module's raw system call, which returns -errno and touches no libc \
             state (a child sharing its parent's memory and TLS makes it)",
        ),
        (
            "sys/emulate.rs",
            "the boundary module's part for the supervisor's emulated calls (changes through `O_PATH` \
             descriptors, a pty peer handed into the job)",
        ),
        (
            "sys/beneath.rs",
            "the boundary module's part for host-side file work beneath a directory \
             descriptor (`*at` calls without following, a thread's file-system identity)",
        ),
        (
            "exec/spawn.rs",
            "the spawn: clones a child that shares the host's memory onto a stack it maps, \
             and waits on the words the child writes",
        ),
        (
            "exec/spawn/child.rs",
            "the child between clone and exec (child_main): it shares the host's memory, so \
             its calls must not allocate or take locks: raw calls on memory the spawn prepared",
        ),
        (
            "exec/spawn/init.rs",
            "the namespaces' init, a cloned child: raw, allocation-free calls on memory the \
             spawn prepared (id maps, mounts, landlock rules)",
        ),
        (
            "exec/clone.rs",
            "clone3 itself: the child returns on a new stack in the middle of the call",
        ),
        (
            "session/resident.rs",
            "a session's resident: clones each command sharing its memory and descriptor \
             table (the commands its main thread starts)",
        ),
        (
            "session/child.rs",
            "a session command's child between clone and exec (its process group, the \
             profile's filter, the listener made in the shared table): it shares the \
             resident's memory, so raw calls only, on memory prepared before the clone",
        ),
        (
            "session/start_socket.rs",
            "a session's spawner thread under its filter: receives starts and clones each \
             command onto a slot's memory, in raw calls that carry the secret, no allocation",
        ),
        (
            "exec/spawner.rs",
            "the spawner thread: installs the filter on itself and hands the spawn raw \
             descriptors across the clone",
        ),
    ];

    /// Outside the listed files, no source file of the host, the preload or the policy crate
    /// holds `unsafe`; and each listed file still does (so the list only shrinks).
    #[test]
    fn unsafe_lives_in_the_boundary_modules() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut wrong = Vec::new();
        for (dir, allowed) in ALLOWED {
            let found = files_with_unsafe(&root.join(dir)).expect("reading the sources");
            for f in &found {
                if !allowed.iter().any(|(a, _)| Path::new(a) == f) {
                    wrong.push(format!(
                        "{dir}/{}: unsafe outside the boundary module",
                        f.display()
                    ));
                }
            }
            for (a, _) in *allowed {
                if !found.iter().any(|f| f == Path::new(a)) {
                    wrong.push(format!(
                        "{dir}/{a}: no unsafe left, remove it from the list"
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
