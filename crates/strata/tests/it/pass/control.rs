//! Running a pass: abort and resume, progress, dry runs, batch hooks, invalid records (with
//! the cause of their step) and checkpoint codecs.

use super::*;

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
