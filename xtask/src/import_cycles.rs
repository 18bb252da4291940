//! Import cycles between the modules of a crate: two modules that use each other, directly or
//! through others, cannot be understood, tested or moved one at a time. The workspace has none,
//! and this module's test keeps it so (`cargo test -p xtask --lib`).

use crate::module_graph::{display, ModPath, ModuleGraph};
use std::collections::{BTreeMap, BTreeSet};

/// The shortest cycle through each module that is on one, each written once as
/// `a -> b -> ... -> a` (starting from its first module in sort order), in a stable order.
pub fn cycles(graph: &ModuleGraph) -> Vec<String> {
    let mut out = BTreeSet::new();
    for group in groups(graph) {
        for start in &group {
            if let Some(mut cycle) = cycle_through(graph, &group, start) {
                cycle.pop();
                let first = (0..cycle.len()).min_by_key(|&i| &cycle[i]).unwrap_or(0);
                cycle.rotate_left(first);
                cycle.push(cycle[0].clone());
                let names: Vec<String> = cycle.iter().map(display).collect();
                out.insert(names.join(" -> "));
            }
        }
    }
    out.into_iter().collect()
}

/// The strongly connected groups of more than one module (Tarjan's algorithm, iterative
/// enough for module graphs: recursion depth is bounded by the number of modules).
fn groups(graph: &ModuleGraph) -> Vec<BTreeSet<ModPath>> {
    struct State<'a> {
        graph: &'a ModuleGraph,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        out: Vec<BTreeSet<ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.uses.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.insert(w.clone());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                s.out.push(group);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.uses.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// A shortest cycle through `start`, staying inside its group.
fn cycle_through<'a>(
    graph: &'a ModuleGraph,
    group: &BTreeSet<ModPath>,
    start: &'a ModPath,
) -> Option<Vec<ModPath>> {
    let mut came_from: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in graph.uses.get(v).into_iter().flatten() {
            if !group.contains(w) {
                continue;
            }
            if w == start {
                let mut cycle = vec![v.clone()];
                let mut at = v;
                while at != start {
                    at = came_from[at];
                    cycle.push(at.clone());
                }
                cycle.reverse();
                cycle.push(start.clone());
                return Some(cycle);
            }
            if !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::cycles;
    use crate::module_graph::ModuleGraph;
    use std::path::{Path, PathBuf};

    /// Every crate root of the workspace whose modules are checked.
    const ROOTS: &[&str] = &[
        "host/src/lib.rs",
        "host/src/main.rs",
        "policy/src/lib.rs",
        "preload/src/lib.rs",
        "xtask/src/lib.rs",
        "xtask/src/main.rs",
        "tests/src/lib.rs",
    ];

    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// No crate of the workspace has modules that use each other, directly or in a ring.
    #[test]
    fn workspace_has_no_import_cycles() {
        let mut found = Vec::new();
        for root in ROOTS {
            let graph = ModuleGraph::read(&workspace().join(root))
                .unwrap_or_else(|e| panic!("{root}: {e:#}"));
            for cycle in cycles(&graph) {
                found.push(format!("{root}: {cycle}"));
            }
        }
        assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
    }

    /// Writes a small crate into a temporary directory and returns its cycles.
    fn cycles_of(files: &[(&str, &str)]) -> Vec<String> {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, text).expect("write");
        }
        cycles(&ModuleGraph::read(&dir.path().join("lib.rs")).expect("read"))
    }

    /// The check sees the kinds of use the workspace has: `use crate::`, grouped uses, a path in
    /// code, `super::` from a child, a parent naming its child, a test module left out.
    #[test]
    fn finds_cycles_of_every_kind() {
        let lib = "mod a;\nmod b;\nmod c;\nmod p;\n";
        // Control: the same modules without the back edge have no cycle.
        assert!(cycles_of(&[
            ("lib.rs", lib),
            ("a.rs", "use crate::{b::X, c};\n"),
            ("b.rs", "pub struct X;\n"),
            (
                "c.rs",
                "// crate::a in a comment\nfn f() { let _ = \"crate::a::y\"; }\n"
            ),
            ("p.rs", "mod q;\npub struct T;\nfn f() { q::g(); }\n"),
            (
                "p/q.rs",
                "pub fn g() {}\n#[cfg(test)]\nmod tests { use super::super::T; }\n"
            ),
        ])
        .is_empty());
        assert_eq!(
            cycles_of(&[
                ("lib.rs", lib),
                ("a.rs", "use crate::{b::{self, X}};\n"),
                ("b.rs", "pub struct X;\nfn f() { crate::c::g(); }\n"),
                ("c.rs", "pub fn g() { let _ = crate::a::Y; }\n"),
                ("p.rs", "mod q;\npub struct T;\nfn f() { q::g(); }\n"),
                ("p/q.rs", "pub fn g() -> super::T { super::T }\n"),
            ]),
            ["a -> b -> c -> a", "p -> p::q -> p"]
        );
    }
}
