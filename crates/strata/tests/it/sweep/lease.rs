//! The sweep lease: abort and resume from the cursor, contention, takeover of a dead or
//! lost lease, a lost claim race, and what stops a sweep (a write guard, a cutover).

use super::*;

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
