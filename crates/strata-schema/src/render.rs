//! Human-readable rendering of a [`SchemaDelta`] (what `strata schema diff` prints).

use std::fmt::Write as _;

use crate::delta::SchemaDelta;

fn yes_no(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "BREAKS"
    }
}

/// Renders a delta as plain text: the seed summary, rename findings, one line per
/// path-level change with its backward/forward verdict, and the overall verdict with
/// its reasons. Ends with a newline.
pub fn render_human(delta: &SchemaDelta) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "schema delta for `{}`: {}",
        delta.collection.escape_debug(),
        delta.kind
    );
    let list = |items: &[String]| {
        if items.is_empty() {
            "-".to_string()
        } else {
            items.join(", ")
        }
    };
    let _ = writeln!(out, "  added:   {}", list(&delta.added));
    let _ = writeln!(out, "  removed: {}", list(&delta.removed));
    let changed: Vec<String> = delta
        .changed
        .iter()
        .map(|c| {
            let what = match (c.required_changed, c.shape_changed) {
                (true, true) => "required, shape",
                (true, false) => "required",
                _ => "shape",
            };
            format!("{} ({what})", c.field)
        })
        .collect();
    let _ = writeln!(out, "  changed: {}", list(&changed));
    for r in &delta.renames {
        let _ = writeln!(
            out,
            "  rename candidate at {}: `{}` -> `{}` (identical shape; not treated as safe)",
            r.path, r.from, r.to
        );
    }
    for a in &delta.ambiguous_renames {
        let _ = writeln!(
            out,
            "  ambiguous rename at {}: removed [{}], added [{}] (identical shapes; not guessed)",
            a.path,
            a.removed.join(", "),
            a.added.join(", ")
        );
    }
    if !delta.paths.is_empty() {
        let width = delta
            .paths
            .iter()
            .map(|p| p.path.chars().count())
            .max()
            .unwrap_or(0)
            .max(4);
        let _ = writeln!(out, "path-level changes:");
        let _ = writeln!(
            out,
            "  {:<8} {:<8} {:<width$}  change",
            "backward", "forward", "path"
        );
        for p in &delta.paths {
            let _ = writeln!(
                out,
                "  {:<8} {:<8} {:<width$}  {}",
                yes_no(p.backward),
                yes_no(p.forward),
                p.path,
                p.change
            );
        }
    }
    let c = &delta.compatibility;
    let _ = writeln!(
        out,
        "compatibility: {} (backward: {}, forward: {})",
        c.level,
        if c.backward { "yes" } else { "no" },
        if c.forward { "yes" } else { "no" }
    );
    for r in &c.reasons {
        let _ = writeln!(out, "  - {r}");
    }
    out
}
