//! Names the credential reads the Landlock layer refused, so that a failed `cat ~/.aws/...`
//! does not end with only the program's own "Permission denied".
//!
//! Landlock refuses an open with `EACCES` and tells no one else (its audit records need the
//! audit subsystem and privileges). What the sandbox can see is the program's standard error:
//! a line that says "Permission denied" and holds the absolute path of an existing entry of the
//! credential list (or a path beneath one) names that entry. A program that says nothing, or
//! names the file by a relative path, gets no line: the list is still enforced.

use crate::credentials::{self, Context, Entry};
use std::path::Path;

/// Most lines added per run: the first entries named are enough to say why.
const MAX_LINES: usize = 4;

/// How a program writes `EACCES` (glibc's and Python's text; coreutils, git, curl, ...).
const DENIED: &str = "Permission denied";

/// The refusal lines for the credential paths `stderr` reports as denied, one per entry;
/// `absent`: the deny paths that did not exist (nothing was refused there); `off`: how the
/// caller turns the Landlock layer off (`--landlock off`, `landlock "off"`).
pub(super) fn refusals(stderr: &str, absent: &[std::path::PathBuf], off: &str) -> Vec<String> {
    if !stderr.contains(DENIED) {
        return Vec::new();
    }
    refusals_for(&Context::current(), stderr, absent, off)
}

/// [`refusals`] for the credential list resolved with `ctx`.
fn refusals_for(
    ctx: &Context,
    stderr: &str,
    absent: &[std::path::PathBuf],
    off: &str,
) -> Vec<String> {
    let denied: Vec<(&'static Entry, std::path::PathBuf)> = credentials::list()
        .iter()
        .flat_map(|e| {
            credentials::resolve(e, ctx)
                .into_iter()
                .map(move |p| (e, p))
        })
        .filter(|(_, p)| !absent.contains(p))
        .collect();
    let mut named: Vec<&'static Entry> = Vec::new();
    let mut out = Vec::new();
    for line in stderr.lines().filter(|l| l.contains(DENIED)) {
        for (entry, path) in &denied {
            let Some(found) = mention(line, path) else {
                continue;
            };
            if named.iter().any(|n| std::ptr::eq(*n, *entry)) || out.len() >= MAX_LINES {
                continue;
            }
            named.push(entry);
            out.push(format!(
                "sandbox: refused: reading {found}: {} is on the credential list ({}: {}; \
                 `sandbox profiles credentials` lists them); only {off} lifts the list, with \
                 the whole Landlock layer",
                path.display(),
                entry.kind,
                entry.reason
            ));
        }
    }
    out
}

/// The path in `line` that is `path` or lies beneath it, as written there.
fn mention<'l>(line: &'l str, path: &Path) -> Option<&'l str> {
    let needle = path.to_str()?;
    let mut from = 0;
    while let Some(i) = line[from..].find(needle) {
        let start = from + i;
        let after = &line[start + needle.len()..];
        // A whole component: `/h/.aws` must not match `/h/.awsx`.
        if after.is_empty() || after.starts_with(['/', ':', '\'', '"', ' ', ')', '`', ',']) {
            let len = after
                .find([':', '\'', '"', ' ', ')', '`', ','])
                .unwrap_or(after.len());
            return Some(&line[start..start + needle.len() + len]);
        }
        from = start + needle.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{mention, refusals_for};
    use crate::credentials::Context;
    use std::path::{Path, PathBuf};

    fn ctx() -> Context {
        Context {
            home: Some("/h".into()),
            runtime_dir: None,
            root: false,
        }
    }

    #[test]
    fn one_line_per_entry_for_denied_credential_paths_only() {
        let err = "cat: /h/.aws/credentials: Permission denied\n\
                   cat: /h/.aws/config: Permission denied\n\
                   cat: /h/notes: Permission denied\n\
                   cat: /h/.kube/config: No such file or directory\n";
        let lines = refusals_for(&ctx(), err, &[], "--landlock off");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("sandbox: refused: reading /h/.aws/credentials: /h/.aws is on the credential list (cloud: "),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with("only --landlock off lifts the list, with the whole Landlock layer")
        );
        // An absent deny path protected nothing: nothing was refused there.
        let absent = [PathBuf::from("/h/.aws")];
        assert!(refusals_for(&ctx(), err, &absent, "x").is_empty());
        // At most four lines, whatever the program printed.
        let many: String = [
            ".aws/a",
            ".kube/a",
            ".docker/a",
            ".ssh/a",
            ".gnupg/a",
            ".netrc",
        ]
        .iter()
        .map(|p| format!("cat: /h/{p}: Permission denied\n"))
        .collect();
        assert_eq!(refusals_for(&ctx(), &many, &[], "x").len(), 4);
    }

    #[test]
    fn a_path_is_found_whole_and_with_what_lies_beneath() {
        let p = Path::new("/h/.aws");
        assert_eq!(
            mention("cat: /h/.aws/credentials: Permission denied", p),
            Some("/h/.aws/credentials")
        );
        assert_eq!(
            mention("open '/h/.aws': Permission denied", p),
            Some("/h/.aws")
        );
        assert_eq!(mention("cat: /h/.awsx: Permission denied", p), None);
        assert_eq!(mention("cat: /h/.awsx /h/.aws/c", p), Some("/h/.aws/c"));
    }
}
