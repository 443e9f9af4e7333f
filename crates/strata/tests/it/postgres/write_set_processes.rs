//! Multi-document writes across two real processes on one PostgreSQL table (issue 24):
//! two child processes (this test binary re-run with `--exact`) each move money between
//! eight accounts, every move ONE write set — the debit, the credit (both with the lock
//! version read) and a ledger entry naming the move — retried after a conflict. Afterwards:
//! the total is conserved (no move landed half), every account's balance is exactly its
//! opening balance plus the ledger's credits minus its debits (no update lost, no ledger
//! entry without its move or move without its entry), and the ledger holds exactly the
//! moves each child reported committed.
//!
//! `STRATA_WRITE_SET_MOVES` sets each child's number of moves (default 300).

use super::{owner, peer, require_pg, scratch_table};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use strata::{Collection, CollectionError, CollectionOptions, Database};
use strata_store::Store;

const CHILD: &str = "STRATA_PG_WRITE_SET_CHILD";
const TEST: &str =
    "postgres::write_set_processes::transfers_from_two_processes_conserve_the_total_and_never_land_half";
const ACCOUNTS: usize = 8;
const OPENING: i64 = 10_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Account {
    id: String,
    cents: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Move {
    from: String,
    to: String,
    cents: i64,
}

fn moves() -> usize {
    std::env::var("STRATA_WRITE_SET_MOVES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn open(store: Store) -> (Database, Collection<Account>, Collection<Move>) {
    let db = Database::builder(store).open().unwrap();
    let accounts = db
        .collection::<Account>("accounts", CollectionOptions::new())
        .unwrap();
    let ledger = db
        .collection::<Move>("ledger", CollectionOptions::new())
        .unwrap();
    (db, accounts, ledger)
}

fn name(i: usize) -> String {
    format!("acct{i}")
}

/// One child: `moves()` committed moves between pseudo-random pairs of accounts; prints
/// how many it committed and how many attempts conflicted.
fn child(role: &str) {
    let (n, table) = role.split_once(':').unwrap();
    let n: u64 = n.parse().unwrap();
    let (db, accounts, ledger) = open(Store::new(peer(&super::pg_url(), table)));
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (n + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut done, mut conflicts) = (0usize, 0usize);
    while done < moves() {
        let a = (next() % ACCOUNTS as u64) as usize;
        let b = (a + 1 + (next() % (ACCOUNTS as u64 - 1)) as usize) % ACCOUNTS;
        let cents = (next() % 50 + 1) as i64;
        let (from, to) = (name(a), name(b));
        let f = accounts.get_document(&from).unwrap().unwrap();
        let t = accounts.get_document(&to).unwrap().unwrap();
        let entry = format!("p{n}-{done:05}");
        let result = db.write(|w| {
            accounts.update_in(
                w,
                &from,
                &Account {
                    id: from.clone(),
                    cents: f.value.cents - cents,
                },
                f.lock_version,
            )?;
            accounts.update_in(
                w,
                &to,
                &Account {
                    id: to.clone(),
                    cents: t.value.cents + cents,
                },
                t.lock_version,
            )?;
            ledger.insert_in(
                w,
                &entry,
                &Move {
                    from: from.clone(),
                    to: to.clone(),
                    cents,
                },
            )
        });
        match result {
            Ok(((), written)) => {
                assert_eq!(written.len(), 3);
                done += 1;
            }
            Err(e) if e.document_error().is_some_and(CollectionError::is_conflict) => {
                conflicts += 1;
            }
            Err(e) => panic!("move {entry} failed: {e}"),
        }
    }
    println!("committed={done} conflicts={conflicts}");
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn transfers_from_two_processes_conserve_the_total_and_never_land_half() {
    if let Ok(role) = std::env::var(CHILD) {
        child(&role);
        return;
    }
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    {
        let (_db, accounts, _) = open(Store::new(peer(&url, &table)));
        for i in 0..ACCOUNTS {
            accounts
                .insert(
                    &name(i),
                    &Account {
                        id: name(i),
                        cents: OPENING,
                    },
                )
                .unwrap();
        }
    }
    let spawn = |n: usize| super::spawn_child(TEST, CHILD, format!("{n}:{table}"), &url);
    // Both at once.
    let children = [spawn(0), spawn(1)];
    let mut conflicts = 0;
    for (i, c) in children.into_iter().enumerate() {
        let stdout = super::child_stdout(c, &i.to_string());
        // The child's own report (checks the role it ran, too).
        let line = stdout
            .lines()
            .find(|l| l.starts_with("committed="))
            .unwrap_or_else(|| panic!("child {i} reported nothing:\n{stdout}"));
        let (committed, c) = line.split_once(' ').unwrap();
        assert_eq!(committed, format!("committed={}", moves()), "child {i}");
        conflicts += c.trim_start_matches("conflicts=").parse::<usize>().unwrap();
    }
    let (_db, accounts, ledger) = open(Store::new(peer(&url, &table)));
    let mut expected: BTreeMap<String, i64> = (0..ACCOUNTS).map(|i| (name(i), OPENING)).collect();
    let mut entries = 0;
    for row in ledger.iter() {
        let m = row.unwrap().value;
        *expected.get_mut(&m.from).unwrap() -= m.cents;
        *expected.get_mut(&m.to).unwrap() += m.cents;
        entries += 1;
    }
    assert_eq!(
        entries,
        2 * moves(),
        "the ledger holds exactly the committed moves"
    );
    let mut total = 0;
    for (id, want) in &expected {
        let d = accounts.get_document(id).unwrap().unwrap();
        assert_eq!(
            d.value.cents, *want,
            "{id}: balance differs from its ledger (a lost update or a half move)"
        );
        total += d.value.cents;
    }
    assert_eq!(
        total,
        OPENING * ACCOUNTS as i64,
        "the total is not conserved"
    );
    println!(
        "two processes: {} moves each, {conflicts} conflicting attempts retried",
        moves()
    );
}
