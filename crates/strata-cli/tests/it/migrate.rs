//! `strata migrate` and `strata verify`: exit codes, argument validation, JSON, progress,
//! dry runs and read-only verification, on the committed legacy fixture.

use crate::support::{snapshot, stderr, strata_db, with_store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use strata::layout::header::SchemaHeader;
use strata::layout::header::{checkpoint_key, header_key};
use strata_store::{Batch, KvWrite};

fn fixture() -> Vec<(Vec<u8>, Vec<u8>)> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../strata/fixtures/legacy-v0/records.tsv");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('\t').unwrap();
            (
                hex::decode(k.trim()).unwrap(),
                hex::decode(v.trim()).unwrap(),
            )
        })
        .collect()
}

fn legacy_db(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    with_store(&db, |s| {
        for (k, v) in fixture() {
            s.apply(Batch::new().set(k, v)).unwrap();
        }
    });
    db
}

/// Every record of the sled store at `db`.
fn all(db: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    with_store(db, snapshot)
}

/// The payload records of the sled store at `db`.
fn payload(db: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    crate::support::payload(&all(db))
}

#[test]
fn missing_path_is_refused_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("missing");
    for cmd in [["migrate"].as_slice(), ["verify"].as_slice()] {
        let out = strata_db(&db, cmd);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}");
        assert!(stderr(&out).starts_with("strata: "), "{}", stderr(&out));
        assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
        assert!(!db.exists(), "{cmd:?} created the path");
    }
}

#[test]
fn zero_and_malformed_limits_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    let before = all(&db);
    for args in [
        ["migrate", "--max-bytes", "0"],
        ["migrate", "--max-bytes", "0MiB"],
        ["migrate", "--max-records", "0"],
        ["migrate", "--max-bytes", "4 parsecs"],
        ["migrate", "--max-bytes", "1.5MiB"],
        ["migrate", "--max-bytes", "4MB"],
    ] {
        let out = strata_db(&db, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(args[1]), "{}", stderr(&out));
    }
    let out = strata_db(&db, &["migrate", "--max-bytes", "0"]);
    assert!(
        stderr(&out).contains("greater than zero"),
        "{}",
        stderr(&out)
    );
    let out = strata_db(&db, &["migrate", "--max-bytes", "1.5MiB"]);
    assert!(
        stderr(&out).contains("whole numbers only"),
        "{}",
        stderr(&out)
    );
    let out = strata_db(&db, &["migrate", "--max-bytes", "4MB"]);
    assert!(
        stderr(&out).contains("use the binary unit MiB"),
        "{}",
        stderr(&out)
    );
    assert_eq!(all(&db), before, "refused arguments changed nothing");
}

#[test]
fn sizes_accept_units_and_bare_numbers() {
    for size in ["4MiB", "512KiB", "4096"] {
        let dir = tempfile::tempdir().unwrap();
        let db = legacy_db(dir.path());
        let out = strata_db(
            &db,
            &["migrate", "--dry-run", "--json", "--max-bytes", size],
        );
        assert_eq!(out.status.code(), Some(0), "{size}: {}", stderr(&out));
    }
    // 100B parses to 100 bytes, too small for the largest fixture record.
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    let out = strata_db(&db, &["migrate", "--dry-run", "--max-bytes", "100B"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("byte budget of 100 bytes"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("--max-bytes"), "{}", stderr(&out));
}

#[test]
fn migrates_the_legacy_fixture_with_a_json_summary() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    let before = payload(&db);
    assert_eq!(strata_db(&db, &["status"]).status.code(), Some(3));

    let out = strata_db(&db, &["migrate", "--max-records", "2", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["format"], 1);
    assert_eq!(doc["dry_run"], false);
    let tables = doc["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 14);
    for t in tables {
        assert_eq!(t["from"], 0, "{t}");
        assert_eq!(t["to"], 1, "{t}");
        assert_eq!(t["records"], 1, "{t}");
        assert_eq!(t["batches"], 1, "{t}");
        assert!(t["seconds"].as_f64().unwrap() >= 0.0);
        assert!(t["table"].is_string());
    }
    // Plain progress lines on stderr (not a terminal here).
    assert!(
        stderr(&out).contains("migrating op-log: v0 -> v1"),
        "{}",
        stderr(&out)
    );

    assert_eq!(payload(&db), before, "every payload byte unchanged");
    let after = all(&db);
    for (id, name, _) in strata::numax::NUMAX_TABLES {
        assert_eq!(
            after
                .get(&header_key(name))
                .map(|h| SchemaHeader::decode(h).unwrap()),
            Some(SchemaHeader::new(1, id))
        );
        assert!(!after.contains_key(&checkpoint_key(name)));
    }
    assert_eq!(strata_db(&db, &["status"]).status.code(), Some(0));

    // Rerunning is a no-op; the human summary goes to stdout.
    let again = strata_db(&db, &["migrate"]);
    assert_eq!(again.status.code(), Some(0));
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("migration complete"), "{text}");
    assert!(text.contains("current"), "{text}");
}

#[test]
fn dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    let before = all(&db);
    let out = strata_db(&db, &["migrate", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing was written"));
    // Its progress lines say it validates, not that it migrates.
    let err = stderr(&out);
    assert!(!err.contains("migrating "), "{err}");
    assert!(err.contains("validating seen-ops (dry run)"), "{err}");
    assert_eq!(all(&db), before);
    assert_eq!(strata_db(&db, &["status"]).status.code(), Some(3));
}

#[test]
fn invalid_record_fails_naming_table_and_key_and_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    with_store(&db, |s| {
        s.apply(Batch::new().set(b"__nx/crdt/seen-op/broken".to_vec(), vec![1, 2, 3]))
            .unwrap();
    });
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let last = err.lines().last().unwrap();
    assert!(last.starts_with("strata: "), "{err}");
    assert!(
        last.contains("seen-ops") && last.contains("__nx/crdt/seen-op/broken"),
        "{err}"
    );
    // The reason is said once, with the checkpoint and the advice.
    assert_eq!(last.matches("invalid record").count(), 1, "{err}");
    assert_eq!(last.matches("seen-op/broken").count(), 1, "{err}");
    assert!(
        last.contains("nothing of its batch was written (checkpoint")
            && last.contains("repair or remove the record and rerun"),
        "{err}"
    );
    let after = all(&db);
    assert!(!after.contains_key(&header_key("seen-ops")));
    assert!(!after.contains_key(&checkpoint_key("seen-ops")));
}

#[test]
fn future_header_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    with_store(&db, |s| {
        s.apply(Batch::new().set(
            header_key("op-log"),
            SchemaHeader::new(7, 14).encode().to_vec(),
        ))
        .unwrap();
    });
    let before = all(&db);
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("op-log"), "{}", stderr(&out));
    assert_eq!(all(&db), before);
}

#[test]
fn verify_is_read_only_and_names_the_first_bad_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = legacy_db(dir.path());
    // Legacy tables are verified too (verify does not need headers), and verify exits
    // like `status`: 3, a migration is required.
    let out = strata_db(&db, &["verify", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verdict"], "migration_required");
    assert_eq!(doc["tables"].as_array().unwrap().len(), 14);
    assert!(doc["tables"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["records"] == 1));

    assert_eq!(strata_db(&db, &["migrate"]).status.code(), Some(0));
    with_store(&db, |s| {
        s.apply(Batch::new().set(b"__nx/crdt/orset/broken".to_vec(), b"{nope".to_vec()))
            .unwrap();
    });
    let before = all(&db);
    let out = strata_db(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("orset-materialized") && err.contains("__nx/crdt/orset/broken"),
        "{err}"
    );
    assert_eq!(all(&db), before, "verify wrote nothing");
}

/// A legacy store with the fixture plus `n` more legacy G-Counter records.
fn big_legacy_db(dir: &Path, n: usize) -> PathBuf {
    use strata::numax::wire;
    let db = legacy_db(dir);
    with_store(&db, |s| {
        let mut batch = Batch::new();
        for i in 0..n {
            batch = batch.set(
                wire::key(wire::GCOUNTER_PREFIX, &format!("counter-{i:08}")),
                wire::encode_gcounter_materialized(i as u64),
            );
        }
        s.apply(batch).unwrap();
    });
    db
}

/// The `batches` of the table with more than `min` records in a `--json` report.
fn batches_of_big_table(out: &Output, min: u64) -> u64 {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let big: Vec<_> = doc["tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["records"].as_u64().unwrap() > min)
        .collect();
    assert_eq!(big.len(), 1, "{doc}");
    big[0]["batches"].as_u64().unwrap()
}

#[test]
fn without_max_records_certification_takes_the_migrators_default_cadence() {
    let n = 9000;
    // Absent: the migrator's defaults, a certification checkpoint every 4096 records.
    let dir = tempfile::tempdir().unwrap();
    let db = big_legacy_db(dir.path(), n);
    let out = strata_db(&db, &["migrate", "--json"]);
    let default = batches_of_big_table(&out, n as u64);
    assert_eq!(
        default,
        (n as u64 + 1).div_ceil(strata::migrate::CERTIFY_MAX_RECORDS as u64),
        "default cadence"
    );
    assert_eq!(strata_db(&db, &["status"]).status.code(), Some(0));

    // Given: applied as given.
    let dir = tempfile::tempdir().unwrap();
    let db = big_legacy_db(dir.path(), n);
    let out = strata_db(&db, &["migrate", "--json", "--max-records", "512"]);
    let explicit = batches_of_big_table(&out, n as u64);
    assert_eq!(explicit, (n as u64 + 1).div_ceil(512), "explicit limit");

    // `--max-bytes` alone still bounds every batch (the record limits stay the defaults).
    let dir = tempfile::tempdir().unwrap();
    let db = big_legacy_db(dir.path(), n);
    let out = strata_db(&db, &["migrate", "--json", "--max-bytes", "16KiB"]);
    let by_bytes = batches_of_big_table(&out, n as u64);
    assert!(by_bytes > default, "{by_bytes} vs {default}");
    assert_eq!(strata_db(&db, &["status"]).status.code(), Some(0));
}
