//! Explicit, resumable, memory-bounded migrations (the "Migration boundary", "Migration
//! registry" and "Legacy migration" parts of the Numax seed).
//!
//! * Every table owns a [`TableMigrations`] registry of `N → N+1` [`RecordStep`]s, validated
//!   before anything runs ([`Registry::validate`]).
//! * A [`Migrator`] takes the store's exclusive write lease for its whole session, then
//!   walks every table independently: it reads the header (no header, or an explicit v0
//!   header, means version 0), pre-checks the `NXMG` checkpoint, and runs each pending
//!   step as one [`crate::pass`] whose final batch writes the step's header and deletes the
//!   checkpoint atomically. A chain `0 → 1 → 2` writes the intermediate header before the
//!   next step starts from a fresh checkpoint.
//! * The legacy step ([`RecordStep::certify`]) validates every record with the table decoder and
//!   never rewrites a payload.
//! * [`verify`] is the read-only full certification scan behind `strata verify`.
//!
//! Opening a store never migrates; migration is this explicit call.
//!
//! ```
//! use strata::migrate::{Migrator, Registry};
//! use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Store};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::new(MemoryStore::new());
//! // A legacy (v0, header-less) gcounter value: u64 little-endian.
//! store.apply(Batch::new().set(b"__nx/crdt/gcounter/visits".to_vec(), 12u64.to_le_bytes().to_vec()))?;
//! let report = Migrator::new(Registry::numax())?.run(&store)?;
//! assert_eq!(report.tables.len(), 14);
//! assert_eq!(store.get(b"__nx/schema/gcounter-materialized")?, Some(b"NXDB\x00\x01\x00\x01".to_vec()));
//! # Ok(()) }
//! ```

mod checkpoint;
mod error;
mod precheck;
mod registry;
mod verification;

pub use checkpoint::{
    MigrationCheckpoint, MigrationCheckpointCodec, CHECKPOINT_FIXED_LEN, CHECKPOINT_FORMAT,
    CHECKPOINT_MAGIC,
};
pub use error::MigrateError;
pub use precheck::{check_checkpoint, CheckpointCheck};
use precheck::{precheck_checkpoint, read_header};
pub use registry::{RecordStep, RecordStepFn, Registry, TableMigrations};
pub use verification::{verify, StoreVerification, VerifiedTable};

use crate::catalog::TableDef;
use crate::header::{checkpoint_key, header_key, SchemaHeader};
use crate::pass::{Pass, PassLimits, Progress, RecordRef};
use serde::Serialize;
use std::time::Instant;
use strata_store::{
    lease_holder, manifest::Manifest, manifest::Tally, Batch, ExclusiveSession, KvRead, KvWrite,
    Mutation, Store, StoreError,
};

/// The operation name of the manifests a migration records
/// (`__nx/manifest/migrate/<table>`).
pub const MANIFEST_OPERATION: &str = "migrate";

/// The record limit of a certification step's batches under the default limits: a
/// certification writes nothing but its checkpoint, so its record limit only sets how
/// often the checkpoint is written (and how many records a resumed run checks again);
/// the byte budget still bounds every batch. Explicit [`Migrator::limits`] apply as given.
pub const CERTIFY_MAX_RECORDS: usize = 4096;

/// What happened to one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableOutcome {
    /// Already at the current version; nothing done.
    Current,
    /// Empty without a header: the current header was written.
    Initialized,
    /// One or more steps ran.
    Migrated,
    /// A dry run validated the pending steps; nothing was written.
    Validated,
}

/// Per-table summary of a migration (this is also the `--json` shape of `strata migrate`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableReport {
    /// The table.
    pub table: String,
    /// The version found (0 for no header).
    pub from: u16,
    /// The version reached.
    pub to: u16,
    /// Records processed (over all steps of this run).
    pub records: u64,
    /// Batches committed.
    pub batches: u64,
    /// Bytes scanned.
    pub bytes: u64,
    /// Wall time.
    pub seconds: f64,
    /// What happened.
    pub outcome: TableOutcome,
}

/// Summary of a migration session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrationReport {
    /// One entry per registered table, in registration order.
    pub tables: Vec<TableReport>,
    /// True when nothing was written.
    pub dry_run: bool,
    /// Wall time of the session.
    pub seconds: f64,
}

/// Events a migration reports while it runs.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum MigrationEvent<'a> {
    /// A step starts (or resumes) on a table.
    StepStarted {
        /// The table.
        table: &'a str,
        /// From version.
        from: u16,
        /// To version.
        to: u16,
        /// The cursor it resumes after, if a checkpoint was found.
        resumed_after: Option<&'a [u8]>,
    },
    /// A batch of a step was committed.
    Progress {
        /// From version.
        from: u16,
        /// To version.
        to: u16,
        /// The pass's progress (table, records, bytes, batches, elapsed).
        progress: &'a Progress<'a>,
    },
    /// A table is finished (including tables that were already current).
    TableFinished {
        /// Its summary.
        report: &'a TableReport,
    },
}

type AbortFn<'a> = Box<dyn FnMut() -> bool + 'a>;
type EventFn<'a> = Box<dyn FnMut(&MigrationEvent<'_>) + 'a>;

/// Runs a validated [`Registry`] against a store.
pub struct Migrator<'a> {
    registry: Registry,
    /// `None`: the defaults ([`PassLimits::default`]; certification steps
    /// [`CERTIFY_MAX_RECORDS`]).
    limits: Option<PassLimits>,
    /// The byte budget of the default limits (`None`: [`crate::pass::DEFAULT_MAX_BYTES`]);
    /// unused once [`Migrator::limits`] set both.
    max_bytes: Option<usize>,
    dry_run: bool,
    /// Set while [`Migrator::run`] holds the store's exclusive session.
    exclusive: bool,
    abort: Option<AbortFn<'a>>,
    events: Option<EventFn<'a>>,
}

impl std::fmt::Debug for Migrator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Migrator")
            .field("registry", &self.registry)
            .field("limits", &self.limits)
            .field("dry_run", &self.dry_run)
            .finish_non_exhaustive()
    }
}

impl<'a> Migrator<'a> {
    /// Validates `registry` (every table, before anything runs) and returns a migrator with
    /// default limits (512 records, 4 MiB; a certification step's batches
    /// [`CERTIFY_MAX_RECORDS`] records, 4 MiB).
    pub fn new(registry: Registry) -> Result<Self, MigrateError> {
        registry.validate()?;
        Ok(Migrator {
            registry,
            limits: None,
            max_bytes: None,
            dry_run: false,
            exclusive: false,
            abort: None,
            events: None,
        })
    }

    /// Sets the batch limits (of every step, certification included).
    pub fn limits(mut self, limits: PassLimits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Sets only the byte budget of every batch (at least 1 byte), keeping the default
    /// record limits (512 records; a certification step's [`CERTIFY_MAX_RECORDS`]).
    /// [`Migrator::limits`] overrides both.
    pub fn max_bytes(mut self, max_bytes: usize) -> Result<Self, MigrateError> {
        PassLimits::new(1, max_bytes)?;
        self.max_bytes = Some(max_bytes);
        Ok(self)
    }

    /// A dry run validates every record of every pending step and writes nothing. Steps
    /// after one that would rewrite records are not run (they would see unmigrated data).
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// An abort check polled at every batch boundary.
    pub fn abort_when(mut self, check: impl FnMut() -> bool + 'a) -> Self {
        self.abort = Some(Box::new(check));
        self
    }

    /// Receives [`MigrationEvent`]s.
    pub fn on_event(mut self, f: impl FnMut(&MigrationEvent<'_>) + 'a) -> Self {
        self.events = Some(Box::new(f));
        self
    }

    /// Migrates `store` under its exclusive session ([`ExclusiveSession`]: the in-process
    /// write lease plus, on a backend shared by several processes, the cross-process store
    /// lease; held for the whole session: other handles and processes keep reading, their
    /// writes wait until this returns), then flushes. A dry run takes no lease.
    ///
    /// The lease is not re-entrant: do not call this from a thread that already holds it
    /// (use [`Migrator::run_on`] with that lease instead).
    pub fn run(&mut self, store: &Store) -> Result<MigrationReport, MigrateError> {
        if self.dry_run {
            return self.run_on(store);
        }
        // The store's exclusive session: the in-process write lease, and on a backend that
        // other processes write to (PostgreSQL) the cross-process store lease — their
        // writers wait (bounded) and another migrator waits for this one to finish.
        let lease = ExclusiveSession::acquire(store, &lease_holder("strata migrate"), None)
            .map_err(|source| MigrateError::Store {
                table: "(store lease)".into(),
                source,
            })?;
        self.exclusive = true;
        let result = self.run_on(&lease);
        self.exclusive = false;
        let flushed = lease.flush().map_err(|source| MigrateError::Store {
            table: "(flush)".into(),
            source,
        });
        let report = result?;
        flushed?;
        Ok(report)
    }

    /// Migrates through any reader/writer — typically a [`strata_store::WriteLease`] the
    /// caller already holds. Does not flush.
    pub fn run_on<S: KvRead + KvWrite + ?Sized>(
        &mut self,
        store: &S,
    ) -> Result<MigrationReport, MigrateError> {
        let started = Instant::now();
        let mut tables = Vec::with_capacity(self.registry.tables().len());
        let registry = self.registry.clone();
        // Metadata of every table is checked before anything is written.
        for tm in registry.tables() {
            check_checkpoint(store, tm)?;
        }
        for tm in registry.tables() {
            let report = self.migrate_table(store, tm)?;
            self.emit(&MigrationEvent::TableFinished { report: &report });
            tables.push(report);
        }
        Ok(MigrationReport {
            tables,
            dry_run: self.dry_run,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    fn emit(&mut self, e: &MigrationEvent<'_>) {
        if let Some(f) = self.events.as_mut() {
            f(e);
        }
    }

    fn migrate_table<S: KvRead + KvWrite + ?Sized>(
        &mut self,
        store: &S,
        tm: &TableMigrations,
    ) -> Result<TableReport, MigrateError> {
        let t = tm.table();
        let name = t.name().to_string();
        let store_err = |source: StoreError| MigrateError::Store {
            table: name.clone(),
            source,
        };
        let started = Instant::now();
        let hkey = header_key(t.name());
        let ckey = checkpoint_key(t.name());
        let current = t.current_version();
        let mut header_bytes = store.get(&hkey).map_err(store_err)?;
        let found = match &header_bytes {
            None => None,
            Some(b) => Some(read_header(t, b)?),
        };
        let mut report = TableReport {
            table: name.clone(),
            from: found.unwrap_or(0),
            to: found.unwrap_or(0),
            records: 0,
            batches: 0,
            bytes: 0,
            seconds: 0.0,
            outcome: TableOutcome::Current,
        };
        let mut version = match found {
            Some(v) if v > current => {
                return Err(MigrateError::FutureVersion {
                    table: name,
                    found: v,
                    current,
                })
            }
            Some(v) => v,
            None => {
                let has_data = store.prefix_exists(t.prefix()).map_err(store_err)?;
                let has_checkpoint = store.get(&ckey).map_err(store_err)?.is_some();
                if !has_data && !has_checkpoint {
                    // An empty table: initialize it at the current version, as startup
                    // validation would.
                    if !self.dry_run {
                        let h = SchemaHeader::new(current, t.id()).encode().to_vec();
                        store
                            .apply(Batch::new().require_absent(hkey.clone()).set(hkey, h))
                            .map_err(store_err)?;
                    }
                    report.to = current;
                    report.outcome = if self.dry_run {
                        TableOutcome::Validated
                    } else {
                        TableOutcome::Initialized
                    };
                    return Ok(report);
                }
                0
            }
        };
        if version < tm.oldest() {
            return Err(MigrateError::TooOld {
                table: name,
                found: version,
                oldest: tm.oldest(),
            });
        }
        let stored_version = version;
        loop {
            let stored_ck = store.get(&ckey).map_err(store_err)?;
            if version == current {
                // A dry run only simulates the steps: the checkpoint of an interrupted
                // migration is still there and is the one it resumed from, not stale.
                let simulated = self.dry_run && version != stored_version;
                if let Some(bytes) = stored_ck.filter(|_| !simulated) {
                    return Err(MigrateError::StaleCheckpoint {
                        table: name,
                        version,
                        step: MigrationCheckpoint::decode(&bytes)
                            .ok()
                            .map(|c| (c.from, c.to)),
                    });
                }
                break;
            }
            // The registry was validated: every version from `oldest` to `current` has a step.
            let Some(step) = tm.step_from(version) else {
                return Err(MigrateError::RegistryGap {
                    table: name,
                    missing: version,
                });
            };
            let resumed = match &stored_ck {
                Some(bytes) => precheck_checkpoint(store, t, step, &ckey, bytes)?,
                None => None,
            };
            self.emit(&MigrationEvent::StepStarted {
                table: t.name(),
                from: step.from(),
                to: step.to(),
                resumed_after: resumed.as_deref(),
            });
            let (from, to) = (step.from(), step.to());
            let new_header = SchemaHeader::new(to, t.id()).encode().to_vec();
            let old_header = header_bytes.clone();
            let codec = MigrationCheckpointCodec::new(t.name(), t.id(), from, to);
            let events = &mut self.events;
            let abort = &mut self.abort;
            let hkey_c = hkey.clone();
            let (scope, scope_prefix) = (name.clone(), t.prefix().to_vec());
            // Only what strata owns is certified: Numax keeps writing its 14 sync tables
            // after a migration (and evicts its op log), so a manifest there would turn
            // its legitimate writes into an alarm, and a strata-migrated Numax store
            // would no longer be byte for byte what Numax's own migration produces.
            let certify = !is_numax_table(t);
            // Under the exclusive session nothing else writes the table, so a pass that
            // saw every record (not resumed) and rewrote none has seen the table exactly as
            // its final batch leaves it: the manifest's tally is taken as the pass reads,
            // instead of a second scan of the table at the end. Otherwise (a resumed step,
            // a step that writes records, `run_on` without the session) the final batch
            // recounts the table.
            let running = std::cell::RefCell::new(
                (certify && self.exclusive && resumed.is_none() && !self.dry_run)
                    .then(Tally::default),
            );
            let running = &running;
            let pass_report = Pass::new(t.name(), t.prefix().to_vec(), codec)
                .limits(self.limits.unwrap_or_else(|| {
                    let bytes = self.max_bytes.unwrap_or(crate::pass::DEFAULT_MAX_BYTES);
                    let records = if step.is_certification() {
                        CERTIFY_MAX_RECORDS
                    } else {
                        crate::pass::DEFAULT_MAX_RECORDS
                    };
                    PassLimits::new(records, bytes).unwrap_or_default()
                }))
                .dry_run(self.dry_run)
                // Kept on under the lease too: the checkpoint compare-and-swap is what stops
                // a writer that lost its lease from rewriting a checkpoint.
                .guard_checkpoint(true)
                .abort_when(move || abort.as_mut().is_some_and(|f| f()))
                .on_progress(move |p| {
                    if let Some(f) = events.as_mut() {
                        f(&MigrationEvent::Progress {
                            from,
                            to,
                            progress: p,
                        });
                    }
                })
                .on_complete(move |batch| {
                    batch.push_precondition(match &old_header {
                        Some(v) => strata_store::Precondition::Equals {
                            key: hkey_c.clone(),
                            value: v.clone(),
                        },
                        None => strata_store::Precondition::Absent {
                            key: hkey_c.clone(),
                        },
                    });
                    batch.push(Mutation::Set {
                        key: hkey_c.clone(),
                        value: new_header.clone(),
                    });
                    // The table as this final batch leaves it: `strata verify` compares
                    // against it until the next write to the table.
                    let tally = running.borrow_mut().take();
                    if !certify {
                        return Ok(());
                    }
                    let in_scope = |m: &Mutation| m.key().starts_with(&scope_prefix);
                    match tally {
                        Some(tally) if !batch.mutations().iter().any(in_scope) => {
                            let m =
                                Manifest::new(MANIFEST_OPERATION, &scope, &scope_prefix, &tally);
                            batch.push(Mutation::Set {
                                key: m.key(),
                                value: m.encode(),
                            });
                        }
                        _ => {
                            Manifest::record(
                                store,
                                MANIFEST_OPERATION,
                                &scope,
                                &scope_prefix,
                                batch,
                            )
                            .map_err(crate::pass::HookError::check)?;
                        }
                    }
                    Ok(())
                })
                .run(store, |r: &RecordRef<'_>, out: &mut Vec<Mutation>| {
                    let before = out.len();
                    let result = step.apply(t, r, out);
                    let mut running = running.borrow_mut();
                    if out.len() > before {
                        *running = None;
                    } else if let Some(tally) = running.as_mut() {
                        tally.add(r.key, r.value);
                    }
                    result
                })?;
            report.records += pass_report.records;
            report.batches += pass_report.batches;
            report.bytes += pass_report.bytes;
            report.to = to;
            tracing::info!(table = %name, from, to, records = pass_report.records, batches = pass_report.batches, dry_run = self.dry_run, "migration step finished");
            if self.dry_run {
                report.outcome = TableOutcome::Validated;
                if pass_report.mutations > 0 {
                    break;
                }
            } else {
                report.outcome = TableOutcome::Migrated;
                header_bytes = Some(SchemaHeader::new(to, t.id()).encode().to_vec());
            }
            version = to;
        }
        report.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// True for one of the 14 Numax sync tables (same id, name and prefix): a scope another
/// program (Numax) legitimately writes, which a migration never certifies with a
/// manifest.
pub fn is_numax_table(t: &TableDef) -> bool {
    crate::numax::NUMAX_TABLES
        .iter()
        .any(|&(id, name, prefix)| {
            id == t.id() && name == t.name() && prefix.as_bytes() == t.prefix()
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::header::checkpoint_key;
    use crate::numax::wire::GCOUNTER_PREFIX;
    use crate::pass::PassError;
    use crate::TableDef;
    use std::cell::Cell;
    use strata_store::manifest::{manifest_key, tally_scope};
    use strata_store::MemoryStore;

    /// A table strata owns (a collection's id and prefix): migrations certify it.
    const TABLE: &str = "acc";
    const PREFIX: &str = "__nx/doc/acc/";

    fn registry() -> Registry {
        Registry::certification(
            &Catalog::new()
                .with(TableDef::new(TABLE, 1024, PREFIX.as_bytes().to_vec(), 1))
                .unwrap(),
        )
    }

    fn legacy_store(n: u64) -> Store {
        let store = Store::new(MemoryStore::new());
        let mut b = Batch::new();
        for i in 0..n {
            b = b.set(
                [PREFIX.as_bytes(), format!("c{i:05}").as_bytes()].concat(),
                i.to_le_bytes().to_vec(),
            );
        }
        store.apply(b).unwrap();
        store
    }

    /// Numax keeps writing its sync tables after a migration: a migration records no
    /// manifest on them, so the migrated store is exactly the records plus the 14 headers
    /// (what Numax's own migration leaves).
    #[test]
    fn the_numax_tables_are_migrated_without_a_manifest() {
        let store = Store::new(MemoryStore::new());
        let mut b = Batch::new();
        for i in 0..50u64 {
            b = b.set(
                [GCOUNTER_PREFIX.as_bytes(), format!("c{i:05}").as_bytes()].concat(),
                i.to_le_bytes().to_vec(),
            );
        }
        store.apply(b).unwrap();
        Migrator::new(Registry::numax())
            .unwrap()
            .limits(small())
            .run(&store)
            .unwrap();
        assert!(!store
            .prefix_exists(strata_store::manifest::MANIFEST_PREFIX)
            .unwrap());
        assert!(crate::numax::tables().iter().all(is_numax_table));
        let own = TableDef::new(TABLE, 1024, PREFIX.as_bytes().to_vec(), 1);
        assert!(!is_numax_table(&own));
    }

    /// The stored manifest of the gcounter table matches a recount of the table.
    fn assert_certified(store: &Store, records: u64) {
        let m = Manifest::decode(&store.get(&manifest_key("migrate", TABLE)).unwrap().unwrap())
            .unwrap();
        let now = tally_scope(store, PREFIX.as_bytes(), None).unwrap();
        assert_eq!((m.records, m.bytes), (records, now.bytes));
        assert_eq!(m.digest, now.digest());
    }

    fn small() -> PassLimits {
        PassLimits::new(16, 1 << 20).unwrap()
    }

    #[test]
    fn the_tally_taken_while_certifying_many_pages_matches_a_recount() {
        let store = legacy_store(100);
        let report = Migrator::new(registry())
            .unwrap()
            .limits(small())
            .run(&store)
            .unwrap();
        let t = report.tables.iter().find(|t| t.table == TABLE).unwrap();
        assert_eq!(t.records, 100);
        assert!(t.batches > 5, "{t:?}");
        assert_certified(&store, 100);
    }

    /// A store lease holder's checkpoint batches may be lost in a server crash (PostgreSQL
    /// commits them without waiting for the WAL flush), always a suffix of them: the
    /// checkpoint is then an earlier one. The rerun certifies the rows after it again and
    /// finishes with a manifest of the whole table.
    #[test]
    fn a_resumed_or_rolled_back_certification_finishes_with_a_whole_manifest() {
        let store = legacy_store(100);
        let batches = Cell::new(0);
        let mut first: Option<Vec<u8>> = None;
        let ckey = checkpoint_key(TABLE);
        let err = Migrator::new(registry())
            .unwrap()
            .limits(small())
            .on_event(|e| {
                if let MigrationEvent::Progress { progress, .. } = e {
                    if progress.table == TABLE {
                        batches.set(batches.get() + 1);
                        if batches.get() == 1 {
                            first = store.get(&ckey).unwrap();
                        }
                    }
                }
            })
            .abort_when(|| batches.get() >= 4)
            .run(&store)
            .unwrap_err();
        assert!(
            matches!(err, MigrateError::Pass(PassError::Aborted { .. })),
            "{err}"
        );
        let latest = store.get(&ckey).unwrap().unwrap();
        let first = first.unwrap();
        assert_ne!(first, latest);
        // The last three checkpoint batches "lost": back to the first one.
        store.apply(Batch::new().set(ckey.clone(), first)).unwrap();
        let report = Migrator::new(registry())
            .unwrap()
            .limits(small())
            .run(&store)
            .unwrap();
        let t = report.tables.iter().find(|t| t.table == TABLE).unwrap();
        assert_eq!(t.records, 100 - 16);
        assert_eq!(store.get(&ckey).unwrap(), None);
        assert_certified(&store, 100);
    }
}
