//! The module tree of a crate, read from its source files, and which module uses which: the
//! input of the import-cycle check.
//!
//! Modules are found from the crate root by following `mod name;` declarations (`#[path]`
//! included). A module depends on another when it names it or one of its items through a path:
//! `use crate::a::b`, `super::x`, `self::c::y`, `child::z` or a `crate::a::f()` in code. A path
//! counts for the longest module prefix it names, so `use super::Item` is a dependency of the
//! child on its parent, and naming an item that a facade re-exports is a dependency on the
//! facade. Inline modules belong to their file; `#[cfg(test)]` modules are left out (tests may
//! use anything).

use crate::rust_tokens::{tokenize, Tok};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside its crate, e.g. `["exec", "spawn"]`; empty for the crate root.
pub type ModPath = Vec<String>;

/// The modules of one crate and the dependencies between them.
#[derive(Debug, Default)]
pub struct ModuleGraph {
    /// Every module with the file that holds it.
    pub files: BTreeMap<ModPath, PathBuf>,
    /// For each module, the other modules it uses.
    pub uses: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

/// Renders a module path the way Rust writes it (`crate` for the root).
pub fn display(path: &ModPath) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        path.join("::")
    }
}

impl ModuleGraph {
    /// Reads the crate whose root file (`lib.rs`, `main.rs`) is `root`.
    pub fn read(root: &Path) -> Result<Self> {
        let mut graph = ModuleGraph::default();
        let mut tokens = BTreeMap::new();
        let mut todo = vec![(Vec::new(), root.to_path_buf(), true)];
        while let Some((path, file, dir_owner)) = todo.pop() {
            let src = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let toks = strip_test_modules(tokenize(&src));
            for (name, explicit) in child_declarations(&toks) {
                let child_file = child_file(&file, dir_owner, &name, explicit)
                    .with_context(|| format!("{}: no file for `mod {name};`", file.display()))?;
                let owner = explicit || child_file.ends_with("mod.rs");
                let mut child = path.clone();
                child.push(name);
                todo.push((child, child_file, owner));
            }
            graph.files.insert(path.clone(), file);
            tokens.insert(path, toks);
        }
        for (module, toks) in &tokens {
            let used = dependencies(module, toks, &graph.files);
            graph.uses.insert(module.clone(), used);
        }
        Ok(graph)
    }
}

/// Removes every `#[cfg(test)]` item that is an inline module.
fn strip_test_modules(toks: Vec<Tok>) -> Vec<Tok> {
    let pattern = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if toks[i..].starts_with(&pattern) {
            let mut j = i + pattern.len();
            if toks.get(j) == Some(&Tok::Ident("pub".into())) {
                j += 1;
            }
            if toks.get(j) == Some(&Tok::Ident("mod".into()))
                && toks.get(j + 2) == Some(&Tok::Punct('{'))
            {
                i = matching_close(&toks, j + 2) + 1;
                continue;
            }
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

/// The index of the `}` that closes the `{` at `open`.
fn matching_close(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The `mod name;` declarations of a file (at any depth), each with whether a `#[path]`
/// attribute places it.
fn child_declarations(toks: &[Tok]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for i in 0..toks.len() {
        if let (Tok::Ident(kw), Some(Tok::Ident(name)), Some(Tok::Punct(';'))) =
            (&toks[i], toks.get(i + 1), toks.get(i + 2))
        {
            if kw == "mod" {
                out.push((name.clone(), has_path_attribute(toks, i)));
            }
        }
    }
    out
}

/// Whether the `mod` at `i` carries a `#[path]` attribute (the tokenizer drops its string;
/// `explicit_path` reads it from the file text).
fn has_path_attribute(toks: &[Tok], i: usize) -> bool {
    // Walk back over attributes (`#[...]`) and a visibility to see whether one is `path`.
    let mut j = i;
    while j > 0 {
        match &toks[j - 1] {
            Tok::Ident(w) if w == "pub" => j -= 1,
            Tok::Punct(']') => {
                let mut k = j - 1;
                while k > 0 && toks[k] != Tok::Punct('[') {
                    k -= 1;
                }
                if toks.get(k + 1) == Some(&Tok::Ident("path".into())) {
                    return true;
                }
                j = k.saturating_sub(1);
            }
            _ => break,
        }
    }
    false
}

/// The file of `mod name;` declared in `parent`. `dir_owner`: the parent is a crate root, a
/// `mod.rs` or reached through `#[path]`, so its children live beside it.
fn child_file(parent: &Path, dir_owner: bool, name: &str, explicit: bool) -> Option<PathBuf> {
    let here = parent.parent()?;
    if explicit {
        let text = std::fs::read_to_string(parent).ok()?;
        return explicit_path(&text, name).map(|p| here.join(p));
    }
    let dir = if dir_owner {
        here.to_path_buf()
    } else {
        here.join(parent.file_stem()?)
    };
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// The string of the `#[path = "..."]` attribute nearest before `mod name;` in `text`.
fn explicit_path(text: &str, name: &str) -> Option<String> {
    let decl = text.find(&format!("mod {name};"))?;
    let attr = text[..decl].rfind("#[path")?;
    let rest = &text[attr..decl];
    let start = rest.find('"')? + 1;
    let end = start + rest[start..].find('"')?;
    Some(rest[start..end].to_string())
}

/// Every module of `files` that `module`'s tokens name, except itself.
fn dependencies(
    module: &ModPath,
    toks: &[Tok],
    files: &BTreeMap<ModPath, PathBuf>,
) -> BTreeSet<ModPath> {
    let mut out = BTreeSet::new();
    let mut scope = module.clone();
    // Inline modules: (depth of their closing brace, how many segments they added).
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if inline.last() == Some(&depth) {
                    inline.pop();
                    scope.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(kw) if kw == "mod" && toks.get(i + 2) == Some(&Tok::Punct('{')) => {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    scope.push(name.clone());
                    depth += 1;
                    inline.push(depth);
                }
                i += 3;
            }
            Tok::Ident(kw) if kw == "use" => {
                let end = toks[i..]
                    .iter()
                    .position(|t| *t == Tok::Punct(';'))
                    .map_or(toks.len(), |p| i + p);
                for path in expand_use(&toks[i + 1..end]) {
                    out.extend(resolve(&scope, module, &path, files));
                }
                i = end + 1;
            }
            Tok::Ident(first) if i == 0 || toks[i - 1] != Tok::PathSep => {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::PathSep) {
                    match toks.get(j + 1) {
                        Some(Tok::Ident(next)) => path.push(next.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                if path.len() > 1 {
                    out.extend(resolve(&scope, module, &path, files));
                }
                i = j.max(i + 1);
            }
            _ => i += 1,
        }
    }
    out
}

/// The full paths of a use tree (`a::{b, c::{d, *}}` gives `a::b`, `a::c::d`, `a::c::*`).
fn expand_use(toks: &[Tok]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    expand_into(toks, &[], &mut out);
    out
}

fn expand_into(toks: &[Tok], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Ident(w) if w == "as" => {
                // `as name`: the alias is not part of the path.
                i += 2;
            }
            Tok::Ident(w) => {
                path.push(w.clone());
                i += 1;
            }
            Tok::Punct('*') => {
                path.push("*".into());
                i += 1;
            }
            Tok::PathSep => i += 1,
            Tok::Punct('{') => {
                let close = matching_close(toks, i);
                for item in split_top_level(&toks[i + 1..close.min(toks.len())]) {
                    expand_into(item, &path, out);
                }
                return;
            }
            _ => i += 1,
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// Splits a brace group's content at its top-level commas.
fn split_top_level(toks: &[Tok]) -> Vec<&[Tok]> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth = depth.saturating_sub(1),
            Tok::Punct(',') if depth == 0 => {
                out.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&toks[start..]);
    out.retain(|s| !s.is_empty());
    out
}

/// The module (`file_module` excluded) that `path`, written in `scope`, names.
fn resolve(
    scope: &ModPath,
    file_module: &ModPath,
    path: &[String],
    files: &BTreeMap<ModPath, PathBuf>,
) -> Option<ModPath> {
    let (mut base, mut rest) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (scope.clone(), &path[1..]),
        "super" => (scope.clone(), path),
        first => {
            let mut child = scope.clone();
            child.push(first.to_string());
            if !files.contains_key(&child) {
                return None;
            }
            (scope.clone(), path)
        }
    };
    while rest.first().map(String::as_str) == Some("super") {
        base.pop()?;
        rest = &rest[1..];
    }
    for seg in rest {
        let mut next = base.clone();
        next.push(seg.clone());
        if !files.contains_key(&next) && !is_inline_of(&next, file_module) {
            break;
        }
        base = next;
    }
    // An inline module belongs to its file.
    while !files.contains_key(&base) {
        base.pop()?;
    }
    (base != *file_module).then_some(base)
}

/// Whether `path` lies inside `file_module` (an inline module of that file).
fn is_inline_of(path: &ModPath, file_module: &ModPath) -> bool {
    path.len() > file_module.len() && path.starts_with(file_module)
}
