//! One round trip per write (issue 24 item 1): a collection write on PostgreSQL decides on
//! the value the handle expects its document to hold — the bytes it last wrote, or absent
//! for a key it knows nothing of (a new id) — and the server checks that value in the
//! statement that writes. A wrong expectation writes nothing, the server answers with the
//! current value and the write is decided again on it; only a refusal on an expected
//! value reads the key. Both write paths (session functions, one message), and two
//! processes writing the same documents at once.

use super::{owner, require_pg, scratch_table};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;
use strata::{Collection, CollectionError, CollectionOptions, Database};
use strata_postgres::{PgOptions, PgStore};
use strata_store::Store;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Doc {
    n: u64,
    by: String,
}

fn doc(n: u64, by: &str) -> Doc {
    Doc {
        n,
        by: by.to_string(),
    }
}

fn open(pg: &Arc<PgStore>) -> (Database, Collection<Doc>) {
    let db = Database::builder(Store::from_arc(pg.clone()))
        .open()
        .unwrap();
    let c = db
        .collection::<Doc>("docs", CollectionOptions::new())
        .unwrap();
    (db, c)
}

/// `(batches, reads)` the handle's write primitive spent since `before`.
fn spent(pg: &PgStore, before: (u64, u64)) -> (u64, u64) {
    let now = pg.write_round_trips();
    (now.0 - before.0, now.1 - before.1)
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn writes_decide_on_the_expected_value_and_the_server_checks_it() {
    let url = require_pg!();
    for functions in [true, false] {
        let table = scratch_table();
        let _owner = owner(&url, &table);
        let connect = || {
            Arc::new(
                PgStore::connect_with(
                    &url,
                    PgOptions::new().table(&table).session_functions(functions),
                )
                .unwrap(),
            )
        };
        let (ours, theirs) = (connect(), connect());
        assert_eq!(ours.session_functions_in_use().unwrap(), functions);
        let (_a_db, a) = open(&ours);
        let (_b_db, b) = open(&theirs);

        // New ids: one batch each, no read.
        let t = ours.write_round_trips();
        for i in 0..10 {
            assert_eq!(a.put(&format!("k{i}"), &doc(i, "a")).unwrap(), 1);
        }
        assert_eq!(spent(&ours, t), (10, 0), "functions={functions}");
        // Overwrites of what this handle wrote: one batch each, no read.
        let t = ours.write_round_trips();
        for i in 0..10 {
            assert_eq!(a.put(&format!("k{i}"), &doc(i + 10, "a")).unwrap(), 2);
        }
        assert_eq!(spent(&ours, t), (10, 0));

        // Another handle overwrites k0 (its first batch, guessing a new id, is refused
        // with the stored value; no read either): lock 3.
        let t = theirs.write_round_trips();
        assert_eq!(b.put("k0", &doc(30, "b")).unwrap(), 3);
        assert_eq!(spent(&theirs, t), (2, 0));
        // Ours expected lock 2's bytes: refused with lock 3's, decided again — lock 4,
        // over B's version, two batches, no read.
        let t = ours.write_round_trips();
        assert_eq!(a.put("k0", &doc(40, "a")).unwrap(), 4);
        assert_eq!(spent(&ours, t), (2, 0));
        let d = b.get_document("k0").unwrap().unwrap();
        assert_eq!((d.value, d.lock_version), (doc(40, "a"), 4));

        // An update of a document this handle never saw: refused on "absent" (no lock
        // to compare), so the key is read and the update decided on it: one read, one
        // batch.
        assert_eq!(b.put("theirs", &doc(1, "b")).unwrap(), 1);
        let t = ours.write_round_trips();
        assert_eq!(a.update("theirs", &doc(2, "a"), 1).unwrap(), 2);
        assert_eq!(spent(&ours, t), (1, 1));
        // A stale expected lock is still refused on the stored one, writing nothing.
        assert!(matches!(
            a.update("theirs", &doc(3, "a"), 1),
            Err(CollectionError::Conflict { found: Some(2), .. })
        ));

        // An insert over a document another handle wrote: the guess "absent" is refused
        // with the stored value, the insert decided again on it — a conflict, nothing
        // written, no read.
        assert_eq!(b.put("taken", &doc(1, "b")).unwrap(), 1);
        let t = ours.write_round_trips();
        assert!(matches!(
            a.insert("taken", &doc(9, "a")),
            Err(CollectionError::Conflict { found: Some(1), .. })
        ));
        assert_eq!(spent(&ours, t), (1, 0));
        assert_eq!(b.get("taken").unwrap(), Some(doc(1, "b")));

        // A delete of a document this handle never wrote: the refusal on "absent"
        // (nothing to delete) is not trusted; the key is read and the delete made.
        assert_eq!(b.put("gone", &doc(1, "b")).unwrap(), 1);
        assert!(a.delete("gone").unwrap(), "the document existed");
        assert_eq!(b.get("gone").unwrap(), None);
    }
}

/// A write set updating documents its handle never saw: the decision on "absent" refuses
/// (no lock to compare), so the documents are read — ALL IN ONE statement, one snapshot —
/// and the set decided again on them: one read statement, one batch, whatever the count.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_write_set_reads_the_documents_it_did_not_expect_in_one_statement() {
    const DOCS: u64 = 40;
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let connect = || Arc::new(PgStore::connect_with(&url, PgOptions::new().table(&table)).unwrap());
    let (ours, theirs) = (connect(), connect());
    let (a_db, a) = open(&ours);
    let (_b_db, b) = open(&theirs);
    for i in 0..DOCS {
        assert_eq!(b.put(&format!("d{i:02}"), &doc(i, "b")).unwrap(), 1);
    }
    let t = ours.write_round_trips();
    let statements = ours.write_read_statements();
    let (_, written) = a_db
        .write(|w| {
            for i in 0..DOCS {
                a.update_in(w, &format!("d{i:02}"), &doc(i + 100, "a"), 1)?;
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(written.len() as u64, DOCS);
    assert_eq!(spent(&ours, t), (1, DOCS), "one batch, every document read");
    assert_eq!(
        ours.write_read_statements() - statements,
        1,
        "in one statement"
    );
    for i in 0..DOCS {
        let d = b.get_document(&format!("d{i:02}")).unwrap().unwrap();
        assert_eq!((d.value, d.lock_version), (doc(i + 100, "a"), 2));
    }
}

const CHILD: &str = "STRATA_PG_ONE_TRIP_CHILD";
const TEST: &str = "postgres::one_trip::two_processes_putting_the_same_documents_lose_no_write";
const PUTS: u64 = 150;
const SHARED: [&str; 3] = ["s0", "s1", "s2"];

/// One child: `PUTS` puts on each shared document, each a fresh decision (no lock given:
/// last writer wins), then one insert per contested id; prints the lock version every
/// put returned and the ids its inserts won.
fn child(role: &str) {
    let (who, table) = role.split_once(':').unwrap();
    let pg = Arc::new(super::peer(&super::pg_url(), table));
    let (_db, c) = open(&pg);
    let mut locks = Vec::new();
    for i in 0..PUTS {
        for key in SHARED {
            locks.push(format!("{key}={}", c.put(key, &doc(i, who)).unwrap()));
        }
    }
    let mut won = Vec::new();
    for i in 0..40 {
        let id = format!("new{i}");
        match c.insert(&id, &doc(i, who)) {
            Ok(1) => won.push(id),
            Ok(other) => panic!("an insert returned lock {other}"),
            Err(e) if e.is_conflict() => {}
            Err(e) => panic!("insert {id}: {e}"),
        }
    }
    println!("locks {}", locks.join(" "));
    println!("won {}", won.join(" "));
}

/// Two processes put the same three documents 150 times each, at once, every put decided
/// on the value its handle expects (its own last write, stale whenever the other process
/// wrote since) and checked by the server: every put gets its own lock version — for each
/// document the versions returned are exactly 1..=300, none twice, none skipped (a lost
/// update would repeat one) — and the last version is the document's. Then both insert
/// the same 40 new ids at once: each id is won by exactly one process, and holds its
/// document.
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn two_processes_putting_the_same_documents_lose_no_write() {
    if let Ok(role) = std::env::var(CHILD) {
        child(&role);
        return;
    }
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    {
        // The collection exists before the children race to open it.
        let pg = Arc::new(super::peer(&url, &table));
        let _ = open(&pg);
    }
    let spawn = |who: &str| super::spawn_child(TEST, CHILD, format!("{who}:{table}"), &url);
    let children = [spawn("p"), spawn("q")];
    let mut locks: Vec<(String, u64)> = Vec::new();
    let mut won: Vec<(String, String)> = Vec::new();
    for (c, who) in children.into_iter().zip(["p", "q"]) {
        let stdout = super::child_stdout(c, who);
        let line = |tag: &str| -> Vec<String> {
            let l = stdout
                .lines()
                .find(|l| l.starts_with(tag))
                .unwrap_or_else(|| panic!("child {who} reported no {tag}:\n{stdout}"));
            l[tag.len()..]
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        for entry in line("locks ") {
            let (key, lock) = entry.split_once('=').unwrap();
            locks.push((key.to_string(), lock.parse().unwrap()));
        }
        assert_eq!(locks.len() as u64 % PUTS, 0);
        won.extend(line("won ").into_iter().map(|id| (id, who.to_string())));
    }
    let pg = Arc::new(super::peer(&url, &table));
    let (_db, c) = open(&pg);
    for key in SHARED {
        let mut mine: Vec<u64> = locks
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, l)| *l)
            .collect();
        mine.sort_unstable();
        let want: Vec<u64> = (1..=2 * PUTS).collect();
        assert_eq!(
            mine, want,
            "{key}: a lock version repeated or skipped (a lost put)"
        );
        let d = c.get_document(key).unwrap().unwrap();
        assert_eq!(d.lock_version, 2 * PUTS, "{key}");
    }
    let ids: BTreeSet<&str> = won.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), won.len(), "an id was won twice: {won:?}");
    assert_eq!(ids.len(), 40, "an id was won by nobody: {won:?}");
    for (id, who) in &won {
        let d = c.get_document(id).unwrap().unwrap();
        assert_eq!((&d.value.by, d.lock_version), (who, 1), "{id}");
    }
}
