//! The library's public surface and its list in docs/reference.md ("Library API") are the
//! same: an item made public (or hidden, or removed) without the list changing fails here,
//! naming it.
//!
//! The surface is read from the source of the crate root and of its public modules: every `pub`
//! item, module or re-export not marked `#[doc(hidden)]`.

use std::collections::BTreeSet;
use std::path::Path;

/// The public items declared in `file`, as paths under `prefix`.
fn surface(file: &Path, prefix: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = BTreeSet::new();
    for stmt in top_level(&text) {
        let mut s = stmt.trim();
        let mut hidden = false;
        while s.starts_with('#') {
            let end = closing(s, '[', ']').expect("a closed attribute");
            hidden |= s[..=end].replace(' ', "") == "#[doc(hidden)]";
            s = s[end + 1..].trim_start();
        }
        let Some(rest) = s.strip_prefix("pub ") else {
            continue;
        };
        if hidden {
            continue;
        }
        let rest = rest.trim_end_matches([';', '{']).trim();
        if let Some(u) = rest.strip_prefix("use ") {
            for name in use_names(u) {
                out.insert(format!("{prefix}::{name}"));
            }
        } else {
            let name: String = rest
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.insert(format!("{prefix}::{name}"));
        }
    }
    out
}

/// The statements of `text` outside any body, comments removed: each ends at its `;` or at
/// the `{` that opens its body (the braces of a `use` list are part of the statement).
fn top_level(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut depth = 0usize;
    let mut use_list = 0usize;
    for c in code.chars() {
        if depth > 0 {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            continue;
        }
        let in_use = buf.split_whitespace().any(|w| w == "use");
        match c {
            '{' if in_use => use_list += 1,
            '}' if use_list > 0 => use_list -= 1,
            '{' => {
                depth = 1;
                buf.push(c);
                out.push(std::mem::take(&mut buf));
                continue;
            }
            ';' if use_list == 0 => {
                buf.push(c);
                out.push(std::mem::take(&mut buf));
                continue;
            }
            _ => {}
        }
        buf.push(c);
    }
    out
}

/// The index of the bracket closing the one `s` starts with.
fn closing(s: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// The names a `use` brings in: the last segment, or the `as` name.
fn use_names(u: &str) -> Vec<String> {
    let u: String = u.split_whitespace().collect::<Vec<_>>().join(" ");
    let (head, list) = match u.find('{') {
        Some(i) => (&u[..i], u[i + 1..].trim_end_matches('}').to_string()),
        None => ("", u.clone()),
    };
    let _ = head;
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| match item.split_once(" as ") {
            Some((_, alias)) => alias.trim().to_string(),
            None => item.rsplit("::").next().unwrap().trim().to_string(),
        })
        .filter(|n| n != "self")
        .collect()
}

/// The paths docs/reference.md lists in its "Library API" section.
fn documented() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("docs/reference.md")).unwrap();
    let start = text
        .find("## 8. Library API")
        .expect("docs/reference.md has a section `## 8. Library API`");
    let section = &text[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    let mut out = BTreeSet::new();
    for line in section[..end].lines() {
        if let Some(rest) = line.strip_prefix("| `sandbox_host::") {
            let path = rest.split('`').next().unwrap();
            out.insert(format!("sandbox_host::{path}"));
        }
    }
    out
}

#[test]
fn reference_lists_exactly_the_public_items() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut public = surface(&src.join("lib.rs"), "sandbox_host");
    // The public modules' own items (one level: no public module has public submodules).
    for module in public.clone() {
        let name = module.trim_start_matches("sandbox_host::");
        let file = [format!("{name}.rs"), format!("{name}/mod.rs")]
            .into_iter()
            .map(|f| src.join(f))
            .find(|f| f.is_file());
        if let Some(file) = file {
            let items = surface(&file, &module);
            for item in &items {
                let sub = item.trim_start_matches(&format!("{module}::"));
                let nested = [format!("{name}/{sub}.rs"), format!("{name}/{sub}/mod.rs")];
                assert!(
                    !nested.iter().any(|f| src.join(f).is_file()),
                    "{item} is a public module inside a public module: extend this test"
                );
            }
            public.extend(items);
        }
    }
    let documented = documented();
    let undocumented: Vec<_> = public.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&public).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/reference.md section 8 is out of date: public but not listed {undocumented:?}; listed but not public {stale:?}"
    );
}

#[test]
fn the_surface_reader_sees_hidden_and_multi_line_items() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("lib.rs");
    std::fs::write(
        &f,
        "pub mod a;\n#[doc(hidden)]\npub mod b;\npub use x::{\n    C,\n    D as E,\n};\n\
         #[doc(hidden)]\npub use y::F;\npub fn g() -> u8 {\n    pub fn h() {}\n    1\n}\n\
         /// docs\npub const K: &[&str] = &[\n    \"v\",\n];\nmod private;\n",
    )
    .unwrap();
    let want: BTreeSet<String> = ["c::C", "c::E", "c::K", "c::a", "c::g"]
        .map(String::from)
        .into();
    assert_eq!(surface(&f, "c"), want);
}
