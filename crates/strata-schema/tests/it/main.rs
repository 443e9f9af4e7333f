#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Integration tests for strata-schema: one binary, one module per capability.

mod bounded;
mod canonical;
mod derived;
mod errors;
mod fuzz;
mod generated;
mod paths;
mod render;
mod seed;

use serde_json::Value;
use strata_schema::{PathChange, SchemaDelta};

/// `"<path> <kind>"` for every path change, sorted.
pub fn change_summary(delta: &SchemaDelta) -> Vec<String> {
    let mut out: Vec<String> = delta.paths.iter().map(summary_of).collect();
    out.sort();
    out
}

/// `"<path> <kind>"` of one path change.
pub fn summary_of(p: &PathChange) -> String {
    let v = serde_json::to_value(&p.change).unwrap();
    let kind = v.get("kind").and_then(Value::as_str).unwrap().to_string();
    format!("{} {}", p.path, kind)
}
