//! The eager sweep: cascade, marker, lease, abort/resume, contention, conflicts.

use crate::collection_util::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata::clock::{Clock, ManualClock, SharedClock};
use strata::layout;
use strata::ops::sweep::SweepOptions;
use strata::ops::sweep::{SweepMarker, SweepNote};
use strata::CollectionOptions;
use strata::{Collection, Database};
use strata::{Mode, StepError};
use strata_store::{Batch, KvRead, KvWrite, Mutation, Precondition, Store};

/// v1 → v2 (lazy, `balance` → `balance_cents`), v2 → v3 (eager, adds `tier`), v3 → v4
/// (lazy, counts steps in `steps`). Every row touched by a sweep must reach v4.
fn options() -> CollectionOptions {
    CollectionOptions::new()
        .identity_fields(["id"])
        .upcast(1, Mode::Lazy, |o| {
            let d = o.remove("balance").and_then(|v| v.as_i64()).unwrap_or(0);
            o.insert("balance_cents".into(), json!(d * 100));
            Ok(())
        })
        .upcast(2, Mode::Eager, |o| {
            if o.contains_key("poison") {
                return Err(StepError::new("poisoned row"));
            }
            o.insert("tier".into(), json!("basic"));
            Ok(())
        })
        .upcast(3, Mode::Lazy, |o| {
            let n = o.get("steps").and_then(|v| v.as_i64()).unwrap_or(0);
            o.insert("steps".into(), json!(n + 1));
            Ok(())
        })
}

fn coll(db: &Database) -> Collection<Account> {
    db.collection("acc", options()).unwrap()
}

fn seed(store: &Store, n: usize) {
    let mut b = Batch::new();
    for i in 0..n {
        let id = format!("r{i:05}");
        let json = format!(r#"{{"id":"{id}","balance":{i}}}"#);
        b = b.set(
            layout::keys::doc_key("acc", &id),
            strata::layout::envelope::encode(
                strata::layout::envelope::Envelope::new(1, 1),
                json.as_bytes(),
            ),
        );
    }
    store.apply(b).unwrap();
}

fn marker(store: &Store) -> Option<SweepMarker> {
    store
        .get(&layout::keys::sweep_key("acc"))
        .unwrap()
        .map(|b| SweepMarker::decode("acc", &b).unwrap())
}

fn clock() -> (ManualClock, SharedClock) {
    let c = ManualClock::new(1_000_000);
    (c.clone(), Arc::new(c))
}

fn opts(runner: &str, clock: &SharedClock) -> SweepOptions {
    SweepOptions::new()
        .runner_id(runner)
        .limits(strata::pass::PassLimits::new(10, 4 << 20).unwrap())
        .clock(clock.clone())
}

#[test]
fn the_sweep_rewrites_every_stale_row_through_the_eager_cascade() {
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 95);
    raw_put(
        &store,
        "acc",
        "r_current",
        4,
        3,
        r#"{"id":"r_current","balance_cents":1}"#,
    );
    let (_, clk) = clock();
    let report = c.sweep(opts("a", &clk)).unwrap();
    assert_eq!(report.note, SweepNote::Complete);
    assert_eq!(report.note.to_string(), "complete");
    assert_eq!(
        (report.scanned(), report.rewritten(), report.failed()),
        (96, 95, 0)
    );
    assert!(report.marker_advanced);
    assert_eq!(
        (report.target_version, report.current_version),
        (Some(3), 4)
    );
    for i in [0usize, 42, 94] {
        let id = format!("r{i:05}");
        let env = stored_env(&store, "acc", &id);
        assert_eq!((env.payload_version, env.lock_version), (4, 1));
        assert_eq!(
            stored_json(&store, "acc", &id),
            json!({"id": id, "balance_cents": i * 100, "tier": "basic", "steps": 1})
        );
    }
    assert_eq!(stored_env(&store, "acc", "r_current").lock_version, 3);
    let m = marker(&store).unwrap();
    assert_eq!(
        (m.completed, m.in_progress, m.cursor_hex, m.lease_expires_ms),
        (3, None, None, 0)
    );
    assert_eq!(m.counters.rewritten, 95);
    assert!(!db.is_sweeping("acc"));
}

#[test]
fn a_completed_sweep_skips_the_scan_with_one_read() {
    let (spy, store) = Spy::new();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = coll(&db);
    seed(&store, 30);
    let (_, clk) = clock();
    assert_eq!(c.sweep(opts("a", &clk)).unwrap().note, SweepNote::Complete);
    spy.reset_counts();
    let again = c.sweep(opts("b", &clk)).unwrap();
    assert_eq!(again.note, SweepNote::AlreadyAt(3));
    assert_eq!(again.note.to_string(), "already at v3");
    assert_eq!(again.scanned(), 0);
    assert_eq!(spy.gets.load(Ordering::SeqCst), 1);
    assert_eq!(spy.scans.load(Ordering::SeqCst), 0);
}

#[test]
fn no_eager_step_is_a_no_op_without_a_marker() {
    let (store, db) = mem_db();
    let c = db
        .collection::<Account>(
            "acc",
            CollectionOptions::new().upcast(1, Mode::Lazy, |_| Ok(())),
        )
        .unwrap();
    seed(&store, 5);
    let r = c.sweep(SweepOptions::new()).unwrap();
    assert_eq!(r.note, SweepNote::NoEagerStep);
    assert_eq!(r.note.to_string(), "no eager step");
    assert_eq!(r.scanned(), 0);
    assert!(marker(&store).is_none());
    assert_eq!(stored_env(&store, "acc", "r00000").payload_version, 1);
}

#[test]
fn ahead_rows_are_left_alone() {
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 3);
    raw_put(&store, "acc", "future", 9, 1, r#"{"id":"future","x":1}"#);
    let before = raw_get(&store, "acc", "future");
    let (_, clk) = clock();
    let r = c.sweep(opts("a", &clk)).unwrap();
    assert_eq!(
        (r.note.clone(), r.skipped_ahead(), r.rewritten()),
        (SweepNote::Complete, 1, 3)
    );
    assert_eq!(raw_get(&store, "acc", "future"), before);
}

#[test]
fn a_row_that_upcasts_but_does_not_bind_is_never_written() {
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 10);
    // Every step runs on it, but its `id` is a number: it cannot be read back as an
    // `Account`, so the sweep leaves its bytes as they are and counts it failed.
    raw_put(&store, "acc", "r00003", 1, 1, r#"{"id":3,"balance":5}"#);
    let before = raw_get(&store, "acc", "r00003");
    let (_, clk) = clock();
    let r = c.sweep(opts("a", &clk)).unwrap();
    assert_eq!(r.note, SweepNote::Incomplete);
    assert_eq!((r.failed(), r.rewritten()), (1, 9));
    assert_eq!(raw_get(&store, "acc", "r00003"), before);
    assert!(c.get("r00003").is_err());
    assert_eq!(c.get("r00004").unwrap().unwrap().balance_cents, 400);
}

#[test]
fn an_unreadable_row_blocks_completion() {
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 20);
    raw_put(
        &store,
        "acc",
        "r00007",
        1,
        1,
        r#"{"id":"r00007","poison":true}"#,
    );
    raw_put(&store, "acc", "r00008", -2, 1, r#"{"id":"r00008"}"#);
    let before = raw_get(&store, "acc", "r00007");
    let (_, clk) = clock();
    let r = c.sweep(opts("a", &clk)).unwrap();
    assert_eq!(r.note, SweepNote::Incomplete);
    assert_eq!((r.failed(), r.rewritten()), (2, 18));
    assert!(!r.marker_advanced);
    assert_eq!(raw_get(&store, "acc", "r00007"), before);
    let m = marker(&store).unwrap();
    assert_eq!(
        (m.completed, m.in_progress, m.lease_expires_ms),
        (0, None, 0)
    );
    // Fixed rows let the next sweep complete (the rest is current and only scanned).
    c.put("r00007", &account("r00007", 1)).unwrap();
    c.put("r00008", &account("r00008", 1)).unwrap();
    let r = c.sweep(opts("a", &clk)).unwrap();
    assert_eq!(
        (r.note.clone(), r.rewritten(), r.scanned()),
        (SweepNote::Complete, 0, 20)
    );
}

#[test]
fn abort_releases_the_lease_and_the_next_run_resumes_from_the_cursor() {
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 100);
    let (_, clk) = clock();
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    // Poll 1 is before the first batch; aborting at poll 4 commits three batches of 10.
    let first = c
        .sweep(opts("a", &clk).abort_when(move || p.fetch_add(1, Ordering::SeqCst) + 1 >= 4))
        .unwrap();
    assert_eq!(first.note, SweepNote::Aborted);
    assert_eq!((first.scanned(), first.rewritten()), (30, 30));
    let m = marker(&store).unwrap();
    assert_eq!(
        (m.in_progress, m.lease_expires_ms, m.runner.as_deref()),
        (Some(3), 0, Some("a"))
    );
    assert_eq!(m.cursor(), Some(layout::keys::doc_key("acc", "r00029")));
    assert_eq!(stored_env(&store, "acc", "r00030").payload_version, 1);
    // Another runner may take over at once (the lease was released) and resumes.
    let second = c.sweep(opts("b", &clk)).unwrap();
    assert_eq!(second.note, SweepNote::Complete);
    assert_eq!(
        second.resumed_from,
        Some(layout::keys::doc_key("acc", "r00029"))
    );
    assert_eq!((second.scanned(), second.rewritten()), (70, 70));
    assert_eq!(marker(&store).unwrap().counters.rewritten, 100);
    assert!(c.iter().all(|d| d.unwrap().stored_version == 4));
}

#[test]
fn two_handles_contend_and_the_second_gets_contended() {
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 40);
    let (_, clk) = clock();
    let other_db = Database::builder(store.clone()).open().unwrap();
    let other = coll(&other_db);
    let seen = Arc::new(Mutex::new(None));
    let sweeping = Arc::new(Mutex::new(None));
    let (s, sw, odb, db2) = (seen.clone(), sweeping.clone(), other_db.clone(), db.clone());
    let clk2 = clk.clone();
    let polls = AtomicUsize::new(0);
    let r = c
        .sweep(opts("a", &clk).abort_when(move || {
            if polls.fetch_add(1, Ordering::SeqCst) == 2 {
                *s.lock().unwrap() = Some(other.sweep(opts("b", &clk2)).unwrap());
                *sw.lock().unwrap() = Some((db2.is_sweeping("acc"), odb.is_sweeping("acc")));
            }
            false
        }))
        .unwrap();
    assert_eq!(r.note, SweepNote::Complete);
    let b = seen.lock().unwrap().clone().unwrap();
    assert_eq!(b.note, SweepNote::Contended);
    assert_eq!(
        b.note.to_string(),
        "contended (live lease held by another instance)"
    );
    assert_eq!(b.scanned(), 0);
    // is_sweeping is scoped to the database (store instance) that runs the sweep.
    assert_eq!(*sweeping.lock().unwrap(), Some((true, false)));
    assert!(!db.is_sweeping("acc"));
}

/// A store one process opens at a time (memory here; redb and sled lock their files): a
/// runner that holds the marker's lease but is not running in this process ended without
/// releasing it (killed, or its release failed on a full disk), so its lease is taken
/// over at once — not after it expires — and the sweep resumes from its cursor.
#[test]
fn the_lease_of_a_dead_runner_is_taken_over_at_once_and_resumed() {
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 50);
    let (manual, clk) = clock();
    // Runner "dead" claimed the lease and processed 20 rows, then vanished.
    let polls = AtomicUsize::new(0);
    let first = c
        .sweep(opts("dead", &clk).abort_when(move || polls.fetch_add(1, Ordering::SeqCst) == 2))
        .unwrap();
    assert_eq!(first.note, SweepNote::Aborted);
    let mut m = marker(&store).unwrap();
    m.lease_expires_ms = manual.now_ms() + 60_000; // as if it had died holding the lease
    store
        .apply(Batch::new().set(layout::keys::sweep_key("acc"), m.encode()))
        .unwrap();
    let r = c.sweep(opts("b", &clk)).unwrap();
    assert_eq!(r.note, SweepNote::Complete);
    assert_eq!(r.scanned(), 30);
    assert!(r.resumed_from.is_some(), "{r:?}");
}

#[test]
fn a_lease_taken_over_mid_sweep_stops_the_sweep_with_lease_lost() {
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 40);
    let (_, clk) = clock();
    let st = store.clone();
    let polls = AtomicUsize::new(0);
    let r = c
        .sweep(opts("a", &clk).abort_when(move || {
            if polls.fetch_add(1, Ordering::SeqCst) == 1 {
                let mut m = marker(&st).unwrap();
                m.runner = Some("thief".into());
                st.apply(Batch::new().set(layout::keys::sweep_key("acc"), m.encode()))
                    .unwrap();
            }
            false
        }))
        .unwrap();
    assert_eq!(r.note, SweepNote::LeaseLost);
    assert_eq!(r.note.to_string(), "lease lost");
    assert_eq!(marker(&store).unwrap().runner.as_deref(), Some("thief"));
    assert_eq!(r.rewritten(), 10);
}

#[test]
fn a_concurrent_delete_during_a_sweep_is_not_resurrected() {
    let (spy, store) = Spy::new();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = coll(&db);
    seed(&store, 25);
    let victim = layout::keys::doc_key("acc", "r00013");
    let changed = layout::keys::doc_key("acc", "r00017");
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    spy.before_apply(move |batch, inner| {
        let touches = batch
            .mutations()
            .iter()
            .any(|m| m.key() == victim.as_slice());
        if touches && f.fetch_add(1, Ordering::SeqCst) == 0 {
            // Between the sweep's read and its write: one delete, one concurrent update.
            inner
                .apply(Batch::new().delete(victim.clone()).set(
                    changed.clone(),
                    strata::layout::envelope::encode(
                        strata::layout::envelope::Envelope::new(4, 2),
                        br#"{"id":"r00017","balance_cents":5,"tier":"gold","steps":0}"#,
                    ),
                ))
                .unwrap();
        }
    });
    let (_, clk) = clock();
    let r = c.sweep(opts("a", &clk)).unwrap();
    spy.clear_hook();
    assert_eq!(r.note, SweepNote::Complete);
    // Rows, not batches: the deleted and the changed row each count once.
    assert_eq!((r.conflicted(), r.rewritten(), r.scanned()), (2, 23, 25));
    assert_eq!(raw_get(&store, "acc", "r00013"), None);
    assert_eq!(stored_json(&store, "acc", "r00017")["tier"], json!("gold"));
    assert_eq!(stored_env(&store, "acc", "r00017").lock_version, 2);
    let versions: Vec<i32> = c.iter().map(|d| d.unwrap().stored_version).collect();
    assert_eq!(versions.len(), 24);
    assert!(versions.iter().all(|v| *v == 4));
}

#[test]
fn the_marker_layout_is_documented_json() {
    let m = SweepMarker {
        format: 1,
        completed: 2,
        in_progress: Some(3),
        runner: Some("r1".into()),
        lease_expires_ms: 5,
        cursor_hex: Some("6162".into()),
        counters: Default::default(),
        token: None,
    };
    assert_eq!(
        String::from_utf8(m.encode()).unwrap(),
        r#"{"format":1,"completed":2,"in_progress":3,"runner":"r1","lease_expires_ms":5,"cursor_hex":"6162","counters":{"scanned":0,"rewritten":0,"conflicted":0,"skipped_ahead":0,"failed":0}}"#
    );
    assert_eq!(m.cursor(), Some(b"ab".to_vec()));
    assert!(SweepMarker::decode("acc", b"{}").is_err());
    assert!(SweepMarker::decode("acc", br#"{"format":2}"#).is_err());
}

#[test]
fn losing_the_claim_race_reports_lease_not_claimed() {
    let (spy, store) = Spy::new();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = coll(&db);
    seed(&store, 5);
    let key = layout::keys::sweep_key("acc");
    let k = key.clone();
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    spy.before_apply(move |batch, inner| {
        let claims = batch.mutations().iter().any(|m| m.key() == k.as_slice());
        if claims && f.fetch_add(1, Ordering::SeqCst) == 0 {
            // Another instance claims first.
            let other = SweepMarker {
                format: 1,
                in_progress: Some(3),
                runner: Some("other".into()),
                lease_expires_ms: 2_000_000,
                ..Default::default()
            };
            inner
                .apply(Batch::new().set(k.clone(), other.encode()))
                .unwrap();
        }
    });
    let (_, clk) = clock();
    let r = c.sweep(opts("a", &clk)).unwrap();
    spy.clear_hook();
    assert_eq!(r.note, SweepNote::LeaseNotClaimed);
    assert_eq!(r.note.to_string(), "lease not claimed");
    assert_eq!(r.scanned(), 0);
    assert_eq!(marker(&store).unwrap().runner.as_deref(), Some("other"));
    assert_eq!(stored_env(&store, "acc", "r00000").payload_version, 1);
}

#[test]
fn a_refusing_write_guard_stops_the_sweep_before_it_writes() {
    #[derive(Debug)]
    struct Fence;
    impl strata::WriteGuard for Fence {
        fn check_write(&self, c: &str) -> Result<(), strata::GuardError> {
            Err(format!("`{c}` is fenced").into())
        }
    }
    let (store, db) = mem_db();
    coll(&db);
    seed(&store, 5);
    let fenced = db
        .collection::<Account>("acc", options().write_guard(Arc::new(Fence)))
        .unwrap();
    let (_, clk) = clock();
    let err = fenced.sweep(opts("a", &clk)).unwrap_err();
    assert!(
        matches!(err, strata::CollectionError::Guard { .. }),
        "{err}"
    );
    assert!(marker(&store).is_none());
    assert_eq!(stored_env(&store, "acc", "r00000").payload_version, 1);
}

fn stale_bytes(id: &str, balance: i64) -> Vec<u8> {
    strata::layout::envelope::encode(
        strata::layout::envelope::Envelope::new(1, 7),
        format!(r#"{{"id":"{id}","balance":{balance},"by":"old build"}}"#).as_bytes(),
    )
}

fn current_bytes(id: &str) -> Vec<u8> {
    strata::layout::envelope::encode(
        strata::layout::envelope::Envelope::new(4, 9),
        format!(r#"{{"id":"{id}","balance_cents":1,"tier":"gold","steps":0}}"#).as_bytes(),
    )
}

/// Fires `writes` through the inner backend right before the first sweep batch that
/// rewrites a document (the sweep has read the rows, not yet written them).
fn race_first_row_batch(spy: &Spy, writes: Batch) -> Arc<AtomicUsize> {
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let mut writes = Some(writes);
    let doc_prefix = layout::keys::doc_prefix("acc");
    spy.before_apply(move |batch, inner| {
        let rewrites = batch
            .mutations()
            .iter()
            .any(|m| m.key().starts_with(&doc_prefix));
        if rewrites {
            if let Some(w) = writes.take() {
                inner.apply(w).unwrap();
            }
            f.fetch_add(1, Ordering::SeqCst);
        }
    });
    fired
}

#[test]
fn conflicted_counts_rows_and_the_rest_of_the_batch_is_still_rewritten() {
    let (spy, store) = Spy::new();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = coll(&db);
    seed(&store, 10);
    // Between the sweep's read and its write: three rows modified (one by an old build,
    // still stale, one with a newer lock at the current version, one rewritten at v1 with
    // the same lock), one deleted.
    let (m1, m2, m3, gone) = ("r00001", "r00004", "r00008", "r00006");
    let writes = Batch::new()
        .set(layout::keys::doc_key("acc", m1), stale_bytes(m1, 77))
        .set(layout::keys::doc_key("acc", m2), current_bytes(m2))
        .set(layout::keys::doc_key("acc", m3), stale_bytes(m3, 3))
        .delete(layout::keys::doc_key("acc", gone));
    let fired = race_first_row_batch(&spy, writes);
    let (_, clk) = clock();
    let r = c.sweep(opts("a", &clk)).unwrap();
    spy.clear_hook();
    // One attempt failed on the changed rows, the narrowed batch committed.
    assert_eq!(fired.load(Ordering::SeqCst), 2);
    assert_eq!(r.note, SweepNote::Complete);
    assert_eq!(
        (r.scanned(), r.rewritten(), r.conflicted(), r.failed()),
        (10, 6, 4, 0)
    );
    // The deleted row stays deleted; the modified ones keep the concurrent writer's bytes.
    assert_eq!(raw_get(&store, "acc", gone), None);
    assert_eq!(raw_get(&store, "acc", m1), Some(stale_bytes(m1, 77)));
    assert_eq!(raw_get(&store, "acc", m2), Some(current_bytes(m2)));
    assert_eq!(raw_get(&store, "acc", m3), Some(stale_bytes(m3, 3)));
    for i in [0usize, 2, 3, 5, 7, 9] {
        let id = format!("r{i:05}");
        assert_eq!(stored_env(&store, "acc", &id).payload_version, 4, "{id}");
        assert_eq!(
            stored_json(&store, "acc", &id)["balance_cents"],
            json!(i * 100)
        );
    }
    // The marker carries the same row counts, and completed.
    let m = marker(&store).unwrap();
    assert_eq!((m.completed, m.in_progress), (3, None));
    assert_eq!(
        (
            m.counters.rewritten,
            m.counters.conflicted,
            m.counters.scanned
        ),
        (6, 4, 10)
    );
    // The stale row the old build wrote heals on its next read.
    assert_eq!(c.get(m1).unwrap().unwrap().balance_cents, 7700);
}

#[test]
fn a_narrowed_batch_is_followed_by_more_batches_and_the_marker_counts_stay_exact() {
    let (spy, store) = Spy::new();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = coll(&db);
    seed(&store, 35);
    // The first row batch is r00000..r00009; race two of its rows and one row of a
    // later batch (its change is seen by the sweep's own read: no conflict there).
    let writes = Batch::new()
        .delete(layout::keys::doc_key("acc", "r00003"))
        .set(
            layout::keys::doc_key("acc", "r00009"),
            current_bytes("r00009"),
        )
        .set(
            layout::keys::doc_key("acc", "r00021"),
            current_bytes("r00021"),
        );
    race_first_row_batch(&spy, writes);
    let (_, clk) = clock();
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    // Abort at poll 3: two batches committed (the narrowed one and the next).
    let first = c
        .sweep(opts("a", &clk).abort_when(move || p.fetch_add(1, Ordering::SeqCst) + 1 >= 3))
        .unwrap();
    spy.clear_hook();
    assert_eq!(first.note, SweepNote::Aborted);
    assert_eq!(
        (first.scanned(), first.rewritten(), first.conflicted()),
        (20, 18, 2)
    );
    let m = marker(&store).unwrap();
    assert_eq!(m.counters, first.counters);
    assert_eq!(m.cursor(), Some(layout::keys::doc_key("acc", "r00019")));
    let second = c.sweep(opts("b", &clk)).unwrap();
    assert_eq!(second.note, SweepNote::Complete);
    assert_eq!(
        (second.scanned(), second.rewritten(), second.conflicted()),
        (15, 14, 0)
    );
    let m = marker(&store).unwrap();
    assert_eq!(
        (
            m.counters.scanned,
            m.counters.rewritten,
            m.counters.conflicted
        ),
        (35, 32, 2)
    );
    assert_eq!(raw_get(&store, "acc", "r00003"), None);
    assert_eq!(
        raw_get(&store, "acc", "r00009"),
        Some(current_bytes("r00009"))
    );
    assert_eq!(
        raw_get(&store, "acc", "r00021"),
        Some(current_bytes("r00021"))
    );
}

#[test]
fn every_row_rewrite_carries_its_own_compare_and_swap_when_the_byte_budget_splits_pages() {
    let (spy, store) = Spy::new();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = coll(&db);
    seed(&store, 40);
    let doc_prefix = layout::keys::doc_prefix("acc");
    let unguarded = Arc::new(Mutex::new(Vec::new()));
    let batches = Arc::new(AtomicUsize::new(0));
    let (u, b) = (unguarded.clone(), batches.clone());
    spy.before_apply(move |batch, _| {
        for m in batch.mutations() {
            let Mutation::Set { key, .. } = m else {
                continue;
            };
            if !key.starts_with(&doc_prefix) {
                continue;
            }
            let guarded = batch
                .preconditions()
                .iter()
                .any(|p| matches!(p, Precondition::Equals { key: k, .. } if k == key));
            if !guarded {
                u.lock().unwrap().push(key.clone());
            }
        }
        // No precondition on a row this batch does not write.
        for p in batch.preconditions() {
            if p.key().starts_with(&doc_prefix) {
                assert!(batch.mutations().iter().any(|m| m.key() == p.key()));
            }
        }
        b.fetch_add(1, Ordering::SeqCst);
    });
    let (_, clk) = clock();
    // About 3 rewritten rows fit a batch's byte budget (rows read + rows written), so
    // batches end mid-page: the pass reads the record that no longer fits first.
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    let first = c
        .sweep(
            opts("a", &clk)
                .limits(strata::pass::PassLimits::new(100, 400).unwrap())
                .abort_when(move || p.fetch_add(1, Ordering::SeqCst) + 1 >= 4),
        )
        .unwrap();
    assert_eq!(first.note, SweepNote::Aborted);
    // The counters of the aborted run are those of the committed rows exactly.
    let m = marker(&store).unwrap();
    let cursor = m.cursor().unwrap();
    let committed = (0..40)
        .filter(|i| layout::keys::doc_key("acc", &format!("r{i:05}")) <= cursor)
        .count() as u64;
    assert!(committed > 0 && committed < 40, "{committed}");
    assert_eq!((first.scanned(), first.rewritten()), (committed, committed));
    assert_eq!(m.counters.scanned, committed);
    let r = c
        .sweep(opts("a", &clk).limits(strata::pass::PassLimits::new(100, 400).unwrap()))
        .unwrap();
    spy.clear_hook();
    assert_eq!(r.note, SweepNote::Complete);
    assert_eq!(r.scanned() + committed, 40);
    assert_eq!(marker(&store).unwrap().counters.rewritten, 40);
    assert!(batches.load(Ordering::SeqCst) > 10);
    assert_eq!(*unguarded.lock().unwrap(), Vec::<Vec<u8>>::new());
    assert!(c.iter().all(|d| d.unwrap().stored_version == 4));
}

#[test]
fn the_narrowed_retry_runs_no_step_again_and_writes_the_unchanged_rows_once() {
    // A step that would fail from its second call on row r00002: the pass narrows a
    // batch whose rows changed by dropping them and keeping the other rows' rewrites as
    // computed from the bytes read, so no step ever runs twice for one row.
    let calls = Arc::new(AtomicUsize::new(0));
    let k = calls.clone();
    let (spy, store) = Spy::new();
    let db = Database::builder(store.clone()).open().unwrap();
    let c: Collection<Account> = db
        .collection(
            "acc",
            CollectionOptions::new()
                .identity_fields(["id"])
                .upcast(1, Mode::Eager, move |o| {
                    if o.get("id") == Some(&json!("r00002")) && k.fetch_add(1, Ordering::SeqCst) > 0
                    {
                        return Err(StepError::new("not pure"));
                    }
                    let d = o.remove("balance").and_then(|v| v.as_i64()).unwrap_or(0);
                    o.insert("balance_cents".into(), json!(d * 100));
                    Ok(())
                }),
        )
        .unwrap();
    seed(&store, 10);
    let writes = Batch::new().delete(layout::keys::doc_key("acc", "r00005"));
    race_first_row_batch(&spy, writes);
    let (_, clk) = clock();
    let r = c.sweep(opts("a", &clk)).unwrap();
    spy.clear_hook();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the step ran once for r00002"
    );
    assert_eq!(r.note, SweepNote::Complete);
    assert_eq!(
        (r.scanned(), r.rewritten(), r.conflicted(), r.failed()),
        (10, 9, 1, 0)
    );
    assert_eq!(stored_env(&store, "acc", "r00002").payload_version, 2);
    assert_eq!(raw_get(&store, "acc", "r00005"), None, "never resurrected");
    assert_eq!(stored_env(&store, "acc", "r00009").payload_version, 2);
    let m = marker(&store).unwrap();
    assert_eq!((m.completed, m.in_progress), (2, None));
    assert_eq!(
        (
            m.counters.rewritten,
            m.counters.conflicted,
            m.counters.failed
        ),
        (9, 1, 0)
    );
}

/// Issue 9: sweep and cutover exclude each other on one collection. A cutover declared by
/// another process while a sweep runs is seen by the sweep's very next batch: that batch
/// carries the fence bytes it checked, conflicts, is re-checked and refused with the
/// typed fence refusal; nothing after the last committed batch is written.
#[test]
fn a_cutover_declared_mid_sweep_stops_the_sweep_before_its_next_batch() {
    let (spy, store) = Spy::new();
    let db = Database::builder(store.clone()).open().unwrap();
    let c = coll(&db);
    seed(&store, 30);
    let marker_key = layout::keys::sweep_key("acc");
    let mut marker_writes = 0;
    spy.before_apply(move |batch, backend| {
        if batch
            .mutations()
            .iter()
            .any(|m| m.key() == marker_key.as_slice())
        {
            marker_writes += 1;
            // 1: the claim, 2: the first batch, 3: the second batch.
            if marker_writes == 3 {
                strata::policy::Fence::add_pending(backend, "acc", "target").unwrap();
            }
        }
    });
    let (_, clk) = clock();
    let err = c.sweep(opts("a", &clk)).unwrap_err();
    spy.clear_hook();
    assert!(err.is_fenced(), "{err}");
    assert!(err.to_string().contains("are fenced"), "{err}");
    let versions: Vec<i32> = (0..30)
        .map(|i| stored_env(&store, "acc", &format!("r{i:05}")).payload_version)
        .collect();
    assert_eq!(versions[..10], [4; 10], "the first batch committed");
    assert_eq!(versions[10..], [1; 20], "nothing after the fence moved");
    // And a new sweep is refused up front while the cutover is pending.
    assert!(c.sweep(opts("b", &clk)).unwrap_err().is_fenced());
}

/// A memory store that hides its write epoch (as a backend without one would).
#[derive(Debug, Clone)]
struct NoEpoch(strata_store::MemoryStore);

impl KvRead for NoEpoch {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: strata_store::ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        self.0.scan_visit(prefix, after, limits, visit)
    }
    // No write epoch: hidden.
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        strata_store::Capabilities::default()
    }
}

impl KvWrite for NoEpoch {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        self.0.read_modify_write(reads, decide)
    }
    fn flush(&self) -> strata_store::Result<()> {
        Ok(())
    }
}

impl strata_store::Backend for NoEpoch {
    fn name(&self) -> &'static str {
        "memory without epoch"
    }
}

/// On a backend with a write epoch and no concurrent writer, the sweep's per-row
/// compare-and-swaps are not read again at commit: the same sweep checks one precondition
/// per row fewer than on a backend without an epoch.
#[test]
fn with_no_concurrent_writer_the_rows_are_not_read_again_at_commit() {
    let sweep_checks = |hide_epoch: bool| {
        let memory = strata_store::MemoryStore::new();
        let store = if hide_epoch {
            Store::new(NoEpoch(memory.clone()))
        } else {
            Store::new(memory.clone())
        };
        let db = Database::builder(store.clone()).open().unwrap();
        let c = coll(&db);
        seed(&store, 40);
        let (_, clk) = clock();
        let before = memory.precondition_checks();
        let r = c.sweep(opts("a", &clk)).unwrap();
        assert_eq!(r.note, SweepNote::Complete);
        assert_eq!((r.rewritten(), r.conflicted()), (40, 0));
        memory.precondition_checks() - before
    };
    let (with, without) = (sweep_checks(false), sweep_checks(true));
    // 4 batches of 10 rows: at least the first three skip their 10 row checks (the final
    // one, which records the manifest, goes through the manifest watch's own path).
    assert!(
        without - with >= 30,
        "{with} checks with the epoch, {without} without"
    );
}

/// The eager sweep's default batch is the payload seed's 256 rows
/// (`sweep::DEFAULT_BATCH_SIZE`), not the bulk pass's 512: stopped at the first batch
/// boundary, a default sweep has rewritten exactly 256 rows.
#[test]
fn the_default_sweep_batch_is_the_seeds_256_rows() {
    use strata::ops::sweep::DEFAULT_BATCH_SIZE;
    assert_eq!(DEFAULT_BATCH_SIZE, 256);
    assert_eq!(
        SweepOptions::new().get_limits(),
        strata::pass::PassLimits::new(DEFAULT_BATCH_SIZE, strata::pass::DEFAULT_MAX_BYTES).unwrap()
    );
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 700);
    let (_, clock) = clock();
    // Polled at every batch boundary: the first poll (before any batch) goes on, the
    // second stops after exactly one batch.
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    let _ = c.sweep(
        SweepOptions::new()
            .runner_id("default-batch")
            .clock(clock)
            .abort_when(move || p.fetch_add(1, Ordering::SeqCst) >= 1),
    );
    let rewritten = (0..700)
        .filter(|i| {
            let raw = store
                .get(&layout::keys::doc_key("acc", &format!("r{i:05}")))
                .unwrap()
                .unwrap();
            strata::layout::envelope::decode(&raw)
                .unwrap()
                .0
                .payload_version
                > 1
        })
        .count();
    assert_eq!(rewritten, DEFAULT_BATCH_SIZE);
}
