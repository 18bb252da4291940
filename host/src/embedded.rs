//! The `libsandbox.so` built from this workspace, embedded at compile time by `build.rs`.

/// The bytes of the preload library.
pub static LIBSANDBOX: &[u8] = &[];
