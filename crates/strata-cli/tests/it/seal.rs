//! The CLI over sealed collections (issue 15): `verify` authenticates every sealed record
//! with the key and says plainly when it checked envelopes only; `inspect` shows headers
//! always and bodies only with the key; `keys rotate` re-encrypts under a new data key;
//! `copy` copies ciphertext as is. The key comes from `--passphrase-env VAR` or
//! `--key-file PATH`, never from the command line.

use crate::support::strata_env;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Output;
use strata::layout::envelope::ENVELOPE_HEADER_LEN;
use strata::seal::{body_key_id, Credential, KdfParams};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

const MARKER: &str = "SECRET-CLI-MARKER-7f2a";
const PASSPHRASE: &str = "cli test passphrase";

#[derive(Debug, Serialize, Deserialize)]
struct Acct {
    id: String,
    note: String,
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A sled store with a sealed collection `accounts` (12 docs) and a clear one `notes`.
fn seed(path: &Path) {
    let store = strata_sled::SledStore::open_store(path).unwrap();
    let db = seal_accounts(&store, (0..12).map(|i| format!("a{i:02}")));
    let n = db
        .collection::<Acct>("notes", CollectionOptions::new())
        .unwrap();
    n.put(
        "n1",
        &Acct {
            id: "n1".into(),
            note: "clear".into(),
        },
    )
    .unwrap();
    store.flush().unwrap();
}

/// Opens `store` with the passphrase and puts one sealed `accounts` document per id, its
/// note the marker and its position.
fn seal_accounts(store: &Store, ids: impl Iterator<Item = String>) -> Database {
    let db = Database::builder(store.clone())
        .key(Credential::passphrase(PASSPHRASE).with_kdf(KdfParams::insecure_fast()))
        .open()
        .unwrap();
    let c = db
        .collection::<Acct>("accounts", CollectionOptions::new().sealed())
        .unwrap();
    for (i, id) in ids.enumerate() {
        c.put(
            &id,
            &Acct {
                id: id.clone(),
                note: format!("{MARKER} {i}"),
            },
        )
        .unwrap();
    }
    db
}

fn dump(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .scan(b"", None, ScanLimits::new(usize::MAX, 1 << 30).unwrap())
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}

const KEY_ENV: (&str, &str) = ("STRATA_TEST_PASSPHRASE", PASSPHRASE);

/// Runs `strata <args> --passphrase-env STRATA_TEST_PASSPHRASE` with the right passphrase.
fn with_key(args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--passphrase-env", KEY_ENV.0]);
    strata_env(&all, &[KEY_ENV])
}

#[test]
fn verify_authenticates_with_the_key_and_says_so_without() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    seed(&db);
    let db_s = db.to_str().unwrap();

    let out = strata_env(&["verify", "--db", db_s], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("12 checked by their envelope only, NOT authenticated"),
        "{stdout}"
    );
    assert!(stdout.contains("envelope checked only"), "{stdout}");

    let out = with_key(&["verify", "--db", db_s]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("sealed records: 12 of 12 authenticated with the key"),
        "{stdout}"
    );
    assert!(!stdout.contains(MARKER));

    // JSON says which check ran.
    let out = with_key(&["verify", "--db", db_s, "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["sealed"]["authenticated_with_key"], true);
    assert_eq!(doc["sealed"]["collections"][0]["authenticated"], 12);

    // A wrong passphrase: one clear error, exit 1, before any record is read.
    let out = strata_env(
        &["verify", "--db", db_s, "--passphrase-env", "WRONG"],
        &[("WRONG", "not it")],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("wrong key for the database"), "{stderr}");
    assert!(
        !stderr.contains("not it"),
        "the passphrase leaked: {stderr}"
    );
    // An unset variable names the variable.
    let out = strata_env(
        &["verify", "--db", db_s, "--passphrase-env", "UNSET_VAR_X"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("`UNSET_VAR_X`"));

    // A tampered body: the envelope check passes, authentication does not.
    {
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        let k = b"__nx/doc/accounts/a05".to_vec();
        let mut v = store.get(&k).unwrap().unwrap();
        let last = v.len() - 1;
        v[last] ^= 0x40;
        store.apply(Batch::new().set(k, v)).unwrap();
        store.flush().unwrap();
    }
    let out = strata_env(&["verify", "--db", db_s], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).0);
    let out = with_key(&["verify", "--db", db_s]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("1 sealed record(s) failed authentication")
            && stderr.contains("__nx/doc/accounts/a05"),
        "{stderr}"
    );
    // Under --json the document's verdict says so too (not "ok" beside exit 1).
    let out = with_key(&["verify", "--db", db_s, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<serde_json::Value>()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(doc["verdict"], "failed", "{stdout}");
    assert_eq!(doc["sealed"]["collections"][0]["failed"], 1, "{stdout}");
}

#[test]
fn inspect_shows_the_header_always_and_the_body_only_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    seed(&db);
    let db_s = db.to_str().unwrap();
    let out = strata_env(&["inspect", "accounts", "--db", db_s, "--limit", "3"], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("a00  payload v1  lock 1  sealed (body not shown"),
        "{stdout}"
    );
    assert!(!stdout.contains(MARKER), "{stdout}");

    let key_file = dir.path().join("wrong.key");
    std::fs::write(&key_file, "00".repeat(32)).unwrap();
    let out = strata_env(
        &[
            "inspect",
            "accounts",
            "--db",
            db_s,
            "--key-file",
            key_file.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("wrong key"), "{}", text(&out).1);

    let out = with_key(&[
        "inspect", "accounts", "--db", db_s, "--limit", "3", "--json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["records"][0]["document"]["note"], format!("{MARKER} 0"));
    assert_eq!(doc["records"][0]["payload_version"], 1);
}

#[test]
fn keys_rotate_reencrypts_and_copy_keeps_ciphertext_as_is() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    seed(&db);
    let db_s = db.to_str().unwrap();

    let out = strata_env(&["keys", "rotate", "--db", db_s], &[]);
    assert_eq!(out.status.code(), Some(2), "no key: usage error");
    let out = with_key(&["keys", "rotate", "--db", db_s]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("accounts") && stdout.contains("12 re-sealed"),
        "{stdout}"
    );
    assert!(stdout.contains("key 1 was removed"), "{stdout}");

    let out = strata_env(&["keys", "status", "--db", db_s, "--json"], &[]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["keyring"]["active_key_id"], 2);
    assert_eq!(doc["keyring"]["retiring_key_id"], serde_json::Value::Null);
    assert_eq!(
        doc["keyring"]["entries"][0]["key_ids"],
        serde_json::json!([2])
    );
    {
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        for (k, v) in dump(&store) {
            if k.starts_with(b"__nx/doc/accounts/") {
                assert_eq!(body_key_id(&v[ENVELOPE_HEADER_LEN..]), Some(2));
            }
        }
    }

    // `copy` to redb: every byte as is, and the copy opens with the same passphrase.
    let to = dir.path().join("copy.redb");
    let out = strata_env(&["copy", "--from", db_s, "--to", to.to_str().unwrap()], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out).0,
        text(&out).1
    );
    let a = strata_sled::SledStore::open_store(&db).unwrap();
    let b = Store::new(strata_redb::RedbStore::open_existing(&to).unwrap());
    let strip = |v: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<(Vec<u8>, Vec<u8>)> {
        v.into_iter()
            .filter(|(k, _)| !k.starts_with(b"__nx/copy/"))
            .collect()
    };
    let (da, db_) = (strip(dump(&a)), strip(dump(&b)));
    assert_eq!(da, db_, "ciphertext and keyring copied byte for byte");
    assert!(!db_
        .iter()
        .any(|(_, v)| v.windows(MARKER.len()).any(|w| w == MARKER.as_bytes())));
    drop((a, b));
    let out = with_key(&["verify", "--db", to.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("12 of 12 authenticated with the key"),
        "{stdout}"
    );
}

/// A wrong passphrase is one typed error before anything is read or written, for every
/// command that takes a key: on a redb store the file keeps its bytes and its mtime (even
/// `keys rotate`, which opens the store for writing only once the key is checked).
#[test]
fn a_wrong_passphrase_leaves_a_redb_store_byte_for_byte_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sealed.redb");
    {
        let store = Store::new(strata_redb::RedbStore::create(&path).unwrap());
        seal_accounts(&store, (0..3).map(|i| format!("a{i}")));
    }
    let db_s = path.to_str().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    for args in [
        vec!["keys", "rotate"],
        vec!["verify"],
        vec!["inspect", "accounts"],
        vec!["verify", "--json"],
    ] {
        let mut all = vec!["--db", db_s];
        all.extend(args.iter().copied());
        all.extend(["--passphrase-env", "WRONG"]);
        let out = strata_env(&all, &[("WRONG", "not it")]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stdout}{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("wrong key for the database"), "{stderr}");
        assert!(!stdout.contains(MARKER) && !stderr.contains(MARKER));
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{args:?} changed it");
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            mtime,
            "{args:?} touched it"
        );
    }
}

/// `collections` reads the payload versions of sealed rows from their clear headers,
/// without the key: the histogram counts them by version, not as unreadable.
#[test]
fn collections_counts_sealed_rows_by_version_without_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    seed(&db);
    let db_s = db.to_str().unwrap();
    let out = strata_env(&["collections", "--db", db_s, "--json"], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let accounts = doc["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["collection"] == "accounts")
        .unwrap_or_else(|| panic!("{doc}"))
        .clone();
    assert_eq!(accounts["rows"], 12, "{accounts}");
    assert_eq!(accounts["unreadable"], 0, "{accounts}");
    assert_eq!(accounts["newest_version"], 1, "{accounts}");
    let out = strata_env(&["collections", "--db", db_s], &[]);
    let (stdout, _) = text(&out);
    assert!(!stdout.contains("unreadable"), "{stdout}");
}

/// `--passphrase-env` uses the variable exactly as the application's
/// `Credential::passphrase(std::env::var(..))` does: a passphrase ending in a newline that
/// sealed the store opens it from the CLI, and the same text without the newline does not.
#[test]
fn a_passphrase_variable_is_used_exactly_as_the_library_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let store = strata_sled::SledStore::open_store(&db).unwrap();
        let cred = Credential::passphrase("with newline\n").with_kdf(KdfParams::insecure_fast());
        let d = Database::builder(store.clone()).key(cred).open().unwrap();
        let c = d
            .collection::<Acct>("accounts", CollectionOptions::new().sealed())
            .unwrap();
        c.put(
            "a1",
            &Acct {
                id: "a1".into(),
                note: MARKER.into(),
            },
        )
        .unwrap();
        store.flush().unwrap();
    }
    let db_s = db.to_str().unwrap();
    let exact = strata_env(
        &["verify", "--db", db_s, "--passphrase-env", "P"],
        &[("P", "with newline\n")],
    );
    let (stdout, stderr) = text(&exact);
    assert_eq!(exact.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("1 of 1 authenticated"), "{stdout}");
    let trimmed = strata_env(
        &["verify", "--db", db_s, "--passphrase-env", "P"],
        &[("P", "with newline")],
    );
    assert_eq!(trimmed.status.code(), Some(1));
    assert!(
        text(&trimmed).1.contains("wrong key"),
        "{}",
        text(&trimmed).1
    );
}

/// `keys status` lists which collections are sealed (no key needed): the sealed one and
/// not the clear one; a database sealed as a whole says so, empty collections included.
#[test]
fn keys_status_lists_the_sealed_collections() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    seed(&db);
    let db_s = db.to_str().unwrap();
    let out = strata_env(&["keys", "status", "--db", db_s], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("sealed            accounts\n"), "{stdout}");
    let out = strata_env(&["keys", "status", "--db", db_s, "--json"], &[]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["sealed"]["collections"],
        serde_json::json!(["accounts"])
    );
    assert_eq!(doc["sealed"]["every_collection"], false);

    let whole = dir.path().join("whole");
    {
        let store = strata_sled::SledStore::open_store(&whole).unwrap();
        let cred = Credential::passphrase(PASSPHRASE).with_kdf(KdfParams::insecure_fast());
        let d = Database::builder(store.clone())
            .key(cred)
            .sealed()
            .open()
            .unwrap();
        d.collection::<Acct>("empty", CollectionOptions::new())
            .unwrap();
        store.flush().unwrap();
    }
    let out = strata_env(&["keys", "status", "--db", whole.to_str().unwrap()], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("sealed            every collection"),
        "{stdout}"
    );
}
