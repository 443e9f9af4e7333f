//! Real crash test, on each embedded backend: `strata migrate` on ≥100k legacy records in
//! a sled datastore (30k in a redb file, whose fsync per batch makes it slower) is
//! SIGKILLed at random batch boundaries-or-later several times (`STRATA_CRASH_ITERS`,
//! default 3), then a final run completes. After every kill the checkpoint only moved
//! forward and no payload byte changed; at the end every header is current, no checkpoint
//! remains, and every payload byte is identical.
//!
//! The kill point is random: the child logs each committed batch (`STRATA_LOG`), the
//! parent picks a random batch count and kills the child as soon as it has seen that many
//! — the child keeps running meanwhile, so the kill lands anywhere in a later batch.
//! The seed is printed; set `STRATA_CRASH_SEED` to replay a run.

use crate::support::{legacy_records, payload, snapshot};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use strata::layout::header::SchemaHeader;
use strata::layout::header::{checkpoint_key, header_key};
use strata::migrate::MigrationCheckpoint;
use strata_store::{KvRead, KvWrite, Store};

/// Creates the store and writes `n` legacy records to it (flushed).
fn build(backend: Backend, db: &Path, n: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let store = backend.create(db);
    let all = legacy_records(&store, n);
    store.flush().unwrap();
    all
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*: enough randomness for kill points, replayable from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The embedded backend a run uses.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Sled,
    Redb,
}

impl Backend {
    /// A new, empty store at `db`.
    fn create(self, db: &Path) -> Store {
        match self {
            Backend::Sled => strata_sled::SledStore::open_store(db).unwrap(),
            Backend::Redb => strata_redb::RedbStore::create_store(db).unwrap(),
        }
    }

    /// The existing store at `db`.
    fn open(self, db: &Path) -> Store {
        match self {
            Backend::Sled => strata_sled::SledStore::open_existing(db)
                .unwrap()
                .into_store(),
            Backend::Redb => strata_redb::RedbStore::open_existing(db)
                .unwrap()
                .into_store(),
        }
    }

    /// The store's path in a temporary directory.
    fn file_name(self) -> &'static str {
        match self {
            Backend::Sled => "db",
            Backend::Redb => "store.redb",
        }
    }

    /// The default record count (`STRATA_CRASH_RECORDS` overrides it).
    fn default_records(self) -> usize {
        match self {
            Backend::Sled => 100_000,
            Backend::Redb => 30_000,
        }
    }
}

/// Per table: (header version if any, checkpoint cursor if any) — the migration position.
type Position = (Option<u16>, Option<Vec<u8>>);

fn positions(store: &Store) -> BTreeMap<&'static str, Position> {
    strata::numax::NUMAX_TABLES
        .iter()
        .map(|&(id, name, _)| {
            let h = store.get(&header_key(name)).unwrap().map(|b| {
                let h = SchemaHeader::decode(&b).unwrap();
                assert_eq!(h.table_id, id);
                h.version
            });
            let c = store.get(&checkpoint_key(name)).unwrap().map(|b| {
                let c = MigrationCheckpoint::decode(&b).unwrap();
                assert_eq!((c.table_id, c.from, c.to), (id, 0, 1), "{name}");
                c.cursor
            });
            assert!(
                !(h.is_some() && c.is_some()),
                "{name}: header and checkpoint together"
            );
            (name, (h, c))
        })
        .collect()
}

/// True when `new` is at or after `old`: a header beats any checkpoint, a later cursor
/// beats an earlier one, and nothing goes back to "not started".
fn not_behind(old: &Position, new: &Position) -> bool {
    match (old, new) {
        ((Some(_), _), (h, _)) => h.is_some(),
        ((None, None), _) => true,
        ((None, Some(_)), (Some(_), _)) => true,
        ((None, Some(a)), (None, Some(b))) => b >= a,
        ((None, Some(_)), (None, None)) => false,
    }
}

fn migrate_cmd(db: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
    cmd.arg("--db")
        .arg(db)
        .args(["migrate", "--max-records", "512"])
        .env("STRATA_LOG", "strata::pass=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

#[test]
fn sigkilled_migrations_resume_and_lose_nothing() {
    crash_and_resume(Backend::Sled);
}

#[test]
fn sigkilled_migrations_on_redb_resume_and_lose_nothing() {
    crash_and_resume(Backend::Redb);
}

fn crash_and_resume(backend: Backend) {
    let records = env_usize("STRATA_CRASH_RECORDS", backend.default_records());
    let iters = env_usize("STRATA_CRASH_ITERS", 3);
    let seed = std::env::var("STRATA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        });
    eprintln!(
        "crash test ({backend:?}): {records} records, {iters} kills, STRATA_CRASH_SEED={seed}"
    );
    let mut rng = Rng(seed);

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(backend.file_name());
    let expected = build(backend, &db, records);
    // 512-record batches over the populated tables, plus a final batch per table.
    let total_batches = (records / 512 + 14) as u64;

    let mut last = {
        let store = backend.open(&db);
        positions(&store)
    };
    let mut kills = 0;
    for i in 0..iters {
        let target = 1 + rng.below(total_batches / iters.max(1) as u64 + 1);
        let mut child = migrate_cmd(&db).spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut seen = 0u64;
        let mut killed = false;
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains("pass batch committed") {
                seen += 1;
                if seen >= target {
                    child.kill().unwrap();
                    killed = true;
                    break;
                }
            }
        }
        let status = child.wait().unwrap();
        if !killed {
            // The migration finished before the chosen point.
            assert!(status.success(), "iteration {i}: {status:?}");
            eprintln!("iteration {i}: finished before batch {target}");
            break;
        }
        kills += 1;
        eprintln!("iteration {i}: killed after {seen} committed batches");
        let store = backend.open(&db);
        let now = positions(&store);
        for (name, pos) in &now {
            assert!(
                not_behind(&last[name], pos),
                "{name}: moved back from {:?} to {pos:?}",
                last[name]
            );
        }
        assert_eq!(
            payload(&snapshot(&store)),
            expected,
            "iteration {i}: a payload byte changed"
        );
        last = now;
    }
    assert!(kills >= 1 || iters == 0, "no run was killed");

    let out = migrate_cmd(&db).stderr(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "final run: {out:?}");
    let store = backend.open(&db);
    let all = snapshot(&store);
    assert_eq!(payload(&all), expected, "every payload byte identical");
    for (id, name, _) in strata::numax::NUMAX_TABLES {
        assert_eq!(
            all.get(&header_key(name))
                .map(|b| SchemaHeader::decode(b).unwrap()),
            Some(SchemaHeader::new(1, id)),
            "{name}"
        );
    }
    assert!(
        !all.keys().any(|k| k.starts_with(b"__nx/migration/")),
        "no checkpoint remains"
    );
    assert!(strata::validate::validate_and_init(&store, &strata::numax::catalog()).is_ok());
}
