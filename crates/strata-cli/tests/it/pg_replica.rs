//! Issue 28, read replicas in the command line: on a private primary with a synchronous
//! hot standby (`strata_postgres::testing::HaPair`), a `--db` naming the standby as
//! `strata_replica=HOST:PORT` makes the stale-tolerant read-only commands (`collections`,
//! `verify`, `inspect`, an embedded admin's `schema plan`) read the standby — shown stale
//! while its replay is paused — and say so (text and `--json` `hosts`), while `status`
//! reads the primary and names both hosts; after a failover `status` names the promoted
//! host as the primary that answered. A replica that does not answer leaves the reads on
//! the primary, saying why. (That no read deciding a write goes to the replica is the
//! library's test `strata-postgres` `replica.rs`: it loses an update if it did.)
#![cfg(feature = "postgres")]

use crate::support::{json_of, stderr, stdout, strata_db};
use serde_json::{json, Value};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use strata::{CollectionOptions, Database};
use strata_postgres::testing::HaPair;

const ROLE: &str = "STRATA_PGREPLICA_ROLE";
const DB: &str = "STRATA_PGREPLICA_DB";
const ARGS: &str = "STRATA_PGREPLICA_ARGS";

/// The application's admin command line (`strata_cli::Admin` with the `docs` collection)
/// run with the `--db` in `STRATA_PGREPLICA_DB` and the arguments in
/// `STRATA_PGREPLICA_ARGS`: what `schema plan` needs.
#[test]
#[ignore = "the child process of the replica test (it runs it)"]
fn admin_child() {
    let role = std::env::var(ROLE).expect("run by the replica test");
    assert_eq!(role, "admin", "the wrong role was spawned");
    let db = std::env::var(DB).unwrap();
    let args = std::env::var(ARGS).unwrap();
    let code = strata_cli::Admin::new()
        .name("app")
        .collection::<Value>("docs", CollectionOptions::new())
        .run_from(
            ["app", "--db", db.as_str()]
                .into_iter()
                .chain(args.split(' ')),
        );
    let status: i32 = format!("{code:?}")
        .chars()
        .filter(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap();
    std::process::exit(status)
}

fn admin(db: &str, args: &str) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "pg_replica::admin_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "admin")
        .env(DB, db)
        .env(ARGS, args)
        .output()
        .unwrap()
}

/// The JSON document in a child's stdout (after the test harness's own lines).
fn json_within(out: &Output) -> Value {
    let text = stdout(out);
    let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) else {
        panic!("no JSON in {text}; stderr: {}", stderr(out));
    };
    serde_json::from_str(&text[start..=end]).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Puts documents `from..to` of `docs` through the primary.
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

/// The rows of `docs` that `strata collections --json` reports, and its `hosts`.
fn collections(db: &str) -> (u64, Value) {
    let out = strata_db(db, &["collections", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    let rows = doc["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["collection"] == "docs")
        .map_or(0, |c| c["rows"].as_u64().unwrap());
    (rows, doc["hosts"].clone())
}

#[test]
#[cfg_attr(
    not(strata_pg),
    ignore = "needs STRATA_PG_URL (and the server binaries)"
)]
fn stale_tolerant_commands_read_the_replica_and_status_names_the_hosts_that_answered() {
    let Some(ha) = HaPair::start_for_test(
        "stale_tolerant_commands_read_the_replica_and_status_names_the_hosts_that_answered",
    )
    .unwrap() else {
        return;
    };
    let (pp, sp) = (ha.primary.port(), ha.standby.port());
    let (primary_at, replica_at) = (format!("127.0.0.1:{pp}"), format!("127.0.0.1:{sp}"));
    let plain = format!("{}&strata_table=replica_cli", ha.url());
    let with_replica = format!("{plain}&strata_replica={replica_at}");
    put_docs(&plain, 0, 10);

    // The standby has replayed the ten (polled with a deadline).
    let deadline = Instant::now() + Duration::from_secs(30);
    while collections(&with_replica).0 != 10 {
        assert!(
            Instant::now() < deadline,
            "the replica never showed 10 rows"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Replay paused (and seen paused): the primary moves on to 15 rows.
    ha.standby.psql("SELECT pg_wal_replay_pause()").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while ha
        .standby
        .psql("SELECT pg_get_wal_replay_pause_state()")
        .unwrap()
        != "paused"
    {
        assert!(Instant::now() < deadline, "replay never paused");
        std::thread::sleep(Duration::from_millis(20));
    }
    put_docs(&plain, 10, 15);

    // `collections`: the replica's 10 rows, saying it read the replica.
    let (rows, hosts) = collections(&with_replica);
    assert_eq!(rows, 10, "not read from the paused replica");
    assert_eq!(hosts["read_from"], "replica", "{hosts}");
    assert_eq!(hosts["replica"], replica_at.as_str(), "{hosts}");
    assert_eq!(hosts["primary"], primary_at.as_str(), "{hosts}");
    let out = strata_db(&with_replica, &["collections"]);
    assert!(
        stdout(&out).contains(&format!("read from the postgres replica {replica_at}")),
        "{}",
        stdout(&out)
    );
    // Without the replica in the URL: the primary's 15.
    let (rows, hosts) = collections(&plain);
    assert_eq!(rows, 15);
    assert_eq!(hosts["read_from"], "primary", "{hosts}");
    assert_eq!(hosts["replica"], Value::Null, "{hosts}");

    // `verify`: the replica's records, and which host answered.
    let out = strata_db(&with_replica, &["verify", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["hosts"]["read_from"], "replica", "{doc}");
    let docs_table = doc["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "docs")
        .cloned()
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(docs_table["records"], 10, "{doc}");
    let out = strata_db(&with_replica, &["verify"]);
    assert!(
        stdout(&out).contains(&format!("read from the postgres replica {replica_at}")),
        "{}",
        stdout(&out)
    );

    // `inspect`: the replica's records.
    let out = strata_db(&with_replica, &["inspect", "docs", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["records"].as_array().unwrap().len(), 10, "{doc}");
    assert_eq!(doc["hosts"]["read_from"], "replica", "{doc}");

    // An embedded admin's `schema plan`: the replica's rows.
    let out = admin(&with_replica, "schema plan docs --json");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_within(&out);
    assert_eq!(doc["rows"], 10, "{doc}");
    assert_eq!(doc["hosts"]["read_from"], "replica", "{doc}");
    let doc = json_within(&admin(&plain, "schema plan docs --json"));
    assert_eq!(doc["rows"], 15, "{doc}");

    // `status` reads the primary and names both hosts.
    let out = strata_db(&with_replica, &["status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    let hosts = &doc["hosts"];
    assert_eq!(hosts["read_from"], "primary", "{doc}");
    assert_eq!(hosts["primary"], primary_at.as_str(), "{doc}");
    assert_eq!(hosts["replica"], replica_at.as_str(), "{doc}");
    assert_eq!(hosts.get("standby"), None, "{doc}");
    // The primary's commit receipt (timeline 1: never promoted).
    assert!(
        hosts["receipt"]
            .as_str()
            .is_some_and(|r| r.starts_with("1:0/")),
        "{doc}"
    );
    let out = strata_db(&with_replica, &["status"]);
    assert!(
        stdout(&out).contains(&format!("answered by the postgres primary {primary_at}")),
        "{}",
        stdout(&out)
    );

    // `status` pointed at the hot standby itself (no `target_session_attrs`): it answers,
    // names the standby, and hands out no commit receipt (a standby has no WAL position
    // of its own).
    let standby_only =
        format!("postgresql://postgres@{replica_at}/postgres?strata_table=replica_cli");
    let out = strata_db(&standby_only, &["status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["hosts"]["primary"], replica_at.as_str(), "{doc}");
    assert_eq!(doc["hosts"]["standby"], true, "{doc}");
    assert_eq!(doc["hosts"].get("receipt"), None, "{doc}");
    let out = strata_db(&standby_only, &["status"]);
    assert!(
        stdout(&out).contains(&format!(
            "answered by the postgres hot standby {replica_at}"
        )),
        "{}",
        stdout(&out)
    );

    // A replica that does not answer: the reads go to the primary, and it says why.
    let dead_replica = format!("{plain}&strata_replica=127.0.0.1:1&connect_timeout=5");
    let out = strata_db(&dead_replica, &["collections", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["hosts"]["read_from"], "primary", "{doc}");
    assert!(
        doc["hosts"]["replica_error"]
            .as_str()
            .is_some_and(|e| e.contains("127.0.0.1:1")),
        "{doc}"
    );
    assert_eq!(doc["collections"][0]["rows"], 15, "{doc}");

    // After a failover, `status` on the multi-host URL names the promoted host.
    ha.standby.psql("SELECT pg_wal_replay_resume()").unwrap();
    ha.fail_over().unwrap();
    let out = strata_db(&plain, &["status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["hosts"]["primary"], replica_at.as_str());
    // Every acknowledged write is on the promoted host (a synchronous standby).
    assert_eq!(collections(&plain).0, 15);
}
