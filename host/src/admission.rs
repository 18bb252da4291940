//! Admission control: can a preload confine this program?

use std::path::{Path, PathBuf};

/// Why a preload cannot confine a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unconfinable {
    /// Placeholder until admission lands.
    Unknown(String),
}

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

/// Classifies `program` (following `#!` interpreters).
pub fn classify(program: &Path) -> Verdict {
    Verdict {
        program: program.to_path_buf(),
        preload: Err(Unconfinable::Unknown("not implemented".into())),
        privileged: false,
    }
}
