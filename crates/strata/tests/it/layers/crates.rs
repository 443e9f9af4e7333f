//! The crates stay layered too: no backend crate ([`BACKENDS`]: the store traits and the
//! stores under them) depends on the engine (`strata`) or on any crate above it, in any
//! dependency kind — normal, dev or build, also under a `[target.…]` table and under
//! another name (`package = "strata"`). So the engine's tests and the benchmarks that
//! drive collections on a backend live in the engine's test binary and in `strata-bench`,
//! never in the backend crate (#25).
//!
//! The graph is read from the manifests (`crates/*/Cargo.toml`); "above the engine" is
//! the engine and every other crate that depends on it, directly or through another such
//! crate, in any kind.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The backend crates: the store traits and every store under them.
const BACKENDS: &[&str] = &[
    "strata-store",
    "strata-sled",
    "strata-redb",
    "strata-postgres",
];

/// The engine.
const ENGINE: &str = "strata";

/// One dependency of a manifest: the package it names and its kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Dep {
    package: String,
    kind: &'static str,
}

/// The kind of a dependency table named by its last segment, if it is one.
fn dep_kind(segment: &str) -> Option<&'static str> {
    match segment {
        "dependencies" => Some("normal"),
        "dev-dependencies" | "dev_dependencies" => Some("dev"),
        "build-dependencies" | "build_dependencies" => Some("build"),
        _ => None,
    }
}

/// The segments of a table header's key (`target.'cfg(unix)'.dev-dependencies`), quotes
/// removed; dots inside quotes do not split.
fn key_segments(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    for c in key.chars() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '.') => out.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out
}

/// The value of `package = "…"` in an inline table or a dependency table's line.
fn package_key(text: &str) -> Option<String> {
    let at = text.find("package")?;
    let before = text[..at].chars().last();
    if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-') {
        return None;
    }
    let rest = text[at + "package".len()..]
        .trim_start()
        .strip_prefix('=')?;
    let rest = rest.trim_start().strip_prefix('"')?;
    rest.split('"').next().map(str::to_string)
}

/// A manifest's package name and its dependencies (every kind, every target).
fn parse_manifest(text: &str) -> (String, BTreeSet<Dep>) {
    let mut name = String::new();
    let mut deps = BTreeSet::new();
    // The table the lines belong to: a dependency list of a kind, one dependency's own
    // table (`[dev-dependencies.strata]`: its name, its kind), or neither.
    let mut list: Option<&'static str> = None;
    let mut one: Option<(String, &'static str)> = None;
    let mut in_package = false;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            let key = line.trim_matches(|c| c == '[' || c == ']');
            let segs = key_segments(key);
            in_package = key == "package";
            list = segs.last().and_then(|s| dep_kind(s));
            one = None;
            if list.is_none() && segs.len() >= 2 {
                if let Some(kind) = dep_kind(&segs[segs.len() - 2]) {
                    let dep = segs[segs.len() - 1].clone();
                    deps.insert(Dep {
                        package: dep.clone(),
                        kind,
                    });
                    one = Some((dep, kind));
                }
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if in_package && key == "name" {
            name = value.trim().trim_matches('"').to_string();
        }
        if let Some(kind) = list {
            // `name = …`, `name.workspace = true`, `alias = { package = "name", … }`.
            let dep = key_segments(key)[0].clone();
            let package = package_key(value).unwrap_or(dep);
            deps.insert(Dep { package, kind });
        }
        if let Some((dep, kind)) = &one {
            if key == "package" {
                if let Some(package) = package_key(line) {
                    deps.remove(&Dep {
                        package: dep.clone(),
                        kind,
                    });
                    deps.insert(Dep { package, kind });
                }
            }
        }
    }
    (name, deps)
}

/// The crate graph of `manifests` (their texts): package name → its dependencies on
/// other crates of the set (self-references left out).
fn graph(manifests: &[String]) -> BTreeMap<String, BTreeSet<Dep>> {
    let parsed: Vec<(String, BTreeSet<Dep>)> =
        manifests.iter().map(|m| parse_manifest(m)).collect();
    let names: BTreeSet<String> = parsed.iter().map(|(n, _)| n.clone()).collect();
    parsed
        .into_iter()
        .map(|(n, deps)| {
            let deps = deps
                .into_iter()
                .filter(|d| d.package != n && names.contains(&d.package))
                .collect();
            (n, deps)
        })
        .collect()
}

/// The engine and every crate above it: every non-backend crate that depends (any kind)
/// on the engine or on a crate already above it.
fn above_engine(graph: &BTreeMap<String, BTreeSet<Dep>>) -> BTreeSet<String> {
    let mut above = BTreeSet::from([ENGINE.to_string()]);
    loop {
        let more: Vec<String> = graph
            .iter()
            .filter(|(n, deps)| {
                !above.contains(*n)
                    && !BACKENDS.contains(&n.as_str())
                    && deps.iter().any(|d| above.contains(&d.package))
            })
            .map(|(n, _)| n.clone())
            .collect();
        if more.is_empty() {
            return above;
        }
        above.extend(more);
    }
}

/// One line per dependency of a backend on the engine or a crate above it.
fn upward_deps(graph: &BTreeMap<String, BTreeSet<Dep>>) -> Vec<String> {
    let above = above_engine(graph);
    let mut problems = Vec::new();
    for backend in BACKENDS {
        for d in graph.get(*backend).into_iter().flatten() {
            if above.contains(&d.package) {
                problems.push(format!(
                    "{backend} has a {} dependency on `{}` (the engine or above it): a backend \
                     never depends on the engine; move the test into strata's tests/it and \
                     the benchmark into strata-bench",
                    d.kind, d.package
                ));
            }
        }
    }
    problems
}

/// The text of every crate manifest of the workspace (`crates/*/Cargo.toml`).
fn workspace_manifests() -> Vec<String> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut paths: Vec<_> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path().join("Cargo.toml"))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

#[test]
fn backends_never_depend_on_the_engine_in_any_kind() {
    let graph = graph(&workspace_manifests());
    // The scanner found the crates and their edges of every kind.
    for name in BACKENDS
        .iter()
        .chain(&[ENGINE, "strata-cli", "strata-bench"])
    {
        assert!(graph.contains_key(*name), "{name} not found: {graph:?}");
    }
    let dev = |from: &str, to: &str| {
        graph[from].contains(&Dep {
            package: to.into(),
            kind: "dev",
        })
    };
    assert!(
        dev(ENGINE, "strata-postgres") && dev("strata-bench", ENGINE),
        "dev-dependencies not read: {graph:?}"
    );
    let above = above_engine(&graph);
    for name in [
        "strata-sync",
        "strata-cli",
        "strata-testkit",
        "strata-bench",
    ] {
        assert!(
            above.contains(name),
            "{name} not above the engine: {above:?}"
        );
    }
    let problems = upward_deps(&graph);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check fails on each kind of upward dependency a backend could take: injected into
/// the real manifests, and in a small workspace of its own.
#[test]
fn crate_checker_catches_upward_dependencies() {
    // The real manifests with one upward dev-dependency of strata-postgres added.
    let injected: Vec<String> = workspace_manifests()
        .into_iter()
        .map(|m| {
            if parse_manifest(&m).0 == "strata-postgres" {
                format!("{m}\n[dev-dependencies]\nstrata.workspace = true\n")
            } else {
                m
            }
        })
        .collect();
    let found = upward_deps(&graph(&injected));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("strata-postgres has a dev dependency on `strata`"),
        "{found:?}"
    );

    let base = [
        "[package]\nname = \"strata-store\"\n[dev-dependencies]\nstrata-store = { path = \".\" }\n",
        "[package]\nname = \"strata-sled\"\n[dependencies]\nstrata-store.workspace = true\n",
        "[package]\nname = \"strata-redb\"\n[dependencies]\nstrata-store.workspace = true # strata\n",
        "[package]\nname = \"strata\"\n[dependencies]\nstrata-store.workspace = true\n[dev-dependencies]\nstrata-postgres = { workspace = true, features = [\n  \"testing\",\n] }\n",
        "[package]\nname = \"strata-sync\"\n[dependencies]\nstrata.workspace = true\n",
        "[package]\nname = \"strata-bench\"\n[dev-dependencies]\nstrata.workspace = true\n",
    ];
    let check = |postgres: &str| {
        let mut all: Vec<String> = base.iter().map(|m| m.to_string()).collect();
        all.push(format!(
            "[package]\nname = \"strata-postgres\"\n[dependencies]\nstrata-store.workspace = true\n{postgres}"
        ));
        upward_deps(&graph(&all))
    };
    // Downward dependencies, comments and the engine depending on a backend pass.
    let ok = check("[dev-dependencies]\nstrata-postgres = { path = \".\" }\nstrata-sled.workspace = true\n# strata.workspace = true\n");
    assert!(ok.is_empty(), "{ok:?}");
    for (postgres, kind, on) in [
        (
            "[dev-dependencies]\nstrata.workspace = true\n",
            "dev",
            "strata",
        ),
        (
            "[dependencies.strata]\nworkspace = true\n",
            "normal",
            "strata",
        ),
        (
            "[build-dependencies]\nstrata = { path = \"../strata\" }\n",
            "build",
            "strata",
        ),
        (
            "[dev-dependencies]\nengine = { package = \"strata\", path = \"../strata\" }\n",
            "dev",
            "strata",
        ),
        (
            "[dev-dependencies.engine]\npackage = \"strata\"\npath = \"../strata\"\n",
            "dev",
            "strata",
        ),
        (
            "[target.'cfg(unix)'.dev-dependencies]\nstrata.workspace = true\n",
            "dev",
            "strata",
        ),
        (
            "[dev-dependencies]\nstrata-sync.workspace = true\n",
            "dev",
            "strata-sync",
        ),
        (
            "[dev-dependencies]\nstrata-bench = { path = \"../strata-bench\" }\n",
            "dev",
            "strata-bench",
        ),
    ] {
        let found = check(postgres);
        let want = format!("strata-postgres has a {kind} dependency on `{on}`");
        assert!(
            found.len() == 1 && found[0].contains(&want),
            "not caught: {postgres:?} → {found:?}"
        );
    }
}
