//! Sealed documents (issue 15, phase A): the seal module on its own — sealing and opening
//! bodies, the keyring and its every write path, over the memory store.

use proptest::prelude::*;
use std::sync::{Arc, Mutex, OnceLock};
use strata::seal::{
    Credential, KdfParams, Keyring, RecordContext, SealError, Sealer, DATABASE_KEYRING_KEY,
    SEAL_OVERHEAD,
};
use strata_store::{
    Batch, KvRead, KvWrite, MemoryStore, Precondition, ScanLimits, Store, StoreError,
};

const HEADER: &[u8] = b"NXDV\x02\0\0\0\x01\0\0\0\0\0\0\0\x01";

fn pass(p: &str) -> Credential {
    Credential::passphrase(p).with_kdf(KdfParams::insecure_fast())
}

fn kms(byte: u8) -> Credential {
    Credential::raw_key(&[byte; 32]).unwrap()
}

fn ctx<'a>(key: &'a [u8], collection_id: u16, header: &'a [u8]) -> RecordContext<'a> {
    RecordContext {
        key,
        collection_id,
        header,
    }
}

/// Every record of the store, for "nothing was written" checks.
fn snapshot(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    let page = store
        .scan(b"", None, ScanLimits::new(10_000, 1 << 24).unwrap())
        .unwrap();
    page.records.into_iter().map(|r| (r.key, r.value)).collect()
}

fn sealed_db() -> (Store, Sealer) {
    let store = Store::new(MemoryStore::new());
    let sealer = Keyring::database()
        .create(&store, &pass("alice's passphrase"), "alice")
        .unwrap();
    (store, sealer)
}

#[test]
fn round_trip_and_no_plaintext_in_the_store() {
    let (store, sealer) = sealed_db();
    let marker = "MARKER-7f3a-plaintext-must-not-leak";
    let doc = format!(r#"{{"id":"a1","secret":"{marker}"}}"#);
    let key = b"__nx/doc/accounts/a1";
    let body = sealer.seal(ctx(key, 1024, HEADER), doc.as_bytes()).unwrap();
    assert_eq!(body.len(), doc.len() + SEAL_OVERHEAD);
    let value = [HEADER, &body].concat();
    store
        .apply(Batch::new().set(key.to_vec(), value.clone()))
        .unwrap();

    for (k, v) in snapshot(&store) {
        assert!(
            !v.windows(marker.len()).any(|w| w == marker.as_bytes()),
            "plaintext marker found in `{}`",
            String::from_utf8_lossy(&k)
        );
        assert!(
            !v.windows(18).any(|w| w == b"alice's passphrase"),
            "passphrase stored in clear"
        );
    }
    let stored = store.get(key).unwrap().unwrap();
    let opened = sealer
        .open(ctx(key, 1024, HEADER), &stored[HEADER.len()..])
        .unwrap();
    assert_eq!(opened, doc.as_bytes());

    // A fresh unlock (another process) opens it too, and two seals of the same document
    // differ (fresh nonce).
    let again = Keyring::database()
        .unlock(&store, &pass("alice's passphrase"))
        .unwrap();
    assert_eq!(
        again.open(ctx(key, 1024, HEADER), &body).unwrap(),
        doc.as_bytes()
    );
    let body2 = sealer.seal(ctx(key, 1024, HEADER), doc.as_bytes()).unwrap();
    assert_ne!(body, body2);
    assert_ne!(body[4..28], body2[4..28], "nonces must differ");
}

#[test]
fn swapped_flipped_moved_or_truncated_bodies_fail_authentication() {
    let (_, sealer) = sealed_db();
    let (ka, kb) = (b"__nx/doc/c/a".as_slice(), b"__nx/doc/c/b".as_slice());
    let a = sealer
        .seal(ctx(ka, 1024, HEADER), br#"{"id":"a"}"#)
        .unwrap();
    let b = sealer
        .seal(ctx(kb, 1024, HEADER), br#"{"id":"b"}"#)
        .unwrap();
    assert!(sealer.open(ctx(ka, 1024, HEADER), &a).is_ok());

    let check = |r: Result<Vec<u8>, SealError>, what: &str| {
        let err = r.expect_err(what);
        assert!(err.is_authentication(), "{what}: {err}");
        assert!(!err.is_wrong_key(), "{what}");
        assert!(err.to_string().contains("failed authentication"), "{what}");
    };
    // Swapped between two records.
    check(
        sealer.open(ctx(ka, 1024, HEADER), &b),
        "b's body under a's key",
    );
    check(
        sealer.open(ctx(kb, 1024, HEADER), &a),
        "a's body under b's key",
    );
    // Moved to another collection (same id, other collection id and key).
    check(
        sealer.open(ctx(ka, 1025, HEADER), &a),
        "other collection id",
    );
    check(
        sealer.open(ctx(b"__nx/doc/d/a", 1024, HEADER), &a),
        "other collection key",
    );
    // Another envelope header (payload version 2, lock version 2).
    let mut other_version = HEADER.to_vec();
    other_version[8] = 2;
    check(
        sealer.open(ctx(ka, 1024, &other_version), &a),
        "other payload version",
    );
    let mut other_lock = HEADER.to_vec();
    other_lock[16] = 2;
    check(
        sealer.open(ctx(ka, 1024, &other_lock), &a),
        "other lock version",
    );
    // Every single bit flip, key id and nonce included.
    for i in 0..a.len() * 8 {
        let mut t = a.clone();
        t[i / 8] ^= 1 << (i % 8);
        check(sealer.open(ctx(ka, 1024, HEADER), &t), &format!("bit {i}"));
    }
    // Truncated anywhere.
    for n in 0..a.len() {
        check(
            sealer.open(ctx(ka, 1024, HEADER), &a[..n]),
            &format!("len {n}"),
        );
    }
    let err = sealer.open(ctx(ka, 1024, HEADER), &b).unwrap_err();
    assert!(err.to_string().contains("`__nx/doc/c/a`"), "{err}");
}

#[test]
fn another_keyring_cannot_open_a_body() {
    let store = Store::new(MemoryStore::new());
    let db = Keyring::database()
        .create(&store, &pass("same"), "main")
        .unwrap();
    let coll = Keyring::collection("accounts")
        .create(&store, &pass("same"), "main")
        .unwrap();
    let k = b"__nx/doc/accounts/x".as_slice();
    let body = db.seal(ctx(k, 1024, HEADER), b"{}").unwrap();
    let err = coll.open(ctx(k, 1024, HEADER), &body).unwrap_err();
    assert!(err.is_authentication(), "{err}");
    assert!(store
        .get(b"__nx/keys/collection/accounts")
        .unwrap()
        .is_some());
}

#[test]
fn wrong_passphrase_or_key_is_one_typed_error_and_writes_nothing() {
    let (store, _) = sealed_db();
    let ring = Keyring::database();
    ring.add_entry(&store, &pass("alice's passphrase"), "kms", &kms(7))
        .unwrap();
    let before = snapshot(&store);
    let wrong = pass("mallory");
    let assert_wrong = |r: Result<(), SealError>, what: &str| {
        let err = r.expect_err(what);
        assert!(err.is_wrong_key(), "{what}: {err}");
        let msg = err.to_string();
        assert!(msg.starts_with("wrong key for the database"), "{msg}");
        assert!(msg.contains("`__nx/keys/database`"), "{msg}");
        assert!(!msg.contains("mallory"), "{msg}");
    };
    assert_wrong(ring.unlock(&store, &wrong).map(|_| ()), "unlock");
    assert_wrong(ring.unlock(&store, &kms(8)).map(|_| ()), "unlock raw");
    assert_wrong(
        ring.add_entry(&store, &wrong, "bob", &pass("bob")),
        "add_entry",
    );
    assert_wrong(ring.rewrap(&store, &wrong, &pass("new")), "rewrap");
    assert_wrong(ring.remove_entry(&store, &wrong, "kms"), "remove_entry");
    assert_wrong(
        ring.begin_rotation(&store, &[&wrong]).map(|_| ()),
        "begin_rotation",
    );
    assert_eq!(snapshot(&store), before, "a wrong key wrote something");
    // The right ones still work.
    ring.unlock(&store, &pass("alice's passphrase")).unwrap();
    ring.unlock(&store, &kms(7)).unwrap();
}

#[test]
fn missing_existing_and_corrupted_keyrings() {
    let store = Store::new(MemoryStore::new());
    let ring = Keyring::database();
    assert!(matches!(
        ring.unlock(&store, &pass("x")),
        Err(SealError::NoKeyring { .. })
    ));
    ring.create(&store, &pass("x"), "main").unwrap();
    let before = snapshot(&store);
    assert!(matches!(
        ring.create(&store, &pass("y"), "other"),
        Err(SealError::KeyringExists { .. })
    ));
    assert_eq!(snapshot(&store), before);
    // A truncated keyring is reported as corrupted, not as a wrong key.
    let mut bytes = store.get(DATABASE_KEYRING_KEY).unwrap().unwrap();
    bytes.pop();
    store
        .apply(Batch::new().set(DATABASE_KEYRING_KEY.to_vec(), bytes))
        .unwrap();
    assert!(matches!(
        ring.unlock(&store, &pass("x")),
        Err(SealError::CorruptedKeyring { .. })
    ));
    // One flipped bit inside a wrapped key: no entry opens (indistinguishable from a
    // wrong key by design: the tag covers both).
    let store = Store::new(MemoryStore::new());
    ring.create(&store, &pass("x"), "main").unwrap();
    let mut bytes = store.get(DATABASE_KEYRING_KEY).unwrap().unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    store
        .apply(Batch::new().set(DATABASE_KEYRING_KEY.to_vec(), bytes))
        .unwrap();
    assert!(ring.unlock(&store, &pass("x")).unwrap_err().is_wrong_key());
}

#[test]
fn labels_and_entries_are_checked() {
    let (store, _) = sealed_db();
    let ring = Keyring::database();
    let alice = pass("alice's passphrase");
    for bad in ["", "a/b", "has space", &"x".repeat(65)] {
        assert!(matches!(
            ring.add_entry(&store, &alice, bad, &pass("p")),
            Err(SealError::InvalidLabel { .. })
        ));
    }
    assert!(matches!(
        ring.add_entry(&store, &alice, "alice", &pass("p")),
        Err(SealError::DuplicateLabel { .. })
    ));
    assert!(matches!(
        ring.remove_entry(&store, &alice, "alice"),
        Err(SealError::LastEntry { .. })
    ));
    assert!(matches!(
        ring.remove_entry(&store, &alice, "nobody"),
        Err(SealError::NoSuchEntry { .. })
    ));
    assert!(matches!(
        Credential::raw_key(&[0u8; 16]),
        Err(SealError::InvalidParameters { .. })
    ));
    ring.add_entry(&store, &alice, "bob", &pass("bob's"))
        .unwrap();
    // Bob removes alice; alice no longer opens.
    ring.remove_entry(&store, &pass("bob's"), "alice").unwrap();
    assert!(ring.unlock(&store, &alice).unwrap_err().is_wrong_key());
    let (_, rec) = ring.read(&store).unwrap().unwrap();
    let labels: Vec<String> = rec.entries().into_iter().map(|e| e.label).collect();
    assert_eq!(labels, vec!["bob".to_string()]);
}

/// A store wrapper that records every batch and can interfere once before a write.
#[derive(Clone)]
struct Spy {
    inner: Store,
    batches: Arc<Mutex<Vec<Batch>>>,
    interfere: Arc<Mutex<Option<Batch>>>,
}

impl Spy {
    fn new(inner: Store) -> Self {
        Spy {
            inner,
            batches: Arc::default(),
            interfere: Arc::default(),
        }
    }
}

impl KvRead for Spy {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: strata_store::ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl KvWrite for Spy {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        let inner = self.inner.unguarded_backend();
        strata_store::faults::read_decide_write(inner.as_ref(), reads, decide, &mut |batch| {
            if let Some(other) = self.interfere.lock().unwrap().take() {
                self.inner.apply(other)?;
            }
            self.batches.lock().unwrap().push(batch.clone());
            Ok(())
        })
    }
    fn flush(&self) -> strata_store::Result<()> {
        self.inner.flush()
    }
}

#[test]
fn rewrap_is_one_guarded_write_and_keeps_the_data_key() {
    let (store, sealer) = sealed_db();
    let ring = Keyring::database();
    let alice = pass("alice's passphrase");
    ring.add_entry(&store, &alice, "kms", &kms(1)).unwrap();
    let k = b"__nx/doc/c/a".as_slice();
    let body = sealer.seal(ctx(k, 1024, HEADER), b"{\"n\":1}").unwrap();

    let spy = Spy::new(store.clone());
    let read = store.get(DATABASE_KEYRING_KEY).unwrap().unwrap();
    ring.rewrap(&spy, &alice, &pass("alice's new passphrase"))
        .unwrap();
    let batches = spy.batches.lock().unwrap().clone();
    assert_eq!(batches.len(), 1, "re-wrap must be exactly one write");
    assert_eq!(
        batches[0].preconditions(),
        &[Precondition::Equals {
            key: DATABASE_KEYRING_KEY.to_vec(),
            value: read
        }]
    );
    assert_eq!(batches[0].mutations().len(), 1);

    assert!(ring.unlock(&store, &alice).unwrap_err().is_wrong_key());
    for cred in [pass("alice's new passphrase"), kms(1)] {
        let s = ring.unlock(&store, &cred).unwrap();
        assert_eq!(s.open(ctx(k, 1024, HEADER), &body).unwrap(), b"{\"n\":1}");
    }
    let (_, rec) = ring.read(&store).unwrap().unwrap();
    let labels: Vec<String> = rec.entries().into_iter().map(|e| e.label).collect();
    assert_eq!(labels, vec!["alice".to_string(), "kms".to_string()]);
    assert_eq!(rec.entries()[0].kdf, Some(KdfParams::insecure_fast()));
}

#[test]
fn rewrap_racing_another_keyring_write_writes_nothing() {
    let (store, _) = sealed_db();
    let ring = Keyring::database();
    let alice = pass("alice's passphrase");
    // Prepare an interfering keyring (alice + bob) in another store, then replay it.
    let other = Store::new(MemoryStore::new());
    other
        .apply(Batch::new().set(
            DATABASE_KEYRING_KEY.to_vec(),
            store.get(DATABASE_KEYRING_KEY).unwrap().unwrap(),
        ))
        .unwrap();
    ring.add_entry(&other, &alice, "bob", &pass("bob")).unwrap();
    let theirs = other.get(DATABASE_KEYRING_KEY).unwrap().unwrap();

    let spy = Spy::new(store.clone());
    *spy.interfere.lock().unwrap() =
        Some(Batch::new().set(DATABASE_KEYRING_KEY.to_vec(), theirs.clone()));
    let err = ring.rewrap(&spy, &alice, &pass("new")).unwrap_err();
    assert!(matches!(err, SealError::KeyringChanged { .. }), "{err}");
    assert_eq!(store.get(DATABASE_KEYRING_KEY).unwrap().unwrap(), theirs);
    ring.unlock(&store, &alice).unwrap();
    assert!(ring
        .unlock(&store, &pass("new"))
        .unwrap_err()
        .is_wrong_key());
}

#[test]
fn data_key_rotation_keeps_both_keys_until_finished() {
    let (store, old) = sealed_db();
    let ring = Keyring::database();
    let alice = pass("alice's passphrase");
    ring.add_entry(&store, &alice, "kms", &kms(3)).unwrap();
    let (ka, kb) = (b"__nx/doc/c/a".as_slice(), b"__nx/doc/c/b".as_slice());
    let a1 = old.seal(ctx(ka, 1024, HEADER), b"{\"a\":1}").unwrap();
    assert_eq!(old.active_key_id(), 1);

    // Every entry needs a credential: alice alone is refused, nothing written.
    let before = snapshot(&store);
    match ring.begin_rotation(&store, &[&alice]) {
        Err(SealError::RotationNeedsEveryEntry { missing, .. }) => {
            assert_eq!(missing, vec!["kms".to_string()])
        }
        other => panic!("expected RotationNeedsEveryEntry, got {other:?}"),
    }
    assert_eq!(snapshot(&store), before);

    let new = ring.begin_rotation(&store, &[&kms(3), &alice]).unwrap();
    assert_eq!(new.active_key_id(), 2);
    assert_eq!(new.key_ids(), vec![1, 2]);
    assert!(new.needs_reseal(&a1));
    let b2 = new.seal(ctx(kb, 1024, HEADER), b"{\"b\":2}").unwrap();
    assert!(!new.needs_reseal(&b2));
    assert_eq!(strata::seal::body_key_id(&b2), Some(2));
    // Resume after a restart: unlock with either credential gives both keys.
    for cred in [&alice, &kms(3)] {
        let s = ring.unlock(&store, cred).unwrap();
        assert_eq!(s.key_ids(), vec![1, 2]);
        assert_eq!(s.active_key_id(), 2);
        assert_eq!(s.open(ctx(ka, 1024, HEADER), &a1).unwrap(), b"{\"a\":1}");
        assert_eq!(s.open(ctx(kb, 1024, HEADER), &b2).unwrap(), b"{\"b\":2}");
    }
    assert!(matches!(
        ring.begin_rotation(&store, &[&alice, &kms(3)]),
        Err(SealError::RotationState { .. })
    ));
    // The pass re-seals a under the new key, then finishes.
    let plain = new.open(ctx(ka, 1024, HEADER), &a1).unwrap();
    let a2 = new.seal(ctx(ka, 1024, HEADER), &plain).unwrap();
    let mut batch = Batch::new();
    ring.stage_finish_rotation(&store, &mut batch).unwrap();
    assert_eq!(batch.preconditions().len(), 1);
    store.apply(batch).unwrap();

    let after = ring.unlock(&store, &alice).unwrap();
    assert_eq!(after.key_ids(), vec![2]);
    assert_eq!(
        after.open(ctx(ka, 1024, HEADER), &a2).unwrap(),
        b"{\"a\":1}"
    );
    let err = after.open(ctx(ka, 1024, HEADER), &a1).unwrap_err();
    assert!(
        matches!(err, SealError::UnknownDataKey { key_id: 1, .. }),
        "{err}"
    );
    assert!(err.is_authentication());
    let (_, rec) = ring.read(&store).unwrap().unwrap();
    assert_eq!(rec.retiring_key_id(), None);
    assert!(rec.entries().iter().all(|e| e.key_ids == vec![2]));
    assert!(matches!(
        ring.finish_rotation(&store),
        Err(SealError::RotationState { .. })
    ));
}

#[test]
fn secrets_never_show_in_debug_or_errors() {
    let secret = "hunter2-very-secret";
    let cred = pass(secret);
    assert!(!format!("{cred:?}").contains(secret));
    let raw = Credential::raw_key(&[0x5a; 32]).unwrap();
    let dbg = format!("{raw:?}");
    assert!(!dbg.contains("90") && !dbg.contains("5a"), "{dbg}");
    let (store, sealer) = sealed_db();
    let dbg = format!("{sealer:?}");
    assert!(dbg.contains("active_key_id: 1"), "{dbg}");
    assert!(dbg.len() < 120, "{dbg}");
    let err = Keyring::database().unlock(&store, &cred).unwrap_err();
    assert!(!err.to_string().contains(secret));
    assert!(!format!("{err:?}").contains(secret));
}

fn shared_sealer() -> &'static Sealer {
    static SEALER: OnceLock<Sealer> = OnceLock::new();
    SEALER.get_or_init(|| sealed_db().1)
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| serde_json::json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::json!(f)),
        ".*".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(".*", inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_document_round_trips(
        doc in prop::collection::btree_map("[a-z]{1,8}", json(), 0..8),
        id in "[a-zA-Z0-9]{1,16}",
        collection_id in 1024u16..,
        version in 1i32..,
        lock in 1u64..,
    ) {
        let sealer = shared_sealer();
        let bytes = serde_json::to_vec(&doc).unwrap();
        let key = format!("__nx/doc/c/{id}");
        let mut header = HEADER.to_vec();
        header[5..9].copy_from_slice(&version.to_be_bytes());
        header[9..17].copy_from_slice(&lock.to_be_bytes());
        let c = ctx(key.as_bytes(), collection_id, &header);
        let body = sealer.seal(c, &bytes).unwrap();
        prop_assert_eq!(body.len(), bytes.len() + SEAL_OVERHEAD);
        if bytes.len() >= 8 {
            prop_assert!(!body.windows(bytes.len()).any(|w| w == bytes.as_slice()));
        }
        let opened = sealer.open(c, &body).unwrap();
        prop_assert_eq!(&opened, &bytes);
        let back: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&opened).unwrap();
        prop_assert_eq!(back.len(), doc.len());
        let other = ctx(key.as_bytes(), collection_id.wrapping_add(1), &header);
        prop_assert!(sealer.open(other, &body).unwrap_err().is_authentication());
    }
}

#[test]
fn store_errors_pass_through() {
    // A store error is not dressed up as a key problem.
    let err: SealError = StoreError::InvalidArgument("x".into()).into();
    assert!(!err.is_wrong_key() && !err.is_authentication());
}

#[test]
fn a_stale_sealer_cannot_write_past_a_rotation_and_refreshes_without_the_passphrase() {
    let (store, _) = sealed_db();
    let ring = Keyring::database();
    let alice = pass("alice's passphrase");
    let stale = ring.unlock(&store, &alice).unwrap();
    assert_eq!(stale.refresh(&store).unwrap().key_ids(), vec![1]);
    let k = b"__nx/doc/c/a".as_slice();

    // Another process starts a rotation.
    ring.begin_rotation(&store, &[&alice]).unwrap();
    // A write sealed by the stale sealer carries its keyring precondition: refused.
    let body = stale.seal(ctx(k, 1024, HEADER), b"{}").unwrap();
    let mut batch = Batch::new().set(k.to_vec(), [HEADER, &body].concat());
    batch.push_precondition(stale.keyring_precondition());
    assert!(store.apply(batch).unwrap_err().is_conflict());
    assert_eq!(store.get(k).unwrap(), None);

    // Refresh (no passphrase): both keys, sealing under the new one; the retry commits.
    let fresh = stale.refresh(&store).unwrap();
    assert_eq!(fresh.key_ids(), vec![1, 2]);
    assert_eq!(fresh.active_key_id(), 2);
    let body = fresh.seal(ctx(k, 1024, HEADER), b"{}").unwrap();
    let mut batch = Batch::new().set(k.to_vec(), [HEADER, &body].concat());
    batch.push_precondition(fresh.keyring_precondition());
    store.apply(batch).unwrap();

    // Another entry added: refresh still works; the entry re-wrapped: it does not.
    ring.add_entry(&store, &alice, "kms", &kms(9)).unwrap();
    assert_eq!(fresh.refresh(&store).unwrap().key_ids(), vec![1, 2]);
    ring.rewrap(&store, &alice, &pass("rotated passphrase"))
        .unwrap();
    assert!(fresh.refresh(&store).unwrap_err().is_wrong_key());
}

#[test]
fn a_raw_copy_to_another_backend_opens_with_the_same_passphrase() {
    let (store, sealer) = sealed_db();
    let k = b"__nx/doc/c/a".as_slice();
    let body = sealer.seal(ctx(k, 1024, HEADER), b"{\"a\":1}").unwrap();
    store
        .apply(Batch::new().set(k.to_vec(), [HEADER, &body].concat()))
        .unwrap();
    // `strata copy` copies every key and value as is: ciphertext and keyring included.
    let dir = tempfile::tempdir().unwrap();
    let sled = strata_sled::SledStore::open_store(dir.path()).unwrap();
    let mut batch = Batch::new();
    for (key, value) in snapshot(&store) {
        batch = batch.set(key, value);
    }
    sled.apply(batch).unwrap();
    let there = Keyring::database()
        .unlock(&sled, &pass("alice's passphrase"))
        .unwrap();
    let stored = sled.get(k).unwrap().unwrap();
    assert_eq!(stored, [HEADER, &body].concat(), "ciphertext copied as is");
    assert_eq!(
        there
            .open(ctx(k, 1024, HEADER), &stored[HEADER.len()..])
            .unwrap(),
        b"{\"a\":1}"
    );
    assert!(Keyring::database()
        .unlock(&sled, &pass("wrong"))
        .unwrap_err()
        .is_wrong_key());
}
