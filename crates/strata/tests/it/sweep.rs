//! The eager sweep: cascade, marker, lease, abort/resume, contention, conflicts.

use crate::collection_util::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata::clock::{Clock, ManualClock, SharedClock};
use strata::collection::{layout, CollectionOptions};
use strata::payload::sweep::{SweepMarker, SweepNote};
use strata::payload::{Mode, StepError, SweepOptions};
use strata::{Collection, Database};
use strata_store::{Batch, KvRead, KvWrite, Store};

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
            layout::doc_key("acc", &id),
            strata::payload::envelope::encode(
                strata::payload::Envelope::new(1, 1),
                json.as_bytes(),
            ),
        );
    }
    store.apply(b).unwrap();
}

fn marker(store: &Store) -> Option<SweepMarker> {
    store
        .get(&layout::sweep_key("acc"))
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
        .batch_size(10)
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
    let db = Database::open(store.clone()).unwrap();
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
        .sweep(opts("a", &clk).abort_check(move || p.fetch_add(1, Ordering::SeqCst) + 1 >= 4))
        .unwrap();
    assert_eq!(first.note, SweepNote::Aborted);
    assert_eq!((first.scanned(), first.rewritten()), (30, 30));
    let m = marker(&store).unwrap();
    assert_eq!(
        (m.in_progress, m.lease_expires_ms, m.runner.as_deref()),
        (Some(3), 0, Some("a"))
    );
    assert_eq!(m.cursor(), Some(layout::doc_key("acc", "r00029")));
    assert_eq!(stored_env(&store, "acc", "r00030").payload_version, 1);
    // Another runner may take over at once (the lease was released) and resumes.
    let second = c.sweep(opts("b", &clk)).unwrap();
    assert_eq!(second.note, SweepNote::Complete);
    assert_eq!(second.resumed_from, Some(layout::doc_key("acc", "r00029")));
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
    let other_db = Database::open(store.clone()).unwrap();
    let other = coll(&other_db);
    let seen = Arc::new(Mutex::new(None));
    let sweeping = Arc::new(Mutex::new(None));
    let (s, sw, odb, db2) = (seen.clone(), sweeping.clone(), other_db.clone(), db.clone());
    let clk2 = clk.clone();
    let polls = AtomicUsize::new(0);
    let r = c
        .sweep(opts("a", &clk).abort_check(move || {
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

#[test]
fn an_expired_lease_of_a_dead_runner_is_taken_over_and_resumed() {
    let (store, db) = mem_db();
    let c = coll(&db);
    seed(&store, 50);
    let (manual, clk) = clock();
    // Runner "dead" claimed the lease and processed 20 rows, then vanished.
    let polls = AtomicUsize::new(0);
    let first = c
        .sweep(opts("dead", &clk).abort_check(move || polls.fetch_add(1, Ordering::SeqCst) == 2))
        .unwrap();
    assert_eq!(first.note, SweepNote::Aborted);
    let mut m = marker(&store).unwrap();
    m.lease_expires_ms = manual.now_ms() + 60_000; // as if it had died holding the lease
    store
        .apply(Batch::new().set(layout::sweep_key("acc"), m.encode()))
        .unwrap();
    assert_eq!(c.sweep(opts("b", &clk)).unwrap().note, SweepNote::Contended);
    manual.advance(60_001);
    let r = c.sweep(opts("b", &clk)).unwrap();
    assert_eq!(r.note, SweepNote::Complete);
    assert_eq!(r.scanned(), 30);
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
        .sweep(opts("a", &clk).abort_check(move || {
            if polls.fetch_add(1, Ordering::SeqCst) == 1 {
                let mut m = marker(&st).unwrap();
                m.runner = Some("thief".into());
                st.apply(Batch::new().set(layout::sweep_key("acc"), m.encode()))
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
    let db = Database::open(store.clone()).unwrap();
    let c = coll(&db);
    seed(&store, 25);
    let victim = layout::doc_key("acc", "r00013");
    let changed = layout::doc_key("acc", "r00017");
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
                    strata::payload::envelope::encode(
                        strata::payload::Envelope::new(4, 2),
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
    assert_eq!(r.conflicted(), 1);
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
    let db = Database::open(store.clone()).unwrap();
    let c = coll(&db);
    seed(&store, 5);
    let key = layout::sweep_key("acc");
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
        fn check_write(&self, c: &str) -> Result<(), strata::collection::GuardError> {
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
