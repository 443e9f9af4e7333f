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
//! The cycle check ([`module_cycles`]) runs over every crate of the workspace (`crates/*`
//! with a `src/lib.rs`): for every module, the graph "child A references child B" (a name
//! the module re-exports counts as the child that defines it) must be acyclic. A `pub use`
//! is a reference too. [`KNOWN_CYCLES`] lists the cycles still to break.
//!
//! The crates are layered as well ([`crates`]): no backend crate depends on the engine or
//! on a crate above it, in any dependency kind (read from the manifests).

mod crates;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One library source file: its module path (`policy::gate` → `["policy", "gate"]`) and
/// its text with comments, strings and `#[cfg(test)]` items removed.
pub(crate) struct Source {
    pub(crate) rel: String,
    pub(crate) module: Vec<String>,
    pub(crate) code: String,
}

/// Removes comments, string/char literals (replaced by `""`), keeping everything else.
fn strip(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let n = s.len();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < n {
        let c = s[i];
        if c == '/' && i + 1 < n && s[i + 1] == '/' {
            while i < n && s[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && i + 1 < n && s[i + 1] == '*' {
            let mut depth = 0;
            while i < n {
                if s[i] == '/' && i + 1 < n && s[i + 1] == '*' {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && i + 1 < n && s[i + 1] == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        // Raw strings: r"…", r#"…"#, br#"…"# (the `r` starts a token).
        if c == 'r'
            && (i == 0 || !ident(s[i - 1]) || (s[i - 1] == 'b' && (i < 2 || !ident(s[i - 2]))))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while j < n && s[j] == '#' {
                hashes += 1;
                j += 1;
            }
            if j < n && s[j] == '"' {
                j += 1;
                'raw: while j < n {
                    if s[j] == '"' {
                        let mut k = 0;
                        while k < hashes && j + 1 + k < n && s[j + 1 + k] == '#' {
                            k += 1;
                        }
                        if k == hashes {
                            j += 1 + hashes;
                            break 'raw;
                        }
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
                continue;
            }
        }
        if c == '"' {
            let mut j = i + 1;
            while j < n && s[j] != '"' {
                if s[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j + 1;
            continue;
        }
        if c == '\'' {
            // A char literal ('x', '\n', '\u{..}', '"'), else a lifetime.
            if i + 1 < n && s[i + 1] == '\\' {
                let mut j = i + 2;
                while j < n && s[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
                continue;
            }
            if i + 2 < n && s[i + 2] == '\'' {
                out.push_str("' '");
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Index just past the item starting at `from`: up to its first `;`, or through its first
/// `{ … }` block when that comes first.
pub(crate) fn item_end(s: &str, from: usize) -> usize {
    let b = s.as_bytes();
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b';' => return i + 1,
            b'{' => {
                let mut depth = 0;
                while i < b.len() {
                    match b[i] {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                return i + 1;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                return i;
            }
            _ => i += 1,
        }
    }
    i
}

/// Removes every `#[cfg(test)]` item; returns the code and the names of the test-only
/// file modules it declared (`#[cfg(test)] mod tests;`).
fn drop_test_items(code: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_files = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let end = item_end(after, 0);
        let item = after[..end].trim();
        let words: Vec<&str> = item
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        if item.ends_with(';') {
            if let Some(p) = words.iter().position(|w| *w == "mod") {
                if let Some(name) = words.get(p + 1) {
                    test_files.push(name.to_string());
                }
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    (out, test_files)
}

/// The first path segment of each item of a use tree group starting at `s[0] == '{'`,
/// with the rest of each item's path (`{a::b, c}` → `[["a","b"], ["c"]]`). Nested groups
/// give their prefix only.
fn group_items(s: &str) -> Vec<Vec<String>> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    items.push(std::mem::take(&mut cur));
                    break;
                }
            }
            ',' if depth == 1 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        if depth >= 1 {
            cur.push(c);
        }
    }
    items
        .iter()
        .map(|it| {
            let it = it.split(" as ").next().unwrap_or("");
            let path = it.split('{').next().unwrap_or("");
            path.split("::")
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty() && p != "*")
                .collect::<Vec<_>>()
        })
        .filter(|p| !p.is_empty())
        .collect()
}

pub(crate) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every absolute path referenced through `crate::` or `super::` in `code`, resolved
/// against `module` (the file's module path), each with the byte offset of its reference.
fn references(code: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    let mut refs = Vec::new();
    let offsets: Vec<usize> = code.char_indices().map(|(o, _)| o).collect();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == ':');
        let rest: String = bytes[i..bytes.len().min(i + 6)].iter().collect();
        if !starts_word || !(rest.starts_with("crate") || rest.starts_with("super")) {
            i += 1;
            continue;
        }
        let at = offsets[i];
        let mut base: Vec<String>;
        let mut j;
        if rest.starts_with("crate") {
            base = Vec::new();
            j = i + 5;
        } else {
            base = module[..module.len().saturating_sub(1)].to_vec();
            j = i + 5;
        }
        if !(j + 1 < bytes.len() && bytes[j] == ':' && bytes[j + 1] == ':') {
            i = j;
            continue;
        }
        j += 2;
        // Further `super::`.
        loop {
            let tail: String = bytes[j..bytes.len().min(j + 7)].iter().collect();
            if tail.starts_with("super::") {
                base.pop();
                j += 7;
            } else {
                break;
            }
        }
        if j < bytes.len() && bytes[j] == '{' {
            let group: String = bytes[j..].iter().collect();
            for item in group_items(&group) {
                let mut p = base.clone();
                p.extend(item);
                refs.push((at, p));
            }
        } else {
            let mut p = base.clone();
            let mut k = j;
            loop {
                let start = k;
                while k < bytes.len() && is_ident(bytes[k]) {
                    k += 1;
                }
                if k == start {
                    break;
                }
                p.push(bytes[start..k].iter().collect());
                if k + 2 < bytes.len()
                    && bytes[k] == ':'
                    && bytes[k + 1] == ':'
                    && is_ident(bytes[k + 2])
                {
                    k += 2;
                } else {
                    break;
                }
            }
            if p.len() > base.len() {
                refs.push((at, p));
            }
        }
        i = j;
    }
    refs
}

/// The `pub use crate::…;` statements of `code` (start offset, end offset, text).
pub(crate) fn pub_uses(code: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("pub use ") {
        let start = from + at;
        let prev = code[..start].chars().last();
        let end = code[start..]
            .find(';')
            .map_or(code.len(), |e| start + e + 1);
        if prev.is_none_or(|c| !is_ident(c)) {
            out.push((start, end, code[start..end].to_string()));
        }
        from = end;
    }
    out
}

/// The names a `pub use` statement brings in (the last segment or its alias), each with
/// its full path.
pub(crate) fn used_names(stmt: &str, module: &[String]) -> Vec<(String, Vec<String>)> {
    let body = stmt
        .trim_start_matches("pub use ")
        .trim_end_matches(';')
        .trim();
    let (body, alias) = match body.split_once(" as ") {
        Some((b, a)) if !b.contains('{') => (b.trim(), Some(a.trim())),
        _ => (body, None),
    };
    let mut out = Vec::new();
    let (prefix, group) = match body.find('{') {
        Some(b) => (&body[..b], Some(&body[b..])),
        None => (body, None),
    };
    let mut base: Vec<String> = prefix
        .split("::")
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    match base.first().map(String::as_str) {
        Some("crate") => {
            base.remove(0);
        }
        Some("super") => {
            base.remove(0);
            let mut b = module[..module.len().saturating_sub(1)].to_vec();
            b.extend(base);
            base = b;
        }
        Some("self") => {
            base.remove(0);
            let mut b = module.to_vec();
            b.extend(base);
            base = b;
        }
        _ => {
            let mut b = module.to_vec();
            b.extend(base);
            base = b;
        }
    }
    let mut push = |item: &str| {
        let mut parts = item.split(" as ");
        let path = parts.next().unwrap_or("").trim();
        let alias = parts.next().map(str::trim);
        let segs: Vec<String> = path
            .split("::")
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty() && p != "self")
            .collect();
        let mut full = base.clone();
        full.extend(segs.iter().cloned());
        let name = alias
            .map(str::to_string)
            .or_else(|| full.last().cloned())
            .unwrap_or_default();
        if !name.is_empty() && name != "*" {
            out.push((name, full));
        }
    };
    match group {
        None => {
            // `base` already holds the whole path.
            let name = alias
                .map(str::to_string)
                .or_else(|| base.last().cloned())
                .unwrap_or_default();
            out.push((name, base.clone()));
        }
        Some(g) => {
            let inner = g.trim().trim_start_matches('{').trim_end_matches('}');
            let mut depth = 0;
            let mut cur = String::new();
            for c in inner.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        push(&cur);
                        cur.clear();
                        continue;
                    }
                    _ => {}
                }
                cur.push(c);
            }
            if !cur.trim().is_empty() {
                push(&cur);
            }
        }
    }
    out
}

/// What a root re-export of another crate resolves to.
const EXTERNAL: &str = "<another crate>";

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

/// Import cycles still to break, per crate: (crate directory, modules that use each other
/// in cycles). A cycle all of whose modules one entry lists is tolerated (and printed);
/// any other fails the check. This list may only shrink.
///
/// Empty: every crate of the workspace is free of import cycles.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

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
/// checked by [`modules_use_only_lower_layers`]).
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
