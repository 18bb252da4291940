//! Admission control: can a preload confine this program?
//!
//! `LD_PRELOAD` is honoured only by a dynamic loader. glibc's loader of the host's own machine
//! and class loads our 64-bit glibc `.so`; static and static-pie programs have no loader, a
//! 32-bit program's loader rejects the library and runs the program anyway, and musl's loader
//! fails on it. Only the ELF and program headers are read (the first 4 KiB, more only when
//! they lie beyond), plus the `#!` line of a script, whose interpreter is classified in turn.

use goblin::container::{Container, Ctx};
use goblin::elf::header;
use goblin::elf::program_header::{ProgramHeader, PT_DYNAMIC, PT_INTERP};
use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// How much of a program is read to classify it.
const HEAD_LEN: usize = 4 * 1024;

/// The deepest chain of `#!` interpreters the kernel follows.
pub const MAX_INTERPRETER_DEPTH: usize = 4;

/// glibc's default search path when `PATH` is unset (`confstr(_CS_PATH)`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Why a preload cannot confine a program.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unconfinable {
    /// The program does not exist (or is not in `PATH`).
    NotFound {
        /// The program as given.
        program: PathBuf,
    },
    /// The program exists but is not an executable regular file.
    NotExecutable {
        /// The program.
        program: PathBuf,
    },
    /// The program could not be read.
    Unreadable {
        /// The program.
        program: PathBuf,
        /// The I/O error, as text.
        error: String,
    },
    /// Neither an executable ELF file nor a `#!` script.
    NotElf {
        /// The program.
        program: PathBuf,
    },
    /// Statically linked: no `PT_INTERP`, no `PT_DYNAMIC`.
    Static {
        /// The program.
        program: PathBuf,
    },
    /// Static-pie: `PT_DYNAMIC` but no `PT_INTERP`, so no loader runs.
    StaticPie {
        /// The program.
        program: PathBuf,
    },
    /// Loaded by another loader than glibc's (musl's `ld-musl-*`, for example).
    ForeignLoader {
        /// The program.
        program: PathBuf,
        /// Its `PT_INTERP`.
        interpreter: PathBuf,
    },
    /// Not the host's ELF class (a 32-bit program on a 64-bit host).
    WrongClass {
        /// The program.
        program: PathBuf,
        /// Its class in bits (32 or 64).
        bits: u8,
    },
    /// Built for another machine.
    WrongMachine {
        /// The program.
        program: PathBuf,
        /// Its `e_machine`.
        machine: u16,
    },
    /// A `#!` script whose interpreter cannot be confined.
    ScriptInterpreter {
        /// The script.
        script: PathBuf,
        /// The interpreter (for `#!/usr/bin/env NAME`, NAME as found in `PATH`).
        interpreter: PathBuf,
        /// Why the interpreter cannot be confined.
        reason: Box<Unconfinable>,
    },
    /// A `#!` line that names no interpreter.
    BadShebang {
        /// The script.
        script: PathBuf,
    },
    /// More than [`MAX_INTERPRETER_DEPTH`] nested `#!` interpreters (the kernel refuses these).
    TooManyInterpreters {
        /// The script.
        script: PathBuf,
    },
}

impl Unconfinable {
    /// The program this reason is about.
    pub fn program(&self) -> &Path {
        match self {
            Unconfinable::NotFound { program }
            | Unconfinable::NotExecutable { program }
            | Unconfinable::Unreadable { program, .. }
            | Unconfinable::NotElf { program }
            | Unconfinable::Static { program }
            | Unconfinable::StaticPie { program }
            | Unconfinable::ForeignLoader { program, .. }
            | Unconfinable::WrongClass { program, .. }
            | Unconfinable::WrongMachine { program, .. } => program,
            Unconfinable::ScriptInterpreter { script, .. }
            | Unconfinable::BadShebang { script }
            | Unconfinable::TooManyInterpreters { script } => script,
        }
    }

    /// The reason without the program's name ("is statically linked: ...").
    fn why(&self) -> String {
        const CANNOT: &str = "LD_PRELOAD cannot enter it";
        match self {
            Unconfinable::NotFound { .. } => "was not found".into(),
            Unconfinable::NotExecutable { .. } => "is not an executable file".into(),
            Unconfinable::Unreadable { error, .. } => {
                format!("cannot be read ({error}), so it cannot be checked for confinement")
            }
            Unconfinable::NotElf { .. } => {
                "is neither an ELF program nor a #! script, so it cannot be checked for confinement"
                    .into()
            }
            Unconfinable::Static { .. } => format!("is statically linked: {CANNOT}"),
            Unconfinable::StaticPie { .. } => {
                format!("is a static-pie program (no program interpreter): {CANNOT}")
            }
            Unconfinable::ForeignLoader { interpreter, .. } => format!(
                "is loaded by {}, not glibc's loader: the glibc preload cannot be loaded into it",
                interpreter.display()
            ),
            Unconfinable::WrongClass { bits, .. } => {
                format!("is a {bits}-bit program: its loader ignores the 64-bit preload and runs it unconfined")
            }
            Unconfinable::WrongMachine { machine, .. } => format!(
                "is built for {} (e_machine {machine}), not {}: {CANNOT}",
                header::machine_to_str(*machine),
                header::machine_to_str(host_machine())
            ),
            Unconfinable::ScriptInterpreter {
                interpreter,
                reason,
                ..
            } => {
                format!(
                    "is a script run by {}, which {}",
                    interpreter.display(),
                    reason.why()
                )
            }
            Unconfinable::BadShebang { .. } => "has a #! line that names no interpreter".into(),
            Unconfinable::TooManyInterpreters { .. } => {
                format!("nests more than {MAX_INTERPRETER_DEPTH} #! interpreters")
            }
        }
    }
}

impl fmt::Display for Unconfinable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.program().display(), self.why())
    }
}

impl std::error::Error for Unconfinable {}

/// What admission control decided about a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The program as resolved (absolute path).
    pub program: PathBuf,
    /// `Ok` when glibc's loader will load the preload into it; otherwise why not.
    pub preload: Result<(), Unconfinable>,
    /// setuid, setgid or file capabilities: run with no_new_privs so it keeps the preload.
    pub privileged: bool,
}

/// Why a command name could not be resolved to a program.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// Nothing by that name (exit status 127).
    #[error("{0}: command not found")]
    NotFound(String),
    /// Found, but not an executable regular file (exit status 126).
    #[error("{}: cannot execute: not an executable file", .0.display())]
    NotExecutable(PathBuf),
}

impl ResolveError {
    /// The shell's exit status for this failure: 127 not found, 126 cannot execute.
    pub fn exit_status(&self) -> i32 {
        match self {
            ResolveError::NotFound(_) => 127,
            ResolveError::NotExecutable(_) => 126,
        }
    }
}

/// Resolves `program` like `execvp`: a name containing `/` is taken as a path, a bare name is
/// searched in `path_env` (`PATH`; glibc's default when `None`). Returns the canonical path.
pub fn resolve(program: &str, path_env: Option<&str>) -> Result<PathBuf, ResolveError> {
    if program.is_empty() {
        return Err(ResolveError::NotFound(program.into()));
    }
    if program.contains('/') {
        let path = Path::new(program);
        if fs::metadata(path).is_err() {
            return Err(ResolveError::NotFound(program.into()));
        }
        if !is_executable_file(path) {
            return Err(ResolveError::NotExecutable(path.to_path_buf()));
        }
        return fs::canonicalize(path).map_err(|_| ResolveError::NotFound(program.into()));
    }
    let mut denied = None;
    for dir in path_env.unwrap_or(DEFAULT_PATH).split(':') {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(dir)
        };
        let candidate = dir.join(program);
        if fs::metadata(&candidate).is_err() {
            continue;
        }
        if is_executable_file(&candidate) {
            if let Ok(path) = fs::canonicalize(&candidate) {
                return Ok(path);
            }
        } else if denied.is_none() {
            denied = Some(candidate);
        }
    }
    Err(denied.map_or_else(
        || ResolveError::NotFound(program.into()),
        ResolveError::NotExecutable,
    ))
}

/// A regular file that we may execute (`faccessat(X_OK, AT_EACCESS)`).
fn is_executable_file(path: &Path) -> bool {
    if !fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    crate::sys::executable(path)
}

/// The `e_machine` of the host.
pub const fn host_machine() -> u16 {
    match sandbox_policy::NATIVE {
        sandbox_policy::Arch::X86_64 => header::EM_X86_64,
        sandbox_policy::Arch::Aarch64 => header::EM_AARCH64,
    }
}

/// glibc's dynamic loader for the host's machine.
pub const fn host_loader() -> &'static str {
    match sandbox_policy::NATIVE {
        sandbox_policy::Arch::X86_64 => "/lib64/ld-linux-x86-64.so.2",
        sandbox_policy::Arch::Aarch64 => "/lib/ld-linux-aarch64.so.1",
    }
}

/// Classifies `program` (following `#!` interpreters); a bare name is searched in `PATH`.
pub fn classify(program: &Path) -> Verdict {
    let path_env = std::env::var("PATH").ok();
    classify_with_path(program, path_env.as_deref())
}

/// Whether `reason` is a native program that only lacks a glibc loader (static, static-pie,
/// another loader such as musl's), or a script run by one: the outer filter confines such a
/// program exactly as it would a dynamic one. 32-bit and foreign programs are not.
pub fn native_without_preload(reason: &Unconfinable) -> bool {
    match reason {
        Unconfinable::Static { .. }
        | Unconfinable::StaticPie { .. }
        | Unconfinable::ForeignLoader { .. } => true,
        Unconfinable::ScriptInterpreter { reason, .. } => native_without_preload(reason),
        _ => false,
    }
}

/// Whether this system's `/bin/sh` is itself a program the preload cannot enter (busybox-based
/// and distroless-like images, whose programs are all static): there a static program is the
/// norm, and refusing it refuses everything. Checked once per process.
pub fn static_system() -> bool {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONCE.get_or_init(|| match classify_cached(Path::new("/bin/sh")).preload {
        Ok(()) => false,
        Err(reason) => native_without_preload(&reason),
    })
}

/// [`classify`] for an absolute path, remembering verdicts on ELF programs by the file's
/// identity (device, inode, size, modification and change times, mode, owner): a file that is
/// replaced, rewritten, chmod'ed or given capabilities no longer matches, so a remembered
/// verdict is the one a fresh classification would give. Scripts are classified afresh (their
/// verdict depends on other files). Saves reading and parsing the headers on every spawn.
pub fn classify_cached(program: &Path) -> Verdict {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Key = (u64, u64, u64, i64, i64, i64, i64, u32, u32);
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, (Key, Verdict)>>> = OnceLock::new();
    const MAX: usize = 1024;
    let identity = |m: &fs::Metadata| -> Key {
        (
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            m.mode(),
            m.uid(),
        )
    };
    let (Ok(meta), true) = (fs::metadata(program), program.is_absolute()) else {
        return classify(program);
    };
    let key = identity(&meta);
    let cache = CACHE.get_or_init(Default::default);
    if let Some((k, v)) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(program) {
        if *k == key {
            return v.clone();
        }
    }
    let verdict = classify(program);
    let Ok(file) = File::open(program) else {
        return verdict;
    };
    let mut magic = [0u8; 4];
    let elf = file.read_exact_at(&mut magic, 0).is_ok() && magic == *b"\x7fELF";
    // Cache only if the file did not change while it was classified.
    if elf && file.metadata().is_ok_and(|m| identity(&m) == key) {
        let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
        if c.len() >= MAX {
            c.clear();
        }
        c.insert(program.to_path_buf(), (key, verdict.clone()));
    }
    verdict
}

/// Classifies `program` with `path_env` as the child's `PATH` (for bare names and for
/// `#!/usr/bin/env NAME`).
pub fn classify_with_path(program: &Path, path_env: Option<&str>) -> Verdict {
    let resolved = match resolve_path(program, path_env) {
        Ok(p) => p,
        Err(reason) => {
            return Verdict {
                program: program.to_path_buf(),
                preload: Err(reason),
                privileged: false,
            }
        }
    };
    let mut privileged = false;
    let preload = classify_at(&resolved, path_env, 0, &mut privileged);
    Verdict {
        program: resolved,
        preload,
        privileged,
    }
}

/// Resolves a program for classification, mapping failures to reasons.
fn resolve_path(program: &Path, path_env: Option<&str>) -> Result<PathBuf, Unconfinable> {
    let Some(name) = program.to_str() else {
        // Not UTF-8: only a path can be classified, not a PATH search.
        return fs::canonicalize(program).map_err(|_| Unconfinable::NotFound {
            program: program.into(),
        });
    };
    resolve(name, path_env).map_err(|e| match e {
        ResolveError::NotFound(_) => Unconfinable::NotFound {
            program: program.into(),
        },
        ResolveError::NotExecutable(p) => Unconfinable::NotExecutable { program: p },
    })
}

/// Whether a program runs with more privilege than its caller: setuid, setgid (with group
/// execute; without it the bit means mandatory locking), or file capabilities.
pub fn is_privileged(path: &Path) -> bool {
    let Ok(meta) = fs::metadata(path) else {
        return false;
    };
    let mode = meta.mode();
    if mode & libc::S_ISUID != 0 || (mode & libc::S_ISGID != 0 && mode & libc::S_IXGRP != 0) {
        return true;
    }
    has_file_capabilities(path)
}

/// Whether `path` carries a `security.capability` extended attribute.
fn has_file_capabilities(path: &Path) -> bool {
    crate::sys::has_xattr(path, c"security.capability")
}

/// Classifies the resolved program at `path`, `depth` interpreters deep.
fn classify_at(
    path: &Path,
    path_env: Option<&str>,
    depth: usize,
    privileged: &mut bool,
) -> Result<(), Unconfinable> {
    let program = path.to_path_buf();
    *privileged |= is_privileged(path);
    let unreadable = |e: io::Error| Unconfinable::Unreadable {
        program: program.clone(),
        error: e.to_string(),
    };
    let mut file = File::open(path).map_err(unreadable)?;
    let head = read_head(&mut file).map_err(unreadable)?;
    if let Some(line) = head.strip_prefix(b"#!") {
        if depth >= MAX_INTERPRETER_DEPTH {
            return Err(Unconfinable::TooManyInterpreters { script: program });
        }
        return classify_script(&program, line, path_env, depth, privileged);
    }
    classify_elf(&program, &file, &head)
}

/// Reads up to [`HEAD_LEN`] bytes.
fn read_head(file: &mut File) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(4096);
    file.by_ref().take(HEAD_LEN as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// Classifies a script from the rest of its `#!` line.
fn classify_script(
    script: &Path,
    rest: &[u8],
    path_env: Option<&str>,
    depth: usize,
    privileged: &mut bool,
) -> Result<(), Unconfinable> {
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut words = line
        .split(|b| *b == b' ' || *b == b'\t')
        .filter(|w| !w.is_empty());
    let Some(interp) = words.next() else {
        return Err(Unconfinable::BadShebang {
            script: script.into(),
        });
    };
    // The kernel passes everything after the interpreter as one argument; env -S splits it.
    let args: Vec<&[u8]> = words.collect();
    let interp = Path::new(OsStr::from_bytes(interp));
    let wrap = |interpreter: PathBuf, reason: Unconfinable| Unconfinable::ScriptInterpreter {
        script: script.into(),
        interpreter,
        reason: Box::new(reason),
    };
    // The kernel does not search PATH for an interpreter: it is a path (relative to the cwd).
    let interp_path = match fs::canonicalize(interp) {
        Ok(p) => p,
        Err(_) => {
            return Err(wrap(
                interp.into(),
                Unconfinable::NotFound {
                    program: interp.into(),
                },
            ))
        }
    };
    classify_at(&interp_path, path_env, depth + 1, privileged)
        .map_err(|r| wrap(interp_path.clone(), r))?;

    if interp_path.file_name() == Some(OsStr::new("env")) {
        // `#!/usr/bin/env [-S] [NAME=VALUE]... NAME`: env execs NAME from PATH; it must be
        // confinable too.
        let name = args
            .iter()
            .flat_map(|a| a.split(|b| *b == b' ' || *b == b'\t'))
            .find(|w| !w.is_empty() && !w.starts_with(b"-") && !w.contains(&b'='));
        let Some(name) = name.and_then(|n| std::str::from_utf8(n).ok()) else {
            return Err(Unconfinable::BadShebang {
                script: script.into(),
            });
        };
        let target = resolve_path(Path::new(name), path_env).map_err(|r| wrap(name.into(), r))?;
        classify_at(&target, path_env, depth + 1, privileged)
            .map_err(|r| wrap(target.clone(), r))?;
    }
    Ok(())
}

/// Classifies an ELF program from its first bytes (`head`), reading more of `file` only if the
/// program headers or the interpreter lie beyond them.
fn classify_elf(program: &Path, file: &File, head: &[u8]) -> Result<(), Unconfinable> {
    let program = program.to_path_buf();
    let not_elf = || Unconfinable::NotElf {
        program: program.clone(),
    };
    if head.len() < header::SIZEOF_IDENT || &head[..header::SELFMAG] != header::ELFMAG {
        return Err(not_elf());
    }
    let bits = match head[header::EI_CLASS] {
        header::ELFCLASS32 => 32,
        header::ELFCLASS64 => 64,
        _ => return Err(not_elf()),
    };
    let h = goblin::elf::Elf::parse_header(head).map_err(|_| not_elf())?;
    if !matches!(h.e_type, header::ET_EXEC | header::ET_DYN) {
        return Err(not_elf());
    }
    if bits != 64 {
        return Err(Unconfinable::WrongClass { program, bits });
    }
    if h.e_machine != host_machine() {
        return Err(Unconfinable::WrongMachine {
            program,
            machine: h.e_machine,
        });
    }
    let unreadable = |e: String| Unconfinable::Unreadable {
        program: program.clone(),
        error: e,
    };
    let endian = h.endianness().map_err(|e| unreadable(e.to_string()))?;
    let ctx = Ctx::new(Container::Big, endian);
    let ph_len = usize::from(h.e_phnum) * ProgramHeader::size(ctx);
    let table = bytes_at(file, head, h.e_phoff, ph_len).map_err(|e| unreadable(e.to_string()))?;
    let phs = ProgramHeader::parse(&table, 0, usize::from(h.e_phnum), ctx)
        .map_err(|e| unreadable(e.to_string()))?;

    let Some(interp) = phs.iter().find(|ph| ph.p_type == PT_INTERP) else {
        if is_host_loader(&program) {
            // The loader run as a program (`ld.so prog`) honours LD_PRELOAD itself.
            return Ok(());
        }
        return Err(if phs.iter().any(|ph| ph.p_type == PT_DYNAMIC) {
            Unconfinable::StaticPie { program }
        } else {
            Unconfinable::Static { program }
        });
    };
    let len = usize::try_from(interp.p_filesz)
        .unwrap_or(usize::MAX)
        .min(4096);
    let raw = bytes_at(file, head, interp.p_offset, len).map_err(|e| unreadable(e.to_string()))?;
    let raw = raw.split(|b| *b == 0).next().unwrap_or_default();
    let interpreter = PathBuf::from(OsStr::from_bytes(raw));
    let glibc = interpreter
        .file_name()
        .is_some_and(|n| n.as_bytes().starts_with(b"ld-linux"));
    if glibc {
        Ok(())
    } else {
        Err(Unconfinable::ForeignLoader {
            program,
            interpreter,
        })
    }
}

/// Whether `program` is the host's glibc loader itself.
fn is_host_loader(program: &Path) -> bool {
    fs::canonicalize(host_loader()).is_ok_and(|l| l == program)
}

/// `len` bytes at `offset`: from `head` when they lie within it, else read from `file`.
fn bytes_at(file: &File, head: &[u8], offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    if let Some(slice) = start.checked_add(len).and_then(|end| head.get(start..end)) {
        return Ok(slice.to_vec());
    }
    if len > 1 << 20 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "program header table too large",
        ));
    }
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_native_programs_without_a_glibc_loader_count_as_static() {
        let p = || PathBuf::from("/x");
        assert!(native_without_preload(&Unconfinable::Static {
            program: p()
        }));
        assert!(native_without_preload(&Unconfinable::StaticPie {
            program: p()
        }));
        let script = Unconfinable::ScriptInterpreter {
            script: p(),
            interpreter: p(),
            reason: Box::new(Unconfinable::Static { program: p() }),
        };
        assert!(native_without_preload(&script));
        let m32 = Unconfinable::WrongClass {
            program: p(),
            bits: 32,
        };
        assert!(!native_without_preload(&m32));
        assert!(!native_without_preload(&Unconfinable::NotFound {
            program: p()
        }));
        // This test machine's /bin/sh is dash, linked against glibc.
        assert!(!static_system());
    }

    #[test]
    fn shell_is_confinable() {
        let v = classify_with_path(Path::new("sh"), Some("/usr/bin:/bin"));
        assert_eq!(v.preload, Ok(()), "{v:?}");
        assert!(v.program.is_absolute());
    }

    #[test]
    fn host_loader_is_confinable() {
        let v = classify(Path::new(host_loader()));
        assert_eq!(v.preload, Ok(()), "{v:?}");
    }

    #[test]
    fn resolve_statuses() {
        assert_eq!(
            resolve("no-such-command-xyz", Some("/usr/bin"))
                .unwrap_err()
                .exit_status(),
            127
        );
        assert_eq!(resolve("/etc/passwd", None).unwrap_err().exit_status(), 126);
        assert_eq!(resolve("/", None).unwrap_err().exit_status(), 126);
        assert!(resolve("ls", Some("/nonexistent:/usr/bin:/bin"))
            .unwrap()
            .is_absolute());
    }

    #[test]
    fn display_names_program_and_reason() {
        let r = Unconfinable::Static {
            program: "/tmp/x".into(),
        };
        assert_eq!(
            r.to_string(),
            "/tmp/x is statically linked: LD_PRELOAD cannot enter it"
        );
        let s = Unconfinable::ScriptInterpreter {
            script: "/tmp/s".into(),
            interpreter: "/tmp/x".into(),
            reason: Box::new(r),
        };
        assert_eq!(
            s.to_string(),
            "/tmp/s is a script run by /tmp/x, which is statically linked: LD_PRELOAD cannot enter it"
        );
    }

    #[test]
    fn shared_library_is_not_a_program() {
        // libc.so.6 has PT_INTERP (it is executable); the embedded preload has none.
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("lib.so");
        fs::write(&lib, crate::embedded::LIBSANDBOX).unwrap();
        fs::set_permissions(&lib, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let v = classify(&lib);
        assert!(
            matches!(v.preload, Err(Unconfinable::StaticPie { .. })),
            "{v:?}"
        );
    }
}
