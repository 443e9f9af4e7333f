//! Sealed collections (issue 15): every path over sealed rows — get/iter/update,
//! read-repair, the eager sweep, the coordinated cutover, verify's decoder — and the
//! errors: wrong key at open, tampered rows, sealed rows without the key.

use super::policy_util::{config, mem};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use strata::clock::ManualClock;
use strata::ops::cutover::CutoverOptions;
use strata::ops::sweep::SweepOptions;
use strata::policy::{coordinated_cutover, SchemaOptions};
use strata::seal::{Credential, KdfParams, SealError};
use strata::CollectionOptions;
use strata::{CollectionError, Database};
use strata::{Mode, StepError};
use strata_store::{Batch, KvRead, KvWrite, ScanLimits, Store};

const MARKER: &str = "SECRET-MARKER-4e1d";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Acct {
    id: String,
    note: String,
    #[serde(default)]
    cents: i64,
}

fn key(p: &str) -> Credential {
    Credential::passphrase(p).with_kdf(KdfParams::insecure_fast())
}

fn sealed_db(store: &Store) -> Database {
    Database::builder(store.clone())
        .key(key("open sesame"))
        .open()
        .unwrap()
}

fn acct(i: usize) -> Acct {
    Acct {
        id: format!("a{i}"),
        note: format!("{MARKER} {i}"),
        cents: i as i64,
    }
}

fn all(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .scan(b"", None, ScanLimits::new(100_000, 1 << 26).unwrap())
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}

fn assert_no_plaintext(store: &Store) {
    for (k, v) in all(store) {
        assert!(
            !v.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()),
            "plaintext in `{}`",
            String::from_utf8_lossy(&k)
        );
    }
}

fn seal_err(e: CollectionError) -> SealError {
    match e {
        CollectionError::Seal { source, .. } => source,
        other => panic!("expected a seal error, got {other:?}"),
    }
}

#[test]
fn sealed_round_trip_keeps_ids_and_headers_in_clear_and_nothing_else() {
    let store = mem();
    let db = sealed_db(&store);
    let c = db
        .collection::<Acct>("accounts", CollectionOptions::new().sealed())
        .unwrap();
    for i in 0..20 {
        c.put(&format!("a{i:02}"), &acct(i)).unwrap();
    }
    let lock = c.get_document("a03").unwrap().unwrap().lock_version;
    let mut changed = acct(3);
    changed.cents = 99;
    assert_eq!(c.update("a03", &changed, lock).unwrap(), lock + 1);
    assert_eq!(c.get("a03").unwrap().unwrap(), changed);
    let listed: Vec<Acct> = c.iter().map(|d| d.unwrap().value).collect();
    assert_eq!(listed.len(), 20);
    assert_eq!(listed[0], acct(0));
    assert!(c.delete("a19").unwrap());
    assert_no_plaintext(&store);

    // Header and id in clear: readable without the key.
    let raw = store.get(&c.key_of("a03")).unwrap().unwrap();
    assert_eq!(&raw[..5], b"NXDV\x02");
    let plain = Database::builder(store.clone()).open().unwrap();
    let env = plain
        .collection::<Acct>("accounts", CollectionOptions::new())
        .unwrap()
        .envelope("a03")
        .unwrap()
        .unwrap();
    assert_eq!(env.lock_version, lock + 1);
    // ...but the body is not: a handle without the key gets a typed error, and never
    // overwrites a sealed document in clear.
    let clear = plain
        .collection::<Acct>("accounts", CollectionOptions::new())
        .unwrap();
    assert!(matches!(
        seal_err(clear.get("a03").unwrap_err()),
        SealError::NeedsKey { .. }
    ));
    assert!(matches!(
        seal_err(clear.put("a03", &acct(3)).unwrap_err()),
        SealError::NeedsKey { .. }
    ));
    assert_eq!(store.get(&c.key_of("a03")).unwrap().unwrap(), raw);
    assert!(matches!(
        plain
            .collection::<Acct>("accounts", CollectionOptions::new().sealed())
            .unwrap_err(),
        CollectionError::NoKey { .. }
    ));
    // Verify's certification accepts sealed rows by their header.
    let report = strata::validate::validate_and_init(&store, &plain.catalog());
    assert!(report.is_ok(), "{report:?}");
}

#[test]
fn wrong_key_fails_at_open_and_writes_nothing() {
    let store = mem();
    {
        let db = sealed_db(&store);
        let c = db
            .collection::<Acct>("accounts", CollectionOptions::new().sealed())
            .unwrap();
        c.put("a1", &acct(1)).unwrap();
    }
    let before = all(&store);
    let err = Database::builder(store.clone())
        .key(key("guess"))
        .open()
        .unwrap_err();
    let msg = err.to_string();
    let source = seal_err(err);
    assert!(source.is_wrong_key(), "{source}");
    assert!(msg.contains("sealed collection"), "{msg}");
    assert_eq!(all(&store), before);
}

#[test]
fn a_tampered_row_fails_that_read_only() {
    let store = mem();
    let db = sealed_db(&store);
    let c = db
        .collection::<Acct>("accounts", CollectionOptions::new().sealed())
        .unwrap();
    c.put("a1", &acct(1)).unwrap();
    c.put("a2", &acct(2)).unwrap();
    c.put("a3", &acct(3)).unwrap();
    // Swap the values of a1 and a2; flip one bit of a3's ciphertext.
    let (k1, k2, k3) = (c.key_of("a1"), c.key_of("a2"), c.key_of("a3"));
    let (v1, v2) = (
        store.get(&k1).unwrap().unwrap(),
        store.get(&k2).unwrap().unwrap(),
    );
    let mut v3 = store.get(&k3).unwrap().unwrap();
    let last = v3.len() - 20;
    v3[last] ^= 0x40;
    store
        .apply(
            Batch::new()
                .set(k1.clone(), v2)
                .set(k2.clone(), v1)
                .set(k3.clone(), v3),
        )
        .unwrap();
    let before: Vec<_> = [&k1, &k2, &k3]
        .iter()
        .map(|k| store.get(k).unwrap())
        .collect();
    for id in ["a1", "a2", "a3"] {
        let e = seal_err(c.get(id).unwrap_err());
        assert!(e.is_authentication(), "{id}: {e}");
        assert!(e.to_string().contains("failed authentication"), "{e}");
    }
    // Moved to another collection: fails too.
    let other = db
        .collection::<Acct>("others", CollectionOptions::new().sealed())
        .unwrap();
    c.put("a4", &acct(4)).unwrap();
    let v4 = store.get(&c.key_of("a4")).unwrap().unwrap();
    store
        .apply(Batch::new().set(other.key_of("a4"), v4))
        .unwrap();
    assert!(seal_err(other.get("a4").unwrap_err()).is_authentication());
    // Reads changed nothing, and the other rows still read.
    let after: Vec<_> = [&k1, &k2, &k3]
        .iter()
        .map(|k| store.get(k).unwrap())
        .collect();
    assert_eq!(after, before);
    assert_eq!(c.get("a4").unwrap().unwrap(), acct(4));
}

fn to_cents(o: &mut Map<String, Value>) -> Result<(), StepError> {
    let n = o.get("cents").and_then(Value::as_i64).unwrap_or(0);
    o.insert("cents".into(), json!(n * 100));
    Ok(())
}

#[test]
fn read_repair_and_the_eager_sweep_rewrite_sealed_rows_sealed() {
    let store = mem();
    {
        let db = sealed_db(&store);
        let c = db
            .collection::<Acct>("accounts", CollectionOptions::new().sealed())
            .unwrap();
        for i in 0..30 {
            c.put(&format!("a{i:02}"), &acct(i)).unwrap();
        }
    }
    // v2: cents × 100, read-repaired lazily ...
    let db = sealed_db(&store);
    let lazy = db
        .collection::<Acct>(
            "accounts",
            CollectionOptions::new()
                .sealed()
                .read_repair(true)
                .upcast(1, Mode::Lazy, to_cents),
        )
        .unwrap();
    let d = lazy.get_document("a05").unwrap().unwrap();
    assert!(d.upcast);
    assert_eq!(d.value.cents, 500);
    let raw = store.get(&lazy.key_of("a05")).unwrap().unwrap();
    assert_eq!(&raw[..9], b"NXDV\x02\0\0\0\x02", "repaired sealed at v2");
    assert!(!lazy.get_document("a05").unwrap().unwrap().upcast);
    drop(lazy);

    // ... and the rest by the eager sweep.
    let eager = db
        .collection::<Acct>(
            "accounts",
            CollectionOptions::new()
                .sealed()
                .upcast(1, Mode::Eager, to_cents),
        )
        .unwrap();
    let report = eager.sweep(SweepOptions::new()).unwrap();
    assert_eq!(report.rewritten(), 29, "{report:?}");
    for (k, v) in all(&store) {
        if k.starts_with(b"__nx/doc/accounts/") {
            assert_eq!(&v[..9], b"NXDV\x02\0\0\0\x02");
        }
    }
    for i in 0..30 {
        let d = eager.get_document(&format!("a{i:02}")).unwrap().unwrap();
        assert_eq!((d.value.cents, d.upcast), (i as i64 * 100, false));
    }
    assert_no_plaintext(&store);
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Renamed {
    id: String,
    memo: String,
    #[serde(default)]
    cents: i64,
}

/// `n` sealed accounts under a persisted schema, then `after` on their collection.
fn seed_under_policy(
    store: &Store,
    clock: &ManualClock,
    n: usize,
    after: impl FnOnce(&strata::Collection<Acct>),
) {
    let db = Database::builder(store.clone())
        .key(key("open sesame"))
        .policy(config(clock))
        .open()
        .unwrap();
    let c = db
        .collection::<Acct>(
            "accounts",
            CollectionOptions::new()
                .sealed()
                .schema(SchemaOptions::of::<Acct>()),
        )
        .unwrap();
    for i in 0..n {
        c.put(&format!("a{i}"), &acct(i)).unwrap();
    }
    after(&c);
}

/// A new build renaming `note` to `memo`: the coordinated cutover it declares is pending.
fn pending_rename(store: &Store, clock: &ManualClock) -> (Database, strata::Collection<Renamed>) {
    let db = Database::builder(store.clone())
        .key(key("open sesame"))
        .policy(config(clock))
        .open()
        .unwrap();
    let c = db
        .collection::<Renamed>(
            "accounts",
            CollectionOptions::new()
                .sealed()
                .schema(
                    SchemaOptions::of::<Renamed>().strategy(coordinated_cutover(|d| {
                        Ok(json!({"id": d["id"], "memo": d["note"], "cents": d["cents"]}))
                    })),
                ),
        )
        .unwrap();
    (db, c)
}

#[test]
fn the_coordinated_cutover_rewrites_sealed_rows_sealed() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    seed_under_policy(&store, &clock, 5, |_| {});
    let (db, c) = pending_rename(&store, &clock);
    let report = db.run_schema_cutover(CutoverOptions::new()).unwrap();
    assert_eq!(report.records, 5, "{report:?}");
    for i in 0..5 {
        let id = format!("a{i}");
        let raw = store.get(&c.key_of(&id)).unwrap().unwrap();
        assert_eq!(&raw[..5], b"NXDV\x02", "still sealed");
        let d = c.get_document(&id).unwrap().unwrap();
        assert_eq!(d.value.memo, format!("{MARKER} {i}"));
        assert_eq!(d.lock_version, 2, "a cutover is a write");
    }
    assert_no_plaintext(&store);
}

/// A tampered sealed row stops the cutover, and its error keeps the cause: the chain
/// printed as one line names the record and says it failed authentication.
#[test]
fn a_cutover_over_a_tampered_sealed_row_says_it_failed_authentication() {
    let store = mem();
    let clock = ManualClock::new(1_000);
    seed_under_policy(&store, &clock, 3, |c| {
        let bad = c.key_of("a1");
        let mut v = store.get(&bad).unwrap().unwrap();
        let at = v.len() - 3;
        v[at] ^= 0x01;
        store.apply(Batch::new().set(bad, v)).unwrap();
    });
    let (db, _) = pending_rename(&store, &clock);
    let err = db.run_schema_cutover(CutoverOptions::new()).unwrap_err();
    let mut line = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        line.push_str(": ");
        line.push_str(&s.to_string());
        source = s.source();
    }
    assert!(line.contains("failed authentication"), "{line}");
    assert!(line.contains("a1"), "{line}");
}
