//! Given/expected checks of steps and chains.

use crate::support::options;
use serde_json::json;
use strata::{CollectionOptions, Mode};

#[test]
fn a_whole_chain_and_one_step_on_raw_json() {
    strata_testkit::assert_upcasts(
        &options(),
        1,
        json!({"id": "a", "balance": 2, "email": "e"}),
        json!({"id": "a", "balance_cents": 200, "tier": "basic", "steps": 1, "email": "e"}),
    );
    // Skipping versions: a v3 row runs only the last step.
    strata_testkit::assert_upcasts(
        &options(),
        3,
        json!({"id": "a", "balance_cents": 5, "tier": "gold", "email": "e", "steps": 4}),
        json!({"id": "a", "balance_cents": 5, "tier": "gold", "email": "e", "steps": 5}),
    );
    strata_testkit::assert_step(
        &options(),
        2,
        json!({"id": "a", "balance_cents": 1}),
        json!({"id": "a", "balance_cents": 1, "tier": "basic"}),
    );
    let why = strata_testkit::assert_upcast_fails(&options(), 1, json!({"id": "a"}));
    assert!(
        why.contains("v1 -> v2") && why.contains("numeric `balance`"),
        "{why}"
    );
    strata_testkit::assert_ahead_refused(&options(), 5);
}

#[test]
fn identity_fields_are_protected_as_the_engine_protects_them() {
    let rekeying = CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, |o| {
            o.insert("id".into(), json!("hijacked"));
            o.insert("x".into(), json!(1));
            Ok(())
        });
    strata_testkit::assert_upcasts(&rekeying, 1, json!({"id": "a"}), json!({"id": "a", "x": 1}));
    strata_testkit::assert_step(&rekeying, 1, json!({}), json!({"x": 1}));
}

#[test]
#[should_panic(expected = "upcast to v4")]
fn a_wrong_expectation_fails_with_both_values() {
    strata_testkit::assert_upcasts(
        &options(),
        2,
        json!({"id": "a", "balance_cents": 1, "email": "e"}),
        json!({"id": "a"}),
    );
}

#[test]
#[should_panic(expected = "was accepted")]
fn a_chain_that_knows_the_version_is_not_ahead() {
    strata_testkit::assert_ahead_refused(&options(), 4);
}
