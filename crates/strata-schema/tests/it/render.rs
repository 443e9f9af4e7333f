//! `render_human` and the JSON form of a delta.

use serde_json::json;
use strata_schema::{diff, render_human, SchemaDelta};

fn sample() -> SchemaDelta {
    let old = json!({"type": "object", "properties": {
        "id": {"type": "string"}, "qty": {"type": "integer"}, "old": {"type": "boolean"}},
        "required": ["id"]});
    let new = json!({"type": "object", "properties": {
        "id": {"type": "string"}, "qty": {"type": "number"}, "note": {"type": "string"}},
        "required": ["id", "qty"]});
    diff("invoices", &old, &new).unwrap()
}

#[test]
fn human_rendering_lists_summary_paths_and_verdict() {
    let text = render_human(&sample());
    assert!(
        text.starts_with("schema delta for `invoices`: non-additive\n"),
        "{text}"
    );
    assert!(text.contains("  added:   note\n"), "{text}");
    assert!(text.contains("  removed: old\n"), "{text}");
    assert!(
        text.contains("  changed: qty (required, shape)\n"),
        "{text}"
    );
    assert!(text.contains("type widened: integer -> number"), "{text}");
    assert!(text.contains("BREAKS"), "{text}");
    assert!(
        text.contains("compatibility: none (backward: no, forward: no)"),
        "{text}"
    );
    assert!(
        text.contains("  - not backward compatible: /qty: property became required"),
        "{text}"
    );
    assert!(text.ends_with('\n'));
}

#[test]
fn human_rendering_of_no_change() {
    let s = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let text = render_human(&diff("c", &s, &s).unwrap());
    assert!(text.contains(": none\n"));
    assert!(!text.contains("path-level changes"));
    assert!(text.contains("compatibility: full (backward: yes, forward: yes)"));
}

#[test]
fn json_form_uses_seed_spellings_and_round_trips() {
    let d = sample();
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["kind"], "non-additive");
    assert_eq!(v["changed"][0]["field"], "qty");
    assert_eq!(v["changed"][0]["required_changed"], true);
    assert_eq!(v["compatibility"]["level"], "none");
    assert!(v["paths"].as_array().unwrap().iter().any(
        |p| p["change"]["kind"] == "type_widened" && p["change"]["from"] == json!(["integer"])
    ));
    let back: SchemaDelta = serde_json::from_value(v).unwrap();
    assert_eq!(back, d);
}
