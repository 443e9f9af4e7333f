//! `strata demo`: the README's main job.

use std::process::{Command, Output};

fn demo(dir: &std::path::Path) -> Output {
    crate::support::strata(&["demo", dir.to_str().unwrap()])
}

#[test]
fn demo_runs_every_chapter_and_can_be_rerun() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = demo(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "== 1.",
        "(`strata status` exits 3)",
        "SyncManager::open refuses it: legacy unversioned data",
        "now says: ok (exit 0)",
        "re-delivered 10 of them: 0 applied again",
        "hydrated state identical to before the restart: true",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("gcounter visits ") && l.ends_with("= Some(12)")),
        "{text}"
    );
    // The datastore it leaves behind is current.
    let status = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--db", dir.join("sync").to_str().unwrap(), "status"])
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(0));
    // A previous demo directory may be reused.
    assert_eq!(demo(&dir).status.code(), Some(0));
}

#[test]
fn demo_chapters_6_and_7_evolve_payloads_and_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = demo(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ch6 = text.find("\n== 6. Payload evolution").expect("chapter 6");
    let ch7 = text.find("\n== 7. Shape policy").expect("chapter 7");
    let done = text.find("\ndone in ").expect("done line");
    assert!(text.find("\n== 5.").unwrap() < ch6 && ch6 < ch7 && ch7 < done);
    let (six, seven) = (&text[ch6..ch7], &text[ch7..done]);

    for needle in [
        "an old build (payload v1) wrote 4 accounts",
        "current payload version v2",
        "get(\"alice\") -> Account { id: \"alice\", balance_cents: 1200 } (stored at v1, upcast on read: true)",
        "its envelope says payload v1 lock 1",
        "sweep to v2: complete; scanned 5, rewritten 4, skipped (newer) 0, failed 0",
        "sweep again: already at v2",
        "stored now: alice payload v2 lock 1, bob payload v2 lock 1, carol payload v2 lock 1, dave payload v2 lock 1",
        "an old build writing bob is refused: refusing to overwrite `bob` in collection `accounts`: it was written at payload v2, newer than this build's v1",
        "bob is unchanged: Account { id: \"bob\", balance_cents: 700 }",
    ] {
        assert!(six.contains(needle), "missing {needle:?} in chapter 6:\n{six}");
    }

    for needle in [
        "build 1 persists the schema of `invoices`",
        "build 2 adds an optional `note`: additive change, verdict allowed; put(\"i4\") with a note succeeds",
        "the collection opens (verdict rejected), the first write fails:",
        // The seed's exact message, at write time.
        "  put(\"i5\") -> Non-additive schema change to \"invoices\" (added: [], removed: [total], changed: []). Register a coordinated_cutover() strategy to migrate, or revert the change.\n",
        "    schema delta for `invoices`: non-additive\n",
        "      removed: total\n",
        "required property removed",
        "the persisted baseline is unchanged",
        "verdict cutover pending",
        "put(\"i5\") -> writes to `invoices` are fenced: a schema cutover is pending",
        "`strata fence`: state normal, generation 0, pending [invoices]",
        "migrated 1 collection, rewrote 4 records in 1 batch(es); generation 0 -> 1",
        "get(\"i1\") -> InvoiceV4 { id: \"i1\", amount: Amount { gross: 100.0 }, note: None }",
        "get(\"i4\") -> InvoiceV4 { id: \"i4\", amount: Amount { gross: 7.0 }, note: Some(\"rush\") }",
        "put(\"i5\") succeeds again (lock version 1)",
        "build 2, still open at the old generation: migration required: the schema generation of this store moved from 0 to 1",
        "fence: state normal, generation 1, nothing pending: true",
    ] {
        assert!(seven.contains(needle), "missing {needle:?} in chapter 7:\n{seven}");
    }
    // The baseline hash printed after build 2 is the one kept after the refusal.
    let hash_after = |prefix: &str| {
        let at = seven.find(prefix).unwrap() + prefix.len();
        seven[at..at + 12].to_string()
    };
    assert_eq!(
        hash_after("baseline now "),
        hash_after("the persisted baseline is unchanged (")
    );

    // The docs datastore it leaves behind: current, fence at generation 1, the reshaped
    // schema persisted.
    let docs = dir.join("docs.redb");
    // A new store: redb (the default); the Numax datastore stays a sled directory.
    assert!(strata_redb::is_redb_file(&docs));
    assert!(strata_sled::is_sled_dir(&dir.join("sync")));
    let strata = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("--db")
            .arg(&docs)
            .args(args)
            .output()
            .unwrap()
    };
    let json = |out: Output| -> serde_json::Value {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let status = json(strata(&["status", "--json"]));
    assert_eq!(status["verdict"], "ok");
    for name in ["accounts", "invoices"] {
        assert!(
            status["tables"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["table"] == name && t["state"] == "current"),
            "{name} in {status}"
        );
    }
    let fence = json(strata(&["fence", "--json"]));
    assert_eq!(fence["state"], "normal");
    assert_eq!(fence["generation"], 1);
    assert_eq!(fence["pending"], serde_json::json!([]));
    assert_eq!(fence["clients"], serde_json::json!([]));
    let shown = json(strata(&["schema", "show", "invoices", "--json"]));
    let props = &shown["schema"]["properties"];
    assert!(
        props.get("amount").is_some() && props.get("total").is_none(),
        "{shown}"
    );
}

#[test]
fn demo_refuses_a_non_empty_foreign_directory() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("precious.txt"), b"do not delete").unwrap();
    let out = demo(tmp.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a previous strata demo"));
    assert!(tmp.path().join("precious.txt").exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}

/// `strata demo FILE` is one line naming the file, which is left as it was.
#[test]
fn demo_refuses_a_file_and_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("notes.txt");
    std::fs::write(&file, b"mine").unwrap();
    let out = demo(&file);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("notes.txt") && err.contains("not a directory"),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"mine");
}

/// Rerunning the demo replaces only what the demo wrote: a file the user put into the
/// demo directory since is kept.
#[test]
fn demo_rerun_keeps_files_it_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    assert_eq!(demo(&dir).status.code(), Some(0));
    std::fs::write(dir.join("my-notes.txt"), b"keep me").unwrap();
    let out = demo(&dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(dir.join("my-notes.txt")).unwrap(), b"keep me");
    assert!(dir.join("docs.redb").is_file() && dir.join("sync").is_dir());
}
