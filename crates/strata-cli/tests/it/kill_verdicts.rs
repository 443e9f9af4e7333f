//! After a real `strata` child process is SIGKILLed in the middle of a long operation, on
//! redb and on sled, the read-only commands tell the truth about the store: `status`,
//! `verify` and `collections` report the unfinished work with its own verdict and exit
//! code and the command that finishes it (never `ok`, never "empty", never damage or a
//! restore), `inspect` shows what is there; then resuming completes with every record
//! intact, compared by content.
//!
//! Kill points are chosen from the child's own reports on a pipe (`pass batch committed`
//! log lines, `STRATA_PROGRESS=batch` copy lines): the child is killed right after its
//! N-th report, while it works on the next batch.

use crate::support::{acc_documents, json_of, legacy_records, payload, snapshot, stderr};
use crate::support::{stdout, strata, strata_db, strata_db_env};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use strata::seal::{Credential, KdfParams};
use strata::{CollectionOptions, Database};
use strata_store::{Batch, KvRead, KvWrite, Store};

/// The embedded backends.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Redb,
    Sled,
}

impl Backend {
    fn path(self, dir: &Path, name: &str) -> PathBuf {
        match self {
            Backend::Redb => dir.join(format!("{name}.redb")),
            Backend::Sled => dir.join(name),
        }
    }

    /// `path` as `--db` names it with the backend said: `redb:PATH` or `sled:PATH`.
    fn named(self, path: &Path) -> String {
        match self {
            Backend::Redb => format!("redb:{}", path.display()),
            Backend::Sled => format!("sled:{}", path.display()),
        }
    }

    fn create(self, path: &Path) -> Store {
        match self {
            Backend::Redb => strata_redb::RedbStore::create_store(path).unwrap(),
            Backend::Sled => strata_sled::SledStore::open_store(path).unwrap(),
        }
    }

    /// The store at `path`, read-only (a redb file opened read-only, a private copy of a
    /// sled directory): checking it leaves it exactly as the killed child left it.
    fn read(self, path: &Path) -> Store {
        match self {
            Backend::Redb => {
                // A redb file whose writer was killed needs redb's recovery, which only a
                // writable open runs (the first `strata` command after the kill ran it).
                strata_redb::RedbStore::open_read_only(path)
                    .unwrap_or_else(|_| strata_redb::RedbStore::open_existing(path).unwrap())
                    .into_store()
            }
            Backend::Sled => strata_sled::SledStore::open_read_only(path)
                .unwrap()
                .into_store(),
        }
    }
}

/// Spawns `cmd` (stderr piped) and SIGKILLs it right after the `n`-th stderr line that
/// contains `marker`. True when it was killed; false when it finished first.
fn kill_after(mut cmd: Command, marker: &str, n: usize) -> bool {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let mut seen = 0;
    let mut killed = false;
    let mut said = Vec::new();
    for line in BufReader::new(err).lines() {
        let Ok(line) = line else { break };
        said.push(line.clone());
        if line.contains(marker) {
            seen += 1;
            if seen == n {
                child.kill().unwrap(); // SIGKILL
                killed = true;
                break;
            }
        }
    }
    let status = child.wait().unwrap();
    assert!(
        killed || status.success(),
        "the child failed: {status:?}: {}",
        said.join("\n")
    );
    killed
}

/// `strata --db db <args>` with pass batches logged on stderr.
fn logged(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
    cmd.arg("--db")
        .arg(db)
        .args(args)
        .env("STRATA_LOG", "strata::pass=debug")
        .envs(env.iter().copied());
    cmd
}

/// `status`, `verify` and `collections` (text and `--json`) all exit `code` with
/// `verdict`; the text names `next` (the command that finishes the work) and never
/// claims health, emptiness, damage or a restore. `verify_args` are added to `verify`.
fn assert_verdict(
    db: &Path,
    code: i32,
    verdict: &str,
    next: &str,
    verify_args: &[&str],
    env: &[(&str, &str)],
    what: &str,
) {
    for cmd in ["status", "verify", "collections"] {
        let mut args = vec![cmd];
        if cmd == "verify" {
            args.extend(verify_args);
        }
        let out = strata_db_env(db, &args, env);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(code), "{what}: {cmd}: {text}");
        assert!(
            text.contains(next),
            "{what}: {cmd} does not say `{next}`: {text}"
        );
        for wrong in ["damaged", "restore"] {
            assert!(
                !text.contains(wrong),
                "{what}: {cmd} says `{wrong}`: {text}"
            );
        }
        args.push("--json");
        let out = strata_db_env(db, &args, env);
        assert_eq!(out.status.code(), Some(code), "{what}: {cmd} --json");
        let doc = json_of(&out);
        assert_eq!(doc["verdict"], verdict, "{what}: {cmd} --json: {doc}");
    }
}

/// `inspect name` shows the records without calling the store damaged or empty.
fn assert_inspect_shows(db: &Path, name: &str, expect: i32, what: &str) {
    let out = strata_db(db, &["inspect", name, "--limit", "3", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(expect),
        "{what}: inspect {name}: {}{}",
        stdout(&out),
        stderr(&out)
    );
    let doc = json_of(&out);
    let text = doc.to_string();
    assert!(
        !text.contains("damaged") && !text.contains("restore"),
        "{what}: inspect {name}: {doc}"
    );
}

fn migrate_kill(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let db = backend.path(dir.path(), "numax");
    let expected = {
        let store = backend.create(&db);
        let all = legacy_records(&store, 30_000);
        store.flush().unwrap();
        all
    };
    let mut interrupted = 0;
    // Early kill points, then later ones until a kill left a checkpoint: on sled a kill
    // loses the batches since its last background flush (every 500 ms), so an early kill
    // may leave nothing to resume (and the verdict must say so).
    for (round, batches) in [1usize, 6, 19, 60, 120, 200].into_iter().enumerate() {
        if round >= 3 && interrupted > 0 {
            break;
        }
        let what = format!("{backend:?} round {round} (killed after {batches} batches)");
        let cmd = logged(&db, &["migrate", "--max-records", "100"], &[]);
        if !kill_after(cmd, "pass batch committed", batches) {
            println!("{what}: migrate finished before the kill");
            break;
        }
        // What the kill left durably (sled loses the batches since its last background
        // flush): a checkpoint to resume, or only whole tables.
        let store = backend.read(&db);
        let checkpoint = store
            .prefix_exists(&strata::layout::header::checkpoint_key(""))
            .unwrap();
        drop(store);
        if checkpoint {
            interrupted += 1;
            assert_verdict(
                &db,
                8,
                "unfinished_migration",
                "strata migrate",
                &[],
                &[],
                &what,
            );
        } else {
            let out = strata_db(&db, &["status", "--json"]);
            if out.status.code() == Some(0) {
                // The migration completed as the signal was sent.
                assert_eq!(json_of(&out)["verdict"], "ok", "{what}");
                println!("{what}: the migration completed before the kill landed");
                break;
            }
            // Nothing to resume: the tables not yet certified need `strata migrate`
            // (`collections` judges no Numax table: a store without collections is 0).
            for cmd in ["status", "verify"] {
                let out = strata_db(&db, &[cmd, "--json"]);
                assert_eq!(
                    out.status.code(),
                    Some(3),
                    "{what}: {cmd}: {}",
                    stdout(&out)
                );
                assert_eq!(json_of(&out)["verdict"], "migration_required");
                let out = strata_db(&db, &[cmd]);
                assert!(stdout(&out).contains("strata migrate"), "{what}: {cmd}");
            }
        }
        assert_inspect_shows(&db, "op-log", 0, &what);
        assert_eq!(
            payload(&snapshot(&backend.read(&db))),
            expected,
            "{what}: a payload byte changed"
        );
    }
    assert!(interrupted > 0, "{backend:?}: no kill left a checkpoint");
    let out = strata_db(&db, &["migrate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(payload(&snapshot(&backend.read(&db))), expected);
    for cmd in ["status", "verify", "collections"] {
        let out = strata_db(&db, &[cmd, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", stdout(&out));
        assert_eq!(json_of(&out)["verdict"], "ok");
    }
}

#[test]
fn a_killed_migrate_of_a_numax_sled_store_is_unfinished_and_resumes_byte_for_byte() {
    migrate_kill(Backend::Sled);
}

#[test]
fn a_killed_migrate_of_a_redb_store_is_unfinished_and_resumes_byte_for_byte() {
    migrate_kill(Backend::Redb);
}

const DOCS: u32 = 4_000;
const PROGRESS_KEY: &[u8] = b"__nx/copy/progress";

/// A store with the collection `acc` of [`DOCS`] documents (and a few other keys).
fn copy_source(backend: Backend, path: &Path) {
    let store = backend.create(path);
    acc_documents(&store, DOCS, |i, id| json!({"id": id, "n": i}));
    store
        .apply(Batch::new().set(b"app/setting".to_vec(), b"kept".to_vec()))
        .unwrap();
    store.flush().unwrap();
}

fn without_copy_records(all: BTreeMap<Vec<u8>, Vec<u8>>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    all.into_iter()
        .filter(|(k, _)| !k.starts_with(b"__nx/copy/"))
        .collect()
}

fn copy_kill(from_backend: Backend, to_backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let from = from_backend.path(dir.path(), "source");
    copy_source(from_backend, &from);
    let expected = snapshot(&from_backend.read(&from));
    let to = match to_backend {
        Backend::Redb => dir.path().join("target.redb"),
        Backend::Sled => dir.path().join("target"),
    };
    let to_arg = match to_backend {
        Backend::Redb => to.display().to_string(),
        Backend::Sled => format!("sled:{}", to.display()),
    };
    let from_s = from.to_str().unwrap();
    let mut interrupted = 0;
    // Later kill points only until a kill left a progress record (see `migrate_kill`).
    for (round, batches) in [1usize, 5, 11, 25, 35].into_iter().enumerate() {
        if round >= 3 && interrupted > 0 {
            break;
        }
        let what = format!("{from_backend:?} -> {to_backend:?} round {round} ({batches} batches)");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
        cmd.args([
            "copy",
            "--from",
            from_s,
            "--to",
            &to_arg,
            "--max-records",
            "100",
        ])
        .env("STRATA_PROGRESS", "batch");
        if !kill_after(cmd, "records copied", batches) {
            println!("{what}: the copy finished before the kill");
            break;
        }
        let target = snapshot(&to_backend.read(&to));
        if target.contains_key(b"__nx/copy/manifest".as_slice()) {
            // The copy completed as the signal was sent.
            assert_eq!(without_copy_records(target), expected, "{what}");
            println!("{what}: the copy completed before the kill landed");
            break;
        }
        if !target.contains_key(PROGRESS_KEY) {
            // sled lost every batch since its last background flush: nothing was copied,
            // the target is empty, and says so.
            assert!(
                target.is_empty(),
                "{what}: records without progress: {target:?}"
            );
            let out = strata_db(&to, &["status", "--json"]);
            assert_eq!(out.status.code(), Some(0), "{what}: {}", stdout(&out));
            continue;
        }
        interrupted += 1;
        assert_verdict(&to, 7, "unfinished_copy", "strata copy", &[], &[], &what);
        assert_inspect_shows(&to, "acc", 7, &what);
        // Whatever is there is exactly what the source holds.
        for (k, v) in without_copy_records(snapshot(&to_backend.read(&to))) {
            assert_eq!(expected.get(&k), Some(&v), "{what}: {k:?}");
        }
    }
    assert!(interrupted > 0, "no copy was killed");
    let out = strata(&["copy", "--from", from_s, "--to", &to_arg, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["verified"], true);
    assert_eq!(
        without_copy_records(snapshot(&to_backend.read(&to))),
        expected
    );
    for cmd in ["status", "verify", "collections"] {
        let out = strata_db(&to, &[cmd, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", stdout(&out));
    }
}

#[test]
fn a_killed_copy_from_redb_to_sled_is_unfinished_and_resumes_with_every_record() {
    copy_kill(Backend::Redb, Backend::Sled);
}

#[test]
fn a_killed_copy_from_sled_to_redb_is_unfinished_and_resumes_with_every_record() {
    copy_kill(Backend::Sled, Backend::Redb);
}

const PASS: (&str, &str) = ("STRATA_TEST_KILL_ROTATE_PASS", "kill rotate passphrase");

fn cred() -> Credential {
    Credential::passphrase(PASS.1).with_kdf(KdfParams::insecure_fast())
}

/// Every document of the sealed collection `cards`, read through the key.
fn sealed_docs(backend: Backend, db: &Path) -> BTreeMap<String, Value> {
    let store = match backend {
        Backend::Redb => strata_redb::RedbStore::open_existing(db)
            .unwrap()
            .into_store(),
        Backend::Sled => strata_sled::SledStore::open_existing(db)
            .unwrap()
            .into_store(),
    };
    let d = Database::builder(store).key(cred()).open().unwrap();
    let c = d
        .collection::<Value>("cards", CollectionOptions::new().sealed())
        .unwrap();
    (0..1_500)
        .filter_map(|i| {
            let id = format!("c{i:05}");
            c.get(&id).unwrap().map(|v| (id, v))
        })
        .collect()
}

/// True when the database keyring holds a rotation in progress (a retiring key).
fn rotation_begun(backend: Backend, db: &Path) -> bool {
    let store = backend.read(db);
    strata::seal::Keyring::database()
        .read(&store)
        .unwrap()
        .is_some_and(|(_, rec)| rec.retiring_key_id().is_some())
}

/// A seeded store with the sealed collection `cards` of 1,500 documents.
fn sealed_store(backend: Backend, db: &Path) {
    let store = backend.create(db);
    let d = Database::builder(store.clone()).key(cred()).open().unwrap();
    let c = d
        .collection::<Value>("cards", CollectionOptions::new().sealed())
        .unwrap();
    let docs: Vec<(String, Value)> = (0..1_500)
        .map(|i| {
            (
                format!("c{i:05}"),
                json!({"n": i, "pan": format!("4000{i:012}")}),
            )
        })
        .collect();
    c.put_many(docs.iter().map(|(k, v)| (k.as_str(), v)))
        .unwrap();
    drop(d);
    store.flush().unwrap();
}

/// A rotation that began (the keyring keeps the retiring key) but committed no batch yet
/// — what a kill right after its start leaves — is an unfinished rotation for `status`,
/// `verify` and `collections`, as `keys status` says (before session 26 they said every
/// table was current: only a collection's checkpoint counted).
#[test]
fn a_rotation_begun_without_a_checkpoint_is_unfinished_rotation_exit_10() {
    let dir = tempfile::tempdir().unwrap();
    let db = Backend::Redb.path(dir.path(), "begun");
    sealed_store(Backend::Redb, &db);
    let expected = sealed_docs(Backend::Redb, &db);
    {
        let store = strata_redb::RedbStore::open_existing(&db)
            .unwrap()
            .into_store();
        strata::seal::Keyring::database()
            .begin_rotation(&store, &[&cred()])
            .unwrap();
        assert!(!store
            .prefix_exists(strata::ops::rotate::ROTATION_CHECKPOINT_PREFIX)
            .unwrap());
    }
    let key = ["--passphrase-env", PASS.0];
    let what = "begun, no batch";
    assert_verdict(
        &db,
        10,
        "unfinished_rotation",
        "strata keys rotate",
        &key,
        &[PASS],
        what,
    );
    let out = strata_db_env(&db, &["keys", "rotate", key[0], key[1]], &[PASS]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(sealed_docs(Backend::Redb, &db), expected);
    let out = strata_db_env(&db, &["status", "--json"], &[PASS]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

fn rotate_kill(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let db = backend.path(dir.path(), "sealed");
    sealed_store(backend, &db);
    let expected = sealed_docs(backend, &db);
    assert_eq!(expected.len(), 1_500);
    let key = ["--passphrase-env", PASS.0];
    let mut interrupted = 0;
    // Later kill points only until a kill left the rotation begun (see `migrate_kill`).
    for (round, batches) in [1usize, 4, 12, 20, 26].into_iter().enumerate() {
        if round >= 2 && interrupted > 0 {
            break;
        }
        let what = format!("{backend:?} round {round} ({batches} batches)");
        let mut args = vec!["keys", "rotate", "--batch-records", "50"];
        args.extend(key);
        if !kill_after(logged(&db, &args, &[PASS]), "pass batch committed", batches) {
            println!("{what}: the rotation finished before the kill");
            break;
        }
        if !rotation_begun(backend, &db) {
            // sled lost the rotation's first writes: no rotation, nothing unfinished.
            let out = strata_db_env(&db, &["status", "--json"], &[PASS]);
            assert_eq!(out.status.code(), Some(0), "{what}: {}", stdout(&out));
            continue;
        }
        interrupted += 1;
        assert_verdict(
            &db,
            10,
            "unfinished_rotation",
            "strata keys rotate",
            &key,
            &[PASS],
            &what,
        );
        assert_eq!(sealed_docs(backend, &db), expected, "{what}");
    }
    assert!(interrupted > 0, "no rotation was killed");
    let mut args = vec!["keys", "rotate"];
    args.extend(key);
    let out = strata_db_env(&db, &args, &[PASS]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("finished"), "{}", stdout(&out));
    assert_eq!(sealed_docs(backend, &db), expected);
    let out = strata_db_env(&db, &["verify", "--json", key[0], key[1]], &[PASS]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn a_killed_key_rotation_on_redb_is_unfinished_and_resumes_with_every_record() {
    rotate_kill(Backend::Redb);
}

#[test]
fn a_killed_key_rotation_on_sled_is_unfinished_and_resumes_with_every_record() {
    rotate_kill(Backend::Sled);
}

/// The bulk load's child: `STRATA_KILL_LOAD_DB` (`redb:PATH` or `sled:PATH`) gets
/// [`LOAD_CHUNKS`] `put_many` calls of [`LOAD_CHUNK`] documents each; it prints `chunk N`
/// after each call returns. Nothing without the variable.
#[test]
#[ignore = "the child process of the bulk-load kill test"]
fn load_child() {
    let Ok(db) = std::env::var("STRATA_KILL_LOAD_DB") else {
        return;
    };
    let store = match db.split_once(':') {
        Some(("redb", p)) => strata_redb::RedbStore::create_store(p).unwrap(),
        Some(("sled", p)) => strata_sled::SledStore::open_store(p).unwrap(),
        _ => panic!("bad STRATA_KILL_LOAD_DB {db}"),
    };
    let d = Database::builder(store).open().unwrap();
    let c = d
        .collection::<Value>("bulk", CollectionOptions::new())
        .unwrap();
    println!("role=loader ready");
    for chunk in 0..LOAD_CHUNKS {
        let docs: Vec<(String, Value)> = (chunk * LOAD_CHUNK..(chunk + 1) * LOAD_CHUNK)
            .map(|i| (load_id(i), load_doc(i)))
            .collect();
        c.put_many(docs.iter().map(|(k, v)| (k.as_str(), v)))
            .unwrap();
        println!("chunk {chunk}");
    }
    println!("done");
}

const LOAD_CHUNKS: usize = 8;
const LOAD_CHUNK: usize = 2_500;

fn load_id(i: usize) -> String {
    format!("d{i:06}")
}

fn load_doc(i: usize) -> Value {
    json!({"i": i, "body": format!("{:x}", i.wrapping_mul(2_654_435_761))})
}

/// Runs the loader on `db` and SIGKILLs it right after its `chunks`-th `chunk` line
/// (`None`: runs it to its end). True when it was killed.
fn run_loader(db: &str, chunks: Option<usize>) -> bool {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "kill_verdicts::load_child",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("STRATA_KILL_LOAD_DB", db)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.find("role=").map(|at| l[at..].to_string()));
    assert_eq!(ready.as_deref(), Some("role=loader ready"), "wrong child");
    let mut seen = 0;
    for line in lines.map_while(Result::ok) {
        if line.starts_with("chunk ") {
            seen += 1;
            if Some(seen) == chunks {
                child.kill().unwrap(); // SIGKILL, while it loads the next chunk
                child.wait().unwrap();
                return true;
            }
        }
    }
    assert!(child.wait().unwrap().success(), "the loader failed");
    false
}

/// The documents of `bulk`, by id, decoded from their envelopes.
fn loaded(backend: Backend, path: &Path) -> BTreeMap<String, Value> {
    let prefix = strata::layout::keys::doc_prefix("bulk");
    crate::support::scan_prefix(&backend.read(path), &prefix)
        .into_iter()
        .map(|(k, v)| {
            let (env, json) = strata::layout::envelope::decode(&v).unwrap();
            assert_eq!(env.payload_version, 1);
            (
                String::from_utf8(k[prefix.len()..].to_vec()).unwrap(),
                serde_json::from_slice(json).unwrap(),
            )
        })
        .collect()
}

fn load_kill(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let path = backend.path(dir.path(), "bulk");
    let db = backend.named(&path);
    // `put_many` commits sets of `PUT_MANY_DOCUMENTS` in the order given: a kill may
    // leave only whole sets, so the documents present are a prefix ending on a set.
    let set = strata::PUT_MANY_DOCUMENTS;
    let boundaries: Vec<usize> = (0..LOAD_CHUNKS)
        .flat_map(|c| (0..LOAD_CHUNK.div_ceil(set)).map(move |s| c * LOAD_CHUNK + s * set))
        .chain([LOAD_CHUNKS * LOAD_CHUNK])
        .collect();
    for (round, chunks) in [1usize, 3, 6].into_iter().enumerate() {
        let what = format!("{backend:?} round {round} (killed after {chunks} chunks)");
        if !run_loader(&db, Some(chunks)) {
            println!("{what}: the load finished before the kill");
        }
        let docs = loaded(backend, &path);
        let n = docs.len();
        println!("{what}: {n} documents");
        assert!(
            boundaries.contains(&n),
            "{what}: {n} documents is not a whole number of sets"
        );
        for (i, (id, doc)) in docs.iter().enumerate() {
            assert_eq!((id, doc), (&load_id(i), &load_doc(i)), "{what}");
        }
        // A partly loaded collection is a collection with that many rows: nothing is
        // unfinished, nothing damaged.
        for cmd in ["status", "verify", "collections"] {
            let out = strata_db(&db, &[cmd, "--json"]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{what}: {cmd}: {}",
                stdout(&out)
            );
            let doc = json_of(&out);
            assert_eq!(doc["verdict"], "ok", "{what}: {cmd}: {doc}");
            if cmd == "collections" {
                let rows = doc["collections"]
                    .as_array()
                    .and_then(|a| a.iter().find(|c| c["collection"] == "bulk"))
                    .map_or(0, |c| c["rows"].as_u64().unwrap_or(0));
                assert_eq!(rows as usize, n, "{what}: {doc}");
            }
        }
    }
    // Loading again completes it (documents present are written once more, same content).
    assert!(!run_loader(&db, None));
    let docs = loaded(backend, &path);
    assert_eq!(docs.len(), LOAD_CHUNKS * LOAD_CHUNK);
    for (i, (id, doc)) in docs.iter().enumerate() {
        assert_eq!((id, doc), (&load_id(i), &load_doc(i)));
    }
}

#[test]
fn a_killed_bulk_load_on_redb_leaves_whole_sets_and_a_true_verdict() {
    load_kill(Backend::Redb);
}

#[test]
fn a_killed_bulk_load_on_sled_leaves_whole_sets_and_a_true_verdict() {
    load_kill(Backend::Sled);
}

/// The `bank_admin` example: an application's embedded admin, with `sweep`.
fn bank_admin() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_strata"));
    bin.parent()
        .unwrap()
        .join("examples")
        .join(format!("bank_admin{}", std::env::consts::EXE_SUFFIX))
}

/// The end of a kill test of an application's command (`sweep`, `cutover`): some of the
/// kill rounds (`interrupted`) left its work unfinished (`left`, as in "no kill left a
/// sweep in progress"), `rerun` (the command again) succeeds, `checked` finds all `rows`
/// done, and `status`, `verify` and `collections` say `ok` (exit 0).
fn resumes_and_all_say_ok(
    backend: Backend,
    path: &Path,
    interrupted: usize,
    left: &str,
    mut rerun: Command,
    checked: fn(Backend, &Path, &str) -> usize,
    rows: usize,
) {
    assert!(interrupted > 0, "{backend:?}: no kill left {left}");
    let out = rerun.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the rerun: {}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(checked(backend, path, "after the rerun"), rows);
    for cmd in ["status", "verify", "collections"] {
        let out = strata_db(path, &[cmd, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", stdout(&out));
        assert_eq!(json_of(&out)["verdict"], "ok", "{cmd}");
    }
}

const ACCOUNTS: usize = 3_000;

/// Every account, checked: untouched at v1 (`balance`) or swept to v3 (`balance_cents`
/// = balance × 100, `tier`), never anything else. Returns how many are at v3.
fn accounts_checked(backend: Backend, path: &Path, what: &str) -> usize {
    let prefix = strata::layout::keys::doc_prefix("accounts");
    let rows = crate::support::scan_prefix(&backend.read(path), &prefix);
    assert_eq!(rows.len(), ACCOUNTS, "{what}: accounts lost or added");
    let mut swept = 0;
    for (i, (_, v)) in rows.iter().enumerate() {
        let (env, json) = strata::layout::envelope::decode(v).unwrap();
        let doc: Value = serde_json::from_slice(json).unwrap();
        let id = format!("acc{i:05}");
        let memo = format!("memo {i}");
        let expected = match env.payload_version {
            1 => json!({"id": id, "balance": i, "memo": memo}),
            3 => {
                swept += 1;
                json!({"id": id, "balance_cents": i * 100, "tier": "basic", "memo": memo})
            }
            other => panic!("{what}: {id} at v{other}"),
        };
        assert_eq!(doc, expected, "{what}: {id}");
    }
    swept
}

fn sweep_kill(backend: Backend) {
    assert!(bank_admin().exists(), "`cargo test` builds the examples");
    let dir = tempfile::tempdir().unwrap();
    let path = backend.path(dir.path(), "bank");
    {
        // The old build: v1 accounts (dollars).
        let store = backend.create(&path);
        let d = Database::builder(store.clone()).open().unwrap();
        let accounts = d
            .collection::<Value>("accounts", CollectionOptions::new())
            .unwrap();
        let docs: Vec<(String, Value)> = (0..ACCOUNTS)
            .map(|i| {
                let id = format!("acc{i:05}");
                let doc = json!({"id": id, "balance": i, "memo": format!("memo {i}")});
                (id, doc)
            })
            .collect();
        accounts
            .put_many(docs.iter().map(|(k, v)| (k.as_str(), v)))
            .unwrap();
        drop(d);
        store.flush().unwrap();
    }
    let named = backend.named(&path);
    let sweep = || {
        let mut cmd = Command::new(bank_admin());
        cmd.arg("--db")
            .arg(&named)
            .args(["sweep", "accounts", "--batch-size", "50"])
            .env("STRATA_LOG", "strata::pass=debug");
        cmd
    };
    let mut interrupted = 0;
    for (round, batches) in [1usize, 8, 20, 40, 55].into_iter().enumerate() {
        if round >= 2 && interrupted > 0 {
            break;
        }
        let what = format!("{backend:?} round {round} ({batches} batches)");
        if !kill_after(sweep(), "pass batch committed", batches) {
            println!("{what}: the sweep finished before the kill");
            break;
        }
        let swept = accounts_checked(backend, &path, &what);
        let store = backend.read(&path);
        let marker = store
            .get(&strata::layout::keys::sweep_key("accounts"))
            .unwrap()
            .map(|b| strata::ops::sweep::SweepMarker::decode("accounts", &b).unwrap());
        drop(store);
        println!("{what}: {swept} of {ACCOUNTS} swept, marker {marker:?}");
        match marker {
            Some(m) if m.in_progress.is_some() => {
                interrupted += 1;
                assert_verdict(&path, 11, "unfinished_sweep", "sweep", &[], &[], &what);
            }
            Some(m) if m.completed == 3 => {
                // The sweep completed as the signal was sent.
                assert_eq!(swept, ACCOUNTS, "{what}");
                break;
            }
            _ => {
                // The claim was lost with sled's unflushed log: no sweep ran, as far as
                // the store knows; the stale rows are reported, not as unfinished work.
                assert_eq!(swept, 0, "{what}: rows swept without a marker");
                let out = strata_db(&path, &["status", "--json"]);
                assert_eq!(out.status.code(), Some(0), "{what}: {}", stdout(&out));
            }
        }
    }
    resumes_and_all_say_ok(
        backend,
        &path,
        interrupted,
        "a sweep in progress",
        sweep(),
        accounts_checked,
        ACCOUNTS,
    );
}

#[test]
fn a_killed_sweep_on_redb_is_unfinished_and_resumes_with_every_row_upcast_once() {
    sweep_kill(Backend::Redb);
}

#[test]
fn a_killed_sweep_on_sled_is_unfinished_and_resumes_with_every_row_upcast_once() {
    sweep_kill(Backend::Sled);
}

const INVOICES: usize = 4_000;

/// Every invoice, checked: the old flat `total` or the cutover's `amount.gross`, with
/// the same value, never anything else. Returns how many were transformed.
fn invoices_checked(backend: Backend, path: &Path, what: &str) -> usize {
    let prefix = strata::layout::keys::doc_prefix("invoices");
    let rows = crate::support::scan_prefix(&backend.read(path), &prefix);
    assert_eq!(rows.len(), INVOICES, "{what}: invoices lost or added");
    let mut moved = 0;
    for (i, (_, v)) in rows.iter().enumerate() {
        let (_, json) = strata::layout::envelope::decode(v).unwrap();
        let doc: Value = serde_json::from_slice(json).unwrap();
        let id = format!("inv{i:05}");
        let total = i as f64 + 0.5;
        if doc.get("amount").is_some() {
            moved += 1;
            assert_eq!(doc, json!({"id": id, "amount": {"gross": total}}), "{what}");
        } else {
            assert_eq!(doc, json!({"id": id, "total": total}), "{what}");
        }
    }
    moved
}

fn cutover_kill(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let path = backend.path(dir.path(), "bank");
    {
        // The old build: flat invoices under a persisted schema (as `bank_admin seed`).
        let store = backend.create(&path);
        let d = Database::builder(store.clone()).open().unwrap();
        let old = json!({
            "type": "object",
            "properties": { "id": {"type": "string"}, "total": {"type": "number"} },
            "required": ["id", "total"]
        });
        let invoices = d
            .collection::<Value>(
                "invoices",
                CollectionOptions::new().schema(
                    strata::policy::SchemaOptions::json(old)
                        .strategy(strata::policy::additive_only()),
                ),
            )
            .unwrap();
        let docs: Vec<(String, Value)> = (0..INVOICES)
            .map(|i| {
                let id = format!("inv{i:05}");
                let doc = json!({"id": id, "total": i as f64 + 0.5});
                (id, doc)
            })
            .collect();
        invoices
            .put_many(docs.iter().map(|(k, v)| (k.as_str(), v)))
            .unwrap();
        drop(d);
        store.flush().unwrap();
    }
    let named = backend.named(&path);
    let cutover = || {
        let mut cmd = Command::new(bank_admin());
        cmd.arg("--db").arg(&named).arg("cutover");
        cmd
    };
    let mut interrupted = 0;
    for (round, batches) in [1usize, 3, 5].into_iter().enumerate() {
        let what = format!("{backend:?} round {round} ({batches} batches)");
        if !kill_after(cutover(), "records rewritten", batches) {
            println!("{what}: the cutover finished before the kill");
            break;
        }
        let moved = invoices_checked(backend, &path, &what);
        let store = backend.read(&path);
        let fence = strata::policy::Fence::read(&store).unwrap();
        drop(store);
        println!(
            "{what}: {moved} of {INVOICES} transformed, fence {:?}",
            fence.state
        );
        if fence.state.as_str() != "normal" || !fence.pending.is_empty() {
            interrupted += 1;
            assert_verdict(&path, 9, "unfinished_cutover", "cutover", &[], &[], &what);
        } else if moved == INVOICES {
            // The cutover completed as the signal was sent.
            println!("{what}: the cutover completed before the kill landed");
            break;
        } else {
            assert_eq!(moved, 0, "{what}: transformed without a cutover");
        }
    }
    resumes_and_all_say_ok(
        backend,
        &path,
        interrupted,
        "a cutover pending",
        cutover(),
        invoices_checked,
        INVOICES,
    );
}

#[test]
fn a_killed_cutover_on_redb_is_unfinished_and_resumes_with_every_invoice_moved_once() {
    cutover_kill(Backend::Redb);
}

#[test]
fn a_killed_cutover_on_sled_is_unfinished_and_resumes_with_every_invoice_moved_once() {
    cutover_kill(Backend::Sled);
}
