//! A data-key rotation over damaged records in two collections (issue 15 audit): it
//! cannot finish, keeps the old key, and its error names every collection holding such
//! records and their total, not only the first.

use serde::{Deserialize, Serialize};
use strata::ops::rotate::RotateOptions;
use strata::seal::{Credential, KdfParams, Keyring, SealError};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Store};

#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    id: String,
}

fn pass() -> Credential {
    Credential::passphrase("audit15 rotate").with_kdf(KdfParams::insecure_fast())
}

fn flip(store: &Store, key: &[u8]) {
    let mut v = store.get(key).unwrap().unwrap();
    let last = v.len() - 1;
    v[last] ^= 1;
    store.apply(Batch::new().set(key.to_vec(), v)).unwrap();
}

#[test]
fn an_unfinishable_rotation_names_every_collection_with_damaged_records() {
    let store = Store::new(MemoryStore::new());
    let db = Database::builder(store.clone()).key(pass()).open().unwrap();
    for name in ["accounts", "invoices", "notes"] {
        let c = db
            .collection::<Doc>(name, CollectionOptions::new().sealed())
            .unwrap();
        for i in 0..3 {
            c.put(
                &format!("d{i}"),
                &Doc {
                    id: format!("d{i}"),
                },
            )
            .unwrap();
        }
    }
    flip(&store, b"__nx/doc/accounts/d0");
    flip(&store, b"__nx/doc/accounts/d2");
    flip(&store, b"__nx/doc/notes/d1");

    let err = db
        .rotate_data_key(&[&pass()], RotateOptions::new())
        .unwrap_err();
    match &err {
        SealError::RotationIncomplete { collection, failed } => {
            assert_eq!(*failed, 3, "{err}");
            assert_eq!(collection, "accounts`, `notes", "{err}");
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("`accounts`, `notes`"), "{msg}");
    let (_, rec) = Keyring::database().read(&store).unwrap().unwrap();
    assert_eq!(rec.retiring_key_id(), Some(1), "the old key was kept");
}
