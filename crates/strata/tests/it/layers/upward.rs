//! Every module of `src/` uses only modules of a LOWER layer (the layer map of `src/lib.rs`),
//! and the checker catches each kind of upward reference.

use super::*;

/// What a root re-export of another crate resolves to.
const EXTERNAL: &str = "<another crate>";

/// The layer map of the crate docs: rows `| <n> | [`a`], [`b`] | … |` of the table under
/// the "Layers" heading of `src/lib.rs`, bottom layer first.
fn layer_map() -> Vec<Vec<String>> {
    let lib = std::fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let mut layers = Vec::new();
    let mut in_section = false;
    let mut in_table = false;
    for line in lib.lines() {
        let line = line.trim_start_matches("//!").trim();
        if line == "## Layers" {
            in_section = true;
            continue;
        }
        if !in_section {
            continue;
        }
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 2 || cells[0].parse::<usize>().is_err() {
            continue;
        }
        let mods: Vec<String> = cells[1]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect();
        assert_eq!(
            cells[0].parse::<usize>().unwrap(),
            layers.len() + 1,
            "layer rows of lib.rs must be numbered 1, 2, … bottom first"
        );
        layers.push(mods);
    }
    layers
}

/// The crate root's `pub use module::Name` re-exports: name → module.
fn root_reexports(lib_code: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for (_, _, stmt) in pub_uses(lib_code) {
        for (name, path) in used_names(&stmt, &[]) {
            if let Some(m) = path.first() {
                map.insert(name, m.clone());
            }
        }
    }
    map
}

/// Violations of the layering in `sources` against `layers`: one line per reference.
/// A `pub use` of a higher layer is an upward reference unless `allowed` lists it (see
/// [`KNOWN_FACADES`]).
fn violations(
    sources: &[Source],
    layers: &[Vec<String>],
    allowed: &[(&str, &str)],
) -> (Vec<String>, usize) {
    let rank: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, ms)| ms.iter().map(move |m| (m.as_str(), i)))
        .collect();
    let lib = sources
        .iter()
        .find(|s| s.module.is_empty())
        .map(|s| s.code.clone())
        .unwrap_or_default();
    let root = root_reexports(&lib);
    let mut problems = Vec::new();
    // Every module the crate root declares is placed in the map.
    for word in lib.split(';') {
        let w: Vec<&str> = word.split_whitespace().collect();
        if let Some(p) = w.iter().position(|x| *x == "mod") {
            if let Some(name) = w.get(p + 1) {
                if !rank.contains_key(name) {
                    problems.push(format!(
                        "module `{name}` is in no layer of the lib.rs layer map"
                    ));
                }
            }
        }
    }
    // Facades: (module path, name) → the module the item really lives in.
    let mut facades: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for s in sources.iter().filter(|s| !s.module.is_empty()) {
        let own = rank.get(s.module[0].as_str()).copied();
        for (_, _, stmt) in pub_uses(&s.code) {
            for (name, path) in used_names(&stmt, &s.module) {
                let target = path.first().map(String::as_str).unwrap_or("");
                if target != s.module[0]
                    && rank.get(target).copied() > own
                    && allowed_facade(&s.rel, &path, allowed)
                {
                    let mut at = s.module.clone();
                    at.push(name);
                    facades.insert(at, path);
                }
            }
        }
    }
    let resolve = |path: &[String]| -> Option<String> {
        // The longest facade prefix wins.
        for len in (1..=path.len()).rev() {
            if let Some(real) = facades.get(&path[..len]) {
                return real.first().cloned();
            }
        }
        let first = path.first()?;
        if rank.contains_key(first.as_str()) {
            Some(first.clone())
        } else {
            // A root re-export of another crate (`crate::Store`) is no module of ours.
            root.get(first).map(|m| {
                if rank.contains_key(m.as_str()) {
                    m.clone()
                } else {
                    EXTERNAL.to_string()
                }
            })
        }
    };
    let mut count = 0;
    for s in sources.iter().filter(|s| !s.module.is_empty()) {
        let me = s.module[0].as_str();
        let Some(&own) = rank.get(me) else {
            problems.push(format!("{}: module `{me}` is in no layer", s.rel));
            continue;
        };
        let facade_spans: Vec<(usize, usize, String)> = pub_uses(&s.code)
            .into_iter()
            .filter(|(_, _, stmt)| {
                used_names(stmt, &s.module).iter().any(|(_, p)| {
                    let t = p.first().map(String::as_str).unwrap_or("");
                    t != me
                        && rank.get(t).copied() > Some(own)
                        && allowed_facade(&s.rel, p, allowed)
                })
            })
            .collect();
        for (at, path) in references(&s.code, &s.module) {
            count += 1;
            if facade_spans.iter().any(|(a, b, _)| (*a..*b).contains(&at)) {
                continue;
            }
            let Some(target) = resolve(&path) else {
                problems.push(format!(
                    "{}: cannot tell which module `crate::{}` is in",
                    s.rel,
                    path.join("::")
                ));
                continue;
            };
            if target == me || target == EXTERNAL {
                continue;
            }
            match rank.get(target.as_str()) {
                Some(&t) if t < own => {}
                Some(&t) => problems.push(format!(
                    "{}: `{me}` (layer {}) uses `crate::{}` of `{target}` (layer {}): a module may use only lower layers",
                    s.rel,
                    own + 1,
                    path.join("::"),
                    t + 1
                )),
                None => problems.push(format!("{}: `{target}` is in no layer", s.rel)),
            }
        }
        // A facade's names are not used in its own file (they would hide an upward use).
        let mut rest = s.code.clone();
        for (a, b, _) in facade_spans.iter().rev() {
            rest.replace_range(*a..*b, "");
        }
        for (_, _, stmt) in &facade_spans {
            for (name, _) in used_names(stmt, &s.module) {
                let used = rest.match_indices(name.as_str()).any(|(i, _)| {
                    let before = rest[..i].chars().last();
                    let after = rest[i + name.len()..].chars().next();
                    before.is_none_or(|c| !is_ident(c)) && after.is_none_or(|c| !is_ident(c))
                });
                if used {
                    problems.push(format!(
                        "{}: `{name}` is re-exported from a higher layer and also used in this file",
                        s.rel
                    ));
                }
            }
        }
    }
    (problems, count)
}

#[test]
fn modules_use_only_lower_layers() {
    let layers = layer_map();
    assert!(
        layers.len() >= 5,
        "the lib.rs layer map was not found: {layers:?}"
    );
    let sources = sources();
    let (problems, count) = violations(&sources, &layers, KNOWN_FACADES);
    assert!(
        count > 200,
        "only {count} references found: is the scanner broken?"
    );
    assert!(
        problems.is_empty(),
        "layering broken (see the layer map in src/lib.rs):\n{}",
        problems.join("\n")
    );
}

/// The checker itself catches each kind of upward reference, and lets the allowed ones pass.
#[test]
fn checker_catches_upward_references() {
    let layers: Vec<Vec<String>> =
        vec![vec!["low".into()], vec!["mid".into()], vec!["high".into()]];
    // The facades of `low/mod.rs` these cases allow (as `KNOWN_FACADES` does strata's).
    let facades: &[(&str, &str)] = &[("low/mod.rs", "high"), ("low/mod.rs", "mid")];
    let check = |files: &[(&str, &str)]| {
        let mut all = vec![source(
            "lib.rs",
            "pub mod low; pub mod mid; pub mod high; pub use high::Top; pub use mid::Middle; pub use other::Ext;",
        )];
        all.extend(files.iter().map(|(r, t)| source(r, t)));
        violations(&all, &layers, facades).0
    };
    // Allowed: downward uses, own module, comments, strings, tests, facades.
    let ok = check(&[
        ("mid/mod.rs", "use crate::low::{A, b::C};\nuse crate::Ext; // crate::high::X\nfn f() { let _ = \"crate::high\"; let _ = '\"'; crate::mid::y(); }"),
        ("mid/inner.rs", "use super::Thing; use crate::low as l;"),
        ("mid/t.rs", "#[cfg(test)]\nmod tests { use crate::high::H; }"),
        ("low/mod.rs", "// Facade\npub use crate::high::Top as Old;\npub use crate::mid::{Middle, m::M2};"),
        ("high.rs", "use crate::{low::A, mid::B}; use crate::Middle; fn g() -> crate::low::Old { todo!() }"),
    ]);
    assert!(ok.is_empty(), "{ok:?}");
    // Each of these is one upward use.
    for (rel, text) in [
        ("low.rs", "use crate::mid::A;"),
        ("low.rs", "use crate::{x::Y, high::Z};"),
        ("low.rs", "fn f() -> crate::high::T { todo!() }"),
        ("low.rs", "use crate::Top;"),
        ("mid/a.rs", "use super::super::high::T;"),
        ("mid/a.rs", "pub(crate) use crate::high::T;"),
        ("mid/a.rs", "fn f() { crate::low::Old::new(); }"),
        ("low/b.rs", "use super::Old;"),
    ] {
        let extra = ("low/mod.rs", "pub use crate::high::Top as Old;");
        let found = check(&[extra, (rel, text)]);
        assert!(
            found
                .iter()
                .any(|p| p.contains("only lower layers") || p.contains("cannot tell")),
            "not caught: {text} → {found:?}"
        );
    }
    // A `pub use` of a higher layer that no allowed facade names is an upward use.
    for (rel, text) in [
        ("mid/a.rs", "pub use crate::high::T;"),
        ("mid/a.rs", "pub use crate::{low::A, high::T};"),
        ("mid/a.rs", "pub use super::super::high::T as Old;"),
        ("low/b.rs", "pub use crate::high::Top;"),
    ] {
        let found = check(&[(rel, text)]);
        assert!(
            found.iter().any(|p| p.contains("only lower layers")),
            "upward pub use not caught: {text} → {found:?}"
        );
    }
    // The same facade, not allowed, is caught too.
    let all = vec![
        source("lib.rs", "pub mod low; pub mod mid; pub mod high;"),
        source("low/mod.rs", "pub use crate::high::Top as Old;"),
    ];
    assert!(
        violations(&all, &layers, &[])
            .0
            .iter()
            .any(|p| p.contains("only lower layers")),
        "an upward pub use passed without an allowed facade"
    );
    // A facade name used in its own file is caught.
    let found = check(&[(
        "low/mod.rs",
        "pub use crate::high::Top;\nfn f() -> Top { todo!() }",
    )]);
    assert!(found.iter().any(|p| p.contains("also used")), "{found:?}");
    // Two modules of one layer may not use each other either.
    let same = vec![
        vec!["low".to_string(), "mid".to_string()],
        vec!["high".to_string()],
    ];
    let all = vec![
        source("lib.rs", "pub mod low; pub mod mid; pub mod high;"),
        source("low.rs", "use crate::mid::A;"),
    ];
    assert_eq!(violations(&all, &same, &[]).0.len(), 1);
    // A module the map does not place is reported.
    let all = vec![source(
        "lib.rs",
        "pub mod low; pub mod mid; pub mod high; mod extra;",
    )];
    assert!(violations(&all, &layers, &[])
        .0
        .iter()
        .any(|p| p.contains("`extra`")));
}
