//! Keyring edge cases a careful user hits (issue 15 audit): a keyring lost while sealed
//! records remain must never be silently replaced by a fresh one; hostile Argon2id
//! parameters stored in a keyring are refused before any memory is allocated or time
//! spent; an empty passphrase is refused with a clear error.

use serde::{Deserialize, Serialize};
use strata::seal::{Credential, KdfParams, Keyring, SealError, DATABASE_KEYRING_KEY};
use strata::Database;
use strata::{CollectionError, CollectionOptions};
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, ScanLimits, Store};

#[derive(Debug, Serialize, Deserialize)]
struct Acct {
    id: String,
    note: String,
}

fn pass() -> Credential {
    Credential::passphrase("audit15 passphrase").with_kdf(KdfParams::insecure_fast())
}

/// The error and its sources, joined as the CLI prints them.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    std::iter::successors(Some(e), |e| e.source())
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

fn snapshot(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .scan(b"", None, ScanLimits::new(usize::MAX, 1 << 30).unwrap())
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}

/// A store with two sealed `accounts` documents under the passphrase.
fn sealed_store() -> Store {
    let store = Store::new(MemoryStore::new());
    let db = Database::builder(store.clone()).key(pass()).open().unwrap();
    let c = db
        .collection::<Acct>("accounts", CollectionOptions::new().sealed())
        .unwrap();
    for id in ["a1", "a2"] {
        c.put(
            id,
            &Acct {
                id: id.into(),
                note: "secret".into(),
            },
        )
        .unwrap();
    }
    store
}

fn delete_keyring(store: &Store) {
    store
        .apply(Batch::new().delete(DATABASE_KEYRING_KEY.to_vec()))
        .unwrap();
}

/// The keyring record was deleted (a bad restore, a stray `DELETE`): opening with the key
/// must not create a fresh keyring whose data key opens none of the sealed records (every
/// read would then claim the records were tampered with, and restoring the real keyring
/// later would lose what was written under the fresh one).
#[test]
fn a_keyed_open_over_sealed_records_without_their_keyring_is_refused_and_writes_nothing() {
    let store = sealed_store();
    delete_keyring(&store);
    let before = snapshot(&store);

    let err = Database::builder(store.clone())
        .key(pass())
        .open()
        .unwrap_err();
    let msg = chain(&err);
    assert!(
        matches!(
            &err,
            CollectionError::Seal {
                source: SealError::KeyringMissing { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(msg.contains("`__nx/keys/database`"), "{msg}");
    assert!(msg.contains("`__nx/doc/accounts/a1`"), "{msg}");
    assert!(msg.contains("restore"), "{msg}");
    assert_eq!(snapshot(&store), before, "the failed open wrote something");

    // Keyring::create refuses too, and unlock says the same instead of "not sealed".
    let ring = Keyring::database();
    let err = ring.create(&store, &pass(), "primary").unwrap_err();
    assert!(matches!(err, SealError::KeyringMissing { .. }), "{err:?}");
    let err = ring.unlock(&store, &pass()).unwrap_err();
    assert!(matches!(err, SealError::KeyringMissing { .. }), "{err:?}");
    assert_eq!(snapshot(&store), before);
}

/// A store whose documents are all clear still gets its keyring on the first keyed open
/// (sealing an existing clear database is allowed).
#[test]
fn a_first_keyed_open_of_a_clear_database_creates_the_keyring() {
    let store = Store::new(MemoryStore::new());
    let db = Database::builder(store.clone()).open().unwrap();
    let c = db
        .collection::<Acct>("notes", CollectionOptions::new())
        .unwrap();
    c.put(
        "n1",
        &Acct {
            id: "n1".into(),
            note: "clear".into(),
        },
    )
    .unwrap();
    Database::builder(store.clone()).key(pass()).open().unwrap();
    assert!(store.get(DATABASE_KEYRING_KEY).unwrap().is_some());
}

/// Overwrites the Argon2id parameters of the keyring's first (passphrase) entry.
fn set_stored_params(store: &Store, params: KdfParams) {
    let mut ring = store.get(DATABASE_KEYRING_KEY).unwrap().unwrap();
    let fast: Vec<u8> = [8u32, 1, 1].iter().flat_map(|x| x.to_be_bytes()).collect();
    let pos = ring.windows(12).position(|w| w == fast.as_slice()).unwrap();
    let new: Vec<u8> = [params.m_cost_kib, params.t_cost, params.parallelism]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    ring[pos..pos + 12].copy_from_slice(&new);
    store
        .apply(Batch::new().set(DATABASE_KEYRING_KEY.to_vec(), ring))
        .unwrap();
}

/// Parameters a tampered keyring could ask for that each stayed under the old per-field
/// limits (4 GiB, 1024 passes) but together mean hours of work and gigabytes of memory:
/// refused before Argon2 runs, naming the keyring and the entry.
#[test]
fn hostile_stored_argon2_parameters_are_refused_without_running_argon2() {
    for params in [
        KdfParams {
            m_cost_kib: 4 * 1024 * 1024,
            t_cost: 1024,
            parallelism: 1,
        },
        KdfParams {
            m_cost_kib: 4 * 1024 * 1024,
            t_cost: 1,
            parallelism: 1,
        },
        KdfParams {
            m_cost_kib: 1024 * 1024,
            t_cost: 1024,
            parallelism: 1,
        },
    ] {
        let store = sealed_store();
        set_stored_params(&store, params);
        let before = snapshot(&store);
        let err = Keyring::database().unlock(&store, &pass()).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, SealError::CorruptedKeyring { .. }),
            "{params:?}: {err:?}"
        );
        assert!(msg.contains("entry `primary`"), "{msg}");
        assert!(msg.contains("Argon2id"), "{msg}");
        let err = Database::builder(store.clone())
            .key(pass())
            .open()
            .unwrap_err();
        assert!(
            matches!(
                err,
                CollectionError::Seal {
                    source: SealError::CorruptedKeyring { .. },
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(snapshot(&store), before);
    }
}

/// Parameters Argon2 itself rejects (no memory, no pass, no lane) are a corrupted keyring
/// too, named as such when the keyring is read.
#[test]
fn invalid_stored_argon2_parameters_are_a_corrupted_keyring() {
    for (m, t, p) in [(0, 1, 1), (8, 0, 1), (8, 1, 0)] {
        let store = sealed_store();
        set_stored_params(
            &store,
            KdfParams {
                m_cost_kib: m,
                t_cost: t,
                parallelism: p,
            },
        );
        let err = Keyring::database().read(&store).unwrap_err();
        assert!(
            matches!(err, SealError::CorruptedKeyring { .. }),
            "{m}/{t}/{p}: {err:?}"
        );
        assert!(err.to_string().contains("entry `primary`"), "{err}");
    }
}

/// Creating an entry with such parameters is refused too (what this build cannot open,
/// it must not write).
#[test]
fn creating_an_entry_beyond_the_argon2_limits_is_refused() {
    let store = Store::new(MemoryStore::new());
    let heavy = Credential::passphrase("p").with_kdf(KdfParams {
        m_cost_kib: 4 * 1024 * 1024,
        t_cost: 1024,
        parallelism: 1,
    });
    let err = Keyring::database()
        .create(&store, &heavy, "primary")
        .unwrap_err();
    assert!(
        matches!(err, SealError::InvalidParameters { .. }),
        "{err:?}"
    );
    assert!(store.get(DATABASE_KEYRING_KEY).unwrap().is_none());
}

/// An empty passphrase protects nothing (e.g. `std::env::var(..).unwrap_or_default()`
/// with the variable unset): refused when creating a keyring or an entry, with a clear
/// error, and nothing is written.
#[test]
fn an_empty_passphrase_is_refused_with_a_clear_error() {
    let store = Store::new(MemoryStore::new());
    let empty = Credential::passphrase("").with_kdf(KdfParams::insecure_fast());
    let err = Database::builder(store.clone())
        .key(empty)
        .open()
        .unwrap_err();
    assert!(chain(&err).contains("empty"), "{err:?}");
    assert!(snapshot(&store).is_empty(), "an empty passphrase wrote");

    let store = sealed_store();
    let before = snapshot(&store);
    let empty = Credential::passphrase("").with_kdf(KdfParams::insecure_fast());
    let ring = Keyring::database();
    let err = ring
        .add_entry(&store, &pass(), "blank", &empty)
        .unwrap_err();
    assert!(
        matches!(err, SealError::InvalidParameters { .. }),
        "{err:?}"
    );
    let err = ring.rewrap(&store, &pass(), &empty).unwrap_err();
    assert!(
        matches!(err, SealError::InvalidParameters { .. }),
        "{err:?}"
    );
    assert_eq!(snapshot(&store), before);
}
