//! No crate of the workspace has an import cycle between the child modules of any module,
//! except the ones [`KNOWN_CYCLES`] lists; the checker catches cycles, also in a crate read
//! from disk.

use super::*;

/// Import cycles still to break, per crate: (crate directory, modules that use each other
/// in cycles). A cycle all of whose modules one entry lists is tolerated (and printed);
/// any other fails the check. This list may only shrink.
///
/// Empty: every crate of the workspace is free of import cycles.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

/// Import cycles between the child modules of one module, at every depth including the
/// crate root (`policy::error` ↔ `policy::fence`, `cli` ↔ `admin`): for every module with
/// children, the graph "child A references child B" (a name the module re-exports counts
/// as the child that defines it; a `pub use` is a reference) must be acyclic. Returns one
/// line per cycle found.
fn module_cycles(sources: &[Source]) -> Vec<String> {
    // Parent module → its child modules.
    let mut children: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for s in sources {
        for len in 0..s.module.len() {
            children
                .entry(s.module[..len].to_vec())
                .or_default()
                .insert(s.module[len].clone());
        }
    }
    // Names each parent re-exports from one of its children (`pub use error::PolicyError`).
    let mut reexports: BTreeMap<Vec<String>, BTreeMap<String, String>> = BTreeMap::new();
    for s in sources {
        let Some(kids) = children.get(&s.module) else {
            continue;
        };
        for (_, _, stmt) in pub_uses(&s.code) {
            for (name, path) in used_names(&stmt, &s.module) {
                if path.len() > s.module.len() && path[..s.module.len()] == s.module[..] {
                    let child = &path[s.module.len()];
                    if kids.contains(child) {
                        reexports
                            .entry(s.module.clone())
                            .or_default()
                            .insert(name, child.clone());
                    }
                }
            }
        }
    }
    // Edges between siblings: parent → (from → {to}).
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for s in sources {
        for (_, path) in references(&s.code, &s.module) {
            let common = s
                .module
                .iter()
                .zip(&path)
                .take_while(|(a, b)| a == b)
                .count();
            if common >= s.module.len() || common >= path.len() {
                continue;
            }
            let parent = s.module[..common].to_vec();
            let from = s.module[common].clone();
            let named = &path[common];
            let to = match children.get(&parent) {
                Some(kids) if kids.contains(named) => named.clone(),
                _ => match reexports.get(&parent).and_then(|r| r.get(named)) {
                    Some(child) => child.clone(),
                    None => continue, // an item of the parent itself
                },
            };
            if to != from {
                edges
                    .entry(parent)
                    .or_default()
                    .entry(from)
                    .or_default()
                    .insert(to);
            }
        }
    }
    let mut cycles = Vec::new();
    for (parent, graph) in &edges {
        // Depth-first search for a back edge; report the cycle's path once per start.
        fn dfs(
            node: &str,
            graph: &BTreeMap<String, BTreeSet<String>>,
            stack: &mut Vec<String>,
            done: &mut BTreeSet<String>,
            found: &mut Vec<Vec<String>>,
        ) {
            if let Some(at) = stack.iter().position(|n| n == node) {
                found.push(stack[at..].to_vec());
                return;
            }
            if done.contains(node) {
                return;
            }
            stack.push(node.to_string());
            for next in graph.get(node).into_iter().flatten() {
                dfs(next, graph, stack, done, found);
            }
            stack.pop();
            done.insert(node.to_string());
        }
        let mut done = BTreeSet::new();
        let mut found = Vec::new();
        for start in graph.keys() {
            dfs(start, graph, &mut Vec::new(), &mut done, &mut found);
        }
        for cycle in found {
            let names: Vec<String> = cycle
                .iter()
                .chain(cycle.first())
                .map(|n| {
                    parent
                        .iter()
                        .chain([n])
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("::")
                })
                .collect();
            cycles.push(format!("import cycle: {}", names.join(" → ")));
        }
    }
    cycles
}

/// The modules of a cycle line of [`module_cycles`], sorted.
fn cycle_modules(line: &str) -> BTreeSet<String> {
    line.trim_start_matches("import cycle: ")
        .split(" → ")
        .map(str::to_string)
        .collect()
}

#[test]
fn submodules_have_no_import_cycles() {
    let cycles = module_cycles(&without_facades(&sources(), KNOWN_FACADES));
    assert!(
        cycles.is_empty(),
        "submodules of one module use each other in a cycle; move the shared item into \
         the lower one (or a new leaf module):\n{}",
        cycles.join("\n")
    );
}

/// The cycle checker catches a two-module and a three-module cycle, including one through
/// a name the parent re-exports, and lets a parent's own items and one-way uses pass.
#[test]
fn cycle_checker_catches_cycles() {
    let ok = vec![
        source("lib.rs", "pub mod p;"),
        source("p/mod.rs", "mod a; mod b; pub use a::A; pub fn own() {}"),
        source("p/a.rs", "use super::own; pub struct A;"),
        source("p/b.rs", "use super::A; use super::a::x;"),
    ];
    assert!(module_cycles(&ok).is_empty(), "{:?}", module_cycles(&ok));
    let two = vec![
        source("lib.rs", "pub mod p;"),
        source("p/mod.rs", "mod a; mod b; pub use a::A;"),
        source("p/a.rs", "use super::b::B; pub struct A;"),
        source("p/b.rs", "use super::A; pub struct B;"),
    ];
    let found = module_cycles(&two);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("p::a") && found[0].contains("p::b"),
        "{found:?}"
    );
    let three = vec![
        source("lib.rs", "pub mod p;"),
        source("p/mod.rs", "mod a; mod b; mod c;"),
        source("p/a.rs", "use crate::p::b::B;"),
        source("p/b.rs", "use super::c::C;"),
        source("p/c/mod.rs", "use super::super::p::a::A;"),
    ];
    assert_eq!(
        module_cycles(&three).len(),
        1,
        "{:?}",
        module_cycles(&three)
    );
    // Between the crate root's modules, also when one side is only a `pub use`.
    for a in [
        "use crate::b::B;",
        "pub use crate::b::B;",
        "pub use super::b::B;",
    ] {
        let root = vec![
            source("lib.rs", "mod a; mod b;"),
            source("a.rs", a),
            source("b/mod.rs", "use crate::a::A; pub struct B;"),
        ];
        let found = module_cycles(&root);
        assert_eq!(found.len(), 1, "{a}: {found:?}");
        assert_eq!(
            cycle_modules(&found[0]),
            BTreeSet::from(["a".to_string(), "b".to_string()]),
            "{found:?}"
        );
    }
    // Through a name the crate root re-exports, between nested modules of two crates'
    // shapes (`x::y` → `crate::Z` defined in `z::w`, and back).
    let nested = vec![
        source("lib.rs", "mod x; mod z; pub use z::w::Z;"),
        source("x/mod.rs", "mod y;"),
        source("x/y.rs", "use crate::Z;"),
        source("z/mod.rs", "pub mod w;"),
        source("z/w.rs", "use crate::x::y::Y; pub struct Z;"),
    ];
    assert_eq!(
        module_cycles(&nested).len(),
        1,
        "{:?}",
        module_cycles(&nested)
    );
    // The facades a check allows are left out of the cycle graph.
    let facade = vec![
        source("lib.rs", "mod low; mod high;"),
        source("low.rs", "pub use crate::high::Top;"),
        source("high.rs", "use crate::low::A;"),
    ];
    assert_eq!(module_cycles(&facade).len(), 1);
    assert!(module_cycles(&without_facades(&facade, &[("low.rs", "high")])).is_empty());
}

/// No crate of the workspace has an import cycle between its modules (at any depth),
/// except the ones [`KNOWN_CYCLES`] lists; strata's facades are left out (they are
/// checked by [`super::upward::modules_use_only_lower_layers`]).
#[test]
fn no_crate_has_import_cycles() {
    let crates = workspace_crates();
    assert!(
        crates.len() >= 8,
        "the workspace's crates were not found: {crates:?}"
    );
    let mut problems = Vec::new();
    for (name, src) in &crates {
        let mut sources = sources_of(src);
        assert!(!sources.is_empty(), "{name}: no sources under {src:?}");
        if name == "strata" {
            sources = without_facades(&sources, KNOWN_FACADES);
        }
        for cycle in module_cycles(&sources) {
            let modules = cycle_modules(&cycle);
            let known = KNOWN_CYCLES
                .iter()
                .any(|(c, ms)| c == name && modules.iter().all(|m| ms.contains(&m.as_str())));
            if known {
                eprintln!("{name}: known {cycle} (KNOWN_CYCLES)");
            } else {
                problems.push(format!("{name}: {cycle}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "modules use each other in a cycle; move the shared item into the lower one (or \
         a new leaf module):\n{}",
        problems.join("\n")
    );
}

/// The workspace check reads a crate from disk as it reads ours: a cycle between two
/// modules of a crate on disk (one side only a `pub use`) is found, its binary target
/// (`main.rs`) is not one of its modules, and a test-only module is left out.
#[test]
fn cycle_check_reads_a_crate_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    let write = |rel: &str, text: &str| std::fs::write(src.join(rel), text).unwrap();
    write("lib.rs", "mod a; mod b; #[cfg(test)] mod t;");
    write("a.rs", "pub use crate::b::B; pub struct A;");
    write("b/mod.rs", "mod inner; pub struct B;");
    write("b/inner.rs", "use crate::a::A;");
    write("t.rs", "use crate::b::B;");
    write("main.rs", "use crate::x::Y;");
    let sources = sources_of(&src);
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    assert!(!modules.contains(&vec!["main".to_string()]), "{modules:?}");
    assert!(!modules.contains(&vec!["t".to_string()]), "{modules:?}");
    let found = module_cycles(&sources);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        cycle_modules(&found[0]),
        BTreeSet::from(["a".to_string(), "b".to_string()])
    );
    // Without the `pub use`, nothing.
    write("a.rs", "pub struct A;");
    assert!(module_cycles(&sources_of(&src)).is_empty());
}
