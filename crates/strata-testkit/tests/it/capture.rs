//! Fixtures captured from a real store: CLI and embedded admin, redaction, samples.

use crate::support::{options, seeded_redb, Account};
use std::process::ExitCode;
use strata::seal::Credential;
use strata_testkit::{capture, CaptureOptions, Fixture, RedactPath};

fn admin(db: &std::path::Path, args: &[&str]) -> ExitCode {
    let mut all = vec!["app-admin", "--db"];
    let db = db.to_str().unwrap();
    all.push(db);
    all.extend_from_slice(args);
    strata_cli::Admin::new()
        .collection::<Account>("accounts", options())
        .run_from(all)
}

#[test]
fn a_captured_fixture_holds_every_version_and_no_redacted_value() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.redb");
    drop(seeded_redb(&db, 40));
    let out = dir.path().join("accounts.jsonl");
    let code = admin(
        &db,
        &[
            "fixture",
            "capture",
            "--collection",
            "accounts",
            "--redact",
            "email",
            "--redact",
            "id",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, ExitCode::SUCCESS);
    let text = std::fs::read_to_string(&out).unwrap();
    for i in 0..40 {
        assert!(
            !text.contains(&format!("user{i}@example.com")),
            "email {i} leaked"
        );
        assert!(
            !text.contains(&format!("\"id\":\"a{i:03}\"")),
            "the id of row {i} leaked into a body"
        );
    }
    let fixture = Fixture::read(&out).unwrap();
    assert_eq!(fixture.header.rows, 40);
    assert_eq!(
        fixture.header.versions.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(fixture.header.redacted, ["email", "id"]);
    assert_eq!(fixture.header.container_header.unwrap().version, 1);
    let row = &fixture.rows[0];
    assert_eq!(row.body["email"], "redacted");
    assert_eq!(row.body["id"], "redacted");
    assert!(row.body["balance"].is_number(), "{}", row.body);
    // The store was only read.
    let again = admin(
        &db,
        &[
            "fixture",
            "capture",
            "--collection",
            "accounts",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(again, ExitCode::from(1), "an existing file is refused");
}

#[test]
fn a_sample_keeps_every_version_and_the_store_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.redb");
    let store = seeded_redb(&db, 40);
    let fixture = capture(
        &store,
        "accounts",
        &CaptureOptions::new()
            .sample(6)
            .redact(RedactPath::parse("email").unwrap()),
    )
    .unwrap();
    assert_eq!(fixture.rows.len(), 6);
    let versions: std::collections::BTreeSet<i32> =
        fixture.rows.iter().map(|r| r.payload_version).collect();
    assert_eq!(versions.into_iter().collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(fixture.header.total_rows, 40);
    // Round trip through the file format.
    let mut buf = Vec::new();
    fixture.write_to(&mut buf).unwrap();
    assert_eq!(Fixture::read_from(&buf[..]).unwrap(), fixture);
    assert!(capture(&store, "nope", &CaptureOptions::new()).is_err());
    assert!(capture(&store, "accounts", &CaptureOptions::new().sample(0)).is_err());
}

#[test]
fn retire_through_the_admin_is_refused_then_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.redb");
    drop(seeded_redb(&db, 8));
    assert_eq!(
        admin(&db, &["retire", "accounts", "--below", "2"]),
        ExitCode::from(1),
        "v1 rows are stored"
    );
    assert_eq!(admin(&db, &["sweep", "accounts"]), ExitCode::SUCCESS);
    assert_eq!(
        admin(&db, &["retire", "accounts", "--below", "4", "--dry-run"]),
        ExitCode::SUCCESS
    );
    let store = strata_redb::RedbStore::open_existing(&db)
        .unwrap()
        .into_store();
    assert_eq!(
        strata::ops::retire::retired_below(&store, "accounts").unwrap(),
        None
    );
    drop(store);
    assert_eq!(
        admin(&db, &["retire", "accounts", "--below", "4"]),
        ExitCode::SUCCESS
    );
    let store = strata_redb::RedbStore::open_existing(&db)
        .unwrap()
        .into_store();
    assert_eq!(
        strata::ops::retire::retired_below(&store, "accounts").unwrap(),
        Some(4)
    );
}

/// The key of [`sealed_accounts`]' store.
const KEY: [u8; 32] = [7u8; 32];

/// A new redb store at `path` whose `accounts` collection is sealed with [`KEY`], holding
/// three gold accounts with secret emails (`secret{i}@example.com`), reopened read-only.
fn sealed_accounts(path: &std::path::Path) -> strata_store::Store {
    {
        let store = strata_redb::RedbStore::create_store(path).unwrap();
        let db = strata::Database::builder(store)
            .key(Credential::raw_key(&KEY).unwrap())
            .open()
            .unwrap();
        let c = db
            .collection::<Account>("accounts", options().sealed())
            .unwrap();
        for i in 0..3 {
            let a = Account {
                id: format!("a{i}"),
                balance_cents: i,
                tier: "gold".into(),
                email: format!("secret{i}@example.com"),
                steps: 0,
            };
            c.put(&a.id, &a).unwrap();
        }
    }
    strata_redb::RedbStore::open_read_only(path)
        .unwrap()
        .into_store()
}

/// The sealer [`KEY`] unlocks from the keyring of `store`.
fn unlock(store: &strata_store::Store) -> strata::seal::Sealer {
    strata::seal::Keyring::database()
        .unlock(store, &Credential::raw_key(&KEY).unwrap())
        .unwrap()
}

#[test]
fn a_sealed_collection_is_captured_only_with_its_key_decrypted_and_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let store = sealed_accounts(&dir.path().join("sealed.redb"));
    let no_key = capture(&store, "accounts", &CaptureOptions::new()).unwrap_err();
    assert!(no_key.to_string().contains("is sealed"), "{no_key}");
    let sealer = unlock(&store);
    let fixture = capture(
        &store,
        "accounts",
        &CaptureOptions::new()
            .sealer(Some(sealer))
            .redact(RedactPath::parse("email").unwrap()),
    )
    .unwrap();
    assert!(fixture.header.sealed);
    assert_eq!(fixture.rows.len(), 3);
    for r in &fixture.rows {
        assert_eq!(r.body["email"], "redacted");
        assert_eq!(r.body["tier"], "gold", "bodies are decrypted");
    }
    // The sealed marks are not among the records: a replay needs no key.
    assert!(fixture
        .header
        .records
        .iter()
        .all(|r| !r.key.starts_with("__nx/sealed/") && !r.key.starts_with("__nx/keys/")));
}

/// The fixture of a sealed collection holds its bodies decrypted: replaying it with the
/// options the application opens the collection with (`.sealed()`, as the README's
/// `replay::<Account>(&fixture, "accounts", accounts())` does) reads every row. (The
/// scratch store has no key: the collection did not open, and every replay of a sealed
/// collection failed.)
#[test]
fn a_sealed_collections_fixture_replays_with_the_applications_options() {
    let dir = tempfile::tempdir().unwrap();
    let store = sealed_accounts(&dir.path().join("sealed.redb"));
    let sealer = unlock(&store);
    let fixture = capture(
        &store,
        "accounts",
        &CaptureOptions::new().sealer(Some(sealer)),
    )
    .unwrap();
    assert!(fixture.header.sealed);
    let report = strata_testkit::Replay::<Account>::new(&fixture, "accounts", options().sealed())
        .kills(false)
        .run();
    report.assert_ok();
    assert_eq!(report.rows, 3);
    assert!(
        report.notes.iter().any(|n| n.contains("sealed")),
        "{report}"
    );
}
