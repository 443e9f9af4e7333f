//! Payload evolution: chain validation, the read path (upcast, protection, refusals,
//! failures), read-repair and the ahead guard.

use crate::collection_util::*;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata::Database;
use strata::{CollectionError, CollectionOptions};
use strata::{Mode, StepError};
use strata_store::{KvWrite, Store};

fn noop(o: CollectionOptions, from: i32, mode: Mode) -> CollectionOptions {
    o.upcast(from, mode, |_| Ok(()))
}

// ---- chain declaration -------------------------------------------------------------

#[test]
fn contiguous_chain_opens_and_reports_its_shape() {
    let (_, db) = mem_db();
    let o = noop(
        noop(noop(CollectionOptions::new(), 3, Mode::Lazy), 1, Mode::Lazy),
        2,
        Mode::Eager,
    );
    let c = db.collection::<Account>("c", o).unwrap();
    assert_eq!(c.current_version(), 4);
    assert!(c.has_chain());
    assert_eq!(c.eager_target_version(), Some(3));
    let steps = c.chain().steps();
    assert_eq!(
        steps
            .iter()
            .map(|s| (s.from(), s.mode()))
            .collect::<Vec<_>>(),
        [(1, Mode::Lazy), (2, Mode::Eager), (3, Mode::Lazy)]
    );
    let plain = db
        .collection::<Account>("plain", CollectionOptions::new())
        .unwrap();
    assert_eq!(
        (
            plain.current_version(),
            plain.has_chain(),
            plain.eager_target_version()
        ),
        (1, false, None)
    );
    assert!(plain.chain().steps().is_empty());
}

#[test]
fn gap_duplicate_and_below_initial_are_distinct_errors_and_record_nothing() {
    let (store, db) = mem_db();
    let gap = noop(noop(CollectionOptions::new(), 1, Mode::Lazy), 3, Mode::Lazy);
    assert!(matches!(
        db.collection::<Account>("c", gap),
        Err(CollectionError::ChainGap {
            expected: 2,
            found: 3,
            ..
        })
    ));
    let starts_late = noop(CollectionOptions::new(), 2, Mode::Lazy);
    assert!(matches!(
        db.collection::<Account>("c", starts_late),
        Err(CollectionError::ChainGap {
            expected: 1,
            found: 2,
            ..
        })
    ));
    let dup = noop(
        noop(CollectionOptions::new(), 1, Mode::Lazy),
        1,
        Mode::Eager,
    );
    assert!(matches!(
        db.collection::<Account>("c", dup),
        Err(CollectionError::ChainDuplicate { from: 1, .. })
    ));
    for from in [0, -3] {
        let low = noop(CollectionOptions::new(), from, Mode::Lazy);
        let err = db.collection::<Account>("c", low).unwrap_err();
        assert!(
            matches!(err, CollectionError::ChainBelowInitial { .. }),
            "{err}"
        );
        assert!(err.is_chain_error());
    }
    assert!(db.collections().unwrap().is_empty());
    assert_eq!(
        strata_store::KvRead::get(&store, b"__nx/schema/c").unwrap(),
        None
    );
}

#[test]
fn the_steps_snapshot_is_immutable() {
    let (_, db) = mem_db();
    let c = db
        .collection::<Account>("c", noop(CollectionOptions::new(), 1, Mode::Lazy))
        .unwrap();
    let snap = c.chain().steps();
    let c2 = db
        .collection::<Account>(
            "c",
            noop(noop(CollectionOptions::new(), 1, Mode::Lazy), 2, Mode::Lazy),
        )
        .unwrap();
    assert_eq!(snap.len(), 1);
    assert_eq!(c.current_version(), 2);
    assert_eq!(c2.current_version(), 3);
}

// ---- the read path -----------------------------------------------------------------

/// v1 `{"id","balance"}` (dollars) → v2 `{"id","balance_cents"}`.
fn dollars_to_cents(o: CollectionOptions) -> CollectionOptions {
    o.upcast(1, Mode::Lazy, |obj| {
        let dollars = obj.remove("balance").and_then(|v| v.as_i64()).unwrap_or(0);
        obj.insert("balance_cents".into(), json!(dollars * 100));
        Ok(())
    })
}

#[test]
fn a_stale_row_is_upcast_on_every_read_path() {
    let (store, db) = mem_db();
    let c = db
        .collection::<Account>(
            "acc",
            dollars_to_cents(CollectionOptions::new().identity_fields(["id"])),
        )
        .unwrap();
    raw_put(&store, "acc", "a", 1, 4, r#"{"id":"a","balance":3}"#);
    raw_put(&store, "acc", "b", 2, 1, r#"{"id":"b","balance_cents":7}"#);
    let before = raw_get(&store, "acc", "a");
    let doc = c.get_document("a").unwrap().unwrap();
    assert_eq!(doc.value, account("a", 300));
    assert_eq!(
        (doc.stored_version, doc.lock_version, doc.upcast),
        (1, 4, true)
    );
    assert_eq!(
        raw_get(&store, "acc", "a"),
        before,
        "lazy reads never write"
    );
    let all: Vec<_> = c.iter().map(|d| d.unwrap().value).collect();
    assert_eq!(all, [account("a", 300), account("b", 7)]);
    let ranged: Vec<_> = c.scan_prefix("a").map(|d| d.unwrap().value).collect();
    assert_eq!(ranged, [account("a", 300)]);
    // A range that starts at the stale key (read by a point lookup) and one that ends at
    // it (read by a scan).
    let values =
        |it: strata::Iter<'_, Account>| -> Vec<Account> { it.map(|d| d.unwrap().value).collect() };
    assert_eq!(
        values(c.range(Bound::Included("a"), Bound::Unbounded)),
        [account("a", 300), account("b", 7)]
    );
    assert_eq!(
        values(c.range(Bound::Unbounded, Bound::Included("a"))),
        [account("a", 300)]
    );
    assert_eq!(
        values(c.range(Bound::Excluded("0"), Bound::Excluded("b"))),
        [account("a", 300)]
    );
    assert_eq!(
        c.get_many(["a"])[0]
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap()
            .value,
        account("a", 300)
    );
}

#[test]
fn the_version_is_restamped_before_each_step() {
    let (store, db) = mem_db();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut o = CollectionOptions::new().version_field("schemaVersion");
    for from in 1..=3 {
        let seen = seen.clone();
        o = o.upcast(from, Mode::Lazy, move |obj| {
            seen.lock()
                .unwrap()
                .push((from, obj.get("schemaVersion").cloned()));
            obj.insert("schemaVersion".into(), json!(99)); // a step cannot set it
            Ok(())
        });
    }
    #[derive(Deserialize, Serialize)]
    struct V {
        #[serde(rename = "schemaVersion")]
        schema_version: i32,
    }
    let c = db.collection::<V>("c", o).unwrap();
    raw_put(&store, "c", "a", 1, 1, r#"{}"#); // the field is missing: stamped by the engine
    assert_eq!(c.get("a").unwrap().unwrap().schema_version, 4);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (1, Some(json!(1))),
            (2, Some(json!(2))),
            (3, Some(json!(3)))
        ]
    );
    seen.lock().unwrap().clear();
    raw_put(&store, "c", "b", 3, 1, r#"{"schemaVersion":0}"#);
    assert_eq!(c.get("b").unwrap().unwrap().schema_version, 4);
    assert_eq!(*seen.lock().unwrap(), [(3, Some(json!(3)))]);
}

fn counting_chain(calls: Arc<AtomicUsize>) -> CollectionOptions {
    CollectionOptions::new().upcast(1, Mode::Lazy, move |obj| {
        calls.fetch_add(1, Ordering::SeqCst);
        obj.insert("balance_cents".into(), json!(1));
        Ok(())
    })
}

#[test]
fn current_and_ahead_rows_are_never_touched() {
    let (store, db) = mem_db();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = db
        .collection::<Account>("c", counting_chain(calls.clone()))
        .unwrap();
    raw_put(
        &store,
        "c",
        "cur",
        2,
        1,
        r#"{"id":"cur","balance_cents":5}"#,
    );
    raw_put(
        &store,
        "c",
        "ahead",
        7,
        1,
        r#"{"id":"ahead","balance_cents":6,"newer":true}"#,
    );
    assert_eq!(c.get("cur").unwrap(), Some(account("cur", 5)));
    let ahead = c.get_document("ahead").unwrap().unwrap();
    assert_eq!(
        (ahead.value.clone(), ahead.stored_version, ahead.upcast),
        (account("ahead", 6), 7, false)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    raw_put(&store, "c", "old", 1, 1, r#"{"id":"old"}"#);
    assert_eq!(c.get("old").unwrap(), Some(account("old", 1)));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_value_without_an_envelope_is_refused_not_guessed() {
    let (store, db) = mem_db();
    let c = db
        .collection::<Account>("c", dollars_to_cents(CollectionOptions::new()))
        .unwrap();
    let key = strata::layout::keys::doc_key("c", "raw");
    strata_store::KvWrite::apply(
        &store,
        strata_store::Batch::new().set(key, br#"{"id":"raw"}"#.to_vec()),
    )
    .unwrap();
    let err = c.get("raw").unwrap_err();
    assert!(matches!(err, CollectionError::Corrupted { .. }), "{err}");
}

fn hostile(o: CollectionOptions) -> CollectionOptions {
    o.upcast(1, Mode::Lazy, |obj| {
        obj.insert("id".into(), json!("stolen"));
        obj.insert("lockVersion".into(), json!(0));
        obj.insert("extra".into(), json!(true));
        Ok(())
    })
}

#[test]
fn a_hostile_step_cannot_change_the_identity_or_the_lock_field() {
    let (store, db) = mem_db();
    let c = db
        .collection::<Value>(
            "c",
            hostile(
                CollectionOptions::new()
                    .identity_fields(["id"])
                    .lock_field("lockVersion"),
            ),
        )
        .unwrap();
    raw_put(&store, "c", "a", 1, 9, r#"{"id":"a","lockVersion":5}"#);
    let doc = c.get_document("a").unwrap().unwrap();
    assert_eq!(doc.value, json!({"id":"a","lockVersion":5,"extra":true}));
    assert_eq!(
        doc.lock_version, 9,
        "the envelope lock version is out of the step's reach"
    );
}

#[test]
fn absent_stays_absent_and_null_stays_null() {
    let (store, db) = mem_db();
    let c = db
        .collection::<Value>(
            "c",
            hostile(
                CollectionOptions::new()
                    .identity_fields(["id"])
                    .lock_field("lockVersion"),
            ),
        )
        .unwrap();
    raw_put(&store, "c", "absent", 1, 1, r#"{}"#);
    raw_put(
        &store,
        "c",
        "null",
        1,
        1,
        r#"{"id":null,"lockVersion":null}"#,
    );
    assert_eq!(c.get("absent").unwrap().unwrap(), json!({"extra":true}));
    assert_eq!(
        c.get("null").unwrap().unwrap(),
        json!({"id":null,"lockVersion":null,"extra":true})
    );
}

#[test]
fn version_zero_and_negative_are_refused_and_the_row_is_kept() {
    let (store, db) = mem_db();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = db
        .collection::<Account>("c", counting_chain(calls.clone()))
        .unwrap();
    for (id, v) in [("zero", 0), ("neg", -1)] {
        raw_put(&store, "c", id, v, 1, r#"{"id":"x"}"#);
        let before = raw_get(&store, "c", id);
        let err = c.get(id).unwrap_err();
        assert!(
            matches!(err, CollectionError::InvalidPayloadVersion { found, .. } if found == v),
            "{err}"
        );
        assert!(
            err.to_string().contains("below the initial version 1"),
            "{err}"
        );
        assert_eq!(raw_get(&store, "c", id), before);
    }
    // No upcast step ran for either row.
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    // The write path is not blocked: neither version is ahead of the code, so a correct
    // put overwrites the bad row and it reads back.
    c.put("zero", &account("zero", 1)).unwrap();
    assert_eq!(c.get("zero").unwrap(), Some(account("zero", 1)));
}

#[test]
fn a_failing_step_fails_that_read_names_everything_and_keeps_the_row() {
    let (store, db) = mem_db();
    let o = CollectionOptions::new()
        .upcast(1, Mode::Lazy, |_| Ok(()))
        .upcast(2, Mode::Lazy, |obj| {
            if obj.contains_key("poison") {
                Err(StepError::new("poisoned balance"))
            } else {
                Ok(())
            }
        });
    let c = db.collection::<Account>("c", o).unwrap();
    raw_put(&store, "c", "bad", 1, 1, r#"{"id":"bad","poison":1}"#);
    raw_put(&store, "c", "good", 1, 1, r#"{"id":"good"}"#);
    let before = raw_get(&store, "c", "bad");
    let err = c.get("bad").unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            CollectionError::Upcast {
                stored: 1,
                from: 2,
                to: 3,
                ..
            }
        ),
        "{msg}"
    );
    for part in ["`c`", "`bad`", "v1", "v2->v3"] {
        assert!(msg.contains(part), "{msg} lacks {part}");
    }
    assert_eq!(
        std::error::Error::source(&err).unwrap().to_string(),
        "poisoned balance"
    );
    assert_eq!(raw_get(&store, "c", "bad"), before);
    // Iteration reports the one bad row and goes on.
    let results: Vec<_> = c.iter().collect();
    assert!(results[0].is_err());
    assert_eq!(results[1].as_ref().unwrap().value, account("good", 0));
    // A tree that does not bind fails the same way.
    raw_put(&store, "c", "unbindable", 1, 1, r#"{"id":5}"#);
    assert!(matches!(
        c.get("unbindable"),
        Err(CollectionError::Bind {
            stored: 1,
            version: 3,
            ..
        })
    ));
}

#[test]
fn a_chain_declared_after_the_data_was_written_still_migrates() {
    let store = mem_store();
    {
        let db = Database::builder(store.clone()).open().unwrap();
        #[derive(Serialize, Deserialize)]
        struct V1 {
            id: String,
            balance: i64,
        }
        let old = db
            .collection::<V1>("acc", CollectionOptions::new())
            .unwrap();
        old.put(
            "a",
            &V1 {
                id: "a".into(),
                balance: 2,
            },
        )
        .unwrap();
        assert_eq!(stored_env(&store, "acc", "a").payload_version, 1);
    }
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db
        .collection::<Account>("acc", dollars_to_cents(CollectionOptions::new()))
        .unwrap();
    assert_eq!(c.get("a").unwrap(), Some(account("a", 200)));
}

/// Records which serde deserializer built it.
#[derive(Debug, Serialize)]
struct Probe;
static PROBE_DESERIALIZERS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
impl<'de> Deserialize<'de> for Probe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        PROBE_DESERIALIZERS
            .lock()
            .unwrap()
            .push(std::any::type_name::<D>());
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Probe)
    }
}

#[test]
fn a_current_row_decodes_from_its_bytes_without_a_tree() {
    let (store, db) = mem_db();
    let c = db
        .collection::<Probe>("probe", noop(CollectionOptions::new(), 1, Mode::Lazy))
        .unwrap();
    raw_put(&store, "probe", "cur", 2, 1, r#"{"a":1}"#);
    raw_put(&store, "probe", "old", 1, 1, r#"{"a":1}"#);
    c.get("cur").unwrap();
    c.get("old").unwrap();
    let seen = PROBE_DESERIALIZERS.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[0].contains("SliceRead") && !seen[0].contains("Value"),
        "{}",
        seen[0]
    );
    assert!(seen[1].contains("Value"), "{}", seen[1]);
}

// ---- read-repair -------------------------------------------------------------------

#[test]
fn read_repair_writes_the_upcast_row_back_keeping_the_lock() {
    let (store, db) = mem_db();
    let c = db
        .collection::<Account>(
            "acc",
            dollars_to_cents(CollectionOptions::new()).read_repair(true),
        )
        .unwrap();
    raw_put(&store, "acc", "a", 1, 3, r#"{"id":"a","balance":1}"#);
    assert_eq!(c.get("a").unwrap(), Some(account("a", 100)));
    let env = stored_env(&store, "acc", "a");
    assert_eq!((env.payload_version, env.lock_version), (2, 3));
    assert_eq!(
        stored_json(&store, "acc", "a"),
        json!({"id":"a","balance_cents":100})
    );
    // A reader holding lock 3 can still update.
    c.update("a", &account("a", 5), 3).unwrap();
}

#[test]
fn read_repair_never_resurrects_a_deleted_row_nor_overwrites_a_concurrent_write() {
    let (spy, store) = Spy::new();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db
        .collection::<Account>(
            "acc",
            dollars_to_cents(CollectionOptions::new()).read_repair(true),
        )
        .unwrap();
    raw_put(&store, "acc", "gone", 1, 1, r#"{"id":"gone","balance":1}"#);
    raw_put(&store, "acc", "busy", 1, 1, r#"{"id":"busy","balance":1}"#);
    let gone = strata::layout::keys::doc_key("acc", "gone");
    spy.before_apply(move |_, inner| {
        inner
            .apply(strata_store::Batch::new().delete(gone.clone()))
            .unwrap();
    });
    assert_eq!(c.get("gone").unwrap(), Some(account("gone", 100)));
    spy.clear_hook();
    assert_eq!(raw_get(&store, "acc", "gone"), None);
    let busy = strata::layout::keys::doc_key("acc", "busy");
    let winner = strata::layout::envelope::encode(
        strata::layout::envelope::Envelope::new(2, 2),
        br#"{"id":"busy","balance_cents":42}"#,
    );
    let w = winner.clone();
    spy.before_apply(move |_, inner| {
        inner
            .apply(strata_store::Batch::new().set(busy.clone(), w.clone()))
            .unwrap();
    });
    c.get("busy").unwrap();
    spy.clear_hook();
    assert_eq!(raw_get(&store, "acc", "busy"), Some(winner));
}

// ---- the ahead guard ---------------------------------------------------------------

#[test]
fn the_ahead_guard_refuses_and_keeps_the_row_readable() {
    let (store, db) = mem_db();
    let c = db
        .collection::<Account>("acc", dollars_to_cents(CollectionOptions::new()))
        .unwrap();
    raw_put(
        &store,
        "acc",
        "new",
        3,
        8,
        r#"{"id":"new","balance_cents":1,"nickname":"n"}"#,
    );
    let before = raw_get(&store, "acc", "new");
    let err = c.put("new", &account("new", 2)).unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::AheadOfBuild {
                stored: 3,
                current: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_ahead());
    assert!(
        err.to_string().contains("newer than this build's v2"),
        "{err}"
    );
    assert!(c
        .update("new", &account("new", 2), 8)
        .unwrap_err()
        .is_ahead());
    assert_eq!(raw_get(&store, "acc", "new"), before);
    assert_eq!(c.get("new").unwrap(), Some(account("new", 1)));
    // Behind and current rows are written normally.
    raw_put(&store, "acc", "old", 1, 1, r#"{"id":"old","balance":1}"#);
    assert_eq!(c.put("old", &account("old", 3)).unwrap(), 2);
    assert_eq!(stored_env(&store, "acc", "old").payload_version, 2);
}

/// On sled, a put or insert of a key the write cache does not hold (a reopened store)
/// reads it under the write: an existing document must be read and honoured — its lock
/// version continued, an insert refused, a newer build's row refused unchanged.
#[test]
fn a_guessed_write_over_a_document_the_write_cache_does_not_hold_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let open = || {
        let store = Store::new(strata_sled::SledStore::open(&path).unwrap());
        let db = Database::builder(store.clone()).open().unwrap();
        let c = db
            .collection::<Account>("acc", dollars_to_cents(CollectionOptions::new()))
            .unwrap();
        (store, db, c)
    };
    {
        let (store, _db, c) = open();
        assert_eq!(c.put("a", &account("a", 1)).unwrap(), 1);
        assert_eq!(c.put("a", &account("a", 2)).unwrap(), 2);
        assert_eq!(c.insert("b", &account("b", 1)).unwrap(), 1);
        raw_put(
            &store,
            "acc",
            "new",
            3,
            8,
            r#"{"id":"new","balance_cents":1}"#,
        );
        raw_put(&store, "acc", "old", 1, 4, r#"{"id":"old","balance":1}"#);
        store.flush().unwrap();
    }
    // Reopened: the write cache is empty, so every write below reads sled's tree.
    let (store, _db, c) = open();
    assert_eq!(c.put("a", &account("a", 3)).unwrap(), 3);
    assert_eq!(c.get_document("a").unwrap().unwrap().lock_version, 3);
    let err = c.insert("b", &account("b", 9)).unwrap_err();
    assert!(
        matches!(err, CollectionError::Conflict { found: Some(1), .. }),
        "{err}"
    );
    assert_eq!(c.get("b").unwrap(), Some(account("b", 1)));
    let before = raw_get(&store, "acc", "new");
    assert!(c.put("new", &account("new", 2)).unwrap_err().is_ahead());
    assert_eq!(raw_get(&store, "acc", "new"), before);
    assert_eq!(c.put("old", &account("old", 5)).unwrap(), 5);
    assert_eq!(stored_env(&store, "acc", "old").payload_version, 2);
    // A key that is really absent is created at lock version 1.
    assert_eq!(c.put("c", &account("c", 1)).unwrap(), 1);
    assert_eq!(c.insert("d", &account("d", 1)).unwrap(), 1);
    assert_eq!(c.get_document("d").unwrap().unwrap().lock_version, 1);
}

#[test]
fn a_newer_row_that_does_not_bind_says_upgrade_this_instance() {
    let (store, db) = mem_db();
    let c = db
        .collection::<Account>("acc", dollars_to_cents(CollectionOptions::new()))
        .unwrap();
    // Payload v5 renamed a field this build (v2) requires.
    raw_put(&store, "acc", "n", 5, 1, r#"{"ident":"n","cents":1}"#);
    let err = c.get("n").unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::NewerBuild {
                stored: 5,
                current: 2,
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(
            "written by a newer build (payload v5, this build knows v2); upgrade this instance"
        ),
        "{msg}"
    );
    assert!(!msg.contains("upcast step"), "{msg}");
    // The serde error is the source, not repeated in the message.
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(!msg.contains(&source), "{msg}");
    // A row at this build's version that does not bind still points at the steps.
    raw_put(&store, "acc", "c", 2, 1, r#"{"ident":"c"}"#);
    let err = c.get("c").unwrap_err();
    assert!(matches!(err, CollectionError::Bind { .. }), "{err}");
}

#[test]
fn envelope_versions_are_readable_without_json() {
    let store: Store = mem_store();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db
        .collection::<Account>("acc", CollectionOptions::new())
        .unwrap();
    raw_put(&store, "acc", "a", 1, 6, "not json at all");
    let env = c.envelope("a").unwrap().unwrap();
    assert_eq!((env.payload_version, env.lock_version), (1, 6));
    assert!(c.envelope("missing").unwrap().is_none());
}

/// Counts WARN events whose message mentions the ahead guard.
struct AheadWarnings(Arc<AtomicUsize>);

impl tracing::Subscriber for AheadWarnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        if *event.metadata().level() == tracing::Level::WARN && m.0.contains("newer build") {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn the_ahead_guard_is_logged_once_per_collection() {
    let warnings = Arc::new(AtomicUsize::new(0));
    let subscriber = AheadWarnings(Arc::clone(&warnings));
    tracing::subscriber::with_default(subscriber, || {
        // Another test thread may have registered the warning's callsite while no
        // subscriber wanted it (interest cached as "never"): recompute it now that this
        // thread's subscriber exists.
        tracing::callsite::rebuild_interest_cache();
        let (store, db) = mem_db();
        let first = db
            .collection::<Account>("acc", dollars_to_cents(CollectionOptions::new()))
            .unwrap();
        // A second handle on the same collection of the same database.
        let second = db
            .collection::<Account>("acc", dollars_to_cents(CollectionOptions::new()))
            .unwrap();
        for key in ["a", "b"] {
            raw_put(
                &store,
                "acc",
                key,
                3,
                1,
                r#"{"id":"x","balance_cents":1,"nickname":"n"}"#,
            );
        }
        for c in [&first, &second] {
            for key in ["a", "b"] {
                assert!(c.put(key, &account(key, 2)).unwrap_err().is_ahead());
            }
        }
        assert_eq!(
            warnings.load(Ordering::SeqCst),
            1,
            "logged once per collection"
        );
        let other = db
            .collection::<Account>("other", dollars_to_cents(CollectionOptions::new()))
            .unwrap();
        raw_put(
            &store,
            "other",
            "a",
            3,
            1,
            r#"{"id":"x","balance_cents":1,"nickname":"n"}"#,
        );
        assert!(other.put("a", &account("a", 2)).unwrap_err().is_ahead());
        assert_eq!(
            warnings.load(Ordering::SeqCst),
            2,
            "another collection logs its own"
        );
    });
}
