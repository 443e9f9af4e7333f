//! `verify_sealed` (issue 15 audit): a document stored in clear inside a sealed collection
//! (written behind strata's back, or by a build that did not seal it) is a failure with
//! and without the key — a sealed handle refuses to read it, so "every record ok" would
//! be a lie. A clear collection beside it is not affected.

use serde::{Deserialize, Serialize};
use strata::layout::envelope::{self, Envelope};
use strata::ops::verify::verify_sealed;
use strata::seal::{Credential, KdfParams, Keyring};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvWrite, MemoryStore, Store};

#[derive(Debug, Serialize, Deserialize)]
struct Acct {
    id: String,
}

fn pass() -> Credential {
    Credential::passphrase("audit15 verify").with_kdf(KdfParams::insecure_fast())
}

fn put_clear(store: &Store, key: &[u8]) {
    let value = envelope::encode(Envelope::new(1, 1), br#"{"id":"x"}"#);
    store.apply(Batch::new().set(key.to_vec(), value)).unwrap();
}

#[test]
fn a_clear_record_in_a_sealed_collection_fails_verification_with_and_without_the_key() {
    let store = Store::new(MemoryStore::new());
    let db = Database::builder(store.clone()).key(pass()).open().unwrap();
    let accounts = db
        .collection::<Acct>("accounts", CollectionOptions::new().sealed())
        .unwrap();
    let notes = db
        .collection::<Acct>("notes", CollectionOptions::new())
        .unwrap();
    // An empty sealed collection: its mark says it is sealed.
    db.collection::<Acct>("vault", CollectionOptions::new().sealed())
        .unwrap();
    accounts.put("a1", &Acct { id: "a1".into() }).unwrap();
    notes.put("n1", &Acct { id: "n1".into() }).unwrap();
    put_clear(&store, b"__nx/doc/accounts/a2");
    put_clear(&store, b"__nx/doc/vault/v1");

    let catalog = strata::layout::read_catalog(&store).unwrap();
    let sealer = Keyring::database().unlock(&store, &pass()).unwrap();
    for key in [Some(&sealer), None] {
        let report = verify_sealed(&store, &catalog, key).unwrap();
        let by = |name: &str| {
            report
                .collections
                .iter()
                .find(|c| c.collection == name)
                .unwrap()
                .clone()
        };
        assert_eq!(by("accounts").failed, 1, "{report:?}");
        assert_eq!(by("vault").failed, 1, "{report:?}");
        assert_eq!(by("notes").failed, 0, "{report:?}");
        assert_eq!(report.failed(), 2);
        let keys: Vec<&str> = report.failures.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["__nx/doc/accounts/a2", "__nx/doc/vault/v1"]);
        assert!(
            report.failures[0].reason.contains("stored in clear"),
            "{}",
            report.failures[0].reason
        );
    }
}
