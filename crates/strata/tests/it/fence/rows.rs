//! Issue 9: the cutover rewrites rows through the collection's one row rewrite (upcast,
//! protected fields kept), leaves rows of a newer build byte-identical and reports them.

use super::*;

// ---- issue 9: the cutover rewrites rows through the collection's one row rewrite ----

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct OrdV3 {
    id: String,
    qty: i64,
    price_cents: i64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Money {
    cents: i64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct OrdNew {
    id: String,
    qty: i64,
    price: Money,
}

/// The v3 chain of `orders`: v1 `{id, price}` (dollars) → v2 adds `qty` → v3 stores
/// `price_cents`. Each step also tries to re-key the document (a protected field).
fn orders_chain() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, strata::Mode::Lazy, |o| {
            o.insert("qty".into(), json!(1));
            o.insert("id".into(), json!("step-rekeyed"));
            Ok(())
        })
        .upcast(2, strata::Mode::Lazy, |o| {
            let dollars = o.remove("price").and_then(|v| v.as_i64()).unwrap_or(0);
            o.insert("price_cents".into(), json!(dollars * 100));
            Ok(())
        })
}

fn raw_order(store: &Store, id: &str, version: i32, lock: u64, json: &str) {
    let value = strata::layout::envelope::encode(
        strata::layout::envelope::Envelope::new(version, lock),
        json.as_bytes(),
    );
    store.apply(Batch::new().set(order_key(id), value)).unwrap();
}

/// Issue 9 test: a cutover over v1 rows with a v3 chain hands the transform each row at
/// v3 (upcast, protected fields kept) exactly once; a row written by a newer build (v5) is
/// left byte-identical and reported by key.
#[test]
fn cutover_upcasts_old_rows_keeps_protected_fields_and_reports_newer_rows() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let store = mem();
    let clock = ManualClock::new(1_000);
    {
        let gen0 = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        gen0.collection::<OrdV3>(
            "orders",
            orders_chain().schema(SchemaOptions::of::<OrdV3>()),
        )
        .unwrap();
    }
    for i in 0..5 {
        raw_order(
            &store,
            &format!("o{i}"),
            1,
            7,
            &format!(r#"{{"id":"o{i}","price":{i}}}"#),
        );
    }
    raw_order(
        &store,
        "o2-current",
        3,
        2,
        r#"{"id":"o2-current","qty":4,"price_cents":50}"#,
    );
    raw_order(
        &store,
        "o9-newer",
        5,
        3,
        r#"{"id":"o9-newer","qty":2,"price_v5":{"cents":1}}"#,
    );
    let newer_before = store.get(&order_key("o9-newer")).unwrap();

    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let (seen_t, calls_t) = (Arc::clone(&seen), Arc::clone(&calls));
    let transform = move |d: Value| {
        calls_t.fetch_add(1, Ordering::SeqCst);
        seen_t.lock().unwrap().push(d.clone());
        Ok(json!({
            "id": "transform-rekeyed",
            "qty": d["qty"],
            "price": {"cents": d["price_cents"]},
        }))
    };
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let orders = db
        .collection::<OrdNew>(
            "orders",
            orders_chain()
                .schema(SchemaOptions::of::<OrdNew>().strategy(coordinated_cutover(transform))),
        )
        .unwrap();
    assert!(matches!(
        db.verdict("orders"),
        Some(Verdict::CutoverPending { .. })
    ));
    let report = db.run_schema_cutover(CutoverOptions::new()).unwrap();

    // The transform saw every old and current row once, each at v3 and with its own id.
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    for d in seen.lock().unwrap().iter() {
        let id = d["id"].as_str().unwrap();
        assert!(id.starts_with('o') && id != "step-rekeyed", "{d}");
        assert!(
            d.get("price").is_none(),
            "v1 field reached the transform: {d}"
        );
        assert!(d["qty"].is_i64() && d["price_cents"].is_i64(), "{d}");
    }
    for i in 0..5 {
        let id = format!("o{i}");
        let doc = orders.get_document(&id).unwrap().unwrap();
        assert_eq!(
            doc.value.id, id,
            "protected id restored after the transform"
        );
        assert_eq!(doc.value.qty, 1);
        assert_eq!(doc.value.price.cents, i * 100);
        // A cutover is a payload step (#26): the transform is the step 3 → 4, so the
        // rows move to v4; the lock version is bumped once (a cutover is a write).
        assert_eq!((doc.stored_version, doc.lock_version), (4, 8));
    }
    // The newer row: byte-identical, counted and named in the report, never transformed.
    assert_eq!(store.get(&order_key("o9-newer")).unwrap(), newer_before);
    assert_eq!(report.skipped_ahead, 1);
    let c = &report.collections[0];
    assert_eq!(c.skipped_ahead, 1);
    assert_eq!(c.ahead_keys, ["o9-newer".to_string()]);
    assert!(orders.get("o9-newer").is_err(), "this build cannot bind it");
}

/// A cutover over more newer-build rows than a report lists: all are counted and left
/// byte-identical, the first `MAX_LISTED_AHEAD` are named in key order.
#[test]
fn cutover_report_counts_every_newer_row_and_lists_the_first_ones() {
    use strata::ops::cutover::MAX_LISTED_AHEAD;
    let store = mem();
    let clock = ManualClock::new(1_000);
    {
        let gen0 = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        gen0.collection::<OrdV3>(
            "orders",
            orders_chain().schema(SchemaOptions::of::<OrdV3>()),
        )
        .unwrap();
    }
    let n = MAX_LISTED_AHEAD + 7;
    let ids: Vec<String> = (0..n).map(|i| format!("n{i:04}")).collect();
    for id in &ids {
        raw_order(&store, id, 5, 1, &format!(r#"{{"id":"{id}","v5":true}}"#));
    }
    raw_order(&store, "a-old", 1, 1, r#"{"id":"a-old","price":1}"#);
    let before: Vec<_> = ids
        .iter()
        .map(|id| store.get(&order_key(id)).unwrap())
        .collect();
    let transform = |d: Value| {
        Ok(json!({"id": d["id"], "qty": d["qty"], "price": {"cents": d["price_cents"]}}))
    };
    let db = Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let _orders = db
        .collection::<OrdNew>(
            "orders",
            orders_chain()
                .schema(SchemaOptions::of::<OrdNew>().strategy(coordinated_cutover(transform))),
        )
        .unwrap();
    // Small batches: rows are met across many batches.
    let report = db
        .run_schema_cutover(
            CutoverOptions::new().limits(strata::pass::PassLimits::new(10, 1 << 20).unwrap()),
        )
        .unwrap();
    let c = &report.collections[0];
    assert_eq!(c.skipped_ahead, n as u64);
    assert_eq!(report.skipped_ahead, n as u64);
    assert_eq!(c.ahead_keys, ids[..MAX_LISTED_AHEAD].to_vec());
    let after: Vec<_> = ids
        .iter()
        .map(|id| store.get(&order_key(id)).unwrap())
        .collect();
    assert_eq!(after, before, "newer rows are left byte-identical");
}
