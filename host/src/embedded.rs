//! The `libsandbox.so` built from this workspace, embedded at compile time by `build.rs`.

/// The bytes of the preload library.
pub static LIBSANDBOX: &[u8] = include_bytes!(env!("SANDBOX_PRELOAD_PATH"));

/// The SHA-256 of [`LIBSANDBOX`] as 64 lowercase hex digits, computed at build time.
pub const SHA256_HEX: &str = env!("SANDBOX_PRELOAD_SHA256");
