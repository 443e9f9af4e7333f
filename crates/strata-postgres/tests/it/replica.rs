//! A read replica (`strata_replica=HOST:PORT`) on a private primary + synchronous standby
//! (`strata_postgres::testing::HaPair`): stale-tolerant reads (`PgStore::stale_reads`) are
//! answered by the standby — shown stale while its replay is paused — and name it as the
//! host that answered; a read-modify-write of the same store meanwhile decides on the
//! primary's value. Had it read the replica, the increment would have been decided on the
//! stale value and an update lost (or, refused by the precondition, never written).

use std::time::{Duration, Instant};
use strata_postgres::testing::HaPair;
use strata_postgres::{PgError, PgOptions, PgStore};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits};

fn number(v: Option<&[u8]>) -> u64 {
    v.map_or(0, |v| std::str::from_utf8(v).unwrap().parse().unwrap())
}

#[test]
#[cfg_attr(
    not(strata_pg),
    ignore = "needs STRATA_PG_URL (and the server binaries)"
)]
fn a_replica_answers_stale_reads_and_never_a_read_that_decides_a_write() {
    let Some(ha) =
        HaPair::start_for_test("a_replica_answers_stale_reads_and_never_a_read_that_decides")
            .unwrap()
    else {
        return;
    };
    let url = format!(
        "{}&strata_replica=127.0.0.1:{}",
        ha.url(),
        ha.standby.port()
    );
    let store = PgStore::connect_with(&url, PgOptions::new().table("replica_reads")).unwrap();
    let stale = store.stale_reads().expect("the URL names a replica");
    assert!(
        stale
            .host()
            .contains(&format!("127.0.0.1:{}", ha.standby.port())),
        "{}",
        stale.host()
    );
    store
        .apply(Batch::new().set(b"n".to_vec(), b"1".to_vec()))
        .unwrap();
    // The standby applies it (polling with a deadline; until it has replayed the
    // table's creation, the replica's open fails and is tried again).
    let deadline = Instant::now() + Duration::from_secs(30);
    while number(stale.get(b"n").ok().flatten().as_deref()) != 1 {
        assert!(Instant::now() < deadline, "the replica never saw n = 1");
        std::thread::sleep(Duration::from_millis(10));
    }

    // Replay paused: the replica stays at n = 1 while the primary moves on to 2.
    ha.standby.psql("SELECT pg_wal_replay_pause()").unwrap();
    store
        .apply(Batch::new().set(b"n".to_vec(), b"2".to_vec()))
        .unwrap();
    assert_eq!(number(stale.get(b"n").unwrap().as_deref()), 1, "not stale");
    let page = stale
        .scan(b"", None, ScanLimits::new(10, 1 << 20).unwrap())
        .unwrap();
    assert_eq!(page.records.len(), 1);
    assert_eq!(page.records[0].value, b"1".to_vec());
    // The store's own reads are the primary's.
    assert_eq!(number(store.get(b"n").unwrap().as_deref()), 2);

    // An increment decides on what the primary has (2), not on the replica's 1.
    let mut decided_on = Vec::new();
    let written = store
        .read_modify_write(&[b"n".as_slice()], &mut |values| {
            let n = number(values[0]);
            decided_on.push(n);
            Some(Batch::new().set(b"n".to_vec(), (n + 1).to_string().into_bytes()))
        })
        .unwrap();
    assert!(written);
    // The handle has no record of `n` (plain batches wrote it): its first decision is on
    // "absent" (0), which the primary refused with its 2; never on the replica's 1.
    assert_eq!(decided_on, vec![0, 2], "decided on a replica's read");
    assert_eq!(number(store.get(b"n").unwrap().as_deref()), 3);

    // The replica as a store of its own (what the command line's stale-tolerant commands
    // read): the standby's value, its address as the host that answered, and every write
    // refused before it reaches a server.
    let replica = store.replica_store().expect("the URL names a replica");
    assert_eq!(
        number(replica.get(b"n").unwrap().as_deref()),
        1,
        "not stale"
    );
    assert_eq!(
        replica.answering_server().unwrap(),
        format!("127.0.0.1:{}", ha.standby.port())
    );
    assert_eq!(
        store.answering_server().unwrap(),
        format!("127.0.0.1:{}", ha.primary.port())
    );
    let refused = replica
        .apply(Batch::new().set(b"n".to_vec(), b"7".to_vec()))
        .unwrap_err();
    assert!(
        matches!(
            std::error::Error::source(&refused).and_then(|s| s.downcast_ref::<PgError>()),
            Some(PgError::ReplicaReadOnly { .. })
        ),
        "{refused:?}"
    );
    assert!(replica.capabilities().cross_process_lease.is_none());

    // A replica never holds a write: the standby refuses one, and nothing of it shows.
    let on_replica = PgStore::connect_with(
        &format!(
            "postgresql://postgres@127.0.0.1:{}/postgres?strata_pooler=transaction",
            ha.standby.port()
        ),
        PgOptions::new().table("replica_reads").create_table(false),
    )
    .unwrap();
    let err = on_replica
        .apply(Batch::new().set(b"n".to_vec(), b"9".to_vec()))
        .unwrap_err();
    assert!(
        std::error::Error::source(&err)
            .and_then(|s| s.downcast_ref::<PgError>())
            .is_some(),
        "{err:?}"
    );

    // Replay resumed: the replica catches up with every write, in order.
    ha.standby.psql("SELECT pg_wal_replay_resume()").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while number(stale.get(b"n").unwrap().as_deref()) != 3 {
        assert!(Instant::now() < deadline, "the replica never caught up");
        std::thread::sleep(Duration::from_millis(10));
    }
}
