//! Writing the embedded preload to disk safely, once per process.

use std::path::{Path, PathBuf};

/// Why the preload cannot be provided at a usable path.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// Placeholder until extraction lands.
    #[error("extraction is not implemented")]
    Unimplemented,
}

/// Extracts the embedded library into the per-user directory (once per process) and returns
/// its path, verified and safe to put in `LD_PRELOAD`.
pub fn extracted() -> Result<PathBuf, ExtractError> {
    Err(ExtractError::Unimplemented)
}

/// Writes the embedded library to `dest` (for `sandbox extract --to`).
pub fn extract_to(_dest: &Path) -> Result<(), ExtractError> {
    Err(ExtractError::Unimplemented)
}

/// Checks an operator-given library path (`libsandboxPath`) and returns it.
pub fn explicit(path: &Path) -> Result<PathBuf, ExtractError> {
    let _ = path;
    Err(ExtractError::Unimplemented)
}
