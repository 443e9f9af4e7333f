//! The bulk pass: batching under one shared byte budget, mutation rules, hooks, abort,
//! progress, dry runs and checkpoints.

use crate::migration::{mem, put};
use std::cell::{Cell, RefCell};
use strata::pass::{
    BatchInfo, CheckpointCodec, HookError, MutationRule, Pass, PassError, PassLimits,
    RawCheckpoint, RecordError, RecordRef,
};
use strata_store::{Batch, KvRead, Mutation};

type Out = Vec<Mutation>;

fn k(s: &str) -> Vec<u8> {
    format!("__nx/t/{s}").into_bytes()
}

fn ck() -> RawCheckpoint {
    RawCheckpoint::new(b"__nx/sweep/t".to_vec())
}

fn limits(r: usize, b: usize) -> PassLimits {
    PassLimits::new(r, b).unwrap()
}

fn pass<'a>() -> Pass<'a> {
    Pass::new("t", b"__nx/t/".to_vec(), ck())
}

fn noop(_: &RecordRef<'_>, _: &mut Out) -> Result<(), RecordError> {
    Ok(())
}

#[test]
fn limits_must_be_positive() {
    assert!(matches!(
        PassLimits::new(0, 1),
        Err(PassError::InvalidLimits { .. })
    ));
    assert!(matches!(
        PassLimits::new(1, 0),
        Err(PassError::InvalidLimits { .. })
    ));
    let d = PassLimits::default();
    assert_eq!((d.max_records(), d.max_bytes()), (512, 4 * 1024 * 1024));
}

#[test]
fn replace_delete_move_and_additional_sets() {
    let (store, m) = mem();
    for s in ["replace", "delete", "move", "keep"] {
        put(&store, &k(s), s.as_bytes());
    }
    let report = pass()
        .limits(limits(3, 4096))
        .run(&store, |r: &RecordRef<'_>, out: &mut Out| {
            match &r.key[7..] {
                b"replace" => out.push(r.replace(b"replaced".to_vec())),
                b"delete" => out.push(r.delete()),
                b"move" => out.extend(r.move_to(b"__nx/moved/move".to_vec(), r.value.to_vec())),
                _ => {
                    out.push(RecordRef::create(
                        b"__nx/index/keep".to_vec(),
                        r.key.to_vec(),
                    ));
                    out.push(RecordRef::create(
                        b"__nx/index/keep2".to_vec(),
                        b"2".to_vec(),
                    ));
                }
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(
        (report.records, report.mutations, report.batches),
        (4, 6, 2)
    );
    let snap = m.snapshot();
    let expected: Vec<(&[u8], &[u8])> = vec![
        (b"__nx/index/keep", b"__nx/t/keep"),
        (b"__nx/index/keep2", b"2"),
        (b"__nx/moved/move", b"move"),
        (b"__nx/t/keep", b"keep"),
        (b"__nx/t/replace", b"replaced"),
    ];
    let got: Vec<(&[u8], &[u8])> = snap
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect();
    assert_eq!(got, expected, "checkpoint removed, every mutation applied");
}

#[test]
fn mutations_share_the_byte_budget_and_split_batches() {
    let (store, m) = mem();
    for i in 0..10 {
        put(&store, &k(&format!("{i:02}")), b"0123456789"); // 10 + 10 bytes
    }
    let infos = RefCell::new(Vec::new());
    let report = pass()
        .limits(limits(100, 100))
        .on_batch(|_b: &mut Batch, info: &BatchInfo<'_>| {
            infos
                .borrow_mut()
                .push((info.records, info.bytes, info.done));
            Ok(())
        })
        .run(&store, |r: &RecordRef<'_>, out: &mut Out| {
            // 19 bytes of record + a 30-byte copy: 49 per record, two per batch.
            let mut key = b"__nx/copy/".to_vec();
            key.extend_from_slice(&r.key[7..]);
            out.push(RecordRef::create(key, vec![b'x'; 18]));
            Ok(())
        })
        .unwrap();
    let infos = infos.into_inner();
    assert_eq!(report.batches, 5);
    assert!(
        infos.iter().all(|(r, b, _)| *r == 2 && *b == 98),
        "{infos:?}"
    );
    assert_eq!(infos.iter().filter(|i| i.2).count(), 1);
    assert_eq!(
        m.snapshot()
            .keys()
            .filter(|k| k.starts_with(b"__nx/copy/"))
            .count(),
        10
    );
}

#[test]
fn a_step_that_grows_a_batch_past_the_budget_preserves_payload_and_checkpoint() {
    let (store, m) = mem();
    for s in ["a", "b", "c"] {
        put(&store, &k(s), b"v");
    }
    let grow = |r: &RecordRef<'_>, out: &mut Out| -> Result<(), RecordError> {
        if r.key.ends_with(b"b") {
            out.push(r.replace(vec![0; 500]));
        }
        Ok(())
    };
    // Same batch: nothing committed at all.
    let before = m.snapshot();
    let err = pass()
        .limits(limits(10, 256))
        .run(&store, grow)
        .unwrap_err();
    assert!(
        matches!(err, PassError::BatchTooLarge { ref key, limit: 256, checkpoint: None, .. } if key == &k("b")),
        "{err}"
    );
    assert_eq!(m.snapshot(), before);
    // One record per batch: `a` is durable, `b` is not, and the checkpoint stays at `a`.
    let err = pass().limits(limits(1, 256)).run(&store, grow).unwrap_err();
    assert_eq!(err.checkpoint(), Some(k("a").as_slice()));
    assert_eq!(store.get(b"__nx/sweep/t").unwrap(), Some(k("a")));
    assert_eq!(store.get(&k("b")).unwrap(), Some(b"v".to_vec()));
    let snap = m.snapshot();
    let again = pass().limits(limits(1, 256)).run(&store, grow).unwrap_err();
    assert!(matches!(again, PassError::BatchTooLarge { .. }));
    assert_eq!(m.snapshot(), snap);
}

#[test]
fn oversize_record_is_rejected_before_anything_is_written() {
    let (store, m) = mem();
    put(&store, &k("big"), &[1u8; 300]);
    let before = m.snapshot();
    let called = Cell::new(false);
    let err = pass()
        .limits(limits(10, 100))
        .run(&store, |_: &RecordRef<'_>, _: &mut Out| {
            called.set(true);
            Ok(())
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            PassError::RecordTooLarge {
                size: 310,
                limit: 100,
                ..
            }
        ),
        "{err}"
    );
    assert!(!called.get(), "the processor never saw the oversize record");
    assert_eq!(m.snapshot(), before);
}

#[test]
fn steps_cannot_touch_engine_metadata_or_sibling_keys() {
    let (store, m) = mem();
    put(&store, &k("a"), b"1");
    put(&store, &k("b"), b"2");
    let cases: Vec<(Mutation, MutationRule)> = vec![
        (
            Mutation::Set {
                key: b"__nx/schema/t".to_vec(),
                value: b"x".to_vec(),
            },
            MutationRule::EngineMetadata,
        ),
        (
            Mutation::Delete {
                key: b"__nx/schema/t".to_vec(),
            },
            MutationRule::EngineMetadata,
        ),
        (
            Mutation::Set {
                key: b"__nx/migration/t".to_vec(),
                value: b"x".to_vec(),
            },
            MutationRule::EngineMetadata,
        ),
        (
            Mutation::Delete {
                key: b"__nx/sweep/t".to_vec(),
            },
            MutationRule::EngineMetadata,
        ),
        (
            Mutation::Set {
                key: k("b"),
                value: b"x".to_vec(),
            },
            MutationRule::SiblingKey,
        ),
        (Mutation::Delete { key: k("b") }, MutationRule::SiblingKey),
        (
            Mutation::Set {
                key: k("new"),
                value: b"x".to_vec(),
            },
            MutationRule::SiblingKey,
        ),
    ];
    for (mutation, rule) in cases {
        let before = m.snapshot();
        let err = pass()
            .run(&store, |r: &RecordRef<'_>, out: &mut Out| {
                out.push(r.replace(b"changed".to_vec()));
                if r.key == k("a").as_slice() {
                    out.push(mutation.clone());
                }
                Ok(())
            })
            .unwrap_err();
        assert!(
            matches!(err, PassError::ForbiddenMutation { rule: r, ref key, ref target, .. } if r == rule && key == &k("a") && target == mutation.key()),
            "{err}"
        );
        assert_eq!(m.snapshot(), before, "{rule:?} applied nothing");
    }
}

#[test]
fn duplicate_mutations_in_one_batch_are_rejected() {
    let (store, m) = mem();
    put(&store, &k("a"), b"1");
    put(&store, &k("b"), b"2");
    let set = |v: &[u8]| Mutation::Set {
        key: b"__nx/idx/x".to_vec(),
        value: v.to_vec(),
    };
    let del = || Mutation::Delete {
        key: b"__nx/idx/x".to_vec(),
    };
    type Emit = Box<dyn Fn(&RecordRef<'_>) -> Vec<Mutation>>;
    let cases: Vec<(&str, Emit)> = vec![
        (
            "set twice by one record",
            Box::new(move |_| vec![set(b"1"), set(b"2")]),
        ),
        ("set and deleted", Box::new(move |_| vec![set(b"1"), del()])),
        ("deleted twice", Box::new(move |_| vec![del(), del()])),
        (
            "own key twice",
            Box::new(|r| vec![r.replace(b"1".to_vec()), r.delete()]),
        ),
        (
            "set by two records of one batch",
            Box::new(move |_| vec![set(b"1")]),
        ),
    ];
    for (name, emit) in cases {
        let before = m.snapshot();
        let err = pass()
            .run(&store, |r: &RecordRef<'_>, out: &mut Out| {
                out.extend(emit(r));
                Ok(())
            })
            .unwrap_err();
        assert!(
            matches!(
                err,
                PassError::ForbiddenMutation {
                    rule: MutationRule::Duplicate,
                    ..
                }
            ),
            "{name}: {err}"
        );
        assert_eq!(m.snapshot(), before, "{name}");
    }
    // In separate batches, the same target key is fine.
    pass()
        .limits(limits(1, 4096))
        .run(&store, |_: &RecordRef<'_>, out: &mut Out| {
            out.push(set(b"1"));
            Ok(())
        })
        .unwrap();
}

#[test]
fn abort_stops_at_a_batch_boundary_and_the_rerun_resumes() {
    let (store, _m) = mem();
    for i in 0..6 {
        put(&store, &k(&i.to_string()), b"v");
    }
    let polls = Cell::new(0);
    let seen = RefCell::new(Vec::new());
    let err = pass()
        .limits(limits(2, 4096))
        .abort_when(|| {
            polls.set(polls.get() + 1);
            polls.get() > 2
        })
        .run(&store, |r: &RecordRef<'_>, _: &mut Out| {
            seen.borrow_mut().push(r.key.to_vec());
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, PassError::Aborted { .. }));
    assert!(err.is_retryable());
    assert_eq!(err.checkpoint(), Some(k("3").as_slice()));
    assert_eq!(seen.borrow().len(), 4);
    let report = pass().limits(limits(2, 4096)).run(&store, noop).unwrap();
    assert_eq!(report.resumed_from, Some(k("3")));
    assert_eq!(report.records, 2);
    assert_eq!(store.get(b"__nx/sweep/t").unwrap(), None);
}

#[test]
fn progress_is_reported_after_every_batch() {
    let (store, _m) = mem();
    for i in 0..5 {
        put(&store, &k(&i.to_string()), b"vv");
    }
    let events = RefCell::new(Vec::new());
    pass()
        .limits(limits(2, 4096))
        .on_progress(|p| {
            events.borrow_mut().push((
                p.table.to_string(),
                p.records,
                p.batches,
                p.bytes,
                p.done,
                p.cursor.map(<[u8]>::to_vec),
            ))
        })
        .run(&store, noop)
        .unwrap();
    let events = events.into_inner();
    assert_eq!(
        events.iter().map(|e| (e.1, e.2, e.4)).collect::<Vec<_>>(),
        vec![(2, 1, false), (4, 2, false), (5, 3, true)]
    );
    assert!(events.iter().all(|e| e.0 == "t"));
    assert_eq!(events[2].3, 5 * (8 + 2));
    assert_eq!(events[2].5, Some(k("4")));
}

#[test]
fn dry_run_processes_everything_and_writes_nothing() {
    let (store, m) = mem();
    for i in 0..5 {
        put(&store, &k(&i.to_string()), b"v");
    }
    let before = m.snapshot();
    let hook_called = Cell::new(false);
    let report = pass()
        .limits(limits(2, 4096))
        .dry_run(true)
        .on_batch(|_, _| {
            hook_called.set(true);
            Ok(())
        })
        .run(&store, |r: &RecordRef<'_>, out: &mut Out| {
            out.push(r.delete());
            Ok(())
        })
        .unwrap();
    assert!(report.dry_run);
    assert_eq!(
        (report.records, report.mutations, report.batches),
        (5, 5, 3)
    );
    assert!(!hook_called.get());
    assert_eq!(m.snapshot(), before);
}

#[test]
fn batch_hook_preconditions_guard_every_batch() {
    let (store, m) = mem();
    for i in 0..4 {
        put(&store, &k(&i.to_string()), b"v");
    }
    put(&store, b"__nx/lease", b"me");
    // The lease is taken over by someone else after the first batch.
    let batches = Cell::new(0);
    let err = pass()
        .limits(limits(2, 4096))
        .on_batch(|b: &mut Batch, _| {
            b.push_precondition(strata_store::Precondition::Equals {
                key: b"__nx/lease".to_vec(),
                value: b"me".to_vec(),
            });
            b.push(Mutation::Set {
                key: b"__nx/heartbeat".to_vec(),
                value: vec![batches.get()],
            });
            batches.set(batches.get() + 1);
            Ok(())
        })
        .on_progress(|p| {
            if p.batches == 1 {
                put(&store, b"__nx/lease", b"thief");
            }
        })
        .run(&store, |r: &RecordRef<'_>, out: &mut Out| {
            out.push(r.replace(b"w".to_vec()));
            Ok(())
        })
        .unwrap_err();
    assert!(
        matches!(err, PassError::Store { ref source, .. } if source.is_conflict()),
        "{err}"
    );
    assert_eq!(err.checkpoint(), Some(k("1").as_slice()));
    assert_eq!(store.get(&k("1")).unwrap(), Some(b"w".to_vec()));
    assert_eq!(
        store.get(&k("2")).unwrap(),
        Some(b"v".to_vec()),
        "the refused batch applied nothing"
    );
    assert_eq!(store.get(b"__nx/heartbeat").unwrap(), Some(vec![0]));
    assert_eq!(m.snapshot().get(b"__nx/sweep/t".as_slice()), Some(&k("1")));

    // A hook error stops the pass with nothing of the batch written.
    let before = m.snapshot();
    let err = pass()
        .on_batch(|_, _| {
            Err(HookError::LeaseLost {
                holder: Some("other".into()),
            })
        })
        .run(&store, noop)
        .unwrap_err();
    assert!(matches!(
        err,
        PassError::Hook {
            source: HookError::LeaseLost { .. },
            ..
        }
    ));
    assert_eq!(
        std::error::Error::source(&err).map(|s| s.to_string()),
        Some("the lease was lost to `other`".to_string())
    );
    assert!(!err.to_string().contains("lease"), "printed once: {err}");

    // A guard's refusal keeps the guard's error as the source: each message of the chain
    // once, and the caller gets its own error back without a string in between.
    let err = pass()
        .on_batch(|_, _| {
            Err(HookError::refused(std::io::Error::other(
                "fenced by the cutover",
            )))
        })
        .run(&store, noop)
        .unwrap_err();
    let chain: Vec<String> =
        std::iter::successors(Some(&err as &dyn std::error::Error), |e| e.source())
            .map(ToString::to_string)
            .collect();
    assert_eq!(chain.len(), 3, "{chain:?}");
    assert_eq!(chain[1], "a write guard refused the batch");
    assert_eq!(chain[2], "fenced by the cutover");
    assert_eq!(
        chain.iter().filter(|m| m.contains("fenced")).count(),
        1,
        "{chain:?}"
    );
    let PassError::Hook { source, .. } = err else {
        panic!("not a hook error: {err}");
    };
    let own = source.into_cause::<std::io::Error>().unwrap();
    assert_eq!(own.to_string(), "fenced by the cutover");
    assert!(HookError::check(std::io::Error::other("x"))
        .into_cause::<std::fmt::Error>()
        .is_err());
    assert_eq!(m.snapshot(), before);
    assert_eq!(m.snapshot(), before);
}

#[test]
fn invalid_record_names_table_and_key_and_writes_nothing() {
    let (store, m) = mem();
    put(&store, &k("a"), b"ok");
    put(&store, &k("b"), b"bad");
    let before = m.snapshot();
    let err = pass()
        .run(&store, |r: &RecordRef<'_>, out: &mut Out| {
            out.push(r.replace(b"x".to_vec()));
            if r.value == b"bad" {
                return Err(RecordError::new("value is bad"));
            }
            Ok(())
        })
        .unwrap_err();
    assert_eq!(err.table(), Some("t"));
    assert_eq!(err.key(), Some(k("b").as_slice()));
    assert!(err.to_string().contains("value is bad"), "{err}");
    assert_eq!(m.snapshot(), before);
}

/// A codec that keeps a "done" marker instead of deleting the checkpoint.
struct Marker;

impl CheckpointCodec for Marker {
    fn key(&self) -> &[u8] {
        b"__nx/sweep/t"
    }
    fn encode(&self, cursor: &[u8]) -> Vec<u8> {
        [b"C:".as_slice(), cursor].concat()
    }
    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, RecordError> {
        match value.strip_prefix(b"C:") {
            Some(c) => Ok(c.to_vec()),
            None => Err("not a cursor marker".into()),
        }
    }
    fn finished(&self) -> Option<Vec<u8>> {
        Some(b"DONE".to_vec())
    }
}

#[test]
fn custom_checkpoint_codec_and_checkpoint_prechecks() {
    let (store, m) = mem();
    for i in 0..3 {
        put(&store, &k(&i.to_string()), b"v");
    }
    put(&store, b"__nx/sweep/t", b"C:__nx/t/0");
    let report = Pass::new("t", b"__nx/t/".to_vec(), Marker)
        .run(&store, noop)
        .unwrap();
    assert_eq!(report.records, 2);
    assert_eq!(store.get(b"__nx/sweep/t").unwrap(), Some(b"DONE".to_vec()));

    // DONE does not decode as a cursor: corrupt.
    let before = m.snapshot();
    let err = Pass::new("t", b"__nx/t/".to_vec(), Marker)
        .run(&store, noop)
        .unwrap_err();
    assert!(matches!(err, PassError::CorruptCheckpoint { .. }), "{err}");
    // A cursor outside the prefix.
    put(&store, b"__nx/sweep/t", b"C:__nx/u/0");
    let before2 = m.snapshot();
    let err = Pass::new("t", b"__nx/t/".to_vec(), Marker)
        .run(&store, noop)
        .unwrap_err();
    assert!(
        matches!(err, PassError::CheckpointOutOfPrefix { .. }),
        "{err}"
    );
    assert_eq!(m.snapshot(), before2);
    assert_ne!(before, before2);
}

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

/// The same narrowing on sled, whose `apply_or_return` hands the refused batch back
/// without a copy (the rows' mutations and preconditions were moved into it): the
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

/// `run_between`: records read from one store are written verbatim into another — engine
/// metadata included — with the checkpoint in the target; a record costs its bytes once
/// against the budget; an aborted run resumes after its checkpoint; any other key is a
/// forbidden mutation.
#[test]
fn run_between_copies_verbatim_into_another_store_and_resumes() {
    let (source, _) = mem();
    put(&source, b"__nx/schema/t", b"HDR");
    for i in 0..10 {
        put(&source, format!("k{i:02}").as_bytes(), &[b'v'; 40]);
    }
    let (target, _) = mem();
    let copy = |r: &RecordRef<'_>, out: &mut Out| -> Result<(), RecordError> {
        out.push(Mutation::Set {
            key: r.key.to_vec(),
            value: r.value.to_vec(),
        });
        Ok(())
    };
    let ck = RawCheckpoint::new(b"__nx/copy/progress".to_vec());
    // Budget 100 bytes: a 43-byte record fits twice (counted once each, not twice).
    let batches = Cell::new(0);
    let err = Pass::new("copy", Vec::new(), &ck)
        .limits(limits(100, 100))
        .abort_when(|| {
            batches.set(batches.get() + 1);
            batches.get() > 2
        })
        .run_between(&source, &target, copy)
        .unwrap_err();
    assert!(matches!(err, PassError::Aborted { .. }), "{err}");
    assert_eq!(target.get(b"k00").unwrap(), Some(vec![b'v'; 40]));
    assert!(target.get(b"__nx/copy/progress").unwrap().is_some());
    assert_eq!(
        source.get(b"__nx/copy/progress").unwrap(),
        None,
        "the source is never written"
    );
    let report = Pass::new("copy", Vec::new(), &ck)
        .limits(limits(100, 100))
        .run_between(&source, &target, copy)
        .unwrap();
    assert!(report.resumed_from.is_some());
    assert!(report.batches >= 3, "{report:?}");
    assert_eq!(target.get(b"__nx/schema/t").unwrap(), Some(b"HDR".to_vec()));
    for i in 0..10 {
        assert_eq!(
            target.get(format!("k{i:02}").as_bytes()).unwrap(),
            Some(vec![b'v'; 40])
        );
    }
    assert_eq!(target.get(b"__nx/copy/progress").unwrap(), None);
    // Into another store a record may only be written as itself.
    let elsewhere = |r: &RecordRef<'_>, out: &mut Out| -> Result<(), RecordError> {
        out.push(Mutation::Set {
            key: [b"x/".as_slice(), r.key].concat(),
            value: r.value.to_vec(),
        });
        Ok(())
    };
    let err = Pass::new("copy", Vec::new(), RawCheckpoint::new(b"__nx/c2".to_vec()))
        .run_between(&source, &mem().0, elsewhere)
        .unwrap_err();
    assert!(
        matches!(
            err,
            PassError::ForbiddenMutation {
                rule: MutationRule::SiblingKey,
                ..
            }
        ),
        "{err}"
    );
}

/// A step's failure that has a cause of its own.
#[derive(Debug)]
struct StepFailed(std::io::Error);

impl std::fmt::Display for StepFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the lookup table could not be read")
    }
}

impl std::error::Error for StepFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// A record error made from an error keeps that error's causes as sources (not
/// flattened into its text): the pass's `InvalidRecord` names the record and the reason,
/// and its source chain reaches the I/O error underneath.
#[test]
fn an_invalid_record_keeps_the_cause_of_its_step_as_a_source() {
    let (store, _) = mem();
    put(&store, &k("a"), b"v");
    let err = pass()
        .run(&store, |_: &RecordRef<'_>, _: &mut Out| {
            Err(RecordError::from_error(StepFailed(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "lookup.csv: no such file",
            ))))
        })
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("the lookup table could not be read"),
        "{text}"
    );
    assert!(
        !text.contains("lookup.csv"),
        "the cause was flattened: {text}"
    );
    let PassError::InvalidRecord { ref reason, .. } = err else {
        panic!("{err:?}")
    };
    assert_eq!(reason.reason(), "the lookup table could not be read");
    assert!(reason.cause().is_some());
    let chain: Vec<&(dyn std::error::Error + 'static)> =
        std::iter::successors(Some(&err as &(dyn std::error::Error + 'static)), |e| {
            e.source()
        })
        .collect();
    let io = chain
        .iter()
        .find_map(|e| e.downcast_ref::<std::io::Error>())
        .expect("the I/O error is in the source chain");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    // A record error without a cause ends the chain.
    assert!(std::error::Error::source(&RecordError::new("bad")).is_none());
}
