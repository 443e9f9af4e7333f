//! One import path per public type (#25 item 2, "a closed front door").
//!
//! Reads the crate's sources (with the parser of [`crate::layers`]) and computes every
//! path under which a public type (`struct`, `enum`, `trait`, `type`) can be named from
//! outside the crate: its definition, if every module on the way is `pub mod`, plus every
//! `pub use` (named or glob) in a public module that brings it in. A type reachable under
//! two paths fails the check — the facades that kept older paths alive
//! (`strata::ops::sweep`, `strata::ops::cutover::CutoverOptions`, …) are exactly that.

use crate::layers::{
    is_ident, item_end, pub_uses, source, sources, sources_of, used_names, workspace_crates, Source,
};
use std::collections::{BTreeMap, BTreeSet};

/// One module: a file, or an inline `mod name { … }` inside one.
struct Module {
    path: Vec<String>,
    /// The module's own code, without the bodies of its inline modules.
    code: String,
}

/// Positions of `word` in `code` as a whole word.
fn words_at(code: &str, word: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(word) {
        let i = from + at;
        let before = code[..i].chars().last();
        let after = code[i + word.len()..].chars().next();
        if before.is_none_or(|c| !is_ident(c)) && after.is_none_or(|c| !is_ident(c)) {
            out.push(i);
        }
        from = i + word.len();
    }
    out
}

/// The identifier at the start of `s` (after spaces).
fn ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| is_ident(*c))
        .collect()
}

/// Splits a file into its module and its inline modules (recursively).
fn modules_of(path: Vec<String>, code: &str, out: &mut Vec<Module>) {
    let mut own = String::new();
    let mut rest = 0;
    for at in words_at(code, "mod") {
        if at < rest {
            continue;
        }
        let name = ident(&code[at + 3..]);
        let end = item_end(code, at);
        let item = &code[at..end];
        if !item.ends_with('}') || name.is_empty() {
            continue;
        }
        let open = at + item.find('{').unwrap_or(0);
        own.push_str(&code[rest..open + 1]);
        let mut inner = path.clone();
        inner.push(name);
        modules_of(inner, &code[open + 1..end - 1], out);
        own.push('}');
        rest = end;
    }
    own.push_str(&code[rest..]);
    out.push(Module { path, code: own });
}

/// The names a module declares `pub mod` (not `pub(crate) mod`).
fn pub_mods(code: &str) -> BTreeSet<String> {
    words_at(code, "pub")
        .into_iter()
        .filter(|&at| code[at + 3..].trim_start().starts_with("mod "))
        .map(|at| ident(code[at + 3..].trim_start().trim_start_matches("mod")))
        .collect()
}

/// The types a module defines `pub` (`pub struct|enum|trait|type NAME`).
fn pub_types(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for at in words_at(code, "pub") {
        let rest = code[at + 3..].trim_start();
        for kw in ["struct ", "enum ", "trait ", "type "] {
            if let Some(r) = rest.strip_prefix(kw) {
                out.insert(ident(r));
            }
        }
    }
    out
}

/// Every public path of every public type: type (defining module + name) → paths.
fn public_paths(sources: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    public_paths_of("strata", sources)
}

/// [`public_paths`] of the crate `krate` (its name as other crates import it).
fn public_paths_of(krate: &str, sources: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let mut modules = Vec::new();
    for s in sources {
        modules_of(s.module.clone(), &s.code, &mut modules);
    }
    let by_path: BTreeMap<Vec<String>, &Module> =
        modules.iter().map(|m| (m.path.clone(), m)).collect();
    let is_public = |path: &[String]| -> bool {
        (1..=path.len()).all(|n| {
            by_path
                .get(&path[..n - 1])
                .is_some_and(|parent| pub_mods(&parent.code).contains(&path[n - 1]))
        })
    };
    // Re-exports per module: name → full path; globs: module paths.
    let mut named: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut globs: BTreeMap<Vec<String>, Vec<Vec<String>>> = BTreeMap::new();
    for m in &modules {
        for (_, _, stmt) in pub_uses(&m.code) {
            let body = stmt.trim_end_matches(';').trim_end();
            if let Some(prefix) = body.strip_suffix("::*") {
                let (_, full) = used_names(&format!("{prefix};"), &m.path)
                    .into_iter()
                    .next()
                    .unwrap_or_default();
                globs.entry(m.path.clone()).or_default().push(full);
                continue;
            }
            for (name, full) in used_names(&stmt, &m.path) {
                named.entry(m.path.clone()).or_default().insert(name, full);
            }
        }
    }
    // Where `module::name` really is defined (None: not a type of this crate).
    fn resolve(
        module: &[String],
        name: &str,
        by_path: &BTreeMap<Vec<String>, &Module>,
        named: &BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
        globs: &BTreeMap<Vec<String>, Vec<Vec<String>>>,
        depth: usize,
    ) -> Option<String> {
        if depth > 16 {
            return None;
        }
        let m = by_path.get(module)?;
        if pub_types(&m.code).contains(name) {
            return Some(format!("{}::{name}", module.join("::")));
        }
        if let Some(full) = named.get(module).and_then(|n| n.get(name)) {
            let (last, at) = full.split_last()?;
            return resolve(at, last, by_path, named, globs, depth + 1);
        }
        for g in globs.get(module).into_iter().flatten() {
            if let Some(found) = resolve(g, name, by_path, named, globs, depth + 1) {
                return Some(found);
            }
        }
        None
    }
    let shown = |path: &[String], name: &str| {
        let mut p = vec![krate.to_string()];
        p.extend(path.iter().cloned());
        p.push(name.to_string());
        p.join("::")
    };
    let mut paths: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in modules.iter().filter(|m| is_public(&m.path)) {
        let mut exposed: BTreeSet<String> = pub_types(&m.code);
        exposed.extend(
            named
                .get(&m.path)
                .into_iter()
                .flat_map(|n| n.keys().cloned()),
        );
        for g in globs.get(&m.path).into_iter().flatten() {
            if let Some(target) = by_path.get(g) {
                exposed.extend(pub_types(&target.code));
                exposed.extend(named.get(g).into_iter().flat_map(|n| n.keys().cloned()));
            }
        }
        for name in exposed {
            if let Some(def) = resolve(&m.path, &name, &by_path, &named, &globs, 0) {
                paths.entry(def).or_default().insert(shown(&m.path, &name));
            }
        }
    }
    paths
}

fn duplicates(paths: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    paths
        .iter()
        .filter(|(_, p)| p.len() > 1)
        .map(|(def, p)| {
            format!(
                "{def} is public under {} paths: {}",
                p.len(),
                p.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect()
}

#[test]
fn every_public_type_has_one_import_path() {
    let paths = public_paths(&sources());
    // The check sees the crate's main types (it would pass vacuously on a parse failure).
    for ty in [
        "Collection",
        "Database",
        "CollectionOptions",
        "Mode",
        "policy::Policy",
        "ops::sweep::SweepOptions",
        "layout::envelope::Envelope",
        "layout::header::SchemaHeader",
    ] {
        assert!(
            paths.values().any(|p| p.contains(&format!("strata::{ty}"))),
            "`strata::{ty}` not found among the public paths"
        );
    }
    assert!(paths.len() > 150, "only {} public types found", paths.len());
    let dups = duplicates(&paths);
    assert!(
        dups.is_empty(),
        "types reachable under more than one path (one import path per type; re-export \
         from a private module instead):\n{}",
        dups.join("\n")
    );
}

/// The same rule for every library crate of the workspace (the store crate, the
/// backends, the schema and sync crates, the test kit): a type public under two paths
/// (a module and a re-export at the root, say) fails.
#[test]
fn every_crate_gives_each_public_type_one_import_path() {
    let crates = workspace_crates();
    assert!(crates.len() >= 8, "{crates:?}");
    let mut problems = Vec::new();
    let mut seen = 0;
    for (dir, src) in &crates {
        let krate = dir.replace('-', "_");
        let paths = public_paths_of(&krate, &sources_of(src));
        seen += paths.len();
        problems.extend(
            duplicates(&paths)
                .into_iter()
                .map(|d| format!("{dir}: {d}")),
        );
    }
    // The check sees the store crate's main types (it would pass vacuously otherwise).
    let store = public_paths_of(
        "strata_store",
        &sources_of(&crates.iter().find(|(d, _)| d == "strata-store").unwrap().1),
    );
    for ty in ["strata_store::Store", "strata_store::manifest::Manifest"] {
        assert!(
            store.values().any(|p| p.contains(ty)),
            "`{ty}` not found among strata-store's public paths: {store:?}"
        );
    }
    assert!(
        seen > 200,
        "only {seen} public types found in the workspace"
    );
    assert!(
        problems.is_empty(),
        "types reachable under more than one path:\n{}",
        problems.join("\n")
    );
}

#[test]
fn checker_catches_a_second_path() {
    let lib = "pub mod policy; mod collection; pub mod layout; \
               pub use collection::{Collection, Options};";
    let collection = "pub struct Collection; pub struct Options; pub(crate) struct Hidden;";
    let policy = "pub mod cutover; pub enum Refusal { A } pub use crate::collection::Options;";
    let cutover = "pub struct CutoverOptions;";
    let layout = "pub mod keys { pub use crate::collection::*; } mod private { pub struct P; }";
    let sources = vec![
        source("lib.rs", lib),
        source("collection/mod.rs", collection),
        source("policy/mod.rs", policy),
        source("policy/cutover.rs", cutover),
        source("layout.rs", layout),
    ];
    let paths = public_paths(&sources);
    assert_eq!(
        paths["policy::cutover::CutoverOptions"],
        BTreeSet::from(["strata::policy::cutover::CutoverOptions".to_string()])
    );
    assert!(!paths.contains_key("layout::private::P"), "{paths:?}");
    assert!(!paths.contains_key("collection::Hidden"), "{paths:?}");
    let dups = duplicates(&paths);
    // `Options` at the root, in `policy` and through the glob; `Collection` at the root
    // and through the glob.
    assert_eq!(dups.len(), 2, "{dups:?}");
    assert!(dups[0].starts_with("collection::Collection is public under 2 paths"));
    assert!(dups[1].contains("strata::policy::Options"), "{dups:?}");
    assert!(
        dups[1].contains("strata::layout::keys::Options"),
        "{dups:?}"
    );
}
