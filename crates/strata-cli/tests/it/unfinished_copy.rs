//! Unfinished work is visible everywhere (#23 item 3): a `strata copy` killed part-way
//! (a real child process, SIGKILL after a random number of batches) leaves a target that
//! `status`, `verify` and `collections` report as `unfinished_copy` with exit 7 (and that
//! `inspect`, `fence` and `keys status` flag the same way after what they show), and that
//! `migrate` refuses (exit 7, not one byte written) — before #23, status said it needed
//! `strata migrate`, migrate certified the partial collection and verify then vouched for
//! it. Resuming the copy makes it a whole, healthy store.

use crate::support::{acc_documents, json_of, stderr, stdout, strata, strata_db};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvWrite};

const DOCS: u32 = 6_000;

/// A redb store with the collection `acc` of 6,000 documents.
fn source(path: &Path) {
    let store = strata_redb::RedbStore::create_store(path).unwrap();
    acc_documents(&store, DOCS, |_, id| json!({"id": id}));
    store.flush().unwrap();
}

/// Runs `strata copy` and SIGKILLs it after `batches` batches; true when it was killed
/// before it finished.
fn killed_copy(from: &str, to: &str, batches: usize) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["copy", "--from", from, "--to", to, "--max-records", "250"])
        .env("STRATA_PROGRESS", "batch")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let mut seen = 0;
    for line in BufReader::new(err).lines() {
        if line.unwrap().ends_with("records copied") {
            seen += 1;
            if seen == batches {
                child.kill().unwrap();
                break;
            }
        }
    }
    !child.wait().unwrap().success()
}

/// Makes `store` look like the target of a copy that stopped after two records: one
/// empty collection `collection` and the copy's progress record (then closes it).
fn stopped_copy_target(store: strata_store::Store, collection: &str) {
    Database::builder(store.clone())
        .open()
        .unwrap()
        .collection::<Value>(collection, CollectionOptions::new())
        .unwrap();
    let progress = json!({"from": "source.redb", "copied": 2});
    store
        .apply(Batch::new().set(
            b"__nx/copy/progress".to_vec(),
            serde_json::to_vec(&progress).unwrap(),
        ))
        .unwrap();
    store.flush().unwrap();
}

fn bytes_and_mtime(p: &Path) -> (Vec<u8>, std::time::SystemTime) {
    (
        std::fs::read(p).unwrap(),
        std::fs::metadata(p).unwrap().modified().unwrap(),
    )
}

#[test]
fn a_killed_copy_is_unfinished_for_status_verify_collections_and_migrate_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("source.redb");
    source(&from);
    let from_s = from.to_str().unwrap();
    let mut checked = 0;
    for (round, batches) in [1usize, 4, 9, 17].into_iter().enumerate() {
        let to = dir.path().join(format!("target-{round}.redb"));
        let to_s = to.to_str().unwrap();
        if !killed_copy(from_s, to_s, batches) {
            println!("round {round}: the copy finished before the kill landed");
            continue;
        }
        checked += 1;
        let what = format!("killed after {batches} batches");
        // A redb file its writer was killed in needs redb's crash recovery, which only a
        // writable open does (documented: the first read-only command runs it; no record
        // changes). From then on nothing writes a byte.
        let out = strata_db(&to, &["status"]);
        assert_eq!(out.status.code(), Some(7), "{what}: {}", stderr(&out));
        let before = bytes_and_mtime(&to);
        for args in [
            &["status"][..],
            &["verify"],
            &["collections"],
            &["inspect", "acc"],
            &["fence"],
            &["keys", "status"],
        ] {
            let out = strata_db(&to, args);
            assert_eq!(
                out.status.code(),
                Some(7),
                "{what} {args:?}: {}{}",
                stdout(&out),
                stderr(&out)
            );
            let text = stdout(&out);
            assert!(
                text.contains("unfinished copy")
                    && text.contains(from_s)
                    && text.contains("resume"),
                "{what} {args:?}: {text}"
            );
            assert!(
                !text.contains("run `strata migrate`"),
                "{what} {args:?}: {text}"
            );
            let mut json_args = args.to_vec();
            json_args.push("--json");
            let out = strata_db(&to, &json_args);
            assert_eq!(out.status.code(), Some(7), "{what} {json_args:?}");
            let doc = json_of(&out);
            assert_eq!(
                doc["verdict"], "unfinished_copy",
                "{what} {json_args:?}: {doc}"
            );
            assert_eq!(doc["unfinished"][0]["operation"], "copy", "{what}: {doc}");
        }
        for args in [&["migrate"][..], &["migrate", "--dry-run"]] {
            let out = strata_db(&to, args);
            assert_eq!(
                out.status.code(),
                Some(7),
                "{what} {args:?}: {}",
                stderr(&out)
            );
            let err = stderr(&out);
            // One sentence without nested parentheses: what was refused, that nothing was
            // written, why (the copy, its source and progress record) and the way forward.
            let expected = format!(
                "`strata migrate` refused, nothing was written: this store is the target of a `strata copy` from `{from_s}` that stopped after "
            );
            assert!(err.contains(&expected), "{what}: {err}");
            assert!(
                err.contains(
                    "records (its progress record `__nx/copy/progress` is here), so it holds only part of its source; "
                ) && err.contains(&format!(
                    "; resume it (rerun `strata copy --from {from_s} --to {to_s}`) or delete this store; no command certifies, migrates or changes it until then"
                )),
                "{what}: {err}"
            );
            assert!(!err.contains("(resume it (rerun"), "{what}: {err}");
        }
        assert_eq!(
            bytes_and_mtime(&to),
            before,
            "{what}: a command wrote the target"
        );
        // The way forward: resume the copy.
        let out = strata(&["copy", "--from", from_s, "--to", to_s, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
        assert!(json_of(&out)["records"].as_u64().unwrap() > u64::from(DOCS));
        for args in [
            &["status"][..],
            &["verify"],
            &["collections"],
            &["inspect", "acc"],
            &["fence"],
            &["keys", "status"],
        ] {
            let out = strata_db(&to, args);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{what} after resuming {args:?}: {}",
                stderr(&out)
            );
        }
    }
    assert!(
        checked >= 2,
        "only {checked} copies were killed before they finished"
    );
}

/// `schema show` (and `schema log`) of a collection whose schema an unfinished copy has
/// not brought yet says the store is an unfinished copy and how to resume it (exit 7),
/// not that the collection was never opened with a schema.
#[test]
fn a_schema_an_unfinished_copy_has_not_brought_yet_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("target.redb");
    stopped_copy_target(strata_redb::RedbStore::create_store(&to).unwrap(), "acc");
    for args in [&["schema", "show", "acc"][..], &["schema", "log", "acc"]] {
        let out = strata_db(&to, args);
        assert_eq!(out.status.code(), Some(7), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("target of a `strata copy` from `source.redb`"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("rerun `strata copy --from source.redb")
                && !err.contains("never opened with a schema"),
            "{args:?}: {err}"
        );
    }
}

/// A killed copy resumes when its source is named another way than the first run named
/// it: an absolute path, a `redb:` prefix, from another working directory (the progress
/// record keeps the source's identity, not only its spelling); another source is still
/// refused.
#[test]
fn a_killed_copy_resumes_with_its_source_named_another_way() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("source.redb");
    source(&from);
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .current_dir(dir.path())
        .args(["copy", "--from", "source.redb", "--to", "target.redb"])
        .args(["--max-records", "250"])
        .env("STRATA_PROGRESS", "batch")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    for line in BufReader::new(err).lines() {
        if line.unwrap().ends_with("records copied") {
            child.kill().unwrap();
            break;
        }
    }
    assert!(!child.wait().unwrap().success(), "the copy finished first");
    let to = dir.path().join("target.redb");
    let out = strata_db(&to, &["status"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    // Another source is refused, naming the one the copy started from.
    let other = dir.path().join("other.redb");
    source(&other);
    let out = strata(&[
        "copy",
        "--from",
        other.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds an unfinished copy from `source.redb`"));
    // The same source, spelled as an absolute path with a `redb:` prefix, from this
    // process's working directory: resumed.
    let out = strata(&[
        "copy",
        "--from",
        &format!("redb:{}", from.display()),
        "--to",
        to.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&out)["resumed"], true, "{}", stdout(&out));
    let out = strata_db(&to, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A sled store whose copy stopped before the documents of `accounts` arrived:
/// `inspect accounts` printed nothing with exit 0, and `fence` and `keys status` showed
/// the store as whole. Each now shows what is there, then flags the store as an unfinished
/// copy with the way to resume it (exit 7, `unfinished_copy` in `--json`); a collection
/// the copy has not brought yet is not reported as unknown.
#[test]
fn inspect_fence_and_keys_status_flag_an_unfinished_copy() {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("target");
    stopped_copy_target(strata_sled::SledStore::open_store(&to).unwrap(), "accounts");
    for args in [
        &["inspect", "accounts"][..],
        &["fence"],
        &["keys", "status"],
    ] {
        let out = strata_db(&to, args);
        assert_eq!(out.status.code(), Some(7), "{args:?}: {}", stderr(&out));
        assert_names_the_copy(
            &stdout(&out),
            &["unfinished copy", "resume it"],
            &format!("{args:?}"),
        );
        let mut json_args = args.to_vec();
        json_args.push("--json");
        let out = strata_db(&to, &json_args);
        assert_eq!(
            out.status.code(),
            Some(7),
            "{json_args:?}: {}",
            stderr(&out)
        );
        let doc = json_of(&out);
        assert_eq!(doc["verdict"], "unfinished_copy", "{json_args:?}: {doc}");
        assert_eq!(doc["unfinished"][0]["operation"], "copy", "{doc}");
        assert!(
            doc["unfinished"][0]["next"]
                .as_str()
                .is_some_and(|n| n.contains("rerun `strata copy --from source.redb")),
            "{doc}"
        );
    }
    // A collection the copy has not brought yet: the copy is named, not "unknown" alone.
    let out = strata_db(&to, &["inspect", "orders"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_names_the_copy(
        &stderr(&out),
        &[
            "no managed table or collection `orders`",
            "which may not have reached it",
        ],
        "inspect orders",
    );
}

/// `text` names the unfinished copy from `source.redb` ([`stopped_copy_target`]) and the
/// way to resume it, and holds each of `also`.
fn assert_names_the_copy(text: &str, also: &[&str], what: &str) {
    assert!(
        text.contains("target of a `strata copy` from `source.redb`")
            && text.contains("rerun `strata copy --from source.redb")
            && also.iter().all(|part| text.contains(part)),
        "{what}: {text}"
    );
}

/// Every command that writes refuses the target of an unfinished copy before it opens it
/// for writing (exit 7, not one byte or the mtime changed), naming itself, the copy and the
/// way forward: before, `retire` recorded a proof about rows the copy had not brought yet,
/// `repair --apply` deleted what only looked orphaned, `fence abort` reset a fence copied
/// from the source, and the `keys` changes reported a missing keyring (exit 4) — the copy
/// may not have brought it yet. `inspect` with a key says the same instead of "no keyring".
#[test]
fn every_command_that_writes_refuses_an_unfinished_copy() {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("target.redb");
    let store = strata_redb::RedbStore::create_store(&to).unwrap();
    // An orphaned sweep marker: a change `repair --apply` would make on a whole store.
    store
        .apply(Batch::new().set(b"__nx/sweep/ghost".to_vec(), b"x".to_vec()))
        .unwrap();
    stopped_copy_target(store, "accounts");
    let before = bytes_and_mtime(&to);
    let env = [("P_OLD", "old secret"), ("P_NEW", "new secret")];
    for (command, args) in [
        ("strata retire", &["retire", "accounts", "--below", "2"][..]),
        (
            "strata retire",
            &["retire", "accounts", "--below", "2", "--dry-run"],
        ),
        ("strata repair --apply", &["repair", "--apply"]),
        ("strata fence abort", &["fence", "abort"]),
        (
            "strata keys add",
            &[
                "keys",
                "add",
                "laptop",
                "--new-passphrase-env",
                "P_NEW",
                "--passphrase-env",
                "P_OLD",
            ],
        ),
        (
            "strata keys rewrap",
            &[
                "keys",
                "rewrap",
                "--new-passphrase-env",
                "P_NEW",
                "--passphrase-env",
                "P_OLD",
            ],
        ),
        (
            "strata keys remove",
            &["keys", "remove", "laptop", "--passphrase-env", "P_OLD"],
        ),
        (
            "strata keys rotate",
            &["keys", "rotate", "--passphrase-env", "P_OLD"],
        ),
    ] {
        let out = crate::support::strata_db_env(&to, args, &env);
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(7),
            "{args:?}: {}{err}",
            stdout(&out)
        );
        assert!(
            err.contains(&format!("`{command}` refused, nothing was written: this store is the target of a `strata copy` from `source.redb`"))
                && err.contains("rerun `strata copy --from source.redb"),
            "{args:?}: {err}"
        );
        assert_eq!(bytes_and_mtime(&to), before, "{args:?} wrote the target");
    }
    // Listing what repair would do writes nothing and names the copy.
    let out = strata_db(&to, &["repair"]);
    assert!(
        stdout(&out).contains("unfinished copy from `source.redb`"),
        "{}",
        stdout(&out)
    );
    // Reading with a key: the keyring may not have been copied yet.
    let out = crate::support::strata_db_env(
        &to,
        &["inspect", "accounts", "--passphrase-env", "P_OLD"],
        &env,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(
        err.contains("which may not have reached the keyring")
            && err.contains("rerun `strata copy --from source.redb"),
        "{err}"
    );
    assert_eq!(bytes_and_mtime(&to), before, "a read wrote the target");
}
