//! The credential list: files and directories that no confined command may read, kept as data
//! in `profiles/credentials.toml` (embedded at build time) and resolved here for the caller.
//!
//! Every user of the list goes through [`deny_read`]: the Landlock layer of each runner and of
//! the preload route (`sandbox env`), the choice of a private `/tmp`, the broad-workspace check
//! (through `landlock::default_deny_read`) and `sandbox profiles credentials`. [`covering`] says which entry denies a path, for refusal messages.
//!
//! The file's grammar is in its header comment. Entries are checked by [`parse`]: a path that
//! is relative without `~/`, has an empty, `.` or `..` component, holds NUL or a newline, or has
//! `*` outside its last component is an error, so a bad entry cannot silently widen or empty
//! the list (a unit test parses the embedded file).

use serde::Deserialize;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The embedded list, as written.
pub const TEXT: &str = include_str!("../../profiles/credentials.toml");

/// Prefix of an entry beneath the caller's home directory.
const HOME_PREFIX: &str = "~/";
/// Prefix of an entry beneath the caller's `XDG_RUNTIME_DIR`.
const RUNTIME_PREFIX: &str = "$XDG_RUNTIME_DIR/";

/// One entry of the list: a path as written, the kind of store it belongs to and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The kind (`agent`, `cloud`, ...), from the `[[kind]]` table it is in.
    pub kind: String,
    /// The path as written: `~/REL`, `$XDG_RUNTIME_DIR/REL` or `/ABS`, `*` allowed in the
    /// last component.
    pub path: String,
    /// What the path holds, in words.
    pub reason: String,
    /// Whether the entry applies only to a caller whose effective uid is 0.
    pub root_only: bool,
}

/// Why the list's text was rejected; names the entry at fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialsError {
    /// The text is not TOML of the expected shape.
    #[error("profiles/credentials.toml: {0}")]
    Syntax(String),
    /// An entry or kind is not acceptable.
    #[error("profiles/credentials.toml: {what:?}: {why}")]
    Entry {
        /// The path (or kind name) at fault.
        what: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    kind: Vec<KindFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KindFile {
    name: String,
    doc: String,
    #[serde(default)]
    root_only: bool,
    entries: Vec<EntryFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    path: String,
    reason: String,
}

fn bad(what: &str, why: &'static str) -> CredentialsError {
    CredentialsError::Entry {
        what: what.to_owned(),
        why,
    }
}

/// Text fields must be non-empty, one line, without NUL.
fn check_words(what: &str, text: &str) -> Result<(), CredentialsError> {
    if text.trim().is_empty() {
        return Err(bad(what, "is empty"));
    }
    if text.contains(['\0', '\n', '\r']) {
        return Err(bad(what, "contains a NUL byte or a line break"));
    }
    Ok(())
}

/// Checks one path as written (grammar in `profiles/credentials.toml`).
fn check_path(path: &str) -> Result<(), CredentialsError> {
    check_words(path, path)?;
    let rest = path
        .strip_prefix(HOME_PREFIX)
        .or_else(|| path.strip_prefix(RUNTIME_PREFIX))
        .or_else(|| path.strip_prefix('/'))
        .ok_or_else(|| bad(path, "must start with ~/, $XDG_RUNTIME_DIR/ or /"))?;
    let parts: Vec<&str> = rest.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        match *part {
            "" => return Err(bad(path, "has an empty component")),
            "." | ".." => return Err(bad(path, "has a . or .. component")),
            p if p.contains('*') && i + 1 != parts.len() => {
                return Err(bad(path, "has * outside its last component"))
            }
            p if p.contains(['?', '[', ']', '{', '}', '\\']) => {
                return Err(bad(path, "has a pattern character other than *"))
            }
            _ => {}
        }
    }
    if parts.last().is_some_and(|p| p.chars().all(|c| c == '*')) {
        return Err(bad(path, "has a last component that matches every entry"));
    }
    Ok(())
}

/// Parses and checks a credential list (the embedded one is [`TEXT`]).
pub fn parse(text: &str) -> Result<Vec<Entry>, CredentialsError> {
    let file: File = toml::from_str(text).map_err(|e| CredentialsError::Syntax(e.to_string()))?;
    let mut seen = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    let mut out = Vec::new();
    for kind in file.kind {
        check_words(&kind.name, &kind.name)?;
        check_words(&kind.name, &kind.doc)?;
        if !kinds.insert(kind.name.clone()) {
            return Err(bad(&kind.name, "is a kind named twice"));
        }
        if kind.entries.is_empty() {
            return Err(bad(&kind.name, "is a kind without entries"));
        }
        for e in kind.entries {
            check_path(&e.path)?;
            check_words(&e.path, &e.reason)?;
            if !seen.insert(e.path.clone()) {
                return Err(bad(&e.path, "is listed twice"));
            }
            out.push(Entry {
                kind: kind.name.clone(),
                path: e.path,
                reason: e.reason,
                root_only: kind.root_only,
            });
        }
    }
    Ok(out)
}

include!(concat!(env!("OUT_DIR"), "/credentials_table.rs"));

/// The embedded list, from the table build.rs made of [`TEXT`] (no TOML parsed at run time).
/// A unit test checks that [`parse`] accepts the text and gives the same entries.
pub fn list() -> &'static [Entry] {
    static LIST: OnceLock<Vec<Entry>> = OnceLock::new();
    LIST.get_or_init(|| {
        TABLE
            .iter()
            .map(|&(kind, path, reason, root_only)| Entry {
                kind: kind.to_owned(),
                path: path.to_owned(),
                reason: reason.to_owned(),
                root_only,
            })
            .collect()
    })
}

/// Whose list is resolved: the caller's home, runtime directory and whether it is root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// `HOME` (only when absolute): `~/` entries are skipped without it.
    pub home: Option<PathBuf>,
    /// `XDG_RUNTIME_DIR` (only when absolute): `$XDG_RUNTIME_DIR/` entries are skipped without.
    pub runtime_dir: Option<PathBuf>,
    /// Whether the effective uid is 0 (entries of `root_only` kinds apply).
    pub root: bool,
}

impl Context {
    /// This process's context: its `HOME` and `XDG_RUNTIME_DIR` (the host's, not a child's
    /// `HOME=/tmp`) and its effective uid.
    pub fn current() -> Context {
        let abs = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        Context {
            home: abs("HOME"),
            runtime_dir: abs("XDG_RUNTIME_DIR"),
            root: crate::sys::euid() == 0,
        }
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of bytes.
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.iter().position(|b| *b == b'*') {
        None => pattern == name,
        Some(star) => {
            let (head, tail) = (&pattern[..star], &pattern[star + 1..]);
            name.starts_with(head) && (head.len()..=name.len()).any(|i| matches(tail, &name[i..]))
        }
    }
}

/// The path an entry names for `ctx`, before any `*` is expanded (`None`: it does not apply).
fn base(entry: &Entry, ctx: &Context) -> Option<PathBuf> {
    if entry.root_only && !ctx.root {
        return None;
    }
    if let Some(rel) = entry.path.strip_prefix(HOME_PREFIX) {
        return ctx.home.as_ref().map(|h| h.join(rel));
    }
    if let Some(rel) = entry.path.strip_prefix(RUNTIME_PREFIX) {
        return ctx.runtime_dir.as_ref().map(|d| d.join(rel));
    }
    Some(PathBuf::from(&entry.path))
}

/// The paths `entry` names for `ctx`: none when it does not apply; a `*` in the last component
/// is matched against the directory's entries now. A directory that exists but cannot be
/// listed is denied whole (fail closed: its matching entries cannot be told apart).
pub fn resolve(entry: &Entry, ctx: &Context) -> Vec<PathBuf> {
    let Some(path) = base(entry, ctx) else {
        return Vec::new();
    };
    let name = path.file_name().map_or(&[][..], OsStr::as_bytes);
    if !name.contains(&b'*') {
        return vec![path];
    }
    let Some(dir) = path.parent() else {
        return Vec::new();
    };
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.file_name())
                .filter(|n| matches(name, n.as_bytes()))
                .map(|n| dir.join(n))
                .collect();
            found.sort();
            found
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(_) => vec![dir.to_path_buf()],
    }
}

/// The paths a confined command must not read, for `ctx`: every entry of the list resolved,
/// in the file's order. The one source of the default deny list.
pub fn deny_read(ctx: &Context) -> Vec<PathBuf> {
    list().iter().flat_map(|e| resolve(e, ctx)).collect()
}

/// The entry that denies `path` for `ctx` (the path itself or a directory above it), for
/// messages that name why a read was refused.
pub fn covering(path: &Path, ctx: &Context) -> Option<&'static Entry> {
    list()
        .iter()
        .find(|e| resolve(e, ctx).iter().any(|p| path.starts_with(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list with one entry; the path is quoted the JSON way (`\u0000`), which TOML reads.
    fn one(path: &str) -> String {
        let quoted = serde_json::to_string(path).unwrap();
        format!("[[kind]]\nname = \"k\"\ndoc = \"d\"\nentries = [{{ path = {quoted}, reason = \"r\" }}]\n")
    }

    fn ctx(home: &str) -> Context {
        Context {
            home: Some(home.into()),
            runtime_dir: Some("/run/user/7".into()),
            root: false,
        }
    }

    #[test]
    fn the_embedded_list_parses_and_covers_the_reviewed_stores() {
        let list = parse(TEXT).unwrap();
        assert!(list.len() > 50, "{}", list.len());
        // The table build.rs made is the text, entry for entry.
        assert_eq!(list, super::list());
        let paths = deny_read(&ctx("/h"));
        for p in [
            "/h/.claude/.credentials.json",
            "/h/.cargo/credentials.toml",
            "/h/.aws",
            "/h/.docker",
            "/h/.kube",
            "/h/.ssh",
            "/run/user/7/containers/auth.json",
        ] {
            assert!(paths.contains(&PathBuf::from(p)), "{p} missing");
        }
        // Plain settings beside the secrets stay readable.
        assert!(!paths.iter().any(|p| p == Path::new("/h/.cargo")));
        assert!(!paths.iter().any(|p| p.starts_with("/etc")));
    }

    #[test]
    fn the_paths_listed_before_the_list_became_data_are_all_still_denied() {
        let paths = deny_read(&ctx("/h"));
        for rel in [
            ".ssh",
            ".gnupg",
            ".aws",
            ".azure",
            ".config/gcloud",
            ".kube",
            ".docker",
            ".netrc",
            ".git-credentials",
            ".npmrc",
            ".pypirc",
            ".password-store",
            ".local/share/keyrings",
            ".config/gh",
        ] {
            assert!(paths.contains(&Path::new("/h").join(rel)), "{rel}");
        }
    }

    #[test]
    fn root_only_entries_apply_to_root_alone() {
        let mut c = ctx("/root");
        assert!(!deny_read(&c).contains(&PathBuf::from("/etc/shadow")));
        c.root = true;
        let paths = deny_read(&c);
        assert!(paths.contains(&PathBuf::from("/etc/shadow")));
        assert!(paths.contains(&PathBuf::from("/etc/gshadow")));
        assert!(paths.contains(&PathBuf::from("/root/.ssh")));
    }

    #[test]
    fn missing_home_and_runtime_dir_skip_their_entries() {
        let c = Context {
            home: None,
            runtime_dir: None,
            root: false,
        };
        assert!(deny_read(&c).is_empty());
    }

    #[test]
    fn hostile_entries_are_rejected() {
        for (path, why) in [
            ("~/../etc/passwd", "has a . or .. component"),
            ("~/.ssh/../..", "has a . or .. component"),
            ("/etc/./shadow", "has a . or .. component"),
            ("", "is empty"),
            ("   ", "is empty"),
            ("~/", "has an empty component"),
            ("/", "has an empty component"),
            ("~/a//b", "has an empty component"),
            ("~/.ssh/", "has an empty component"),
            ("~/a\0b", "contains a NUL byte or a line break"),
            ("~/a\nb", "contains a NUL byte or a line break"),
            (".ssh", "must start with ~/, $XDG_RUNTIME_DIR/ or /"),
            ("~user/.ssh", "must start with ~/, $XDG_RUNTIME_DIR/ or /"),
            ("$HOME/.ssh", "must start with ~/, $XDG_RUNTIME_DIR/ or /"),
            ("/etc/*/shadow", "has * outside its last component"),
            (
                "/etc/ssh/*",
                "has a last component that matches every entry",
            ),
            ("/etc/ssh/key?", "has a pattern character other than *"),
        ] {
            let err = parse(&one(path)).unwrap_err();
            assert_eq!(
                err,
                CredentialsError::Entry {
                    what: path.to_owned(),
                    why
                },
                "{path:?}"
            );
        }
    }

    #[test]
    fn bad_shapes_are_rejected() {
        let twice = "[[kind]]\nname = \"k\"\ndoc = \"d\"\nentries = [{ path = \"~/a\", reason = \"r\" }, { path = \"~/a\", reason = \"s\" }]\n";
        assert!(matches!(
            parse(twice),
            Err(CredentialsError::Entry {
                why: "is listed twice",
                ..
            })
        ));
        let no_reason =
            "[[kind]]\nname = \"k\"\ndoc = \"d\"\nentries = [{ path = \"~/a\", reason = \"\" }]\n";
        assert!(matches!(
            parse(no_reason),
            Err(CredentialsError::Entry {
                why: "is empty",
                ..
            })
        ));
        let empty = "[[kind]]\nname = \"k\"\ndoc = \"d\"\nentries = []\n";
        assert!(matches!(
            parse(empty),
            Err(CredentialsError::Entry {
                why: "is a kind without entries",
                ..
            })
        ));
        let unknown = "[[kind]]\nname = \"k\"\ndoc = \"d\"\nroot = true\nentries = [{ path = \"~/a\", reason = \"r\" }]\n";
        assert!(matches!(parse(unknown), Err(CredentialsError::Syntax(_))));
        assert!(matches!(
            parse("kind = 1"),
            Err(CredentialsError::Syntax(_))
        ));
        let nameless =
            "[[kind]]\nname = \"\"\ndoc = \"d\"\nentries = [{ path = \"~/a\", reason = \"r\" }]\n";
        assert!(matches!(
            parse(nameless),
            Err(CredentialsError::Entry {
                why: "is empty",
                ..
            })
        ));
        let two_line_doc = "[[kind]]\nname = \"k\"\ndoc = \"d\\ne\"\nentries = [{ path = \"~/a\", reason = \"r\" }]\n";
        assert!(matches!(
            parse(two_line_doc),
            Err(CredentialsError::Entry {
                why: "contains a NUL byte or a line break",
                ..
            })
        ));
        let kind_twice = format!("{}{}", one("~/a"), one("~/b"));
        assert!(matches!(
            parse(&kind_twice),
            Err(CredentialsError::Entry {
                why: "is a kind named twice",
                ..
            })
        ));
        assert!(parse(&one("~/.config/a b/c")).is_ok());
    }

    #[test]
    fn a_star_in_the_last_component_matches_the_directory_entries() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            "ssh_host_rsa_key",
            "ssh_host_rsa_key.pub",
            "ssh_host_ed25519_key",
            "moduli",
        ] {
            std::fs::write(dir.path().join(n), "x").unwrap();
        }
        let entry = Entry {
            kind: "k".into(),
            path: format!("{}/ssh_host_*_key", dir.path().display()),
            reason: "r".into(),
            root_only: false,
        };
        let c = ctx("/h");
        assert_eq!(
            resolve(&entry, &c),
            vec![
                dir.path().join("ssh_host_ed25519_key"),
                dir.path().join("ssh_host_rsa_key")
            ]
        );
        let absent = Entry {
            path: format!("{}/nowhere/ssh_host_*_key", dir.path().display()),
            ..entry
        };
        assert!(resolve(&absent, &c).is_empty());
        assert!(matches(b"a*", b"a"));
        assert!(matches(b"*b*c", b"xbyc"));
        assert!(!matches(b"*b*c", b"xbycd"));
    }

    #[test]
    fn covering_names_the_entry_above_a_path() {
        let c = ctx("/h");
        let e = covering(Path::new("/h/.aws/credentials"), &c).unwrap();
        assert_eq!((e.kind.as_str(), e.path.as_str()), ("cloud", "~/.aws"));
        assert!(covering(Path::new("/h/.cargo/config.toml"), &c).is_none());
        assert!(covering(Path::new("/h/.awsx"), &c).is_none());
    }
}
