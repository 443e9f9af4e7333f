//! Issue 28, asynchronous replication: a private primary with an **asynchronous**
//! streaming standby (no `synchronous_standby_names`). The standby is cut off from the
//! primary's WAL, the primary acknowledges more writes, dies, and the standby is promoted
//! without them: acknowledged writes are lost, as PostgreSQL's asynchronous replication
//! allows. What strata can tell: `status --json` hands out a commit receipt
//! (`hosts.receipt`, `TIMELINE:LSN`) after writes; `verify --receipt` on the promoted
//! server says whether every commit acknowledged before it is there — `kept` for the
//! receipt taken before the cut (exit 0), `may_be_lost` for the one taken after the lost
//! writes (exit 4, naming the WAL range), `not_in_history` for a receipt from elsewhere.
#![cfg(feature = "postgres")]

use crate::support::{json_of, stderr, stdout, strata_db};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use strata::{CollectionOptions, Database};
use strata_postgres::testing::PrivateCluster;

fn put_docs(db: &str, from: usize, to: usize) {
    let store = strata_postgres::connect_store(db).unwrap();
    let handle = Database::builder(store).open().unwrap();
    let docs = handle
        .collection::<Value>("docs", CollectionOptions::new())
        .unwrap();
    for i in from..to {
        docs.put(&format!("d{i:03}"), &json!({"i": i})).unwrap();
    }
}

fn receipt(db: &str) -> String {
    let out = strata_db(db, &["status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    doc["hosts"]["receipt"]
        .as_str()
        .unwrap_or_else(|| panic!("no receipt: {doc}"))
        .to_string()
}

fn poll(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what} within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[cfg_attr(
    not(strata_pg),
    ignore = "needs STRATA_PG_URL (and the server binaries)"
)]
fn verify_with_a_receipt_finds_writes_lost_to_an_asynchronous_failover() {
    let Some(primary) = PrivateCluster::start_for_test(
        "verify_with_a_receipt_finds_writes_lost_to_an_asynchronous_failover",
        &[("wal_level", "replica"), ("max_wal_senders", "4")],
    )
    .unwrap() else {
        return;
    };
    let standby = PrivateCluster::start_standby_of(&primary, &[("hot_standby", "on")]).unwrap();
    let db = format!(
        "postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write&strata_table=async_loss",
        primary.port(),
        standby.port()
    );
    put_docs(&db, 0, 10);
    let before = receipt(&db);
    assert!(before.starts_with("1:"), "{before}");
    let lsn = before.split_once(':').unwrap().1.to_string();
    poll("the standby replays the first writes", || {
        standby
            .psql(&format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'"))
            .unwrap()
            == "t"
    });

    // The standby stops receiving WAL; the primary goes on acknowledging (asynchronous).
    standby
        .psql("ALTER SYSTEM SET primary_conninfo = ''")
        .unwrap();
    standby.psql("SELECT pg_reload_conf()").unwrap();
    poll("the standby's WAL receiver stops", || {
        primary
            .psql("SELECT count(*) FROM pg_stat_replication")
            .unwrap()
            == "0"
    });
    put_docs(&db, 10, 15);
    let after = receipt(&db);
    assert!(after > before, "{before} {after}");

    // The primary dies; the standby, without the last five writes, is promoted.
    primary.stop_immediate().unwrap();
    standby.promote().unwrap();
    let out = strata_db(&db, &["collections", "--json"]);
    assert_eq!(json_of(&out)["collections"][0]["rows"], 10, "not lost");

    // The receipt taken before the cut: every commit before it is here.
    let out = strata_db(&db, &["verify", "--receipt", &before, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["receipt"]["verdict"], "kept", "{doc}");

    // The receipt taken after the lost writes: they may be lost (exit 4, one line).
    let out = strata_db(&db, &["verify", "--receipt", &after, "--json"]);
    assert_eq!(out.status.code(), Some(4), "{}", stdout(&out));
    let doc = json_of(&out);
    assert_eq!(doc["receipt"]["verdict"], "may_be_lost", "{doc}");
    assert_eq!(doc["verdict"], "unsupported", "{doc}");
    let out = strata_db(&db, &["verify", "--receipt", &after]);
    assert_eq!(out.status.code(), Some(4));
    let text = stdout(&out);
    assert!(
        text.contains(&format!("receipt {after}: this server left timeline 1 at"))
            && text.contains("may be lost"),
        "{text}"
    );
    // One error line (beside the progress lines of the record scan).
    let err = stderr(&out);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("strata:")).collect();
    assert_eq!(errors.len(), 1, "{err:?}");
    assert!(errors[0].starts_with("strata: receipt "), "{err}");
    // Receipts on the promoted server are on its new timeline.
    assert!(receipt(&db).starts_with("2:"));

    // A receipt from a timeline this server never had, and one that is not a receipt.
    let out = strata_db(&db, &["verify", "--receipt", "9:0/1", "--json"]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(json_of(&out)["receipt"]["verdict"], "not_in_history");
    let out = strata_db(&db, &["verify", "--receipt", "0/1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("TIMELINE:LSN"), "{}", stderr(&out));
}
