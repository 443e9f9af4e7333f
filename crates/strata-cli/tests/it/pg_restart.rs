//! A PostgreSQL server restart in the middle of `strata migrate`, on a private cluster this
//! test starts itself ([`strata_postgres::testing::PrivateCluster`], on a free port): the
//! run fails with ONE line on stderr (no backtrace, the password never shown), and a rerun
//! resumes from the checkpoint and completes — the records of both runs add up to the
//! store's exactly, and every payload byte is unchanged.
//!
//! Skipped, saying so, where there are no PostgreSQL server binaries; under `CI=true` that
//! is a failure.
#![cfg(feature = "postgres")]

use crate::support::{legacy_records, payload, snapshot};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use strata::header::{checkpoint_key, header_key};
use strata::SchemaHeader;
use strata_postgres::testing::PrivateCluster;
use strata_postgres::{PgOptions, PgStore};
use strata_store::{KvRead, Store};

/// The records of a `pass batch committed` log line.
fn batch_records(line: &str) -> Option<u64> {
    if !line.contains("pass batch committed") {
        return None;
    }
    let at = line.find("records=")? + "records=".len();
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn a_server_restart_mid_migrate_is_one_line_and_a_rerun_resumes_with_exact_counts() {
    const N: usize = 40_000;
    let Some(cluster) = PrivateCluster::start_for_test(
        "a_server_restart_mid_migrate_is_one_line_and_a_rerun_resumes_with_exact_counts",
        &[],
    )
    .unwrap() else {
        return;
    };
    // The private cluster trusts local connections: the password is accepted and ignored,
    // and must never be shown.
    let db = format!(
        "postgresql://postgres:s3cr3t@127.0.0.1:{}/postgres?strata_table=legacy",
        cluster.port()
    );
    let store = Store::new(
        PgStore::connect_with(&cluster.url(), PgOptions::new().table("legacy")).unwrap(),
    );
    let expected = legacy_records(&store, N);

    // The run: small batches, one log line each. Once it committed 3, the server restarts
    // (the child cannot get far meanwhile: it blocks on its full stderr pipe).
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--db", &db, "migrate", "--max-records", "64"])
        .env("STRATA_LOG", "strata::pass=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut first_run = 0;
    let mut seen = 0;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(r) = batch_records(&line) {
            first_run += r;
            seen += 1;
            if seen == 3 {
                break;
            }
        }
    }
    assert_eq!(seen, 3, "the migrate ended before 3 batches");
    cluster.restart().unwrap();
    let mut other = Vec::new();
    for line in lines {
        let line = line.unwrap();
        match batch_records(&line) {
            Some(r) => first_run += r,
            None => other.push(line),
        }
    }
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the migrate survived the restart: {other:?}"
    );
    assert_eq!(other.len(), 1, "not one line: {other:#?}");
    let line = &other[0];
    eprintln!("the interrupted run said: {line}");
    assert!(line.starts_with("strata: "), "{line}");
    assert!(!line.contains("s3cr3t"), "{line}");
    assert!(
        !line.contains("backtrace") && !line.contains("panicked"),
        "{line}"
    );
    assert!((1..N as u64).contains(&first_run), "{first_run}");

    // The rerun resumes from the checkpoint and does exactly the rest.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--db", &db, "migrate", "--json"])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("s3cr3t"), "{text}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rerun: u64 = doc["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["records"].as_u64().unwrap())
        .sum();
    assert_eq!(first_run + rerun, N as u64, "{doc}");

    // Every payload byte unchanged, every populated table current, no checkpoint left.
    let store = Store::new(
        PgStore::connect_with(&cluster.url(), PgOptions::new().table("legacy")).unwrap(),
    );
    assert!(
        payload(&snapshot(&store)) == expected,
        "a payload byte changed"
    );
    for &(id, name, _) in strata::numax::NUMAX_TABLES.iter() {
        assert_eq!(store.get(&checkpoint_key(name)).unwrap(), None, "{name}");
        if let Some(h) = store.get(&header_key(name)).unwrap() {
            let h = SchemaHeader::decode(&h).unwrap();
            assert_eq!((h.table_id, h.version), (id, 1), "{name}");
        }
    }
}
