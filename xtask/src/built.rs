//! What a build of the shipped `sandbox` binary produced: shared by the bundle (`dist`) and the
//! packages made from the same binary (`dist_wheel`, `dist_npm`), which `dist` calls.

use std::path::PathBuf;

/// A built `sandbox` binary and what it was built for.
pub struct Built {
    /// Where cargo left it.
    pub path: PathBuf,
    /// The target triple it was built for.
    pub triple: String,
    /// True when it is the fully static musl build; false for the host's default build.
    pub fully_static: bool,
}
