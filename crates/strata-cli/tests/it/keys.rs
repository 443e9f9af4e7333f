//! The CLI over a damaged keyring (issue 15 audit): a keyring deleted while sealed
//! records remain, or one that no longer decodes, is corrupt metadata — `verify` and
//! `keys status` say so with exit 4 (DESIGN §5) instead of "every record ok" or "nothing
//! is sealed", and nothing is written. An error document printed under `--json` to a
//! reader that went away does not crash the command.

use crate::support::{stderr, strata_db_env, strata_env};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use strata::seal::{Credential, KdfParams, DATABASE_KEYRING_KEY};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvWrite, Store};

const PASSPHRASE: &str = "audit15 cli passphrase";
const KEY_ENV: (&str, &str) = ("STRATA_AUDIT15_PASSPHRASE", PASSPHRASE);

#[derive(Debug, Serialize, Deserialize)]
struct Acct {
    id: String,
    note: String,
}

fn strata(args: &[&str]) -> Output {
    strata_env(args, &[KEY_ENV])
}

/// A redb store with three sealed `accounts` documents and one clear `notes` document.
/// The store at `path`: a sled directory when the name ends in `.sled`, else a redb file.
fn open(path: &Path, create: bool) -> Store {
    if path.extension().is_some_and(|e| e == "sled") {
        return strata_sled::SledStore::open_store(path).unwrap();
    }
    match create {
        true => Store::new(strata_redb::RedbStore::create(path).unwrap()),
        false => Store::new(strata_redb::RedbStore::open_existing(path).unwrap()),
    }
}

/// Every file under `path` (or the file itself) with its bytes and mtime.
fn files(path: &Path) -> Vec<(std::path::PathBuf, Vec<u8>, std::time::SystemTime)> {
    let meta = std::fs::metadata(path).unwrap();
    if meta.is_file() {
        return vec![(
            path.to_path_buf(),
            std::fs::read(path).unwrap(),
            meta.modified().unwrap(),
        )];
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).unwrap() {
        out.extend(files(&entry.unwrap().path()));
    }
    out.sort();
    out
}

fn seed(path: &Path) {
    let store = open(path, true);
    let db = Database::builder(store.clone())
        .key(Credential::passphrase(PASSPHRASE).with_kdf(KdfParams::insecure_fast()))
        .open()
        .unwrap();
    let c = db
        .collection::<Acct>("accounts", CollectionOptions::new().sealed())
        .unwrap();
    for id in ["a1", "a2", "a3"] {
        c.put(
            id,
            &Acct {
                id: id.into(),
                note: "secret".into(),
            },
        )
        .unwrap();
    }
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

fn set_keyring(path: &Path, value: Option<&[u8]>) {
    let store = open(path, false);
    let batch = match value {
        Some(v) => Batch::new().set(DATABASE_KEYRING_KEY.to_vec(), v.to_vec()),
        None => Batch::new().delete(DATABASE_KEYRING_KEY.to_vec()),
    };
    store.apply(batch).unwrap();
    store.flush().unwrap();
}

/// Runs each command and checks its exit code, that its output contains `needle`, and that
/// the file is byte-for-byte unchanged.
fn expect(path: &Path, runs: &[(&[&str], i32, &str)]) {
    let db = path.to_str().unwrap();
    for (args, code, needle) in runs {
        let before = files(path);
        let mut all = vec!["--db", db];
        all.extend_from_slice(args);
        let out = strata(&all);
        // `verify` prints metadata problems on stdout (as `status`), errors on stderr.
        let err = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(files(path) == before, "{args:?} wrote");
    }
}

#[test]
fn a_deleted_keyring_over_sealed_records_is_corrupt_metadata_not_an_unsealed_store() {
    for name in ["bank.redb", "bank.sled"] {
        deleted_keyring(name);
    }
}

fn deleted_keyring(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    seed(&path);
    set_keyring(&path, None);
    let missing = "no keyring at `__nx/keys/database`, but record `__nx/doc/accounts/a1` is sealed";
    expect(
        &path,
        &[
            (&["keys", "status"], 4, missing),
            (&["verify"], 4, missing),
            (&["verify", "--passphrase-env", KEY_ENV.0], 4, missing),
            (
                &["inspect", "accounts", "--passphrase-env", KEY_ENV.0],
                4,
                missing,
            ),
            (
                &["keys", "rotate", "--passphrase-env", KEY_ENV.0],
                4,
                missing,
            ),
        ],
    );
    // `keys status` never claims "nothing is sealed" here.
    let out = strata(&["--db", path.to_str().unwrap(), "keys", "status"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("nothing"));
}

/// Sealed records without their keyring on the target of an unfinished copy: the copy
/// (which brings `__nx/doc/…` before `__nx/keys/database`) may not have reached the
/// keyring yet, so `keys status` says so (exit 7, how to resume it), not corrupt
/// metadata (4).
#[test]
fn sealed_records_an_unfinished_copy_has_not_brought_the_keyring_of_yet() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank.redb");
    seed(&path);
    set_keyring(&path, None);
    {
        let store = open(&path, false);
        store
            .apply(Batch::new().set(
                b"__nx/copy/progress".to_vec(),
                br#"{"format":1,"from":"source.redb","cursor":"","copied":4}"#.to_vec(),
            ))
            .unwrap();
        store.flush().unwrap();
    }
    expect(
        &path,
        &[
            (
                &["keys", "status"],
                7,
                "no keyring at `__nx/keys/database`, but record `__nx/doc/accounts/a1` is sealed",
            ),
            (
                &["keys", "status"],
                7,
                "target of a `strata copy` from `source.redb`",
            ),
            (
                &["keys", "status"],
                7,
                "which may not have reached the keyring; resume it (rerun `strata copy --from source.redb",
            ),
        ],
    );
}

#[test]
fn a_store_without_sealed_records_has_no_keyring_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.redb");
    {
        let store = Store::new(strata_redb::RedbStore::create(&path).unwrap());
        let db = Database::builder(store.clone()).open().unwrap();
        db.collection::<Acct>("notes", CollectionOptions::new())
            .unwrap()
            .put(
                "n1",
                &Acct {
                    id: "n1".into(),
                    note: "clear".into(),
                },
            )
            .unwrap();
        store.flush().unwrap();
    }
    let out = strata(&["--db", path.to_str().unwrap(), "keys", "status"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no database keyring"));
    let out = strata(&["--db", path.to_str().unwrap(), "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The keyring changes have nothing to change: said in the CLI's terms (how a database
    // gets sealed), not as the library's `Keyring::create`, and nothing is written.
    let before = files(&path);
    let env = [KEY_ENV, ("STRATA_NEW_KEY", "another secret")];
    for (command, args) in [
        (
            "add",
            &[
                "keys",
                "add",
                "laptop",
                "--new-passphrase-env",
                "STRATA_NEW_KEY",
                "--passphrase-env",
                KEY_ENV.0,
            ][..],
        ),
        (
            "rewrap",
            &[
                "keys",
                "rewrap",
                "--new-passphrase-env",
                "STRATA_NEW_KEY",
                "--passphrase-env",
                KEY_ENV.0,
            ],
        ),
        (
            "remove",
            &["keys", "remove", "laptop", "--passphrase-env", KEY_ENV.0],
        ),
        ("rotate", &["keys", "rotate", "--passphrase-env", KEY_ENV.0]),
    ] {
        let out = run_env(&path, args, &env);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "`strata keys {command}` refused, nothing was written: "
            )) && err.contains(
                "has no database keyring `__nx/keys/database`, so nothing in it is sealed"
            ) && err.contains("Database::builder(store).key(credential)")
                && !err.contains("Keyring::create"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        files(&path),
        before,
        "a refused keys command wrote the store"
    );
}

#[test]
fn a_keyring_that_does_not_decode_fails_verify_with_exit_4_with_or_without_the_key() {
    for name in ["bank.redb", "bank.sled"] {
        undecodable_keyring(name);
    }
}

fn undecodable_keyring(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    seed(&path);
    set_keyring(&path, Some(b"NXKR\x01\0\0"));
    let corrupt = "keyring `__nx/keys/database` is corrupted";
    expect(
        &path,
        &[
            (&["verify"], 4, corrupt),
            (&["verify", "--passphrase-env", KEY_ENV.0], 4, corrupt),
            (&["keys", "status"], 4, corrupt),
            (
                &["inspect", "accounts", "--passphrase-env", KEY_ENV.0],
                4,
                corrupt,
            ),
        ],
    );
    // Without the key, verify says why and that no record was scanned.
    let out = strata(&["--db", path.to_str().unwrap(), "verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(corrupt), "{stdout}");
    assert!(!stdout.contains("records ok"), "{stdout}");
}

/// `strata verify --json --passphrase-env WRONG | head -0`: the error document meets a
/// closed pipe; the command still exits with its code (1), without a panic.
#[test]
fn an_error_document_written_to_a_closed_pipe_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank.redb");
    seed(&path);
    // The reader is closed before the command starts: every write to stdout fails.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "--db",
            path.to_str().unwrap(),
            "verify",
            "--json",
            "--passphrase-env",
            "STRATA_AUDIT15_WRONG",
        ])
        .env("STRATA_AUDIT15_WRONG", "not the passphrase")
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("wrong key for the database"), "{err}");
}

fn run_env(path: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    strata_db_env(path, args, env)
}

/// `keys add|rewrap|remove`: a second passphrase and a raw key open the database; a
/// re-wrap makes the old passphrase fail with the typed error and the new one work; the
/// last entry is never removed; a wrong current key, an unset or empty new passphrase,
/// a bad label or a duplicate one change nothing.
#[test]
fn keys_add_rewrap_and_remove_manage_the_wrapping_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank.redb");
    seed(&path);
    let key_file = dir.path().join("kms.key");
    std::fs::write(&key_file, "ab".repeat(32)).unwrap();
    let kf = key_file.to_str().unwrap();
    let env = [
        KEY_ENV,
        ("AUDIT15_P2", "second passphrase"),
        ("AUDIT15_P3", "third passphrase"),
        ("AUDIT15_WRONG", "wrong"),
        ("AUDIT15_EMPTY", ""),
    ];
    let ok = |args: &[&str]| {
        let out = run_env(&path, args, &env);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let fails = |args: &[&str], code: i32, needle: &str| {
        let before = std::fs::read(&path).unwrap();
        let out = run_env(&path, args, &env);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("second passphrase"), "{err}");
        assert!(std::fs::read(&path).unwrap() == before, "{args:?} wrote");
    };
    let opens =
        |flag: &str, value: &str| run_env(&path, &["verify", flag, value], &env).status.code();

    ok(&[
        "keys",
        "add",
        "backup",
        "--new-passphrase-env",
        "AUDIT15_P2",
        "--passphrase-env",
        KEY_ENV.0,
    ]);
    ok(&[
        "keys",
        "add",
        "kms",
        "--new-key-file",
        kf,
        "--passphrase-env",
        "AUDIT15_P2",
    ]);
    let status = ok(&["keys", "status"]);
    for label in ["`primary`", "`backup`", "`kms`"] {
        assert!(status.contains(label), "{status}");
    }
    assert_eq!(opens("--passphrase-env", "AUDIT15_P2"), Some(0));
    assert_eq!(opens("--key-file", kf), Some(0));

    let wrong = "wrong key for the database";
    fails(
        &[
            "keys",
            "add",
            "x",
            "--new-passphrase-env",
            "AUDIT15_P3",
            "--passphrase-env",
            "AUDIT15_WRONG",
        ],
        1,
        wrong,
    );
    fails(
        &[
            "keys",
            "add",
            "x",
            "--new-passphrase-env",
            "AUDIT15_EMPTY",
            "--passphrase-env",
            KEY_ENV.0,
        ],
        1,
        "`--new-passphrase-env`) is empty",
    );
    fails(
        &[
            "keys",
            "add",
            "x",
            "--new-passphrase-env",
            "AUDIT15_UNSET",
            "--passphrase-env",
            KEY_ENV.0,
        ],
        1,
        "`AUDIT15_UNSET`",
    );
    fails(
        &[
            "keys",
            "add",
            "bad label",
            "--new-passphrase-env",
            "AUDIT15_P3",
            "--passphrase-env",
            KEY_ENV.0,
        ],
        1,
        "invalid keyring entry label",
    );
    fails(
        &[
            "keys",
            "add",
            "backup",
            "--new-passphrase-env",
            "AUDIT15_P3",
            "--passphrase-env",
            KEY_ENV.0,
        ],
        1,
        "already has an entry labelled `backup`",
    );
    fails(
        &["keys", "add", "x", "--new-passphrase-env", "AUDIT15_P3"],
        2,
        "needs a current key",
    );
    fails(
        &[
            "keys",
            "rewrap",
            "--new-passphrase-env",
            "AUDIT15_P3",
            "--passphrase-env",
            "AUDIT15_WRONG",
        ],
        1,
        wrong,
    );
    fails(
        &["keys", "remove", "kms", "--passphrase-env", "AUDIT15_WRONG"],
        1,
        wrong,
    );

    // A key file of the wrong length, or missing: named, nothing written.
    let short = dir.path().join("short.key");
    std::fs::write(&short, [1u8; 31]).unwrap();
    let short = short.to_str().unwrap();
    let neither = "holds neither 32 raw bytes nor 64 hex digits";
    fails(
        &[
            "keys",
            "add",
            "x",
            "--new-key-file",
            short,
            "--passphrase-env",
            KEY_ENV.0,
        ],
        1,
        neither,
    );
    fails(&["keys", "remove", "kms", "--key-file", short], 1, neither);
    fails(&["verify", "--key-file", short], 1, neither);
    fails(
        &["inspect", "accounts", "--key-file", "/nonexistent/kms.key"],
        1,
        "cannot read key file",
    );

    // Starting a rotation needs a credential for every entry: refused without a write.
    fails(
        &["keys", "rotate", "--passphrase-env", KEY_ENV.0],
        1,
        "needs a credential for every entry; none given opens backup, kms",
    );

    // Re-wrap `primary` under P3: the old passphrase fails with the typed error.
    ok(&[
        "keys",
        "rewrap",
        "--new-passphrase-env",
        "AUDIT15_P3",
        "--passphrase-env",
        KEY_ENV.0,
    ]);
    let out = run_env(&path, &["verify", "--passphrase-env", KEY_ENV.0], &env);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(wrong), "{}", stderr(&out));
    assert_eq!(opens("--passphrase-env", "AUDIT15_P3"), Some(0));

    ok(&["keys", "remove", "backup", "--passphrase-env", "AUDIT15_P3"]);
    ok(&["keys", "remove", "kms", "--key-file", kf]);
    assert_eq!(opens("--passphrase-env", "AUDIT15_P2"), Some(1));
    fails(
        &[
            "keys",
            "remove",
            "primary",
            "--passphrase-env",
            "AUDIT15_P3",
        ],
        1,
        "the last entry",
    );
    fails(
        &["keys", "remove", "nosuch", "--passphrase-env", "AUDIT15_P3"],
        1,
        "no entry labelled `nosuch`",
    );
    let status = ok(&["keys", "status"]);
    assert!(
        status.contains("`primary`") && !status.contains("`backup`"),
        "{status}"
    );
}

/// Key material never reaches the logs: every keyed command run with `STRATA_LOG=trace`
/// (and `RUST_LOG=trace`) prints neither the passphrase nor the raw key, in hex or as the
/// byte list `Debug` would show.
#[test]
fn trace_logs_never_show_the_passphrase_or_the_raw_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank.sled");
    seed(&path);
    let raw = [0xa7u8; 32];
    let key_file = dir.path().join("kms.key");
    std::fs::write(&key_file, hex::encode(raw)).unwrap();
    let kf = key_file.to_str().unwrap();
    let new_pass = ("AUDIT15_NEW", "a-brand-new-passphrase-9f1c");
    let env = [
        KEY_ENV,
        new_pass,
        ("STRATA_LOG", "trace"),
        ("RUST_LOG", "trace"),
    ];
    let forbidden = [
        PASSPHRASE.to_string(),
        new_pass.1.to_string(),
        hex::encode(raw),
        hex::encode_upper(raw),
        format!("{:?}", raw.to_vec()),
        format!("{raw:?}"),
    ];
    let runs: [(&[&str], i32); 7] = [
        (
            &[
                "keys",
                "add",
                "kms",
                "--new-key-file",
                kf,
                "--passphrase-env",
                KEY_ENV.0,
            ],
            0,
        ),
        (&["verify", "--passphrase-env", KEY_ENV.0], 0),
        (&["inspect", "accounts", "--key-file", kf], 0),
        (&["verify", "--passphrase-env", "STRATA_AUDIT15_UNSET"], 1),
        (
            &[
                "keys",
                "rotate",
                "--passphrase-env",
                KEY_ENV.0,
                "--key-file",
                kf,
            ],
            0,
        ),
        (
            &[
                "keys",
                "rewrap",
                "--new-passphrase-env",
                new_pass.0,
                "--passphrase-env",
                KEY_ENV.0,
            ],
            0,
        ),
        (&["keys", "status"], 0),
    ];
    let mut logged = 0;
    for (args, code) in runs {
        let out = run_env(&path, args, &env);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        logged += all
            .lines()
            .filter(|l| l.contains("TRACE") || l.contains("DEBUG"))
            .count();
        for secret in &forbidden {
            assert!(
                !all.contains(secret.as_str()),
                "{args:?} printed key material"
            );
        }
    }
    // The logs were on: the check saw real trace output.
    assert!(
        logged > 0,
        "no trace output: the logging assumption of this test is wrong"
    );
}
