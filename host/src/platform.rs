//! Platform checks: can this machine run the sandbox at all?

/// Why the sandbox is unavailable on this machine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// Placeholder until platform checks land.
    #[error("platform checks are not implemented")]
    Unknown,
}

/// Checks once per process: Linux, x86_64/aarch64, glibc present, seccomp filters usable.
pub fn check() -> Result<(), Unavailable> {
    Ok(())
}
