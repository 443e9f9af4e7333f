//! Sealed collections on a PostgreSQL store shared by independent handles (as several
//! processes hold them): the table holds no plaintext, a handle without the key cannot
//! write in clear (also into an empty sealed collection), and a data-key rotation run by one
//! handle while another writes leaves every record under the new key, readable by both.

use super::{owner, peer, require_pg, scratch_table};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use strata::ops::rotate::RotateOptions;
use strata::seal::{self, Credential, KdfParams, Keyring, SealError};
use strata::{CollectionError, CollectionOptions, Database};
use strata_store::{KvRead, ScanLimits, Store};

const MARKER: &str = "PG-PLAINTEXT-MARKER-3b9d";

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Note {
    id: String,
    text: String,
}

fn note(id: &str) -> Note {
    Note {
        id: id.into(),
        text: format!("{MARKER} {id}"),
    }
}

fn key() -> Credential {
    Credential::passphrase("pg sealed passphrase").with_kdf(KdfParams::insecure_fast())
}

fn all(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .scan(b"", None, ScanLimits::new(100_000, 1 << 30).unwrap())
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect()
}

fn no_plaintext(store: &Store) -> bool {
    all(store)
        .iter()
        .all(|(_, v)| !v.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()))
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn sealed_collections_across_handles_and_a_rotation_under_concurrent_writes() {
    let url = require_pg!();
    let table = scratch_table();
    let a = Store::new(owner(&url, &table));
    let b = Store::new(peer(&url, &table));

    let db_a = Database::builder(a.clone()).key(key()).open().unwrap();
    let notes_a = db_a
        .collection::<Note>("notes", CollectionOptions::new().sealed())
        .unwrap();
    // Declared sealed, still empty: another handle without the key cannot write into it.
    let keyless = Database::builder(b.clone()).open().unwrap();
    let err = keyless
        .collection::<Note>("notes", CollectionOptions::new())
        .unwrap()
        .put("x", &note("x"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            CollectionError::Seal {
                source: SealError::NeedsKey { .. },
                ..
            }
        ),
        "{err:?}"
    );
    for i in 0..300 {
        notes_a
            .put(&format!("n{i:03}"), &note(&format!("n{i:03}")))
            .unwrap();
    }
    assert!(no_plaintext(&a), "the table holds a field value in clear");

    // Handle b (with the key, not declaring sealed) writes while handle a rotates.
    let db_b = Database::builder(b.clone()).key(key()).open().unwrap();
    let notes_b = db_b
        .collection::<Note>("notes", CollectionOptions::new())
        .unwrap();
    let start = Arc::new(Barrier::new(2));
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (start, done) = (Arc::clone(&start), Arc::clone(&done));
        std::thread::spawn(move || {
            start.wait();
            let mut written = Vec::new();
            let mut i = 0;
            // Until the rotation finished, and at least 20 writes.
            while !done.load(Ordering::SeqCst) || i < 20 {
                let id = format!("w{i:03}");
                notes_b.put(&id, &note(&id)).unwrap();
                written.push(id);
                i += 1;
            }
            written
        })
    };
    start.wait();
    let report = db_a
        .rotate_data_key(&[&key()], RotateOptions::new())
        .unwrap();
    done.store(true, Ordering::SeqCst);
    let written = writer.join().unwrap();
    assert!(report.finished && report.new_key_id == 2, "{report:?}");

    // One key left, the new one; every record sealed under it, readable by both handles.
    let (_, ring) = Keyring::database().read(&b).unwrap().unwrap();
    assert_eq!((ring.active_key_id(), ring.retiring_key_id()), (2, None));
    let docs: Vec<_> = all(&b)
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"__nx/doc/notes/"))
        .collect();
    assert_eq!(docs.len(), 300 + written.len());
    for (k, v) in &docs {
        let (_, sealed) = seal::peek(v).unwrap();
        assert!(sealed, "{}", String::from_utf8_lossy(k));
        assert_eq!(
            seal::body_key_id(&v[17..]),
            Some(2),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
    let notes_a = db_a
        .collection::<Note>("notes", CollectionOptions::new().sealed())
        .unwrap();
    let reread = db_b
        .collection::<Note>("notes", CollectionOptions::new())
        .unwrap();
    for id in (0..300).map(|i| format!("n{i:03}")).chain(written) {
        assert_eq!(notes_a.get(&id).unwrap().unwrap(), note(&id), "{id}");
        assert_eq!(reread.get(&id).unwrap().unwrap(), note(&id), "{id}");
    }
    assert!(no_plaintext(&a));
}
