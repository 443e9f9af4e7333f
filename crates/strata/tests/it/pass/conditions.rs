//! Row conditions (rows re-read only when another writer changed them, narrowed batches
//! retried, conflicts no row explains) and the exact-or-absent tally.

use super::*;

/// Per-row conditions on a backend with a write epoch: when nothing else writes, the rows
/// are not read again at commit — the store checks only the checkpoint precondition of
/// each batch.
#[test]
fn row_conditions_skip_rereading_rows_when_nothing_else_wrote() {
    use strata::pass::RawCheckpoint;
    use strata_store::{KvWrite, MemoryStore, Store};
    let memory = MemoryStore::new();
    let store = Store::new(memory.clone());
    for i in 0..7 {
        store
            .apply(Batch::new().set(format!("t/{i}").into_bytes(), b"v".to_vec()))
            .unwrap();
    }
    let before = memory.precondition_checks();
    let codec = RawCheckpoint::new(b"__nx/sweep/t".to_vec());
    let report = Pass::new("t", b"t/".to_vec(), &codec)
        .limits(PassLimits::new(3, 1 << 20).unwrap())
        .row_conditions(true)
        .run(
            &store,
            |r: &RecordRef<'_>, out: &mut Vec<Mutation>| -> Result<(), RecordError> {
                out.push(r.replace([r.value, b"!"].concat()));
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(report.counters.rewritten, 7);
    assert!(report.batches >= 3, "{report:?}");
    // One check per batch (the checkpoint), none of the 7 rows.
    assert_eq!(memory.precondition_checks() - before, report.batches);
    for i in 0..7 {
        assert_eq!(
            store.get(format!("t/{i}").as_bytes()).unwrap(),
            Some(b"v!".to_vec())
        );
    }
}

/// Issue 9: per-row conditional writes. A batch whose rows changed after the pass read
/// them is narrowed: the changed rows (and only they) are dropped and reported, the rest
/// commits once, the checkpoint is re-encoded; nothing is processed twice. The competing
/// write lands between the pass's read and its commit (the spy forwards the memory
/// store's write epoch, so the batch was observed at an epoch that write moved).
#[test]
fn row_conditions_narrow_a_batch_whose_rows_changed_and_retry_it() {
    use crate::collection_util::Spy;
    use strata::pass::RawCheckpoint;
    use strata_store::KvWrite;
    let (spy, store) = Spy::new();
    for k in ["a", "b", "c", "d", "e"] {
        store
            .apply(Batch::new().set(format!("t/{k}").into_bytes(), b"v".to_vec()))
            .unwrap();
    }
    let mut fired = false;
    spy.before_apply(move |batch, backend| {
        if !fired && batch.mutations().iter().any(|m| m.key().starts_with(b"t/")) {
            fired = true;
            backend
                .apply(Batch::new().set(b"t/c".to_vec(), b"changed".to_vec()))
                .unwrap();
        }
    });
    let processed = Cell::new(0);
    let dropped = RefCell::new(Vec::new());
    let codec = RawCheckpoint::new(b"__nx/sweep/t".to_vec());
    let report = Pass::new("t", b"t/".to_vec(), &codec)
        .row_conditions(true)
        .on_narrow(|keys: &[Vec<u8>]| dropped.borrow_mut().extend_from_slice(keys))
        .run(
            &store,
            |r: &RecordRef<'_>, out: &mut Vec<Mutation>| -> Result<(), RecordError> {
                processed.set(processed.get() + 1);
                out.push(r.replace([r.value, b"!"].concat()));
                Ok(())
            },
        )
        .unwrap();
    spy.clear_hook();
    assert_eq!(processed.get(), 5, "each row processed once");
    assert_eq!(*dropped.borrow(), [b"t/c".to_vec()]);
    assert_eq!(report.mutations, 4);
    // Typed per-row counters: the dropped row moved from rewritten to conflicted.
    assert_eq!(
        report.counters,
        strata::pass::RowCounters {
            scanned: 5,
            rewritten: 4,
            conflicted: 1,
            ..Default::default()
        }
    );
    for k in ["a", "b", "d", "e"] {
        assert_eq!(
            store.get(format!("t/{k}").as_bytes()).unwrap(),
            Some(b"v!".to_vec())
        );
    }
    assert_eq!(store.get(b"t/c").unwrap(), Some(b"changed".to_vec()));
    assert_eq!(store.get(b"__nx/sweep/t").unwrap(), None, "completed");
}

/// The same narrowing on sled (its batch is committed through the one write primitive;
/// the pass keeps its retry copy of the rows in its reused buffer, `pass::kept`): the
/// competing write lands from the batch hook, after the page was read.
#[test]
fn row_conditions_narrow_on_sled_from_the_batch_handed_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = strata_sled::SledStore::open_store(dir.path()).unwrap();
    for key in ["a", "b", "c", "d", "e"] {
        put(&store, &k(key), b"v");
    }
    let fired = Cell::new(false);
    let processed = Cell::new(0);
    let dropped = RefCell::new(Vec::new());
    let codec = ck();
    let report = Pass::new("t", k(""), &codec)
        .row_conditions(true)
        .on_narrow(|keys: &[Vec<u8>]| dropped.borrow_mut().extend_from_slice(keys))
        .on_batch(
            |_: &mut Batch, _: &BatchInfo<'_>| -> Result<(), HookError> {
                if !fired.replace(true) {
                    put(&store, &k("c"), b"changed");
                    put(&store, &k("e"), b"changed too");
                }
                Ok(())
            },
        )
        .run(
            &store,
            |r: &RecordRef<'_>, out: &mut Out| -> Result<(), RecordError> {
                processed.set(processed.get() + 1);
                out.push(r.replace([r.value, b"!"].concat()));
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(processed.get(), 5, "each row processed once");
    assert_eq!(*dropped.borrow(), [k("c"), k("e")]);
    assert_eq!(report.mutations, 3);
    assert_eq!(
        (report.counters.rewritten, report.counters.conflicted),
        (3, 2)
    );
    for key in ["a", "b", "d"] {
        assert_eq!(store.get(&k(key)).unwrap(), Some(b"v!".to_vec()));
    }
    assert_eq!(store.get(&k("c")).unwrap(), Some(b"changed".to_vec()));
    assert_eq!(store.get(&k("e")).unwrap(), Some(b"changed too".to_vec()));
    assert_eq!(store.get(b"__nx/sweep/t").unwrap(), None, "completed");
}

/// A conflict that no row explains (here: the checkpoint moved) is returned as is.
#[test]
fn row_conditions_return_a_conflict_no_row_explains() {
    use crate::collection_util::Spy;
    use strata::pass::RawCheckpoint;
    use strata_store::KvWrite;
    let (spy, store) = Spy::new();
    store
        .apply(Batch::new().set(b"t/a".to_vec(), b"v".to_vec()))
        .unwrap();
    spy.before_apply(|batch, backend| {
        if batch.mutations().iter().any(|m| m.key().starts_with(b"t/")) {
            backend
                .apply(Batch::new().set(b"__nx/sweep/t".to_vec(), b"other".to_vec()))
                .unwrap();
        }
    });
    let codec = RawCheckpoint::new(b"__nx/sweep/t".to_vec());
    let err = Pass::new("t", b"t/".to_vec(), &codec)
        .row_conditions(true)
        .run(
            &store,
            |r: &RecordRef<'_>, out: &mut Vec<Mutation>| -> Result<(), RecordError> {
                out.push(r.replace(b"w".to_vec()));
                Ok(())
            },
        )
        .unwrap_err();
    spy.clear_hook();
    assert!(
        matches!(err, strata::pass::PassError::Store { ref source, .. } if source.is_conflict()),
        "{err}"
    );
    assert_eq!(store.get(b"t/a").unwrap(), Some(b"v".to_vec()));
}

/// `tally_scope`: the tally the pass hands out equals a recount of the scope as it left
/// it (rewritten, deleted and untouched rows); a write by anyone else during the pass, or
/// a resumed pass, gets no tally.
#[test]
fn the_pass_tally_is_exact_or_absent() {
    use strata_store::manifest::tally_scope;
    use strata_store::{KvWrite, MemoryStore, Store};
    let seeded = || {
        let store = Store::new(MemoryStore::new());
        for i in 0..10 {
            store
                .apply(Batch::new().set(format!("t/{i}").into_bytes(), b"v".to_vec()))
                .unwrap();
        }
        store
    };
    let process = |r: &RecordRef<'_>, out: &mut Vec<Mutation>| -> Result<(), RecordError> {
        match r.key.last() {
            Some(b'4') => out.push(Mutation::Delete {
                key: r.key.to_vec(),
            }),
            Some(d) if d % 2 == 1 => out.push(r.replace(b"odd".to_vec())),
            _ => {}
        }
        Ok(())
    };
    let codec = RawCheckpoint::new(b"__nx/ck/t".to_vec());
    let pass = || {
        Pass::new("t", b"t/".to_vec(), &codec)
            .limits(PassLimits::new(3, 1 << 20).unwrap())
            .tally_scope(true)
    };

    let store = seeded();
    let report = pass().run(&store, process).unwrap();
    let recount = tally_scope(&store, b"t/", None).unwrap();
    assert_eq!(recount.records, 9);
    assert_eq!(report.tally, Some(recount));

    // Another write lands (outside the scope) while the pass runs: no tally.
    let store = seeded();
    let mut once = true;
    let report = pass()
        .on_batch(
            |_: &mut Batch, _: &BatchInfo<'_>| -> Result<(), HookError> {
                if std::mem::take(&mut once) {
                    store
                        .apply(Batch::new().set(b"elsewhere".to_vec(), b"x".to_vec()))
                        .unwrap();
                }
                Ok(())
            },
        )
        .run(&store, process)
        .unwrap();
    assert_eq!(report.tally, None);

    // A resumed pass saw only part of the scope: no tally.
    let store = seeded();
    put(&store, b"__nx/ck/t", b"t/5");
    let report = pass().run(&store, process).unwrap();
    assert_eq!(report.records, 4);
    assert_eq!(report.tally, None);
}

/// The retry copy of a batch lives in one buffer the pass reuses batch after batch: a batch
/// narrowed after earlier, larger batches went through that buffer retries exactly its own
/// rows' rewrites and preconditions — no byte of an earlier batch's rows, and no row of
/// another batch. Rows of different lengths (so stale bytes would show); the competing
/// write hits the third batch, which is also shorter than the first two.
#[test]
fn a_batch_narrowed_after_others_reused_the_buffer_retries_exactly_its_own_rows() {
    use crate::collection_util::Spy;
    use strata::pass::RawCheckpoint;
    use strata_store::KvWrite;
    let (spy, store) = Spy::new();
    let value = |i: usize| format!("v{i}-{}", "x".repeat((i * 5) % 17)).into_bytes();
    for i in 0..11 {
        store
            .apply(Batch::new().set(format!("t/{i:02}").into_bytes(), value(i)))
            .unwrap();
    }
    let mut row_batches = 0;
    spy.before_apply(move |batch, backend| {
        if batch.mutations().iter().any(|m| m.key().starts_with(b"t/")) {
            row_batches += 1;
            if row_batches == 3 {
                // The third batch holds rows 08, 09, 10: row 09 changes under it.
                backend
                    .apply(Batch::new().set(b"t/09".to_vec(), b"changed".to_vec()))
                    .unwrap();
            }
        }
    });
    let processed = Cell::new(0);
    let dropped = RefCell::new(Vec::new());
    let codec = RawCheckpoint::new(b"__nx/sweep/t".to_vec());
    let report = Pass::new("t", b"t/".to_vec(), &codec)
        .limits(PassLimits::new(4, 1 << 20).unwrap())
        .row_conditions(true)
        .on_narrow(|keys: &[Vec<u8>]| dropped.borrow_mut().extend_from_slice(keys))
        .run(
            &store,
            |r: &RecordRef<'_>, out: &mut Vec<Mutation>| -> Result<(), RecordError> {
                processed.set(processed.get() + 1);
                out.push(r.replace([r.value, b"!", r.key].concat()));
                // A second mutation per row, outside the prefix, kept for the retry too.
                out.push(Mutation::Set {
                    key: [b"o/".as_slice(), r.key].concat(),
                    value: r.value.to_vec(),
                });
                Ok(())
            },
        )
        .unwrap();
    spy.clear_hook();
    assert_eq!(processed.get(), 11, "each row processed once");
    assert_eq!(*dropped.borrow(), [b"t/09".to_vec()]);
    assert_eq!(report.counters.rewritten, 10);
    assert_eq!(report.counters.conflicted, 1);
    for i in (0..11).filter(|&i| i != 9) {
        let key = format!("t/{i:02}").into_bytes();
        assert_eq!(
            store.get(&key).unwrap(),
            Some([value(i).as_slice(), b"!", &key].concat()),
            "row {i}"
        );
        assert_eq!(
            store.get(&[b"o/".as_slice(), &key].concat()).unwrap(),
            Some(value(i)),
            "row {i}'s second mutation"
        );
    }
    assert_eq!(store.get(b"t/09").unwrap(), Some(b"changed".to_vec()));
    assert_eq!(store.get(b"o/t/09").unwrap(), None, "dropped with its row");
    assert_eq!(store.get(b"__nx/sweep/t").unwrap(), None, "completed");
}
