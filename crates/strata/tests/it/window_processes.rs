//! Two builds in real processes on one redb file, one process at a time, alternating
//! (issue #26): build 1 and build 2 each write and update the shared documents and their
//! own during a deploy window; nothing is refused, every field either build wrote is
//! there afterwards, and each row's content is what its last writer intended.
//!
//! The test re-runs its own binary (`--exact`) as the child, with the build, the round and
//! the store in the environment. `STRATA_WINDOW_DOCS` raises the document count (default
//! 10,000 shared documents, as the issue asks).

use super::window_shared::{build1, build2, Acct, AcctV2};
use std::path::Path;
use std::process::Command;
use strata::Database;
use strata_redb::{RedbDurability, RedbOptions};

const CHILD: &str = "STRATA_WINDOW_CHILD";
const TEST: &str = "window_processes::two_builds_alternate_on_one_redb_file_in_child_processes";
const ROUNDS: usize = 3;

fn docs() -> usize {
    std::env::var("STRATA_WINDOW_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn open(path: &Path) -> Database {
    let store = if path.exists() {
        RedbOptions::new()
            .durability(RedbDurability::Deferred)
            .open_existing(path)
    } else {
        RedbOptions::new()
            .durability(RedbDurability::Deferred)
            .create(path)
    }
    .unwrap();
    Database::builder(store.into_store())
        .policy(strata::policy::PolicyConfig::new().heartbeat(None))
        .open()
        .unwrap()
}

/// One child: build `build` in round `round`.
fn child(role: &str) {
    let mut parts = role.split(':');
    let build: u32 = parts.next().unwrap().parse().unwrap();
    let round: usize = parts.next().unwrap().parse().unwrap();
    let path = Path::new(parts.next().unwrap());
    let n = docs();
    let db = open(path);
    if build == 1 {
        let c = db.collection::<Acct>("accts", build1()).unwrap();
        for i in 0..n {
            let id = format!("s{i:05}");
            match c.get_document(&id).unwrap() {
                None => {
                    c.insert(
                        &id,
                        &Acct {
                            id: id.clone(),
                            owner: format!("o{i}"),
                            balance: 1,
                        },
                    )
                    .unwrap();
                }
                Some(d) => {
                    let mut v = d.value;
                    v.balance += 1;
                    c.update(&id, &v, d.lock_version).unwrap();
                }
            }
            let own = format!("one{round}-{i:05}");
            c.put(
                &own,
                &Acct {
                    id: own.clone(),
                    owner: "build1".into(),
                    balance: round as i64,
                },
            )
            .unwrap();
        }
    } else {
        let c = db.collection::<AcctV2>("accts", build2()).unwrap();
        assert_eq!(
            strata::ops::window::operational(db.store(), "accts").unwrap(),
            Some(1),
            "build 2 runs inside the window"
        );
        for i in 0..n {
            let id = format!("s{i:05}");
            let d = c.get_document(&id).unwrap().unwrap();
            let mut v = d.value;
            v.balance += 1;
            v.tags.push(format!("r{round}"));
            c.update(&id, &v, d.lock_version).unwrap();
            let own = format!("two{round}-{i:05}");
            c.put(
                &own,
                &AcctV2 {
                    id: own.clone(),
                    owner_name: "build2".into(),
                    balance: round as i64,
                    tags: vec![format!("own{round}")],
                },
            )
            .unwrap();
        }
    }
    strata_store::KvWrite::flush(db.store()).unwrap();
}

#[test]
fn two_builds_alternate_on_one_redb_file_in_child_processes() {
    if let Ok(role) = std::env::var(CHILD) {
        child(&role);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.redb");
    let exe = std::env::current_exe().unwrap();
    for round in 0..ROUNDS {
        for build in [1, 2] {
            let out = Command::new(&exe)
                .args(["--exact", TEST, "--nocapture", "--test-threads", "1"])
                .env(CHILD, format!("{build}:{round}:{}", path.display()))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "build {build} round {round} failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let n = docs();
    let db = open(&path);
    let c2 = db.collection::<AcctV2>("accts", build2()).unwrap();
    let tags: Vec<String> = (0..ROUNDS).map(|r| format!("r{r}")).collect();
    for i in 0..n {
        let id = format!("s{i:05}");
        let d = c2.get_document(&id).unwrap().unwrap();
        assert_eq!(d.stored_version, 1, "{id}: still at the window's version");
        // Inserted by build 1 with 1, then +1 by each build in each round after it.
        assert_eq!(d.value.balance, 1 + (2 * ROUNDS as i64 - 1), "{id}");
        assert_eq!(
            d.value.tags, tags,
            "{id}: build 2's tags survived build 1's updates"
        );
        assert_eq!(d.value.owner_name, format!("o{i}"));
    }
    for round in 0..ROUNDS {
        for i in (0..n).step_by(97) {
            let one = c2.get(&format!("one{round}-{i:05}")).unwrap().unwrap();
            assert_eq!(
                (one.owner_name.as_str(), one.balance),
                ("build1", round as i64)
            );
            let two = c2.get(&format!("two{round}-{i:05}")).unwrap().unwrap();
            assert_eq!(two.tags, vec![format!("own{round}")]);
        }
    }
    // Build 1 reads the whole store as it wrote it.
    drop(c2);
    drop(db);
    let db = open(&path);
    let c1 = db.collection::<Acct>("accts", build1()).unwrap();
    assert_eq!(c1.iter().count(), n * (1 + 2 * ROUNDS));
    assert!(c1.iter().all(|r| r.is_ok()));
}
