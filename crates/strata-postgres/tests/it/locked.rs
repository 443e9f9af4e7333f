//! The write primitive's locked path (`store/locked.rs`): a read-modify-write whose
//! decisions other writers keep overtaking decides under its keys' locks and commits, on
//! every kind of connection (session functions, one message, a transaction-mode pooler)
//! and for the lease holder. Each scenario overtakes the write deterministically: its
//! decision itself writes the key through the same handle on its first three calls
//! (no lock is held while the one-round-trip path decides).

use crate::{owner, require_pg, scratch_table};
use std::sync::Arc;
use strata_postgres::testing::{loopback_port, Pgbouncer};
use strata_postgres::{PgOptions, PgStore};
use strata_store::{Batch, ConflictReason, ExclusiveSession, KvRead, KvWrite, Store, StoreError};

/// Which decision a scenario makes once the write is on the locked path (its 4th call).
#[derive(Clone, Copy, Debug)]
enum Then {
    /// Sets the key read to what it saw + `!`.
    Write,
    /// Also sets a key no earlier decision touched (not locked yet: one more round).
    WriteAnotherKey,
    /// Refuses.
    Refuse,
    /// Requires a guard that does not hold.
    FailAGuard,
}

/// Runs one scenario on `store` (a fresh table) and checks its outcome: what was
/// written, how often it decided, and how many locked transactions it took.
fn overtaken_write(store: &PgStore, then: Then) {
    let (a, c, g) = (b"acct/a".to_vec(), b"acct/c".to_vec(), b"guard".to_vec());
    store
        .apply(Batch::new().set(a.clone(), b"0".to_vec()))
        .unwrap();
    store
        .apply(Batch::new().set(g.clone(), b"g".to_vec()))
        .unwrap();
    let locked_before = store.locked_writes();
    let mut calls = 0usize;
    let mut seen = Vec::new();
    let result = store.read_modify_write(&[&a], &mut |values| {
        calls += 1;
        let value = values[0].map(<[u8]>::to_vec);
        seen.push(value.clone());
        if calls <= 3 {
            // Another writer commits before this decision's batch: overtaken.
            store
                .apply(Batch::new().set(a.clone(), format!("{calls}").into_bytes()))
                .unwrap();
            return Some(Batch::new().set(a.clone(), b"stale".to_vec()));
        }
        let next = [value.unwrap_or_default(), b"!".to_vec()].concat();
        match then {
            Then::Write => Some(Batch::new().set(a.clone(), next)),
            Then::WriteAnotherKey => Some(
                Batch::new()
                    .set(a.clone(), next)
                    .set(c.clone(), b"c".to_vec()),
            ),
            Then::Refuse => None,
            Then::FailAGuard => Some(
                Batch::new()
                    .require_eq(g.clone(), b"not this".to_vec())
                    .set(a.clone(), next),
            ),
        }
    });
    // Decisions 2 and 3 saw what the server reported; the locked one what 3 wrote.
    assert_eq!(seen[1], Some(b"1".to_vec()), "{then:?}");
    assert_eq!(seen[2], Some(b"2".to_vec()), "{then:?}");
    assert_eq!(seen[3], Some(b"3".to_vec()), "{then:?}");
    let locked = store.locked_writes() - locked_before;
    let stored = |k: &[u8]| store.get(k).unwrap();
    match then {
        Then::Write => {
            assert!(result.unwrap());
            assert_eq!((calls, locked), (4, 1));
            assert_eq!(stored(&a), Some(b"3!".to_vec()));
        }
        Then::WriteAnotherKey => {
            assert!(result.unwrap());
            // The 4th decision touched `c`, not locked: rolled back, decided again.
            assert_eq!((calls, locked), (5, 2));
            assert_eq!(seen[4], Some(b"3".to_vec()));
            assert_eq!(stored(&a), Some(b"3!".to_vec()));
            assert_eq!(stored(&c), Some(b"c".to_vec()));
        }
        Then::Refuse => {
            // Final: it saw the current value under the lock.
            assert!(!result.unwrap());
            assert_eq!((calls, locked), (4, 1));
            assert_eq!(stored(&a), Some(b"3".to_vec()));
        }
        Then::FailAGuard => {
            match result {
                Err(StoreError::Conflict { key, reason }) => {
                    assert_eq!((key, reason), (g.clone(), ConflictReason::Changed))
                }
                other => panic!("expected the guard's conflict, got {other:?}"),
            }
            // The guard was not locked on the 4th decision: decided again with it locked.
            assert_eq!((calls, locked), (5, 2));
            assert_eq!(stored(&a), Some(b"3".to_vec()));
        }
    }
    assert_eq!(stored(&g), Some(b"g".to_vec()));
    if !matches!(then, Then::WriteAnotherKey) {
        assert_eq!(stored(&c), None);
    }
    // The connections went back clean: the handle goes on writing and reading.
    store
        .apply(Batch::new().set(b"after".to_vec(), b"1".to_vec()))
        .unwrap();
    assert_eq!(stored(b"after"), Some(b"1".to_vec()));
}

const ALL: [Then; 4] = [
    Then::Write,
    Then::WriteAnotherKey,
    Then::Refuse,
    Then::FailAGuard,
];

/// Every scenario on a fresh table through `url` with `options`.
fn each_scenario(url: &str, options: impl Fn() -> PgOptions) {
    for then in ALL {
        let table = scratch_table();
        let _owner = owner(url, &table);
        let store = PgStore::connect_with(url, options().table(&table)).unwrap();
        overtaken_write(&store, then);
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn an_overtaken_write_decides_under_the_locks_with_and_without_session_functions() {
    let url = require_pg!();
    for functions in [true, false] {
        each_scenario(&url, || PgOptions::new().session_functions(functions));
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn the_lease_holders_overtaken_write_decides_under_the_locks_and_the_fence() {
    let url = require_pg!();
    for then in ALL {
        let table = scratch_table();
        let _owner = owner(&url, &table);
        let store = Arc::new(PgStore::connect_with(&url, PgOptions::new().table(&table)).unwrap());
        let shared = Store::from_arc(store.clone());
        let session =
            ExclusiveSession::acquire(&shared, "locked path (test holder)", None).unwrap();
        assert!(session.fencing_token().is_some());
        overtaken_write(&store, then);
        // The holder's batches commit asynchronously: flushed, then released.
        store.flush().unwrap();
        drop(session);
        let other = PgStore::connect_with(&url, PgOptions::new().table(&table)).unwrap();
        other
            .apply(Batch::new().set(b"next".to_vec(), b"1".to_vec()))
            .unwrap();
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn an_overtaken_write_decides_under_the_locks_through_a_transaction_pooler() {
    let url = require_pg!();
    let Some(port) = loopback_port(&url) else {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI needs a loopback STRATA_PG_URL for the pooler tests"
        );
        eprintln!("skipped: STRATA_PG_URL is not a loopback server pgbouncer can front");
        return;
    };
    let pool = Pgbouncer::start_for_test("locked path through pgbouncer", port, "transaction")
        .expect("start pgbouncer");
    let Some(pool) = pool else { return };
    let pooled = format!(
        "{}?strata_pooler=transaction&strata_direct=127.0.0.1:{port}",
        pool.url()
    );
    for then in ALL {
        let table = scratch_table();
        let _owner = owner(&url, &table);
        let store = PgStore::connect_with(&pooled, PgOptions::new().table(&table)).unwrap();
        overtaken_write(&store, then);
    }
}

/// A write reading more keys than take per-key locks (60 > 48) is overtaken three times,
/// then decides under the whole table's lock and writes every key — for an ordinary
/// writer and for the lease holder.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn an_overtaken_write_of_many_keys_decides_under_the_table_lock() {
    const KEYS: usize = 60;
    let url = require_pg!();
    for holder in [false, true] {
        let table = scratch_table();
        let _owner = owner(&url, &table);
        let store = Arc::new(PgStore::connect_with(&url, PgOptions::new().table(&table)).unwrap());
        let shared = Store::from_arc(store.clone());
        let _session = holder
            .then(|| ExclusiveSession::acquire(&shared, "locked path (many keys)", None).unwrap());
        let keys: Vec<Vec<u8>> = (0..KEYS)
            .map(|i| format!("k/{i:02}").into_bytes())
            .collect();
        let reads: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let locked_before = store.locked_writes();
        let mut calls = 0usize;
        let written = store
            .read_modify_write(&reads, &mut |values| {
                calls += 1;
                if calls <= 3 {
                    // Another write of the last key lands first.
                    store
                        .apply(Batch::new().set(keys[KEYS - 1].clone(), vec![calls as u8]))
                        .unwrap();
                    return Some(Batch::new().set(keys[0].clone(), b"stale".to_vec()));
                }
                // Under the table lock: the last key holds what the 3rd overtaking wrote.
                assert_eq!(values[KEYS - 1], Some(&[3u8][..]));
                assert!(values[..KEYS - 1].iter().all(Option::is_none));
                let mut batch = Batch::new();
                for k in &keys {
                    batch = batch.set(k.clone(), b"all".to_vec());
                }
                Some(batch)
            })
            .unwrap();
        assert!(written);
        assert_eq!((calls, store.locked_writes() - locked_before), (4, 1));
        for k in &keys {
            assert_eq!(
                store.get(k).unwrap(),
                Some(b"all".to_vec()),
                "holder {holder}"
            );
        }
        store.flush().unwrap();
    }
}
