//! Batching under one shared byte budget and the mutation rules: replace, delete, move,
//! additional sets, oversize records, protected keys and duplicate mutations.

use super::*;

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
