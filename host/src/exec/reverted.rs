//! One item a guard undid after a job (modules `git_guard` and `control_guard`): what, where,
//! and the line that says it.

use serde::Serialize;
use std::path::PathBuf;

/// One thing the job left that was undone after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reverted {
    /// The file changed back (a configuration file, a hook, a redirection).
    pub path: PathBuf,
    /// What was undone: a configuration key (`core.fsmonitor`), `hook`, `commondir`,
    /// `gitdir`, `file` (a configuration file restored whole), `symlink` (a directory of
    /// control files made a symlink) or `control-file` (an agent's or editor's, module
    /// `control_guard`).
    pub what: String,
    /// `removed`, `restored`, or `failed` (it could not be undone: the warning says what to
    /// remove by hand).
    pub action: String,
    /// The line said in `warnings` and on stderr.
    #[serde(skip)]
    pub warning: String,
}
