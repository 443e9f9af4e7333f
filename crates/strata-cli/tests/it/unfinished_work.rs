//! Unfinished work is visible everywhere (#23 item 3), beyond a copy
//! (`unfinished_copy.rs`): an interrupted migration (a real `strata migrate` SIGKILLed
//! after a committed batch), sweep, coordinated cutover and data-key rotation (each
//! stopped part-way by its `abort_when` check, the library's interruption point) are each
//! reported by `status`, `verify` and `collections` with their own verdict and exit code
//! (`unfinished_migration` 8, `unfinished_cutover` 9, `unfinished_rotation` 10,
//! `unfinished_sweep` 11), in text and `--json`; once the work is finished every command
//! exits 0 again.

use crate::support::{json_of, legacy_records, stderr, stdout, strata_db, strata_db_env};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use strata::clock::ManualClock;
use strata::ops::cutover::CutoverOptions;
use strata::ops::rotate::RotateOptions;
use strata::ops::sweep::SweepOptions;
use strata::pass::PassLimits;
use strata::policy::{coordinated_cutover, FenceState, PolicyConfig, SchemaOptions};
use strata::seal::{Credential, KdfParams};
use strata::CollectionOptions;
use strata::Database;
use strata::Mode;
use strata_store::{KvRead, KvWrite, Store};

const PASS_ENV: (&str, &str) = ("STRATA_TEST_UNFINISHED_PASS", "unfinished work passphrase");

/// Every read-only command reports `operation` unfinished with `verdict` and `code`: the
/// exit code, the `--json` verdict and `unfinished` list, and the text summary.
fn assert_reported(db: &Path, operation: &str, verdict: &str, code: i32, env: &[(&str, &str)]) {
    for cmd in ["status", "verify", "collections"] {
        let mut args = vec![cmd, "--json"];
        if cmd == "verify" && !env.is_empty() {
            args.extend(["--passphrase-env", PASS_ENV.0]);
        }
        let out = strata_db_env(db, &args, env);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{cmd} --json: {}{}",
            stdout(&out),
            stderr(&out)
        );
        let doc = json_of(&out);
        assert_eq!(doc["verdict"], verdict, "{cmd}: {doc}");
        let listed = doc["unfinished"].as_array().cloned().unwrap_or_default();
        assert!(
            listed.iter().any(|u| u["operation"] == operation),
            "{cmd}: {doc}"
        );
        args.remove(1);
        let out = strata_db_env(db, &args, env);
        assert_eq!(out.status.code(), Some(code), "{cmd}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(
            text.contains(&format!("unfinished {operation}")),
            "{cmd}: {text}"
        );
        assert!(
            text.contains("was interrupted")
                || text.contains("is pending or was interrupted")
                || text.contains("is running or was interrupted"),
            "{cmd}: no summary line: {text}"
        );
    }
}

/// Every read-only command exits 0 with verdict `ok` and nothing unfinished.
fn assert_finished(db: &Path, env: &[(&str, &str)]) {
    for cmd in ["status", "verify", "collections"] {
        let mut args = vec![cmd, "--json"];
        if cmd == "verify" && !env.is_empty() {
            args.extend(["--passphrase-env", PASS_ENV.0]);
        }
        let out = strata_db_env(db, &args, env);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", stderr(&out));
        let doc = json_of(&out);
        assert_eq!(doc["verdict"], "ok", "{cmd}: {doc}");
        assert_eq!(doc["unfinished"], json!([]), "{cmd}: {doc}");
    }
}

/// The redb store at `db` (closed again when dropped: the CLI cannot open a redb file this
/// process holds).
fn open(db: &Path) -> Store {
    strata_redb::RedbStore::open_existing(db)
        .unwrap()
        .into_store()
}

/// True when some table of the store holds a migration checkpoint.
fn has_migration_checkpoint(db: &Path) -> bool {
    let prefix = strata::layout::header::checkpoint_key("");
    open(db).prefix_exists(&prefix).unwrap()
}

#[test]
fn an_interrupted_migration_is_unfinished_migration_exit_8() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("legacy.redb");
    {
        let store = strata_redb::RedbStore::create_store(&db).unwrap();
        legacy_records(&store, 20_000);
        store.flush().unwrap();
    }
    // SIGKILL `strata migrate` after its first committed batch; until a kill leaves a
    // checkpoint (a kill between two tables leaves none: then it is `migration_required`).
    let mut interrupted = false;
    for attempt in 0..10 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("--db")
            .arg(&db)
            .args(["migrate", "--max-records", "256"])
            .env("STRATA_LOG", "strata::pass=debug")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let mut killed = false;
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if line.contains("pass batch committed") {
                child.kill().unwrap();
                killed = true;
                break;
            }
        }
        child.wait().unwrap();
        assert!(killed, "attempt {attempt}: migrate finished before a kill");
        if has_migration_checkpoint(&db) {
            interrupted = true;
            break;
        }
        let out = strata_db(&db, &["status", "--json"]);
        assert!(
            matches!(out.status.code(), Some(3) | Some(0)),
            "no checkpoint, yet: {}",
            stdout(&out)
        );
    }
    assert!(interrupted, "no kill left a migration checkpoint");
    assert_reported(&db, "migration", "unfinished_migration", 8, &[]);
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_finished(&db, &[]);
}

#[test]
fn an_interrupted_sweep_is_unfinished_sweep_exit_11() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.redb");
    {
        let store = strata_redb::RedbStore::create_store(&db).unwrap();
        let d = Database::builder(store).open().unwrap();
        let c = d
            .collection::<Value>("acc", CollectionOptions::new())
            .unwrap();
        for i in 0..20 {
            c.put(&format!("a{i:02}"), &json!({"n": i})).unwrap();
        }
    }
    let v2 = || {
        CollectionOptions::new().upcast(1, Mode::Eager, |o| {
            o.insert("m".into(), json!(0));
            Ok(())
        })
    };
    let sweep = |abort: bool| {
        let store = open(&db);
        let d = Database::builder(store.clone()).open().unwrap();
        let c = d.collection::<Value>("acc", v2()).unwrap();
        let mut options = SweepOptions::new().limits(PassLimits::new(5, 1 << 20).unwrap());
        if abort {
            let polls = std::sync::atomic::AtomicUsize::new(0);
            options = options
                .abort_when(move || polls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1);
        }
        let report = c.sweep(options).unwrap();
        store.flush().unwrap();
        report
    };
    let report = sweep(true);
    assert_eq!(report.note, strata::ops::sweep::SweepNote::Aborted);
    assert_reported(&db, "sweep", "unfinished_sweep", 11, &[]);
    sweep(false);
    assert_finished(&db, &[]);
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvOld {
    id: String,
    total: u64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvNew {
    id: String,
    total: u64,
    note: String,
}

#[test]
fn an_interrupted_cutover_is_unfinished_cutover_exit_9() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cutover.redb");
    drop(strata_redb::RedbStore::create_store(&db).unwrap());
    let clock = ManualClock::new(1_000);
    let config = || {
        PolicyConfig::new()
            .clock(Arc::new(clock.clone()))
            .heartbeat(None)
    };
    {
        let d = Database::builder(open(&db))
            .policy(config())
            .open()
            .unwrap();
        let inv = d
            .collection::<InvOld>(
                "invoices",
                CollectionOptions::new().schema(SchemaOptions::of::<InvOld>()),
            )
            .unwrap();
        for i in 0..30u64 {
            let id = format!("i{i:03}");
            inv.put(
                &id,
                &InvOld {
                    id: id.clone(),
                    total: i,
                },
            )
            .unwrap();
        }
    }
    let new_shape = || {
        let d = Database::builder(open(&db))
            .policy(config())
            .open()
            .unwrap();
        d.collection::<InvNew>(
            "invoices",
            CollectionOptions::new().schema(SchemaOptions::of::<InvNew>().strategy(
                coordinated_cutover(|mut v: Value| {
                    v["note"] = json!("moved");
                    Ok(v)
                }),
            )),
        )
        .unwrap();
        d
    };
    {
        let d = new_shape();
        let mut polls = 0;
        let err = d
            .run_schema_cutover(
                CutoverOptions::new()
                    .limits(PassLimits::new(5, 1 << 20).unwrap())
                    .abort_when(|| {
                        polls += 1;
                        polls > 2
                    }),
            )
            .unwrap_err();
        assert!(err.to_string().contains("abort"), "{err}");
        assert_eq!(d.fence_state().unwrap().state, FenceState::Migrating);
        d.store().flush().unwrap();
    }
    assert_reported(&db, "cutover", "unfinished_cutover", 9, &[]);
    // The stopped coordinator's lease expires; a new one resumes the cutover.
    clock.advance(60_000);
    {
        let d = new_shape();
        d.run_schema_cutover(CutoverOptions::new()).unwrap();
        assert_eq!(d.fence_state().unwrap().state, FenceState::Normal);
        d.store().flush().unwrap();
    }
    assert_finished(&db, &[]);
}

#[test]
fn an_interrupted_key_rotation_is_unfinished_rotation_exit_10() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sealed.redb");
    drop(strata_redb::RedbStore::create_store(&db).unwrap());
    let cred = || Credential::passphrase(PASS_ENV.1).with_kdf(KdfParams::insecure_fast());
    let open_db = || Database::builder(open(&db)).key(cred()).open().unwrap();
    {
        let d = open_db();
        let c = d
            .collection::<Value>("cards", CollectionOptions::new().sealed())
            .unwrap();
        for i in 0..30 {
            c.put(&format!("c{i:02}"), &json!({"n": i})).unwrap();
        }
        let mut batches = 0;
        let report = d
            .rotate_data_key(
                &[&cred()],
                RotateOptions::new()
                    .limits(PassLimits::new(5, 1 << 20).unwrap())
                    .abort_when(|| {
                        batches += 1;
                        batches > 2
                    }),
            )
            .unwrap();
        assert!(report.aborted && !report.finished, "{report:?}");
        d.store().flush().unwrap();
    }
    assert_reported(&db, "rotation", "unfinished_rotation", 10, &[PASS_ENV]);
    {
        let d = open_db();
        let report = d.rotate_data_key(&[&cred()], RotateOptions::new()).unwrap();
        assert!(report.finished, "{report:?}");
        d.store().flush().unwrap();
    }
    assert_finished(&db, &[PASS_ENV]);
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Acct {
    id: String,
    owner: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct AcctV2 {
    id: String,
    owner_name: String,
}

/// A revert (the downcast sweep, #26 item 4) stopped part-way is an unfinished sweep
/// (exit 11) naming the revert to rerun; once it finished every command exits 0.
#[test]
fn an_interrupted_revert_is_unfinished_sweep_exit_11() {
    use strata::ops::revert::RevertOptions;
    use strata::ops::window::WindowOptions;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("revert.redb");
    let rename = |o: &mut serde_json::Map<String, Value>, from: &str, to: &str| {
        let v = o.remove(from).unwrap_or_default();
        o.insert(to.into(), v);
        Ok(())
    };
    let v1 = || {
        CollectionOptions::new()
            .identity_fields(["id"])
            .schema(SchemaOptions::of::<Acct>().strategy(strata::policy::additive_only()))
    };
    let v2 = move || {
        CollectionOptions::new()
            .identity_fields(["id"])
            .upcast(1, Mode::Eager, move |o| rename(o, "owner", "owner_name"))
            .downcast(2, move |o| rename(o, "owner_name", "owner"))
            .schema(SchemaOptions::of::<AcctV2>().strategy(strata::policy::covered_by_upcasts()))
    };
    let policy = || PolicyConfig::new().heartbeat(None);
    {
        let store = strata_redb::RedbStore::create_store(&db).unwrap();
        let d = Database::builder(store).policy(policy()).open().unwrap();
        let c = d.collection::<Acct>("acc", v1()).unwrap();
        for i in 0..20 {
            let id = format!("a{i:02}");
            c.put(
                &id,
                &Acct {
                    id: id.clone(),
                    owner: format!("o{i}"),
                },
            )
            .unwrap();
        }
    }
    let revert = |abort: bool| {
        let store = open(&db);
        let d = Database::builder(store.clone())
            .policy(policy())
            .open()
            .unwrap();
        let c = d.collection::<AcctV2>("acc", v2()).unwrap();
        if abort {
            c.complete_window(WindowOptions::new()).unwrap();
        } else {
            // The window the revert reopened cannot complete while the revert is
            // unfinished.
            let err = c.complete_window(WindowOptions::new()).unwrap_err();
            assert!(err.to_string().contains("revert"), "{err}");
        }
        let mut options = RevertOptions::new().limits(PassLimits::new(5, 1 << 20).unwrap());
        if abort {
            let polls = std::sync::atomic::AtomicUsize::new(0);
            options = options
                .abort_when(move || polls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1);
        }
        let report = c.revert(1, options).unwrap();
        store.flush().unwrap();
        report
    };
    let report = revert(true);
    assert!(!report.finished, "{report:?}");
    assert_reported(&db, "sweep", "unfinished_sweep", 11, &[]);
    let out = strata_db(&db, &["status"]);
    assert!(
        stdout(&out).contains("revert acc --to 1"),
        "{}",
        stdout(&out)
    );
    let report = revert(false);
    assert!(report.is_complete() && report.resumed, "{report:?}");
    assert_finished(&db, &[]);
}
