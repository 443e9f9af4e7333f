//! The sweep's eager cascade and its marker: stale rows rewritten, a completed sweep's one
//! read, no-op and ahead rows, unreadable rows, the documented marker layout, the default
//! batch.

use super::*;

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
