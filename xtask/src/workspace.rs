//! Where the workspace is, and writing its generated documents: the leaf the xtask commands
//! share.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Writes `text` to `path` relative to the workspace root.
pub fn write_doc(path: &Path, text: &str) -> Result<()> {
    let full = root().join(path);
    std::fs::write(&full, text).with_context(|| format!("writing {}", full.display()))
}
