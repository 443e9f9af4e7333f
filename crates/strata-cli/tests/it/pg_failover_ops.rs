//! Issue 28: a failover in the middle of a data-key rotation and of a `strata copy`, on a
//! private primary with a synchronous standby (`strata_postgres::testing::HaPair`), the
//! `strata` process on the multi-host URL. The standby is promoted after a few committed
//! batches; the process ends with one line naming what to do; the rerun on the promoted
//! standby resumes from the checkpoint the new primary has:
//!
//! * rotation: each sealed record re-sealed exactly once (the rerun re-seals exactly the
//!   records the first run had not, and finds none already done after its cursor), every
//!   record opens under the new key with its body unchanged, the old key removed;
//! * copy (into the pair, and out of it): the rerun resumes, and the target is byte for
//!   byte the source.
#![cfg(feature = "postgres")]

use crate::support::{json_of, stderr, stdout, strata_db_env};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Lines};
use std::process::{ChildStderr, Command, Stdio};
use strata::layout::envelope::ENVELOPE_HEADER_LEN;
use strata::layout::keys::doc_prefix;
use strata::ops::rotate::rotation_checkpoint_key;
use strata::seal::{body_key_id, Credential, KdfParams};
use strata::{CollectionOptions, Database};
use strata_postgres::testing::HaPair;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

const PASSPHRASE: &str = "failover rotation passphrase";
const KEY_ENV: (&str, &str) = ("STRATA_TEST_FAILOVER_PASSPHRASE", PASSPHRASE);

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Acct {
    id: String,
    note: String,
}

/// Every record of `store` (reserved copy records included).
fn dump(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .scan(b"", None, ScanLimits::new(usize::MAX, 1 << 30).unwrap())
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}

/// The records a copy carries over: everything but its own `__nx/copy/` records.
fn payload(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    dump(store)
        .into_iter()
        .filter(|(k, _)| !k.starts_with(b"__nx/copy/"))
        .collect()
}

/// Reads `lines` until `n` of them contain `needle`; panics when the process ends first.
fn wait_for(lines: &mut Lines<BufReader<ChildStderr>>, needle: &str, n: usize) {
    let mut seen = 0;
    for line in lines.by_ref() {
        if line.unwrap().contains(needle) {
            seen += 1;
            if seen == n {
                return;
            }
        }
    }
    panic!("the process ended before {n} lines with {needle:?}");
}

/// The lines of the rest of a process's stderr that are not progress (`needle`) or logs
/// of the bulk pass.
fn error_lines(lines: Lines<BufReader<ChildStderr>>, needle: &str) -> Vec<String> {
    lines
        .map(|l| l.unwrap())
        .filter(|l| !l.contains(needle) && !l.contains("strata::pass") && !l.trim().is_empty())
        .collect()
}

/// Starts `strata --db <db> <args>` with its stderr piped.
fn spawn_strata(db: &str, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
    if !db.is_empty() {
        cmd.args(["--db", db]);
    }
    cmd.args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
#[cfg_attr(
    not(strata_pg),
    ignore = "needs STRATA_PG_URL (and the server binaries)"
)]
fn a_promotion_mid_rotation_is_one_line_and_the_rerun_reseals_each_record_once() {
    const N: usize = 3000;
    let Some(ha) = HaPair::start_for_test(
        "a_promotion_mid_rotation_is_one_line_and_the_rerun_reseals_each_record_once",
    )
    .unwrap() else {
        return;
    };
    let db = format!("{}&strata_table=rotation_failover", ha.url());
    let docs: Vec<(String, Acct)> = (0..N)
        .map(|i| {
            let id = format!("a{i:05}");
            let note = format!("note {i}");
            (id.clone(), Acct { id, note })
        })
        .collect();
    {
        let store = strata_postgres::connect_store(&db).unwrap();
        let handle = Database::builder(store)
            .key(Credential::passphrase(PASSPHRASE).with_kdf(KdfParams::insecure_fast()))
            .open()
            .unwrap();
        let accounts = handle
            .collection::<Acct>("accounts", CollectionOptions::new().sealed())
            .unwrap();
        let written = accounts
            .put_many(docs.iter().map(|(id, d)| (id.as_str(), d)))
            .unwrap();
        assert_eq!(written, N);
    }

    let mut first = spawn_strata(
        &db,
        &[
            "keys",
            "rotate",
            "--passphrase-env",
            KEY_ENV.0,
            "--batch-records",
            "10",
        ],
        &[KEY_ENV, ("STRATA_LOG", "strata::pass=debug")],
    );
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    wait_for(&mut lines, "pass batch committed", 4);
    ha.fail_over().unwrap();
    let errors = error_lines(lines, "pass batch committed");
    let status = first.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{errors:#?}");
    assert_eq!(errors.len(), 1, "not one line: {errors:#?}");
    eprintln!("the cut-off rotation said: {}", errors[0]);
    assert!(
        errors[0].starts_with("strata: ")
            && errors[0].contains("resumes from its checkpoint when rerun")
            && (errors[0].contains("lost the connection to postgres")
                || errors[0].contains("cannot connect")),
        "{errors:?}"
    );

    // On the promoted standby: both keys, a checkpoint, the first run's batches re-sealed.
    let store = strata_postgres::connect_store(&db).unwrap();
    assert!(store
        .get(&rotation_checkpoint_key("accounts"))
        .unwrap()
        .is_some());
    let under_new = |store: &Store| {
        dump(store)
            .iter()
            .filter(|(k, v)| {
                k.starts_with(&doc_prefix("accounts"))
                    && body_key_id(&v[ENVELOPE_HEADER_LEN..]) == Some(2)
            })
            .count()
    };
    let done_by_first = under_new(&store);
    assert!(
        (40..N).contains(&done_by_first),
        "the first run re-sealed {done_by_first}"
    );

    let out = strata_db_env(
        &db,
        &["keys", "rotate", "--passphrase-env", KEY_ENV.0],
        &[KEY_ENV],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // Exactly the records the first run had not re-sealed; none after the cursor found
    // already done (a record re-sealed twice would show as `unchanged`).
    let expected = format!(
        "{} re-sealed, 0 unchanged, 0 changed concurrently",
        N - done_by_first
    );
    assert!(text.contains(&expected), "{expected:?} in {text}");
    assert!(
        text.contains("resumed and finished") && text.contains("key 1 was removed"),
        "{text}"
    );
    assert_eq!(under_new(&store), N);
    assert!(store
        .get(&rotation_checkpoint_key("accounts"))
        .unwrap()
        .is_none());
    // Every record opens under the new key (the only one left) with its body unchanged.
    let handle = Database::builder(store)
        .key(Credential::passphrase(PASSPHRASE))
        .open()
        .unwrap();
    let accounts = handle
        .collection::<Acct>("accounts", CollectionOptions::new().sealed())
        .unwrap();
    for (id, d) in &docs {
        assert_eq!(accounts.get(id).unwrap().as_ref(), Some(d), "{id}");
    }
}

/// `n` records of varied keys and sizes (keys under two prefixes, one reserved by strata
/// for nothing a copy knows).
fn seed(store: &Store, n: u32) {
    let mut batch = Batch::new();
    for i in 0..n {
        let key = format!("t{}/{i:08}\u{0}\u{ff}", i % 5).into_bytes();
        let value: Vec<u8> = (0..40 + (i as usize % 90))
            .map(|j| (i as usize * 17 + j) as u8)
            .collect();
        batch = batch.set(key, value);
        if i % 1000 == 999 {
            store.apply(std::mem::take(&mut batch)).unwrap();
        }
    }
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

/// Copies `from` to `to` in batches of 50, the standby of `ha` promoted after 4 batches;
/// checks the one line the copy ends with, then reruns it and returns its `--json`.
fn interrupted_copy(ha: &HaPair, from: &str, to: &str) -> serde_json::Value {
    let args = ["copy", "--from", from, "--to", to, "--max-records", "50"];
    let mut first = spawn_strata("", &args, &[("STRATA_PROGRESS", "batch")]);
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    wait_for(&mut lines, "records copied", 4);
    ha.fail_over().unwrap();
    let errors = error_lines(lines, "records copied");
    let status = first.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{errors:#?}");
    assert_eq!(errors.len(), 1, "not one line: {errors:#?}");
    eprintln!("the cut-off copy said: {}", errors[0]);
    // Lost mid-batch: "… rerun the operation once the server is back"; or, reconnecting
    // before the promotion: "cannot connect … retry in a few seconds, once a standby has
    // been promoted".
    assert!(
        errors[0].starts_with("strata: ")
            && ((errors[0].contains("lost the connection to postgres")
                && errors[0].contains("rerun"))
                || (errors[0].contains("cannot connect") && errors[0].contains("retry"))),
        "{errors:?}"
    );
    let mut all = args.to_vec();
    all.push("--json");
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(&all)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_of(&out)
}

#[test]
#[cfg_attr(
    not(strata_pg),
    ignore = "needs STRATA_PG_URL (and the server binaries)"
)]
fn a_promotion_mid_copy_into_the_cluster_is_one_line_and_the_rerun_copies_byte_exact() {
    const N: u32 = 20_000;
    let Some(ha) = HaPair::start_for_test(
        "a_promotion_mid_copy_into_the_cluster_is_one_line_and_the_rerun_copies_byte_exact",
    )
    .unwrap() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("source.redb");
    let source = strata_redb::RedbStore::create(&from).unwrap().into_store();
    seed(&source, N);
    let expected = dump(&source);
    drop(source);
    let to = format!("{}&strata_table=copy_failover", ha.url());

    let doc = interrupted_copy(&ha, from.to_str().unwrap(), &to);
    assert_eq!(doc["resumed"], true, "{doc}");
    assert_eq!(doc["verified"], true, "{doc}");
    assert_eq!(doc["records"], N, "{doc}");
    let target = strata_postgres::connect_store(&to).unwrap();
    assert_eq!(target.get(b"__nx/copy/progress").unwrap(), None);
    assert!(target.get(b"__nx/copy/manifest").unwrap().is_some());
    assert_eq!(payload(&target), expected, "not byte for byte the source");
}

#[test]
#[cfg_attr(
    not(strata_pg),
    ignore = "needs STRATA_PG_URL (and the server binaries)"
)]
fn a_promotion_mid_copy_out_of_the_cluster_is_one_line_and_the_rerun_copies_byte_exact() {
    const N: u32 = 20_000;
    let Some(ha) = HaPair::start_for_test(
        "a_promotion_mid_copy_out_of_the_cluster_is_one_line_and_the_rerun_copies_byte_exact",
    )
    .unwrap() else {
        return;
    };
    let from = format!("{}&strata_table=copy_source", ha.url());
    let source = strata_postgres::connect_store(&from).unwrap();
    seed(&source, N);
    let expected = dump(&source);
    drop(source);
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("target.redb");

    let doc = interrupted_copy(&ha, &from, to.to_str().unwrap());
    assert_eq!(doc["resumed"], true, "{doc}");
    assert_eq!(doc["verified"], true, "{doc}");
    assert_eq!(doc["records"], N, "{doc}");
    let target = strata_redb::RedbStore::open_existing(&to)
        .unwrap()
        .into_store();
    assert_eq!(target.get(b"__nx/copy/progress").unwrap(), None);
    assert_eq!(payload(&target), expected, "not byte for byte the source");
}
