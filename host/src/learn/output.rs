//! Where the learned profile goes: a file written atomically (checked before the command
//! runs, so a bad `--out` changes nothing), or standard output with the command's own output
//! moved to standard error.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The `--out` file: a temporary file beside it, renamed over it once the profile is known.
#[derive(Debug)]
pub struct OutFile {
    path: PathBuf,
    temp: std::cell::RefCell<Option<tempfile::NamedTempFile>>,
}

impl OutFile {
    /// Checks that `path` can be written (not a directory; its directory exists and is
    /// writable) by creating the temporary file now.
    pub fn check(path: &Path) -> std::io::Result<OutFile> {
        if path.as_os_str().is_empty() {
            return Err(std::io::Error::other("empty path"));
        }
        if path.is_dir() {
            return Err(std::io::Error::other("is a directory"));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let temp = tempfile::Builder::new()
            .prefix(".sandbox-learn-")
            .tempfile_in(dir)?;
        Ok(OutFile {
            path: path.to_path_buf(),
            temp: std::cell::RefCell::new(Some(temp)),
        })
    }

    /// The path given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` and puts it in place (mode 0644 less the umask, like a new file).
    pub fn write(&self, text: &str) -> std::io::Result<()> {
        let mut temp = self
            .temp
            .borrow_mut()
            .take()
            .ok_or_else(|| std::io::Error::other("already written"))?;
        temp.write_all(text.as_bytes())?;
        temp.as_file().sync_all()?;
        let mask = { crate::sys::current_umask() };
        use std::os::unix::fs::PermissionsExt;
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o666 & !mask))?;
        temp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Points descriptor 1 at standard error and returns the original standard output.
pub fn stdout_to_stderr() -> std::io::Result<std::fs::File> {
    crate::sys::stdout_to_stderr().map(std::fs::File::from)
}
