//! The control-file list: files and directories of a workspace that make an agent, an editor
//! or a developer tool run commands when the user next starts it there (`.claude/`,
//! `.mcp.json`, `.vscode/tasks.json`, `.envrc`, ...), kept as data in
//! `profiles/control-files.toml` (embedded at build time). The job guard (module
//! `exec::control_guard`) undoes what a job changed of them; `sandbox profiles control-files`
//! prints the list.
//!
//! Entries are checked by [`parse`]: a path that is absolute, has an empty, `.` or `..`
//! component, or holds NUL or a newline is an error, so a bad entry cannot widen the guard to
//! a path outside the workspace (a unit test parses the embedded file).

use serde::Deserialize;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// The embedded list, as written.
pub const TEXT: &str = include_str!("../../profiles/control-files.toml");

/// One entry: a path relative to the workspace, the tool it belongs to and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The tool (`claude`, `vscode`, ...), from the `[[tool]]` table it is in.
    pub tool: String,
    /// The path relative to the workspace (`.claude`, `.vscode/tasks.json`).
    pub path: String,
    /// What running it does, in words.
    pub reason: String,
}

/// Why the list's text was rejected; names the entry at fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ControlFilesError {
    /// The text is not TOML of the expected shape.
    #[error("profiles/control-files.toml: {0}")]
    Syntax(String),
    /// An entry or tool is not acceptable.
    #[error("profiles/control-files.toml: {what:?}: {why}")]
    Entry {
        /// The path (or tool name) at fault.
        what: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tool: Vec<ToolFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFile {
    name: String,
    doc: String,
    entries: Vec<EntryFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    path: String,
    reason: String,
}

fn bad(what: &str, why: &'static str) -> ControlFilesError {
    ControlFilesError::Entry {
        what: what.to_owned(),
        why,
    }
}

/// Text fields must be non-empty, one line, without NUL.
fn check_words(what: &str, text: &str) -> Result<(), ControlFilesError> {
    if text.trim().is_empty() {
        return Err(bad(what, "is empty"));
    }
    if text.contains(['\0', '\n', '\r']) {
        return Err(bad(what, "contains a NUL byte or a line break"));
    }
    Ok(())
}

/// Checks a relative path as written: what names an entry of the list, and what a request's
/// `allow_control_files` names.
pub fn check_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() || path.contains(['\0', '\n', '\r']) {
        return Err("is empty or contains a NUL byte or a line break");
    }
    if path.starts_with('/') {
        return Err("must be relative to the workspace");
    }
    for part in path.split('/') {
        match part {
            "" => return Err("has an empty component"),
            "." | ".." => return Err("has a . or .. component"),
            _ => {}
        }
    }
    Ok(())
}

/// Parses and checks a control-file list (the embedded one is [`TEXT`]).
pub fn parse(text: &str) -> Result<Vec<Entry>, ControlFilesError> {
    let file: File = toml::from_str(text).map_err(|e| ControlFilesError::Syntax(e.to_string()))?;
    let mut seen = BTreeSet::new();
    let mut tools = BTreeSet::new();
    let mut out = Vec::new();
    for tool in file.tool {
        check_words(&tool.name, &tool.name)?;
        check_words(&tool.name, &tool.doc)?;
        if !tools.insert(tool.name.clone()) {
            return Err(bad(&tool.name, "is a tool named twice"));
        }
        if tool.entries.is_empty() {
            return Err(bad(&tool.name, "is a tool without entries"));
        }
        for e in tool.entries {
            check_path(&e.path).map_err(|why| bad(&e.path, why))?;
            check_words(&e.path, &e.reason)?;
            if !seen.insert(e.path.clone()) {
                return Err(bad(&e.path, "is listed twice"));
            }
            out.push(Entry {
                tool: tool.name.clone(),
                path: e.path,
                reason: e.reason,
            });
        }
    }
    // An entry beneath another (`.vscode` and `.vscode/tasks.json`) would be guarded twice.
    for e in &out {
        if out
            .iter()
            .any(|o| o.path != e.path && e.path.starts_with(&format!("{}/", o.path)))
        {
            return Err(bad(&e.path, "lies beneath another entry"));
        }
    }
    Ok(out)
}

/// The embedded list (parsed once; a unit test keeps it valid).
pub fn all() -> &'static [Entry] {
    static LIST: OnceLock<Vec<Entry>> = OnceLock::new();
    LIST.get_or_init(|| parse(TEXT).unwrap_or_default())
}

/// Whether `path` (relative) is an entry of the list, or lies beneath one: what a request may
/// allow.
pub fn covers(path: &str) -> bool {
    all()
        .iter()
        .any(|e| e.path == path || path.starts_with(&format!("{}/", e.path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_list_parses_and_names_the_issue_s_files() {
        let list = parse(TEXT).unwrap();
        for p in [
            ".claude",
            ".codex",
            ".agents",
            ".cursor",
            ".gemini",
            ".mcp.json",
            ".vscode/tasks.json",
            ".vscode/settings.json",
            ".idea",
            ".envrc",
            ".devcontainer",
        ] {
            assert!(list.iter().any(|e| e.path == p), "{p}");
        }
        assert!(covers(".claude/settings.json") && !covers(".claudex") && !covers("src"));
    }

    #[test]
    fn hostile_entries_are_refused_naming_them() {
        let entry = |p: &str| {
            format!(
                "[[tool]]\nname = \"t\"\ndoc = \"d\"\nentries = [{{ path = {p:?}, reason = \"r\" }}]\n"
            )
        };
        for (p, why) in [
            ("/etc/passwd", "relative"),
            ("../x", ". or .."),
            ("a//b", "empty component"),
            ("a/./b", ". or .."),
            ("", "empty"),
            ("a\nb", "line break"),
        ] {
            let e = parse(&entry(p)).unwrap_err().to_string();
            assert!(e.contains(why), "{p:?}: {e}");
        }
        let twice = format!("{}{}", entry(".x"), entry(".x").replace("\"t\"", "\"u\""));
        assert!(parse(&twice).unwrap_err().to_string().contains("twice"));
        let nested = "[[tool]]\nname = \"t\"\ndoc = \"d\"\nentries = [{ path = \".v\", reason = \"r\" }, { path = \".v/t\", reason = \"r\" }]\n";
        assert!(parse(nested).unwrap_err().to_string().contains("beneath"));
        assert!(parse("[[tool]]\nname = \"t\"\n").is_err());
    }
}
