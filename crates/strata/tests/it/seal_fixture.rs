//! Frozen sealed-format fixtures (`tests/fixtures/sealed1/`, hex text, one value per
//! file): a database keyring in the middle of a data-key rotation (format 1, one
//! passphrase entry with cheap Argon2id parameters, data keys 1 and 2) and two sealed
//! documents (envelope format 2), one under each key.
//!
//! Sealing is randomized (keys, salt, nonces), so these fixtures cannot be re-encoded:
//! they are read. A format change that stops this build from unlocking the keyring or
//! opening either document fails this test until it ships a new format version (see
//! docs/format.md, "Sealed documents"). Corrupt copies (derived here) must be refused.
//!
//! The files were written once by running this test with `STRATA_BLESS_FIXTURES=1`
//! (which writes only missing files; it never overwrites a frozen one).

use std::path::PathBuf;
use strata::layout::envelope::Envelope;
use strata::seal::{
    open_document, peek, seal_document, Credential, KdfParams, Keyring, KeyringRecord, SealError,
    DATABASE_KEYRING_KEY,
};
use strata_store::{Batch, KvWrite, MemoryStore, Store};

const PASSPHRASE: &str = "fixture passphrase";
const TABLE_ID: u16 = 1024;
const DOC1_KEY: &[u8] = b"__nx/doc/accounts/a1";
const DOC2_KEY: &[u8] = b"__nx/doc/accounts/a2";
const DOC1_JSON: &[u8] = br#"{"id":"a1","balance_cents":500}"#;
const DOC2_JSON: &[u8] = br#"{"id":"a2","balance_cents":-7}"#;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sealed1")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn cred() -> Credential {
    Credential::passphrase(PASSPHRASE).with_kdf(KdfParams::insecure_fast())
}

/// Writes the three fixtures (only when blessing and all are missing).
fn bless() {
    let names = ["keyring_rotating", "document_key1", "document_key2"];
    if names
        .iter()
        .all(|n| dir().join(format!("{n}.hex")).exists())
        || std::env::var_os("STRATA_BLESS_FIXTURES").is_none()
    {
        return;
    }
    std::fs::create_dir_all(dir()).unwrap();
    let store = Store::new(MemoryStore::new());
    let ring = Keyring::database();
    let s1 = ring.create(&store, &cred(), "primary").unwrap();
    let d1 = seal_document(&s1, DOC1_KEY, TABLE_ID, Envelope::new(1, 1), DOC1_JSON).unwrap();
    let s2 = ring.begin_rotation(&store, &[&cred()]).unwrap();
    let d2 = seal_document(&s2, DOC2_KEY, TABLE_ID, Envelope::new(2, 5), DOC2_JSON).unwrap();
    let (kr, _) = ring.read(&store).unwrap().unwrap();
    for (name, bytes) in names.iter().zip([kr, d1, d2]) {
        let path = dir().join(format!("{name}.hex"));
        assert!(!path.exists(), "never overwrite a frozen fixture");
        std::fs::write(&path, format!("{}\n", hex(&bytes))).unwrap();
    }
}

fn frozen(name: &str) -> Vec<u8> {
    let path = dir().join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {} missing: {e}", path.display()));
    unhex(&text)
}

#[test]
fn the_frozen_sealed_fixtures_unlock_and_open() {
    bless();
    let keyring = frozen("keyring_rotating");
    let doc1 = frozen("document_key1");
    let doc2 = frozen("document_key2");

    // The keyring decodes without the key: ids, entry, parameters.
    let rec = KeyringRecord::decode(DATABASE_KEYRING_KEY, &keyring).unwrap();
    assert_eq!(rec.active_key_id(), 2);
    assert_eq!(rec.retiring_key_id(), Some(1));
    let entries = rec.entries();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].label, "primary");
    assert_eq!(entries[0].kind, "passphrase");
    assert_eq!(entries[0].kdf, Some(KdfParams::insecure_fast()));
    assert_eq!(entries[0].key_ids, vec![2, 1]);
    assert_eq!(
        rec.encode(),
        keyring,
        "the keyring re-encodes byte for byte"
    );

    // Headers read without the key.
    assert_eq!(peek(&doc1), Some((Envelope::new(1, 1), true)));
    assert_eq!(peek(&doc2), Some((Envelope::new(2, 5), true)));
    assert_eq!(&doc1[17..21], &[0, 0, 0, 1], "sealed under data key 1");
    assert_eq!(&doc2[17..21], &[0, 0, 0, 2], "sealed under data key 2");

    // With the passphrase both documents open.
    let store = Store::new(MemoryStore::new());
    store
        .apply(Batch::new().set(DATABASE_KEYRING_KEY.to_vec(), keyring.clone()))
        .unwrap();
    let sealer = Keyring::database().unlock(&store, &cred()).unwrap();
    assert_eq!(sealer.key_ids(), vec![1, 2]);
    assert_eq!(
        open_document(&sealer, DOC1_KEY, TABLE_ID, &doc1).unwrap(),
        (Envelope::new(1, 1), DOC1_JSON.to_vec())
    );
    assert_eq!(
        open_document(&sealer, DOC2_KEY, TABLE_ID, &doc2).unwrap(),
        (Envelope::new(2, 5), DOC2_JSON.to_vec())
    );

    // Refusals: a wrong passphrase, a corrupt keyring, a flipped or moved body.
    assert!(Keyring::database()
        .unlock(&store, &Credential::passphrase("nope"))
        .unwrap_err()
        .is_wrong_key());
    let mut bad = keyring.clone();
    bad[0] = b'X';
    assert!(matches!(
        KeyringRecord::decode(DATABASE_KEYRING_KEY, &bad),
        Err(SealError::CorruptedKeyring { .. })
    ));
    let mut flipped = doc1.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    assert!(open_document(&sealer, DOC1_KEY, TABLE_ID, &flipped)
        .unwrap_err()
        .is_authentication());
    assert!(open_document(&sealer, DOC2_KEY, TABLE_ID, &doc1)
        .unwrap_err()
        .is_authentication());
    assert!(open_document(&sealer, DOC1_KEY, TABLE_ID + 1, &doc1)
        .unwrap_err()
        .is_authentication());
}
