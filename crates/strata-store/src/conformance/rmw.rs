//! The one write primitive ([`KvWrite::read_modify_write`]): the values a write decides on
//! are read inside the backend's write transaction or lock, the decision may refuse
//! (nothing written), and the batch it decides — mutations and guard preconditions —
//! commits atomically with the read.

use super::{dump, each_write_path, expect_conflict, fixture, k, put};
use crate::{Batch, ConflictReason, KvRead, KvWrite, Result, Store, StoreError};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;

fn owned(values: &[Option<&[u8]>]) -> Vec<Option<Vec<u8>>> {
    values.iter().map(|v| v.map(<[u8]>::to_vec)).collect()
}

/// The decision sees the current value of every key read, in order (absent, then what a
/// plain batch or an earlier decided write wrote); the batch it returns is applied (sets
/// and deletes of any keys, read or not) and the primitive reports the write.
pub fn rmw_decides_on_current_values<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let (a, b, c) = (k(ns, b"a"), k(ns, b"b"), k(ns, b"c"));
        let mut seen = Vec::new();
        let written = w
            .read_modify_write(&[&a, &b], &mut |values| {
                seen.push(owned(values));
                Some(Batch::new().set(a.clone(), b"1".to_vec()))
            })
            .unwrap();
        assert!(written, "a decided batch is reported written");
        assert_eq!(seen.last(), Some(&vec![None, None]));
        put(w, &b, b"plain");
        w.read_modify_write(&[&b, &a], &mut |values| {
            seen.push(owned(values));
            Some(
                Batch::new()
                    .delete(a.clone())
                    .set(b.clone(), b"2".to_vec())
                    .set(c.clone(), b"3".to_vec()),
            )
        })
        .unwrap();
        assert_eq!(
            seen.last(),
            Some(&vec![Some(b"plain".to_vec()), Some(b"1".to_vec())]),
            "the values are handed over in the order of the reads"
        );
        assert_eq!(r.get(&a).unwrap(), None);
        assert_eq!(r.get(&b).unwrap(), Some(b"2".to_vec()));
        assert_eq!(r.get(&c).unwrap(), Some(b"3".to_vec()));
        // Reading nothing is a plain batch.
        let mut calls = 0;
        w.read_modify_write(&[], &mut |values| {
            calls += 1;
            assert!(values.is_empty());
            Some(Batch::new().delete(c.clone()))
        })
        .unwrap();
        assert_eq!(calls, 1, "a write that reads nothing is decided once");
        assert_eq!(r.get(&c).unwrap(), None);
    });
}

/// A decision that refuses writes nothing and is reported as not written; so does a
/// decided batch whose guard fails (the guard's conflict) or that writes a key twice.
pub fn rmw_refusal_and_failed_guards_write_nothing<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let (doc, other, fence) = (k(ns, b"doc"), k(ns, b"other"), k(ns, b"fence"));
        put(w, &doc, b"v1");
        put(w, &fence, b"F1");
        let before = dump(r);
        let mut seen = Vec::new();
        let refused = w
            .read_modify_write(&[&doc], &mut |values| {
                seen.push(owned(values));
                None
            })
            .unwrap();
        assert!(!refused, "a refusal is reported as not written");
        assert_eq!(
            seen.last(),
            Some(&vec![Some(b"v1".to_vec())]),
            "the refusal that counts is decided on the current value"
        );
        assert_eq!(dump(r), before, "a refusal wrote something");
        // A stale guard on a key not read: the guard's conflict, nothing of the batch.
        expect_conflict(
            w.read_modify_write(&[&doc], &mut |_| {
                Some(
                    Batch::new()
                        .require_eq(fence.clone(), b"F0".to_vec())
                        .set(doc.clone(), b"v2".to_vec())
                        .set(other.clone(), b"x".to_vec()),
                )
            })
            .map(drop),
            &fence,
            ConflictReason::Changed,
        );
        expect_conflict(
            w.read_modify_write(&[&doc], &mut |_| {
                Some(
                    Batch::new()
                        .require_absent(fence.clone())
                        .delete(doc.clone()),
                )
            })
            .map(drop),
            &fence,
            ConflictReason::Present,
        );
        assert_eq!(dump(r), before, "a failed guard wrote something");
        // A key written twice: refused, nothing written.
        let dup = w.read_modify_write(&[&doc], &mut |_| {
            Some(
                Batch::new()
                    .set(other.clone(), b"1".to_vec())
                    .delete(other.clone()),
            )
        });
        assert!(
            matches!(dup, Err(StoreError::DuplicateKey { .. })),
            "{dup:?}"
        );
        assert_eq!(dump(r), before);
        // The guard holding: written.
        assert!(w
            .read_modify_write(&[&doc], &mut |_| {
                Some(
                    Batch::new()
                        .require_eq(fence.clone(), b"F1".to_vec())
                        .set(doc.clone(), b"v2".to_vec()),
                )
            })
            .unwrap());
        assert_eq!(r.get(&doc).unwrap(), Some(b"v2".to_vec()));
    });
}

/// The decision that counts sees the current values. A backend may first hand it values
/// it expects instead of reading them (PostgreSQL: the bytes the handle last wrote, or
/// absent for a key it has no record of, checked by the server in the statement that
/// writes); a wrong expectation writes nothing and the decision runs again on the
/// current values. Keys written by plain batches (of which the primitive keeps no record)
/// and then read: an increment lands on the stored value, never on "absent"; a decision
/// that writes only on an absent key refuses on the stored one and writes nothing; one
/// that refuses on an absent key writes on the stored one; a guard that fails on the
/// decision made on the current value is the caller's conflict, and nothing is written.
pub fn rmw_decides_again_on_current_values<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    each_write_path(&fx.store, |w, r, ns| {
        let count = |v: Option<&[u8]>| v.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
        let (n, fresh, old, fence) = (k(ns, b"n"), k(ns, b"fresh"), k(ns, b"old"), k(ns, b"fence"));
        put(w, &n, &5u64.to_be_bytes());
        put(w, &fresh, b"stored");
        put(w, &old, b"stored");
        put(w, &fence, b"F1");
        let mut seen = Vec::new();
        let written = w
            .read_modify_write(&[&n], &mut |values| {
                seen.push(owned(values));
                Some(Batch::new().set(n.clone(), (count(values[0]) + 1).to_be_bytes().to_vec()))
            })
            .unwrap();
        assert!(written);
        assert_eq!(seen.last(), Some(&vec![Some(5u64.to_be_bytes().to_vec())]));
        assert_eq!(
            count(r.get(&n).unwrap().as_deref()),
            6,
            "the increment was lost"
        );
        // Written only when absent: refused on the stored value, nothing written.
        let before = dump(r);
        seen.clear();
        let written = w
            .read_modify_write(&[&fresh, &n], &mut |values| match values[0] {
                None => Some(
                    Batch::new()
                        .set(fresh.clone(), b"new".to_vec())
                        .set(n.clone(), 0u64.to_be_bytes().to_vec()),
                ),
                Some(_) => {
                    seen.push(owned(values));
                    None
                }
            })
            .unwrap();
        assert!(!written, "the decision refuses on the stored value");
        assert_eq!(
            dump(r),
            before,
            "a batch decided on a wrong value was written"
        );
        assert_eq!(
            seen.last(),
            Some(&vec![
                Some(b"stored".to_vec()),
                Some(6u64.to_be_bytes().to_vec())
            ])
        );
        // Refused when absent: written on the stored value.
        let written = w
            .read_modify_write(&[&old], &mut |values| {
                let v = values[0]?;
                Some(Batch::new().set(old.clone(), [v, b"!"].concat()))
            })
            .unwrap();
        assert!(written, "a refusal on an expected value is not final");
        assert_eq!(r.get(&old).unwrap(), Some(b"stored!".to_vec()));
        // Guards chosen on the value read: those of the decision on the current value
        // are the ones checked — holding, written; failing, the guard's conflict.
        let guarded = |holds_on_stored: bool| {
            let (on_absent, on_stored) = match holds_on_stored {
                true => (b"F0", b"F1"),
                false => (b"F1", b"F0"),
            };
            w.read_modify_write(&[&fresh], &mut |values| {
                let guard = match values[0] {
                    None => on_absent.to_vec(),
                    Some(_) => on_stored.to_vec(),
                };
                Some(
                    Batch::new()
                        .require_eq(fence.clone(), guard)
                        .set(fresh.clone(), b"x".to_vec()),
                )
            })
        };
        assert!(
            guarded(true).unwrap(),
            "the guard of the current value holds"
        );
        assert_eq!(r.get(&fresh).unwrap(), Some(b"x".to_vec()));
        put(w, &fresh, b"stored");
        let before = dump(r);
        expect_conflict(guarded(false).map(drop), &fence, ConflictReason::Changed);
        assert_eq!(dump(r), before, "a failed guard wrote something");
    });
}

/// Threads moving units between two keys with read-modify-writes (each reads both,
/// decides, writes both, no precondition of its own) lose no update and never apply a
/// transfer half: the sum is what it was, and each account is back where it started.
pub fn rmw_transfers_are_atomic<F: Fn(&Path) -> Store>(factory: F) {
    const THREADS: usize = 8;
    const PER_THREAD: u64 = 40;
    let fx = fixture(&factory);
    let (a, b) = (b"acct/a".to_vec(), b"acct/b".to_vec());
    put(&fx.store, &a, &1000u64.to_be_bytes());
    put(&fx.store, &b, &1000u64.to_be_bytes());
    let n = |v: Option<&[u8]>| u64::from_be_bytes(v.unwrap().try_into().unwrap());
    // A decision must take any values: one on values the backend expected (see
    // `read_modify_write`) may see an account absent. It refuses then — never final on
    // expected values — and every transfer below is still made, on the values read.
    let amount = |v: Option<&[u8]>| v.map(|v| u64::from_be_bytes(v.try_into().unwrap()));
    let barrier = Arc::new(Barrier::new(THREADS));
    thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (store, barrier, a, b) = (fx.store.clone(), Arc::clone(&barrier), &a, &b);
                s.spawn(move || -> Result<()> {
                    barrier.wait();
                    for _ in 0..PER_THREAD {
                        let (from, to) = if t % 2 == 0 { (a, b) } else { (b, a) };
                        let written = store.read_modify_write(&[from, to], &mut |values| {
                            let (x, y) = (amount(values[0])?, amount(values[1])?);
                            Some(
                                Batch::new()
                                    .set(from.clone(), (x - 1).to_be_bytes().to_vec())
                                    .set(to.clone(), (y + 1).to_be_bytes().to_vec()),
                            )
                        })?;
                        assert!(written);
                    }
                    Ok(())
                })
            })
            .collect();
        // A transfer that failed is a failure of the test, not a transfer never made.
        for (t, w) in workers.into_iter().enumerate() {
            if let Err(e) = w.join().unwrap() {
                panic!("thread {t}: a transfer failed: {e}");
            }
        }
    });
    let (x, y) = (
        n(fx.store.get(&a).unwrap().as_deref()),
        n(fx.store.get(&b).unwrap().as_deref()),
    );
    assert_eq!(x + y, 2000, "a transfer was half applied");
    // Even threads move a→b, odd b→a, as many each: back where they started.
    assert_eq!((x, y), (1000, 1000), "lost updates");
}

/// A backend whose capabilities say it [decides once](crate::Capabilities::decides_once)
/// calls a decision exactly once per write that reads keys — one that writes, one that
/// refuses, one whose guard fails — on every write path: callers move what they own into
/// the batch on that word.
pub fn rmw_decides_once_when_it_says_so<F: Fn(&Path) -> Store>(factory: F) {
    let fx = fixture(&factory);
    if !fx.store.capabilities().decides_once {
        return;
    }
    each_write_path(&fx.store, |w, r, ns| {
        let (a, g) = (k(ns, b"a"), k(ns, b"g"));
        put(w, &g, b"guard");
        let mut calls = 0;
        assert!(w
            .read_modify_write(&[&a, &g], &mut |_| {
                calls += 1;
                Some(Batch::new().set(a.clone(), b"1".to_vec()))
            })
            .unwrap());
        assert_eq!(calls, 1, "a write that commits is decided once");
        calls = 0;
        assert!(!w
            .read_modify_write(&[&a], &mut |_| {
                calls += 1;
                None
            })
            .unwrap());
        assert_eq!(calls, 1, "a refusal is decided once");
        calls = 0;
        let failed = w.read_modify_write(&[&a], &mut |_| {
            calls += 1;
            Some(
                Batch::new()
                    .require_absent(g.clone())
                    .set(a.clone(), b"2".to_vec()),
            )
        });
        assert!(failed.unwrap_err().is_conflict());
        assert_eq!(calls, 1, "a write whose guard fails is decided once");
        assert_eq!(r.get(&a).unwrap(), Some(b"1".to_vec()));
    });
}
