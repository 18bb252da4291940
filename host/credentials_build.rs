//! Turns `profiles/credentials.toml` into a Rust table at build time, so a run does not parse
//! TOML to find the paths it must deny (parsing the list was about a tenth of the `sandbox`
//! process's own CPU time per one-shot run). The build copies the text as it is: checking it
//! stays with `credentials::parse`, whose unit test also asserts that the table and the parsed
//! text agree, entry for entry.

use std::fmt::Write as _;
use std::path::Path;

/// Writes `credentials_table.rs` into `out_dir`: `static TABLE: &[(kind, path, reason,
/// root_only)]` in the order of the file.
pub fn generate(list: &Path, out_dir: &Path) {
    let text =
        std::fs::read_to_string(list).unwrap_or_else(|e| panic!("reading {}: {e}", list.display()));
    // A list that does not parse here gives an empty table; the unit test comparing the table
    // with `credentials::parse` then names the fault, with the checks' own words.
    let doc: toml::Value = text
        .parse()
        .unwrap_or(toml::Value::Table(Default::default()));
    let mut out = String::from(
        "/// `profiles/credentials.toml` as (kind, path, reason, root_only), made by build.rs.\n\
         pub(crate) static TABLE: &[(&str, &str, &str, bool)] = &[\n",
    );
    let kinds = doc.get("kind").and_then(|k| k.as_array()).cloned();
    for kind in kinds.unwrap_or_default() {
        let name = kind
            .get("name")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        let root_only = kind
            .get("root_only")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let entries = kind.get("entries").and_then(|v| v.as_array()).cloned();
        for entry in entries.unwrap_or_default() {
            let path = entry
                .get("path")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            let reason = entry
                .get("reason")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            // `{:?}` of a str is a valid Rust string literal.
            let _ = writeln!(out, "    ({name:?}, {path:?}, {reason:?}, {root_only}),");
        }
    }
    out.push_str("];\n");
    let dest = out_dir.join("credentials_table.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
}
