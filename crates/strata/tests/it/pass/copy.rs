//! `run_between`: a verbatim copy into another store that resumes.

use super::*;

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
