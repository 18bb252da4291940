//! Embeds the syscall groups of `profiles/groups.toml` as static tables, so the preload can
//! expand `@group` entries with no file access and no allocation.

use serde::Deserialize;
use std::fmt::Write;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    group: Vec<Group>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    name: String,
    doc: String,
    syscalls: Vec<String>,
}

fn main() {
    // The manifest directory of this build, read when the script runs: `env!` would bake in
    // the directory the script was compiled in, and a target directory shared with (or moved
    // from) another checkout would then read that checkout's groups.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let path = std::path::Path::new(&dir).join("../profiles/groups.toml");
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(&path).expect("reading profiles/groups.toml");
    let file: File = toml::from_str(&text).expect("parsing profiles/groups.toml");
    let mut out = String::from("static GROUPS: &[Group] = &[\n");
    for g in &file.group {
        assert!(
            g.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "group name {:?}: lower-case letters, digits and '-' only",
            g.name
        );
        writeln!(
            out,
            "    Group {{ name: {:?}, doc: {:?}, entries: &[",
            g.name, g.doc
        )
        .unwrap();
        for s in &g.syscalls {
            writeln!(out, "        {s:?},").unwrap();
        }
        out.push_str("    ] },\n");
    }
    out.push_str("];\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("groups.rs");
    std::fs::write(dest, out).unwrap();
}
