//! A collection handle's write hints (`strata::collection` `hint`): a put of a document
//! the handle wrote last uses the bytes it wrote as its precondition instead of reading;
//! a hint made stale by another handle's (another process's) write only costs a retry.

use super::{owner, peer, require_pg, scratch_table};
use serde::{Deserialize, Serialize};
use strata::CollectionOptions;
use strata::Database;
use strata_store::Store;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Doc {
    n: u32,
    by: String,
}

fn doc(n: u32, by: &str) -> Doc {
    Doc {
        n,
        by: by.to_string(),
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_stale_hint_from_another_handles_write_is_retried_exactly() {
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let a_db = Database::builder(Store::new(peer(&url, &table)))
        .open()
        .unwrap();
    let a = a_db
        .collection::<Doc>("docs", CollectionOptions::new())
        .unwrap();
    let b_db = Database::builder(Store::new(peer(&url, &table)))
        .open()
        .unwrap();
    let b = b_db
        .collection::<Doc>("docs", CollectionOptions::new())
        .unwrap();

    // A writes twice (the second put uses its hint), B then overwrites: A's hint is stale.
    assert_eq!(a.put("x", &doc(1, "a")).unwrap(), 1);
    assert_eq!(a.put("x", &doc(2, "a")).unwrap(), 2);
    assert_eq!(b.put("x", &doc(3, "b")).unwrap(), 3);
    // A's put fails its precondition, reads, and writes over B's version (not over the
    // one it remembered): lock 4, nothing lost or duplicated.
    assert_eq!(a.put("x", &doc(4, "a")).unwrap(), 4);
    let seen = b.get_document("x").unwrap().unwrap();
    assert_eq!((seen.value, seen.lock_version), (doc(4, "a"), 4));

    // B deletes it; A's hint names bytes that are gone: the put recreates it at lock 1.
    assert!(b.delete("x").unwrap());
    assert_eq!(a.put("x", &doc(5, "a")).unwrap(), 1);
    assert_eq!(b.get("x").unwrap(), Some(doc(5, "a")));

    // An optimistic update never trusts a hint: B's lock is checked against the store.
    assert_eq!(b.put("x", &doc(6, "b")).unwrap(), 2);
    assert_eq!(a.update("x", &doc(7, "a"), 2).unwrap(), 3);
    assert!(a.update("x", &doc(8, "a"), 2).is_err(), "lock 2 is gone");
    assert_eq!(b.get("x").unwrap(), Some(doc(7, "a")));

    // Many alternating writers over a few keys: every put counts exactly once.
    for round in 0..20u32 {
        for k in ["p", "q"] {
            let (w, by) = if round % 3 == 0 { (&b, "b") } else { (&a, "a") };
            assert_eq!(w.put(k, &doc(round, by)).unwrap(), u64::from(round) + 1);
        }
    }
    for k in ["p", "q"] {
        let d = a.get_document(k).unwrap().unwrap();
        assert_eq!((d.value, d.lock_version), (doc(19, "a"), 20));
    }
}
