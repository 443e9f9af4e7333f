//! The crate's modules stay layered: every module of `src/` may use only modules of a
//! LOWER layer, so there is no import cycle between modules; and no crate of the workspace
//! has an import cycle between its modules, at any depth.
//!
//! The layer map is read from the crate docs (the "Layers" table of `src/lib.rs`), so the
//! docs and this check cannot drift apart. The check reads every `crate::…`, `super::…`
//! and `use crate::{…}` reference of the library sources (comments, string literals and
//! `#[cfg(test)]` items are left out: unit tests may exercise a layer through the ones
//! above it). A `pub use` of a higher layer's items is an upward reference like any
//! other, except the facades listed in [`KNOWN_FACADES`] (older public paths that item 2
//! of #25 removes; the list may only shrink); a reference that goes through such a facade
//! counts as a reference to the layer that defines the item.
//!
//! The cycle check ([`cycles::module_cycles`]) runs over every crate of the workspace (`crates/*`
//! with a `src/lib.rs`): for every module, the graph "child A references child B" (a name
//! the module re-exports counts as the child that defines it) must be acyclic. A `pub use`
//! is a reference too. [`cycles::KNOWN_CYCLES`] lists the cycles still to break.
//!
//! The crates are layered as well ([`crates`]): no backend crate depends on the engine or
//! on a crate above it, in any dependency kind (read from the manifests).
//!
//! The source scanner is [`parse`], the layer check [`upward`], the cycle check [`cycles`];
//! the sources, the facades and the helpers `public_paths.rs` shares stay here.

mod crates;
mod cycles;
mod parse;
mod upward;

use parse::{drop_test_items, references, strip};
pub(crate) use parse::{is_ident, item_end, pub_uses, used_names};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One library source file: its module path (`policy::gate` → `["policy", "gate"]`) and
/// its text with comments, strings and `#[cfg(test)]` items removed.
pub(crate) struct Source {
    pub(crate) rel: String,
    pub(crate) module: Vec<String>,
    pub(crate) code: String,
}

/// The `pub use` of a higher layer that strata still has, as (file under `src/`, name it
/// brings in). Empty: item 2 of #25 ("one import path per type, no facades") removed the
/// older public paths (`strata::policy::CutoverOptions`, `strata::payload::sweep`,
/// `strata::seal::rotate_data_key`); any upward `pub use` fails the check, and
/// `public_paths.rs` fails on any type public under two paths.
const KNOWN_FACADES: &[(&str, &str)] = &[];

/// Whether `path` (an item a `pub use` of the file `rel` brings in) is under a module an
/// entry of `allowed` names for that file.
fn allowed_facade(rel: &str, path: &[String], allowed: &[(&str, &str)]) -> bool {
    allowed.iter().any(|(file, module)| {
        let module: Vec<&str> = module.split("::").collect();
        *file == rel && path.len() >= module.len() && path.iter().zip(&module).all(|(a, b)| a == b)
    })
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The `src/` of every library crate of the workspace, by crate directory name.
pub(crate) fn workspace_crates() -> Vec<(String, PathBuf)> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src/lib.rs").is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, p.join("src"))
        })
        .collect();
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Every library source of strata, without test-only files.
pub(crate) fn sources() -> Vec<Source> {
    sources_of(&src_dir())
}

/// Every library source under `root` (a crate's `src/`), without test-only files and
/// without the binary targets (`main.rs`, `bin/`: crate roots of their own).
pub(crate) fn sources_of(root: &Path) -> Vec<Source> {
    let root = root.to_path_buf();
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.retain(|f| f != &root.join("main.rs") && !f.starts_with(root.join("bin")));
    let mut all = Vec::new();
    let mut test_only: BTreeSet<PathBuf> = BTreeSet::new();
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let mut module: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(String::from)
            .collect();
        let last = module.last().cloned().unwrap_or_default();
        if last == "mod" || last == "lib" {
            module.pop();
        }
        let raw = std::fs::read_to_string(f).unwrap();
        let (code, tests) = drop_test_items(&strip(&raw));
        let dir = if last == "mod" || last == "lib" {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        for t in tests {
            test_only.insert(dir.join(format!("{t}.rs")));
            test_only.insert(dir.join(&t).join("mod.rs"));
        }
        all.push((f.clone(), Source { rel, module, code }));
    }
    all.into_iter()
        .filter(|(f, _)| !test_only.contains(f))
        .map(|(_, s)| s)
        .collect()
}

pub(crate) fn source(rel: &str, text: &str) -> Source {
    let mut module: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
        module.pop();
    }
    let (code, _) = drop_test_items(&strip(text));
    Source {
        rel: rel.into(),
        module,
        code,
    }
}

/// `sources` without the `pub use` statements of the facades `allowed` lists.
fn without_facades(sources: &[Source], allowed: &[(&str, &str)]) -> Vec<Source> {
    sources
        .iter()
        .map(|s| {
            let mut code = s.code.clone();
            for (a, b, stmt) in pub_uses(&s.code).into_iter().rev() {
                if used_names(&stmt, &s.module)
                    .iter()
                    .any(|(_, p)| allowed_facade(&s.rel, p, allowed))
                {
                    code.replace_range(a..b, "");
                }
            }
            Source {
                rel: s.rel.clone(),
                module: s.module.clone(),
                code,
            }
        })
        .collect()
}
