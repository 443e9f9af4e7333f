//! Given/expected checks of upcast steps on raw JSON, run exactly as the engine runs them
//! (the chain validated, identity and lock fields protected, the version field stamped).

use serde_json::{Map, Value};
use strata::CollectionOptions;
use strata::{UpcastFailure, Upcaster};

/// The name checks give the collection in messages (steps do not see it).
const COLLECTION: &str = "under-test";

/// The upcaster `options` declare (panics with the chain error: a test helper).
fn upcaster(options: &CollectionOptions) -> Upcaster {
    match options.upcaster(COLLECTION) {
        Ok(u) => u,
        Err(e) => panic!("the options declare an invalid chain: {e}"),
    }
}

fn object(input: Value, what: &str) -> Map<String, Value> {
    match input {
        Value::Object(o) => o,
        other => panic!("{what} must be a JSON object, got {other}"),
    }
}

/// Runs the whole chain of `options` on `input`, stored at `version`: the upcast object
/// and the version reached, or why it failed (as the read path would report it).
pub fn upcast(
    options: &CollectionOptions,
    version: i32,
    input: Value,
) -> Result<(Value, i32), String> {
    let up = upcaster(options);
    let mut obj = object(input, "the input");
    match up.upcast(&mut obj, version) {
        Ok(reached) => Ok((Value::Object(obj), reached)),
        Err(f) => Err(describe(f)),
    }
}

fn describe(f: UpcastFailure) -> String {
    match f {
        UpcastFailure::InvalidVersion { found } => {
            format!("payload version {found} is below 1")
        }
        UpcastFailure::Retired { found, below } => {
            format!("v{found} is retired (versions below v{below})")
        }
        UpcastFailure::Unreachable { found, start } => {
            format!("v{found} is below v{start}, where the chain starts")
        }
        UpcastFailure::Step { from, source } => {
            format!(
                "step v{from} -> v{} failed: {source}",
                from.saturating_add(1)
            )
        }
        UpcastFailure::Downcast { from, source } => match source {
            Some(e) => format!(
                "downcast v{from} -> v{} failed: {e}",
                from.saturating_sub(1)
            ),
            None => format!("no downcast from v{from} is declared"),
        },
    }
}

/// Asserts that a document at the chain's current version, `input`, written during a
/// deploy window at `target` reads as `expected` there (the downcasts from the current
/// version down to `target`, protected fields restored), and returns the fields the
/// downcast cannot express (kept with the row, see `strata::KEPT_FIELD`).
/// Then checks the round trip: the stored form upcast back is `input` again.
///
/// ```
/// use serde_json::json;
/// use strata::{CollectionOptions, Mode};
///
/// let options = CollectionOptions::new()
///     .upcast(1, Mode::Lazy, |o| {
///         let v = o.remove("owner").unwrap_or_default();
///         o.insert("owner_name".into(), v);
///         Ok(())
///     })
///     .downcast(2, |o| {
///         let v = o.remove("owner_name").unwrap_or_default();
///         o.insert("owner".into(), v);
///         o.remove("tags");
///         Ok(())
///     });
/// let kept = strata_testkit::assert_downcasts(
///     &options,
///     1,
///     json!({"owner_name": "ann", "tags": ["vip"]}),
///     json!({"owner": "ann"}),
/// );
/// assert_eq!(kept, json!({"tags": ["vip"]}));
/// ```
#[track_caller]
pub fn assert_downcasts(
    options: &CollectionOptions,
    target: i32,
    input: Value,
    expected: Value,
) -> Value {
    let up = upcaster(options);
    let mut obj = object(input.clone(), "the input");
    let kept = match up.downcast(&mut obj, target) {
        Ok(kept) => kept,
        Err(f) => panic!("downcast to v{target} failed: {}", describe(f)),
    };
    assert_eq!(
        Value::Object(obj.clone()),
        expected,
        "the downcast to v{target} produced this (left), not what was expected (right)"
    );
    let mut back = obj;
    up.keep(&mut back, kept.clone());
    if let Err(f) = up.upcast(&mut back, target) {
        panic!("the upcast back from v{target} failed: {}", describe(f));
    }
    assert_eq!(
        Value::Object(back),
        input,
        "the round trip (downcast to v{target}, then upcast) lost or changed content (left: after, right: before)"
    );
    Value::Object(kept)
}

/// Asserts that a row stored at `version` with body `input` reads as `expected` at the
/// chain's current version, and that every protected field (identity fields, the lock
/// field) is exactly as it was stored (absent stays absent).
///
/// ```
/// use serde_json::json;
/// use strata::{CollectionOptions, Mode};
///
/// let options = CollectionOptions::new().identity_fields(["id"]).upcast(1, Mode::Lazy, |o| {
///     let d = o.remove("balance").and_then(|v| v.as_i64()).unwrap_or(0);
///     o.insert("balance_cents".into(), json!(d * 100));
///     Ok(())
/// });
/// strata_testkit::assert_upcasts(
///     &options,
///     1,
///     json!({"id": "a", "balance": 2}),
///     json!({"id": "a", "balance_cents": 200}),
/// );
/// ```
#[track_caller]
pub fn assert_upcasts(options: &CollectionOptions, version: i32, input: Value, expected: Value) {
    let up = upcaster(options);
    let current = up.chain().current_version();
    let stored = object(input.clone(), "the input");
    match upcast(options, version, input) {
        Ok((got, reached)) => {
            assert_eq!(
                reached, current,
                "a row at v{version} must reach the current v{current}, it reached v{reached}"
            );
            assert_protected(&up, &stored, &got);
            assert!(
                got == expected,
                "a row at v{version} upcast to v{current}:\n  got      {got}\n  expected {expected}"
            );
        }
        Err(e) => panic!("a row at v{version} does not upcast: {e}"),
    }
}

/// Asserts that the one step from `from` (to `from + 1`) turns `input` into `expected`,
/// with the protected fields restored as the engine restores them.
#[track_caller]
pub fn assert_step(options: &CollectionOptions, from: i32, input: Value, expected: Value) {
    let up = upcaster(options);
    let Some(step) = up.chain().step_from(from) else {
        panic!(
            "the chain declares no step from v{from} (it runs v{} -> v{})",
            up.chain().start_version(),
            up.chain().current_version()
        );
    };
    let stored = object(input, "the input");
    let mut obj = stored.clone();
    if let Err(e) = step.run(&mut obj) {
        panic!("step v{from} -> v{} failed: {e}", from.saturating_add(1));
    }
    // Restore exactly as the engine does: the protected fields as stored.
    for f in up.protected_fields() {
        match stored.get(f) {
            Some(v) => {
                obj.insert(f.clone(), v.clone());
            }
            None => {
                obj.remove(f);
            }
        }
    }
    if let Some(field) = up.version_field() {
        obj.insert(field.to_string(), Value::from(from.saturating_add(1)));
    }
    let got = Value::Object(obj);
    assert!(
        got == expected,
        "step v{from} -> v{}:\n  got      {got}\n  expected {expected}",
        from.saturating_add(1)
    );
}

/// Asserts that a row stored at `version` with body `input` fails to upcast, and returns
/// the failure's description (to check its wording).
#[track_caller]
pub fn assert_upcast_fails(options: &CollectionOptions, version: i32, input: Value) -> String {
    match upcast(options, version, input) {
        Ok((got, reached)) => {
            panic!("expected the upcast from v{version} to fail; it reached v{reached}: {got}")
        }
        Err(e) => e,
    }
}

/// Asserts the ahead guard: a row stored at `version` above the chain's current version
/// is refused when this build writes it (the stored row stays as it was).
#[track_caller]
pub fn assert_ahead_refused(options: &CollectionOptions, version: i32) {
    use strata::layout::envelope::{encode, Envelope};
    let store = strata::Store::new(strata_store::MemoryStore::new());
    let db = match strata::Database::builder(store.clone()).open() {
        Ok(db) => db,
        Err(e) => panic!("a scratch database does not open: {e}"),
    };
    let c = match db.collection::<Value>(COLLECTION, options.clone()) {
        Ok(c) => c,
        Err(e) => panic!("the collection does not open: {e}"),
    };
    let key = strata::layout::keys::doc_key(COLLECTION, "row");
    let stored = encode(Envelope::new(version, 1), b"{}");
    if let Err(e) = strata_store::KvWrite::apply(
        &store,
        strata_store::Batch::new().set(key.clone(), stored.clone()),
    ) {
        panic!("the scratch store refused the row: {e}");
    }
    match c.put("row", &serde_json::json!({})) {
        Err(e) if e.is_ahead() => {}
        Err(e) => panic!("a write over a v{version} row failed, but not by the ahead guard: {e}"),
        Ok(_) => panic!(
            "a write over a row stored at v{version} was accepted; this build is at v{}",
            c.current_version()
        ),
    }
    let now = strata_store::KvRead::get(&store, &key).ok().flatten();
    assert_eq!(
        now,
        Some(stored),
        "the refused write changed the stored row"
    );
}

/// Asserts that the protected fields of `got` are what `stored` holds.
#[track_caller]
fn assert_protected(up: &Upcaster, stored: &Map<String, Value>, got: &Value) {
    for f in up.protected_fields() {
        assert_eq!(
            stored.get(f),
            got.get(f),
            "protected field `{f}` changed by the upcast"
        );
    }
}
