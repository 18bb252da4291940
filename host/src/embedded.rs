//! The `libsandbox.so` built from this workspace, embedded at compile time by `build.rs`.

/// The bytes of the preload library.
pub static LIBSANDBOX: &[u8] = include_bytes!(env!("SANDBOX_PRELOAD_PATH"));

/// The SHA-256 of [`LIBSANDBOX`] as 64 lowercase hex digits, computed at build time.
pub const SHA256_HEX: &str = env!("SANDBOX_PRELOAD_SHA256");

#[cfg(test)]
mod tests {
    /// The embedded library is the one built under this build's own target directory (the
    /// one `CARGO_TARGET_DIR` names, when set), not under `<workspace>/target`.
    #[test]
    fn embedded_library_comes_from_this_target_directory() {
        // This test binary is `<target>[/<triple>]/<profile>/deps/<name>`.
        let exe = std::env::current_exe().unwrap();
        let profile = exe.parent().unwrap().parent().unwrap();
        let root = [
            profile.parent().unwrap(),
            profile.parent().unwrap().parent().unwrap(),
        ]
        .into_iter()
        .find(|dir| dir.join("preload-build").is_dir())
        .unwrap_or(profile.parent().unwrap());
        let built = root.join("preload-build/preload/libsandbox.so");
        let bytes = std::fs::read(&built)
            .unwrap_or_else(|e| panic!("{}: {e}: not built there", built.display()));
        assert!(
            bytes == super::LIBSANDBOX,
            "{} differs from the embedded library",
            built.display()
        );
    }
}
