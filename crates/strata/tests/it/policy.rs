//! Schema-update strategies and the write gate.

use super::policy_util::{config, guard_err, mem, obj, Faulty};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use strata::clock::ManualClock;
use strata::policy::{
    additive_only, baseline_key, blind_update, coordinated_cutover, covered_by_upcasts,
    evaluate_strategies, lock_schema, lock_schema_fields, Baseline, PolicyError, Refusal,
    Rejection, SchemaDeclaration, SchemaDelta, SchemaOptions, SchemaUpdateStrategy, UpdateContext,
    UpdateDecision, Verdict,
};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, Store};

const NON_ADDITIVE: &str = "Non-additive schema change to \"invoices\" (added: [], removed: [amount], changed: []). Register a coordinated_cutover() strategy to migrate, or revert the change.";
const LOCKED: &str = "Schema for \"invoices\" is locked; the change was refused.";

fn delta(old: &Value, new: &Value) -> SchemaDelta {
    strata_schema::diff("invoices", old, new).unwrap()
}

fn none_delta() -> SchemaDelta {
    let s = obj(&[("id", "string", true)]);
    delta(&s, &s)
}
fn additive_delta() -> SchemaDelta {
    delta(
        &obj(&[("id", "string", true)]),
        &obj(&[("id", "string", true), ("note", "string", false)]),
    )
}
fn removal_delta() -> SchemaDelta {
    delta(
        &obj(&[("id", "string", true), ("amount", "number", true)]),
        &obj(&[("id", "string", true)]),
    )
}

fn ctx() -> UpdateContext {
    UpdateContext::new("invoices")
}

fn decide(s: &strata::policy::Strategy, d: &SchemaDelta) -> UpdateDecision {
    s.on_schema_delta(d, &ctx())
}

fn rejected(dec: &UpdateDecision) -> Option<PolicyError> {
    match dec {
        UpdateDecision::Reject(r) => Some(r.to_error("invoices", "s")),
        _ => None,
    }
}

#[test]
fn deltas_have_the_expected_kinds() {
    use strata::policy::DeltaKind;
    assert_eq!(none_delta().kind, DeltaKind::None);
    assert_eq!(additive_delta().kind, DeltaKind::Additive);
    assert_eq!(removal_delta().kind, DeltaKind::NonAdditive);
}

#[test]
fn blind_update_allows_every_change() {
    for d in [none_delta(), additive_delta(), removal_delta()] {
        assert!(matches!(decide(&blind_update(), &d), UpdateDecision::Allow));
    }
}

#[test]
fn additive_only_allows_none_and_additive_and_rejects_non_additive() {
    assert!(matches!(
        decide(&additive_only(), &none_delta()),
        UpdateDecision::Allow
    ));
    assert!(matches!(
        decide(&additive_only(), &additive_delta()),
        UpdateDecision::Allow
    ));
    let err = rejected(&decide(&additive_only(), &removal_delta())).expect("rejected");
    assert_eq!(err.to_string(), NON_ADDITIVE);
    assert!(err.is_rejection());
}

#[test]
fn lock_schema_refuses_any_change_even_additive() {
    assert!(matches!(
        decide(&lock_schema(), &none_delta()),
        UpdateDecision::Allow
    ));
    for d in [additive_delta(), removal_delta()] {
        let err = rejected(&decide(&lock_schema(), &d)).expect("locked");
        assert_eq!(err.to_string(), LOCKED);
    }
}

#[test]
fn lock_schema_with_fields_refuses_only_changes_touching_them() {
    let lock_amount = lock_schema_fields(["amount"]);
    assert!(matches!(
        decide(&lock_amount, &additive_delta()),
        UpdateDecision::Allow
    ));
    assert!(rejected(&decide(&lock_amount, &removal_delta())).is_some());
    let lock_note = lock_schema_fields(["note"]);
    assert!(rejected(&decide(&lock_note, &additive_delta())).is_some());
    assert!(matches!(
        decide(&lock_note, &removal_delta()),
        UpdateDecision::Allow
    ));
}

#[derive(Debug, Default)]
struct Counting {
    calls: AtomicUsize,
}

impl SchemaUpdateStrategy for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn on_schema_delta(&self, _: &SchemaDelta, _: &UpdateContext) -> UpdateDecision {
        self.calls.fetch_add(1, Ordering::SeqCst);
        UpdateDecision::Reject(Rejection::Custom {
            reason: "counted".into(),
        })
    }
}

#[test]
fn first_non_allow_wins_and_later_strategies_are_never_called() {
    let later = Arc::new(Counting::default());
    let list: Vec<strata::policy::Strategy> = vec![blind_update(), additive_only(), later.clone()];
    // additive_only rejects: `later` is not called.
    let ev = evaluate_strategies(&list, &removal_delta(), &ctx());
    assert_eq!(ev.strategy.as_deref(), Some("additive_only"));
    assert_eq!(rejected(&ev.decision).unwrap().to_string(), NON_ADDITIVE);
    assert_eq!(later.calls.load(Ordering::SeqCst), 0);
    // A cutover decision is terminal too.
    let list: Vec<strata::policy::Strategy> = vec![coordinated_cutover(Ok), later.clone()];
    let ev = evaluate_strategies(&list, &removal_delta(), &ctx());
    assert!(matches!(ev.decision, UpdateDecision::Cutover(_)));
    assert_eq!(later.calls.load(Ordering::SeqCst), 0);
    // When everything before it allows, it is called and its rejection wins.
    let ev = evaluate_strategies(&list, &additive_delta(), &ctx());
    assert_eq!(ev.strategy.as_deref(), Some("counting"));
    assert_eq!(later.calls.load(Ordering::SeqCst), 1);
    let err = rejected(&ev.decision).unwrap();
    assert!(matches!(
        err,
        PolicyError::Refused {
            reason: Refusal::Rejected { .. },
            ..
        }
    ));
}

#[test]
fn lock_before_additive_takes_precedence() {
    let ev = evaluate_strategies(&[lock_schema(), additive_only()], &additive_delta(), &ctx());
    assert_eq!(ev.strategy.as_deref(), Some("lock_schema"));
    assert_eq!(rejected(&ev.decision).unwrap().to_string(), LOCKED);
    // In the other order the additive change passes both.
    let ev = evaluate_strategies(&[additive_only()], &additive_delta(), &ctx());
    assert!(matches!(ev.decision, UpdateDecision::Allow));
}

#[test]
fn covered_by_upcasts_accepts_a_non_additive_change_only_with_a_covered_version_bump() {
    let d = removal_delta();
    let covered = UpdateContext::new("invoices").with_payload(Some(1), 3, true);
    assert!(matches!(
        covered_by_upcasts().on_schema_delta(&d, &covered),
        UpdateDecision::Accept
    ));
    // Accept is terminal: the additive_only() backstop after it is not consulted, and an
    // uncovered change is still refused by covered_by_upcasts itself.
    let pair = [covered_by_upcasts(), additive_only()];
    let ev = evaluate_strategies(&pair, &d, &covered);
    assert!(matches!(ev.decision, UpdateDecision::Accept));
    assert_eq!(ev.strategy.as_deref(), Some("covered_by_upcasts"));
    let gap_ctx = UpdateContext::new("invoices").with_payload(Some(1), 3, false);
    let ev = evaluate_strategies(&pair, &d, &gap_ctx);
    assert_eq!(ev.strategy.as_deref(), Some("covered_by_upcasts"));
    assert!(rejected(&ev.decision).is_some());
    // An additive change passes through to the backstop, which allows it.
    let ev = evaluate_strategies(&pair, &additive_delta(), &covered);
    assert!(matches!(ev.decision, UpdateDecision::Allow));
    assert_eq!(ev.strategy, None);
    let not_moved = UpdateContext::new("invoices").with_payload(Some(3), 3, true);
    assert!(rejected(&covered_by_upcasts().on_schema_delta(&d, &not_moved)).is_some());
    let gap = UpdateContext::new("invoices").with_payload(Some(1), 3, false);
    assert!(rejected(&covered_by_upcasts().on_schema_delta(&d, &gap)).is_some());
}

// ---- the gate, on real collections ----

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvV1 {
    id: String,
    amount: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvV2 {
    id: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvV1Note {
    id: String,
    amount: f64,
    note: Option<String>,
}

fn opts<T: schemars::JsonSchema>(strategies: Vec<strata::policy::Strategy>) -> SchemaOptions {
    strategies
        .into_iter()
        .fold(SchemaOptions::of::<T>(), |o, s| o.strategy(s))
}

#[test]
fn a_rejected_change_fails_every_write_but_not_the_declaration() {
    let store = mem();
    let clock = ManualClock::new(0);
    {
        let db = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        let c = db
            .collection::<InvV1>(
                "invoices",
                CollectionOptions::new().schema(opts::<InvV1>(vec![additive_only()])),
            )
            .unwrap();
        c.put(
            "i1",
            &InvV1 {
                id: "i1".into(),
                amount: 1.0,
            },
        )
        .unwrap();
    }
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    // Declaring never fails…
    let c = db
        .collection::<InvV2>(
            "invoices",
            CollectionOptions::new().schema(opts::<InvV2>(vec![additive_only()])),
        )
        .unwrap();
    assert!(matches!(
        db.verdict("invoices"),
        Some(Verdict::Rejected { .. })
    ));
    // …every write does, puts and deletes alike.
    for _ in 0..3 {
        let e = guard_err(c.put("i2", &InvV2 { id: "i2".into() }).unwrap_err());
        assert_eq!(e.to_string(), NON_ADDITIVE);
        let e = guard_err(c.delete("i1").unwrap_err());
        assert_eq!(e.to_string(), NON_ADDITIVE);
    }
    // Nothing was written; reads still work.
    assert_eq!(c.get("i2").unwrap().map(|d| d.id), None);
    assert!(c.get("i1").unwrap().is_some());
    // Another collection stays writable.
    let other = db
        .collection::<InvV2>(
            "other",
            CollectionOptions::new().schema(opts::<InvV2>(vec![additive_only()])),
        )
        .unwrap();
    other.put("x", &InvV2 { id: "x".into() }).unwrap();
}

#[test]
fn the_baseline_is_unchanged_after_a_rejection_and_replaced_after_an_allowed_change() {
    let store = mem();
    let clock = ManualClock::new(0);
    let v1_db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let v1 = v1_db.policy().unwrap();
    v1.declare(SchemaDeclaration::of::<InvV1>("invoices").strategy(additive_only()));
    let before = store.get(&baseline_key("invoices")).unwrap().unwrap();

    let locked_db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();

    let locked = locked_db.policy().unwrap();
    let out = locked.declare(
        SchemaDeclaration::of::<InvV1Note>("invoices").strategies([lock_schema(), additive_only()]),
    );
    assert!(
        matches!(out.verdict, Verdict::Rejected { ref strategy, .. } if strategy == "lock_schema")
    );
    assert_eq!(
        locked.check_write("invoices").unwrap_err().to_string(),
        LOCKED
    );
    assert_eq!(
        store.get(&baseline_key("invoices")).unwrap().unwrap(),
        before
    );

    let removal_db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();

    let removal = removal_db.policy().unwrap();
    removal.declare(SchemaDeclaration::of::<InvV2>("invoices").strategy(additive_only()));
    assert_eq!(
        store.get(&baseline_key("invoices")).unwrap().unwrap(),
        before
    );

    let additive_db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();

    let additive = additive_db.policy().unwrap();
    let out =
        additive.declare(SchemaDeclaration::of::<InvV1Note>("invoices").strategy(additive_only()));
    assert!(matches!(out.verdict, Verdict::Allowed));
    assert!(out.delta.unwrap().added == ["note"]);
    let after = Baseline::load(&store, "invoices").unwrap().unwrap();
    assert_ne!(after.encode(), before);
    assert_eq!(
        after,
        Baseline::new(
            &SchemaDeclaration::of::<InvV1Note>("x")
                .schema_value()
                .clone(),
            None
        )
    );
    additive.check_write("invoices").unwrap();
}

#[test]
fn first_registration_never_rejects() {
    let store = mem();
    let clock = ManualClock::new(0);
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let c = db
        .collection::<InvV2>(
            "invoices",
            CollectionOptions::new().schema(opts::<InvV2>(vec![lock_schema(), additive_only()])),
        )
        .unwrap();
    assert!(matches!(db.verdict("invoices"), Some(Verdict::Registered)));
    c.put("i1", &InvV2 { id: "i1".into() }).unwrap();
    let b = Baseline::load(&store, "invoices").unwrap().unwrap();
    assert_eq!(b.payload_version, Some(1));
    // Reopening with the same type is unchanged, even under a lock.
    let again = Database::builder(store)
        .policy(config(&clock))
        .open()
        .unwrap();
    let c = again
        .collection::<InvV2>(
            "invoices",
            CollectionOptions::new().schema(opts::<InvV2>(vec![lock_schema()])),
        )
        .unwrap();
    assert!(matches!(
        again.verdict("invoices"),
        Some(Verdict::Unchanged)
    ));
    c.put("i2", &InvV2 { id: "i2".into() }).unwrap();
}

#[test]
fn a_detection_failure_is_logged_and_never_blocks_writes() {
    // A corrupted persisted schema.
    let store = mem();
    let clock = ManualClock::new(0);
    strata_store::KvWrite::apply(
        &store,
        Batch::new().set(baseline_key("invoices"), b"{not json".to_vec()),
    )
    .unwrap();
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let c = db
        .collection::<InvV2>(
            "invoices",
            CollectionOptions::new().schema(opts::<InvV2>(vec![lock_schema()])),
        )
        .unwrap();
    assert!(matches!(
        db.verdict("invoices"),
        Some(Verdict::DetectionFailed { .. })
    ));
    c.put("i1", &InvV2 { id: "i1".into() }).unwrap();
    // The corrupted record is left for an operator, not overwritten.
    assert_eq!(
        store.get(&baseline_key("invoices")).unwrap().unwrap(),
        b"{not json".to_vec()
    );

    // A storage error while reading the baseline.
    let faulty = Faulty::new();
    let store = Store::from_arc(faulty.clone());
    *faulty.fail_get_prefix.lock().unwrap() = Some(b"__nx/jsonschema/".to_vec());
    let db = Database::builder(store)
        .policy(config(&clock))
        .open()
        .unwrap();
    let c = db
        .collection::<InvV2>(
            "invoices",
            CollectionOptions::new().schema(opts::<InvV2>(vec![lock_schema()])),
        )
        .unwrap();
    match db.verdict("invoices") {
        Some(Verdict::DetectionFailed { reason }) => {
            assert!(reason.contains("__nx/jsonschema/invoices"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    c.put("i1", &InvV2 { id: "i1".into() }).unwrap();
}

#[test]
fn an_allowed_change_never_rolls_back_a_concurrent_baseline_writer() {
    let faulty = Faulty::new();
    let store = Store::from_arc(faulty.clone());
    let clock = ManualClock::new(0);
    let v1 = obj(&[("id", "string", true), ("amount", "number", true)]);
    let v2 = obj(&[
        ("id", "string", true),
        ("amount", "number", true),
        ("note", "string", false),
    ]);
    let v3 = obj(&[
        ("id", "string", true),
        ("amount", "number", true),
        ("note", "string", false),
        ("tag", "string", false),
    ]);
    let p_db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let p = p_db.policy().unwrap();
    p.declare(SchemaDeclaration::new("invoices", v1.clone()));
    // Another writer replaces the baseline with v3 just before our compare-and-swap.
    let v1_bytes = Baseline::new(&v1, None).encode();
    let v3_bytes = Baseline::new(&v3, None).encode();
    *faulty.before_apply.lock().unwrap() = Some((
        b"__nx/jsonschema/".to_vec(),
        Batch::new()
            .require_eq(baseline_key("invoices"), v1_bytes)
            .set(baseline_key("invoices"), v3_bytes.clone()),
    ));
    let out = p.declare(SchemaDeclaration::new("invoices", v2).strategy(additive_only()));
    // Compared again against v3: dropping `tag` is non-additive, so it is rejected and
    // v3 stays.
    assert!(
        matches!(out.verdict, Verdict::Rejected { .. }),
        "{:?}",
        out.verdict
    );
    assert_eq!(out.delta.unwrap().removed, ["tag"]);
    assert_eq!(
        store.get(&baseline_key("invoices")).unwrap().unwrap(),
        v3_bytes
    );
}

#[test]
fn no_strategies_accept_changes_silently() {
    let store = mem();
    let clock = ManualClock::new(0);
    let p_db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let p = p_db.policy().unwrap();
    p.declare(SchemaDeclaration::of::<InvV1>("invoices"));
    let out = p.declare(SchemaDeclaration::of::<InvV2>("invoices"));
    assert!(matches!(out.verdict, Verdict::Allowed));
    p.check_write("invoices").unwrap();
}

#[test]
fn a_payload_version_bump_with_upcasts_bridges_a_non_additive_change() {
    bridges_a_non_additive_change(|| vec![covered_by_upcasts()]);
}

/// The documented combination: `covered_by_upcasts()` before the `additive_only()`
/// backstop accepts the covered bump (the backstop is not consulted) and still refuses the
/// uncovered one.
#[test]
fn covered_by_upcasts_before_additive_only_bridges_a_covered_non_additive_change() {
    bridges_a_non_additive_change(|| vec![covered_by_upcasts(), additive_only()]);
}

fn bridges_a_non_additive_change(strategies: fn() -> Vec<strata::policy::Strategy>) {
    use strata::{Mode, StepError};
    let store = mem();
    let clock = ManualClock::new(0);
    {
        let db = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        db.collection::<InvV1>(
            "invoices",
            CollectionOptions::new().schema(opts::<InvV1>(strategies())),
        )
        .unwrap()
        .put(
            "i1",
            &InvV1 {
                id: "i1".into(),
                amount: 2.0,
            },
        )
        .unwrap();
    }
    // Same removal without a version bump: refused.
    {
        let db = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        let c = db
            .collection::<InvV2>(
                "invoices",
                CollectionOptions::new().schema(opts::<InvV2>(strategies())),
            )
            .unwrap();
        assert!(guard_err(c.put("i2", &InvV2 { id: "i2".into() }).unwrap_err()).is_rejection());
    }
    // With payload v2 and the step 1→2 that drops `amount`: accepted, baseline records v2.
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let options = CollectionOptions::new().upcast(1, Mode::Lazy, |o| {
        o.remove("amount");
        Ok::<(), StepError>(())
    });
    let c = db
        .collection::<InvV2>("invoices", options.schema(opts::<InvV2>(strategies())))
        .unwrap();
    assert!(matches!(db.verdict("invoices"), Some(Verdict::Allowed)));
    c.put("i2", &InvV2 { id: "i2".into() }).unwrap();
    assert_eq!(
        Baseline::load(&store, "invoices")
            .unwrap()
            .unwrap()
            .payload_version,
        Some(2)
    );
    assert_eq!(c.get("i1").unwrap().unwrap().id, "i1");
}
