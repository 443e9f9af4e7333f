//! Concurrent writers during a sweep: deletes are not resurrected, conflicted rows are
//! counted, narrowed batches and per-row compare-and-swap keep the counts exact.

use super::*;

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
