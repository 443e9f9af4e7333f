//! Size limits that match (issue 13): iteration skips and reports a document larger than
//! its read budget and goes on; collection writes and pass checkpoints refuse a record the
//! default budgets could not read back, naming the limit, and write nothing.

use crate::collection_util::*;
use serde::{Deserialize, Serialize};
use std::ops::Bound;
use strata::layout;
use strata::layout::envelope::ENVELOPE_HEADER_LEN;
use strata::ops::sweep::SweepNote;
use strata::ops::sweep::SweepOptions;
use strata::pass::{Pass, PassError, PassLimits, RawCheckpoint, RecordRef, DEFAULT_MAX_BYTES};
use strata::Collection;
use strata::{CollectionError, CollectionOptions, ITER_PAGE_BYTES, MAX_DOCUMENT_BYTES};
use strata::{JsonObject, Mode};
use strata_store::{Batch, KvWrite, MemoryStore, Mutation, Store};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Thing {
    id: String,
    #[serde(default)]
    blob: String,
}

fn thing(id: &str, blob_len: usize) -> Thing {
    Thing {
        id: id.into(),
        blob: "x".repeat(blob_len),
    }
}

fn things(db: &strata::Database) -> Collection<Thing> {
    db.collection("things", CollectionOptions::new()).unwrap()
}

fn keys_and_errors(it: strata::Iter<'_, Thing>) -> Vec<Result<String, String>> {
    it.map(|d| match d {
        Ok(d) => Ok(d.key),
        Err(CollectionError::OversizeDocument {
            key, size, limit, ..
        }) => {
            assert_eq!(limit, ITER_PAGE_BYTES);
            assert!(size > limit, "{size} <= {limit}");
            Err(key)
        }
        Err(e) => panic!("unexpected error item: {e}"),
    })
    .collect()
}

/// Issue bullet: with a 70 MiB document among 7 (written raw, as an older build or another
/// tool would), iteration yields the 6 readable documents and one typed error item naming
/// the key and the budget, in key order, and goes on after it.
#[test]
fn iteration_reports_an_oversize_document_and_continues_after_it() {
    let (store, db) = mem_db();
    let c = things(&db);
    for i in [0, 1, 2, 4, 5, 6] {
        c.put(&format!("d{i}"), &thing(&format!("d{i}"), 10))
            .unwrap();
    }
    let big = serde_json::to_string(&thing("d3", 70 << 20)).unwrap();
    raw_put(&store, "things", "d3", 1, 1, &big);

    let items = keys_and_errors(c.iter());
    let expected: Vec<Result<String, String>> = vec![
        Ok("d0".into()),
        Ok("d1".into()),
        Ok("d2".into()),
        Err("d3".into()),
        Ok("d4".into()),
        Ok("d5".into()),
        Ok("d6".into()),
    ];
    assert_eq!(items, expected);

    // The message names the key, the budget and the remedy.
    let err = c
        .iter()
        .find_map(Result::err)
        .expect("one error item")
        .to_string();
    assert!(err.contains("`d3`"), "{err}");
    assert!(err.contains(&ITER_PAGE_BYTES.to_string()), "{err}");
    assert!(err.contains("Collection::get"), "{err}");

    // Ranges: a bound before the big document ends without reporting it; a range over it
    // reports it and goes on.
    assert_eq!(
        keys_and_errors(c.range(Bound::Unbounded, Bound::Excluded("d3"))),
        [Ok("d0".to_string()), Ok("d1".into()), Ok("d2".into())]
    );
    assert_eq!(
        keys_and_errors(c.range(Bound::Excluded("d2"), Bound::Included("d4"))),
        [Err("d3".to_string()), Ok("d4".into())]
    );
    // Read alone (no scan budget) it binds.
    assert_eq!(c.get("d3").unwrap().map(|t| t.blob.len()), Some(70 << 20));
}

/// The full record size of a `Thing` document `id` with a blob of `n` bytes.
fn record_size(id: &str, n: usize) -> usize {
    layout::keys::doc_key("things", id).len()
        + ENVELOPE_HEADER_LEN
        + serde_json::to_vec(&thing(id, n)).unwrap().len()
}

/// Issue bullet: a collection write of a document the default budgets could not read
/// back (and a sweep or cutover rewrite) is refused with a typed error naming the key and
/// the limit, and writes nothing; a document exactly at the limit is stored, iterated and
/// swept under the default budget.
#[test]
fn collection_writes_refuse_a_document_a_sweep_could_not_rewrite() {
    let (store, db) = mem_db();
    let c = things(&db);
    let fits = MAX_DOCUMENT_BYTES - record_size("k", 0);
    assert_eq!(record_size("k", fits), MAX_DOCUMENT_BYTES);
    assert_eq!(MAX_DOCUMENT_BYTES, DEFAULT_MAX_BYTES / 2);

    let refused = |e: CollectionError| match e {
        CollectionError::DocumentTooLarge {
            ref key,
            size,
            limit,
            ..
        } => {
            assert_eq!(key, "k");
            assert_eq!(size, MAX_DOCUMENT_BYTES + 1);
            assert_eq!(limit, MAX_DOCUMENT_BYTES);
            let msg = e.to_string();
            assert!(msg.contains("`k`"), "{msg}");
            assert!(msg.contains(&MAX_DOCUMENT_BYTES.to_string()), "{msg}");
            assert!(msg.contains("nothing was written"), "{msg}");
        }
        other => panic!("expected DocumentTooLarge, got {other}"),
    };
    refused(c.put("k", &thing("k", fits + 1)).unwrap_err());
    refused(c.insert("k", &thing("k", fits + 1)).unwrap_err());
    assert_eq!(raw_get(&store, "things", "k"), None, "nothing was written");

    // Exactly at the limit: stored and iterated.
    assert_eq!(c.insert("k", &thing("k", fits)).unwrap(), 1);
    assert_eq!(c.iter().count(), 1);

    // An update one byte over: refused, the stored document and its lock unchanged.
    let before = raw_get(&store, "things", "k");
    refused(c.update("k", &thing("k", fits + 1), 1).unwrap_err());
    assert_eq!(raw_get(&store, "things", "k"), before);
    assert_eq!(c.get_document("k").unwrap().unwrap().lock_version, 1);

    // A sweep rewrites the document at the limit under the default budget (which holds
    // the document and its replacement in one batch).
    let db2 = strata::Database::builder(store.clone()).open().unwrap();
    let swept: Collection<Thing> = db2
        .collection(
            "things",
            CollectionOptions::new().upcast(1, Mode::Eager, |o: &mut JsonObject| {
                // Same length: the blob's first byte changes.
                let blob = o["blob"].as_str().unwrap_or_default().replacen('x', "y", 1);
                o.insert("blob".into(), blob.into());
                Ok(())
            }),
        )
        .unwrap();
    let report = swept.sweep(SweepOptions::new()).unwrap();
    assert_eq!(report.note, SweepNote::Complete, "{report:?}");
    let doc = swept.get_document("k").unwrap().unwrap();
    assert_eq!((doc.stored_version, doc.value.blob.len()), (2, fits));
    assert!(doc.value.blob.starts_with('y'));
    assert_eq!(
        raw_get(&store, "things", "k").unwrap().len() + layout::keys::doc_key("things", "k").len(),
        MAX_DOCUMENT_BYTES
    );
}

/// Issue bullet: a checkpoint the default budget could not read back is not written; the
/// pass stops with a typed error naming the checkpoint key and the limit, and its batch
/// is not applied.
#[test]
fn a_pass_refuses_a_checkpoint_larger_than_the_record_limit() {
    let m = MemoryStore::new();
    let store = Store::new(m.clone());
    let ck_key = b"__nx/sweep/t".to_vec();
    // A record just inside the budget whose key alone, as a cursor, makes the
    // checkpoint (its key + the cursor) larger than the limit.
    let mut big_key = b"__nx/t/a".to_vec();
    big_key.resize(DEFAULT_MAX_BYTES - 4, b'k');
    // A key over the store-wide limit (an older build's): through the backend itself.
    m.apply(
        Batch::new()
            .set(big_key.clone(), b"v".to_vec())
            .set(b"__nx/t/b".to_vec(), b"v".to_vec()),
    )
    .unwrap();
    let before = m.snapshot();
    let err = Pass::new("t", b"__nx/t/".to_vec(), RawCheckpoint::new(ck_key.clone()))
        .limits(PassLimits::new(1, DEFAULT_MAX_BYTES).unwrap())
        .run(&store, |_: &RecordRef<'_>, _: &mut Vec<Mutation>| Ok(()))
        .unwrap_err();
    match &err {
        PassError::CheckpointTooLarge {
            key, size, limit, ..
        } => {
            assert_eq!(key, &ck_key);
            assert_eq!(*size, ck_key.len() + big_key.len());
            assert_eq!(*limit, DEFAULT_MAX_BYTES);
        }
        other => panic!("expected CheckpointTooLarge, got {other}"),
    }
    assert!(err.to_string().contains("__nx/sweep/t"), "{err}");
    assert_eq!(err.checkpoint(), None);
    assert_eq!(m.snapshot(), before, "nothing of the batch was written");
}

/// A sweep whose step would grow a document past the limit leaves that row as it is
/// (failed, typed in the log), sweeps the others and does not mark the sweep complete.
#[test]
fn a_sweep_never_grows_a_document_past_the_limit() {
    let (store, db) = mem_db();
    let c = things(&db);
    let near = MAX_DOCUMENT_BYTES - record_size("big", 0) - 1_000;
    c.put("big", &thing("big", near)).unwrap();
    c.put("small", &thing("small", 10)).unwrap();
    let before = raw_get(&store, "things", "big");
    let db2 = strata::Database::builder(store.clone()).open().unwrap();
    let grown: Collection<Thing> = db2
        .collection(
            "things",
            CollectionOptions::new().upcast(1, Mode::Eager, |o: &mut JsonObject| {
                let blob = format!(
                    "{}{}",
                    o["blob"].as_str().unwrap_or_default(),
                    "z".repeat(2_000)
                );
                o.insert("blob".into(), blob.into());
                Ok(())
            }),
        )
        .unwrap();
    let report = grown.sweep(SweepOptions::new()).unwrap();
    assert_eq!(report.note, SweepNote::Incomplete, "{report:?}");
    assert_eq!((report.failed(), report.rewritten()), (1, 1), "{report:?}");
    assert_eq!(raw_get(&store, "things", "big"), before, "left as it is");
    assert_eq!(grown.envelope("small").unwrap().unwrap().payload_version, 2);
}

/// A cutover whose transform would grow a document past the limit stops with a typed
/// error naming the key and the limit; the document is unchanged and the fence stays
/// migrating for a rerun once the transform is fixed.
#[test]
fn a_cutover_never_grows_a_document_past_the_limit() {
    use crate::policy_util::config;
    use strata::clock::ManualClock;
    use strata::ops::cutover::CutoverOptions;
    use strata::policy::{coordinated_cutover, FenceState, SchemaOptions};

    #[derive(Serialize, Deserialize, schemars::JsonSchema)]
    struct Old {
        id: String,
        blob: String,
    }
    #[derive(Serialize, Deserialize, schemars::JsonSchema)]
    struct New {
        id: String,
        blob: String,
        extra: String,
    }
    let store = mem_store();
    let clock = ManualClock::new(1_000);
    let db = strata::Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    let old = db
        .collection::<Old>(
            "things",
            CollectionOptions::new().schema(SchemaOptions::of::<Old>()),
        )
        .unwrap();
    let near = MAX_DOCUMENT_BYTES - record_size("big", 0) - 1_000;
    old.put(
        "big",
        &Old {
            id: "big".into(),
            blob: "x".repeat(near),
        },
    )
    .unwrap();
    let before = raw_get(&store, "things", "big");
    drop((old, db));
    let db = strata::Database::builder(store.clone())
        .policy(config(&clock))
        .open()
        .unwrap();
    db.collection::<New>(
        "things",
        CollectionOptions::new().schema(SchemaOptions::of::<New>().strategy(coordinated_cutover(
            |mut d| {
                d["extra"] = "e".repeat(5_000).into();
                Ok(d)
            },
        ))),
    )
    .unwrap();
    let err = db.run_schema_cutover(CutoverOptions::new()).unwrap_err();
    let text = chain(&err);
    assert!(text.contains("`big`"), "{text}");
    assert!(text.contains(&MAX_DOCUMENT_BYTES.to_string()), "{text}");
    assert_eq!(raw_get(&store, "things", "big"), before, "unchanged");
    assert_eq!(db.fence_state().unwrap().state, FenceState::Migrating);
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
