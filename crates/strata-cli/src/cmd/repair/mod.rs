//! `strata repair [--apply] [--json]`: lists every stuck or corrupt metadata record it can
//! see, each with what it would do and why; `--apply` does it in ONE atomic batch, every
//! change guarded by the exact bytes inspected (a concurrent change refuses the whole
//! batch and changes nothing). Data records (documents, the sync tables) are never
//! touched; a problem only a backup can fix is listed as `manual`.
//!
//! | record | problem | action |
//! |---|---|---|
//! | `__nx/migration/<table>` | corrupt, outside or past the table, stale, another step, no such table | delete (the next `migrate` restarts the step; certification only reads) |
//! | `__nx/migration/<table>` | a valid checkpoint of an interrupted migration | none: "resumable from KEY" |
//! | `__nx/catalog/<collection>` | unreadable, duplicate id | rewrite from the collection's schema header, or delete when nothing is stored under it; else manual |
//! | `__nx/catalog-seq` | malformed, missing or behind the recorded ids | rewrite to the highest recorded id |
//! | `__nx/sweep/<collection>` | unreadable, or of an unrecorded collection | delete (the marker is a hint; the next sweep rescans) |
//! | `__nx/fence` | unreadable | rewrite as a normal fence at the highest generation the clients recorded, keeping pending every cutover whose checkpoint is in the store (toward the schema it names), so the cutover resumes and repair stays idempotent |
//! | `__nx/clients/<id>` | unreadable, or no heartbeat within the stale window | delete (a live client rewrites it at its next heartbeat) |
//! | `__nx/cutover/<collection>` | no cutover of the collection pending | delete |
//! | `__nx/jsonschema/<collection>` | unreadable | rewrite from the newest schema-history version, else manual |
//! | `__nx/sync/sequences` | malformed | delete (the next open rebuilds it) |
//! | `__nx/copy/progress` | an unfinished copy | manual: finish the copy (the store is incomplete) |
//! | `__nx/rotate/<collection>` | an unfinished data-key rotation | none: run the rotation again (it resumes) |
//! | `__nx/keys/database` | the keyring does not decode | manual: restore it from a backup (it holds the wrapped data key) |

use crate::db;
use crate::exit::{CmdResult, Failure, OK, UNSUPPORTED};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use strata::clock::{Clock, SystemClock};
use strata::layout;
use strata::layout::catalog::FIRST_COLLECTION_ID;
use strata::layout::header::{header_key, SchemaHeader};
use strata::layout::keys::MIGRATION_PREFIX;
use strata::layout::keys::{CATALOG_PREFIX, CATALOG_SEQ_KEY, DOC_PREFIX, SWEEP_PREFIX};
use strata::layout::keys::{CLIENTS_PREFIX, FENCE_KEY, JSONSCHEMA_PREFIX};
use strata::migrate::{check_checkpoint, CheckpointCheck, Registry};
use strata::ops::cutover::{CutoverCheckpoint, CUTOVER_PREFIX};
use strata::ops::sweep::SweepMarker;
use strata::policy::{
    baseline_key, history_prefix, Baseline, ClientRecord, FenceDoc, FenceState,
    DEFAULT_STALE_AFTER_MS,
};
use strata::validate::{inspect_table, TableState};
use strata::Catalog;
use strata_store::{escape_key, Batch, KvRead, KvWrite, Pages, ScanLimits, Store, StoreError};

mod policy;
mod tables;

use policy::{baseline_findings, cutover_findings, policy_findings};
use tables::{catalog_findings, migration_findings, sweep_findings};

/// Arguments of `strata repair`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Do what the listing says, in one atomic batch (without it, nothing is written).
    #[arg(long)]
    apply: bool,
    /// Print one JSON document instead of a list.
    #[arg(long)]
    json: bool,
}

/// What repair does about one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Action {
    /// Delete the record.
    Delete,
    /// Replace the record's value.
    Rewrite,
    /// Nothing repair may do: a backup, or another command, fixes it.
    Manual,
    /// Not a problem: a state worth knowing (an interrupted migration that resumes).
    None,
}

/// One record repair found.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Finding {
    /// The record's key (escaped).
    key: String,
    /// The kind of record.
    kind: &'static str,
    /// What is wrong (or what state it is in).
    problem: String,
    /// What repair does.
    action: Action,
    /// What exactly, and why that is safe.
    why: String,
    #[serde(skip)]
    raw_key: Vec<u8>,
    /// The bytes inspected (`None`: absent): the batch requires them still there.
    #[serde(skip)]
    inspected: Option<Vec<u8>>,
    /// The new value of a rewrite.
    #[serde(skip)]
    value: Option<Vec<u8>>,
    /// Other records the decision was made from, as read (also required unchanged).
    #[serde(skip)]
    depends: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Finding {
    fn new(
        key: &[u8],
        kind: &'static str,
        inspected: Option<Vec<u8>>,
        problem: impl Into<String>,
    ) -> Self {
        Finding {
            key: escape_key(key),
            kind,
            problem: problem.into(),
            action: Action::None,
            why: String::new(),
            raw_key: key.to_vec(),
            inspected,
            value: None,
            depends: Vec::new(),
        }
    }

    fn delete(mut self, why: impl Into<String>) -> Self {
        self.action = Action::Delete;
        self.why = why.into();
        self
    }

    fn rewrite(mut self, value: Vec<u8>, why: impl Into<String>) -> Self {
        self.action = Action::Rewrite;
        self.value = Some(value);
        self.why = why.into();
        self
    }

    fn manual(mut self, why: impl Into<String>) -> Self {
        self.action = Action::Manual;
        self.why = why.into();
        self
    }

    fn info(mut self, why: impl Into<String>) -> Self {
        self.action = Action::None;
        self.why = why.into();
        self
    }

    fn depends_on(mut self, key: &[u8], value: Option<Vec<u8>>) -> Self {
        self.depends.push((key.to_vec(), value));
        self
    }

    fn is_change(&self) -> bool {
        matches!(self.action, Action::Delete | Action::Rewrite)
    }
}

/// The `--json` document (written by [`crate::json::emit`], which adds its format).
#[derive(Debug, Serialize)]
struct RepairDoc<'a> {
    db: String,
    /// True when `--apply` wrote the changes.
    applied: bool,
    /// Records deleted or rewritten (by `--apply`), or that would be.
    changes: usize,
    /// Records repair cannot fix.
    manual: usize,
    findings: &'a [Finding],
}

const LIMITS: (usize, usize) = (1024, 16 << 20);

/// A record as read: key and value.
type Record = (Vec<u8>, Vec<u8>);

/// Every record under `prefix` (metadata records are small; a larger one is an error).
fn records(store: &Store, prefix: &[u8]) -> Result<Vec<Record>, StoreError> {
    let limits = ScanLimits::new(LIMITS.0, LIMITS.1)?;
    Pages::new(store, prefix, limits)
        .records()
        .map(|r| r.map(|r| (r.key, r.value)))
        .collect()
}

/// Lists every stuck or corrupt metadata record of `store` at clock `now_ms`.
pub(crate) fn plan(store: &Store, now_ms: u64) -> Result<Vec<Finding>, StoreError> {
    let mut out = Vec::new();
    let catalog = catalog_findings(store, &mut out)?;
    migration_findings(store, &catalog, &mut out)?;
    sweep_findings(store, &mut out)?;
    let pending = policy_findings(store, now_ms, &mut out)?;
    cutover_findings(store, pending.as_ref(), &mut out)?;
    baseline_findings(store, &mut out)?;
    sync_findings(store, &mut out)?;
    copy_findings(store, &mut out)?;
    rotation_findings(store, &mut out)?;
    keyring_findings(store, &mut out)?;
    Ok(out)
}

/// The sync store's sequence record (24 bytes, `NXSQ`, format 1).
fn sync_findings(store: &Store, out: &mut Vec<Finding>) -> Result<(), StoreError> {
    let key = strata_sync::SEQUENCES_KEY.as_bytes();
    let Some(v) = store.get(key)? else {
        return Ok(());
    };
    let problem = if v.len() != 24 {
        Some(format!("{} bytes (expected 24)", v.len()))
    } else if &v[..4] != b"NXSQ" {
        Some("wrong magic (expected `NXSQ`)".to_string())
    } else if v[4..6] != [0, 1] {
        Some(format!(
            "format {} (this build reads 1)",
            u16::from_be_bytes([v[4], v[5]])
        ))
    } else {
        None
    };
    if let Some(p) = problem {
        out.push(
            Finding::new(key, "sync_sequences", Some(v), format!("corrupt sequence record: {p}"))
                .delete("delete it: the next open of the sync store rebuilds it from the seen-ops and op-log records"),
        );
    }
    Ok(())
}

/// The progress record of an unfinished `strata copy` into this store.
fn copy_findings(store: &Store, out: &mut Vec<Finding>) -> Result<(), StoreError> {
    let key = crate::cmd::copy::PROGRESS_KEY;
    if let Some(v) = store.get(key)? {
        let from = serde_json::from_slice::<serde_json::Value>(&v)
            .ok()
            .and_then(|j| j.get("from").and_then(|f| f.as_str()).map(str::to_string))
            .unwrap_or_else(|| "?".into());
        out.push(
            Finding::new(key, "copy_progress", Some(v), format!("unfinished copy from `{from}`: this store is incomplete"))
                .manual("rerun the same `strata copy` to finish it, or delete this store and copy again (deleting the record would hide that the copy is incomplete)"),
        );
    }
    Ok(())
}

/// Checkpoints of a data-key rotation that has not finished (`NXRT`).
fn rotation_findings(store: &Store, out: &mut Vec<Finding>) -> Result<(), StoreError> {
    let prefix = strata::ops::rotate::ROTATION_CHECKPOINT_PREFIX;
    for (key, value) in records(store, prefix)? {
        let name = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
        let f = Finding::new(&key, "rotation_checkpoint", Some(value.clone()), "");
        let mut f = if value.starts_with(b"NXRT") {
            f.info("run the key rotation again: it resumes from this checkpoint and finishes (both keys open every record meanwhile)")
        } else {
            f.manual("a rotation checkpoint is never guessed: restore it from a backup, then run the key rotation again")
        };
        f.problem = if f.action == Action::None {
            format!("data-key rotation of `{name}` in progress")
        } else {
            format!("unreadable data-key rotation checkpoint of `{name}` (no `NXRT` magic)")
        };
        out.push(f);
    }
    Ok(())
}

/// The database keyring, when it does not decode: listed for a restore (it holds the
/// wrapped data key, which nothing else can rebuild), as `status` and `verify` report it.
fn keyring_findings(store: &Store, out: &mut Vec<Finding>) -> Result<(), StoreError> {
    let ring = strata::seal::Keyring::database();
    match ring.read(store) {
        Err(strata::seal::SealError::CorruptedKeyring { reason, .. }) => {
            let raw = store.get(ring.store_key())?;
            out.push(
                Finding::new(ring.store_key(), "keyring", raw, format!("corrupted database keyring: {reason}"))
                    .manual("restore the keyring record from a backup (it holds the wrapped data key: without it no sealed record opens, and a new keyring could not open them); repair never rewrites it"),
            );
            Ok(())
        }
        Err(strata::seal::SealError::Store(e)) => Err(e),
        _ => Ok(()),
    }
}

/// The one batch that does every change of `findings`: each change and every record it
/// was decided from are required to still hold the bytes inspected.
pub(crate) fn batch(findings: &[Finding]) -> Batch {
    let mut required: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    let mut batch = Batch::new();
    for f in findings.iter().filter(|f| f.is_change()) {
        required.insert(f.raw_key.clone(), f.inspected.clone());
        for (k, v) in &f.depends {
            required.entry(k.clone()).or_insert_with(|| v.clone());
        }
        batch = match (&f.action, &f.value) {
            (Action::Rewrite, Some(v)) => batch.set(f.raw_key.clone(), v.clone()),
            _ => batch.delete(f.raw_key.clone()),
        };
    }
    for (k, v) in required {
        batch = batch.require(k, v);
    }
    batch
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    // Planned on a read-only open: with nothing to change the store is never opened for
    // writing (which a redb file or a sled directory shows); with work, it is opened for
    // writing and planned again there.
    let reading = db::open_for_reading(db_path)?;
    let mut findings = plan(&reading, SystemClock.now_ms())?;
    let mut applied = false;
    if args.apply && findings.iter().any(Finding::is_change) {
        // Only part of a copy's source: what looks stuck may be what the copy has not
        // brought yet, so nothing is changed (the listing above is still shown without
        // `--apply`).
        crate::cmd::unfinished::refuse_partial_copy(
            &reading,
            &db::describe(db_path),
            "strata repair --apply",
        )?;
        drop(reading);
        let store = db::open_existing(db_path)?;
        findings = plan(&store, SystemClock.now_ms())?;
        if findings.iter().any(Finding::is_change) {
            match store.apply(batch(&findings)) {
                Ok(()) => applied = true,
                Err(e) if e.is_conflict() => {
                    return Err(Failure::error(format!(
                        "the store changed while repair inspected it ({e}); nothing was changed: run `strata repair` again"
                    )))
                }
                Err(e) => return Err(e.into()),
            }
            store.flush()?;
        }
    }
    let changes = findings.iter().filter(|f| f.is_change()).count();
    let manual = findings
        .iter()
        .filter(|f| f.action == Action::Manual)
        .count();
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = RepairDoc {
            db: db::describe(db_path),
            applied,
            changes,
            manual,
            findings: &findings,
        };
        crate::json::emit(&mut out, &doc)?;
    } else {
        for f in &findings {
            let verb = match f.action {
                Action::Delete | Action::Rewrite if applied => "done",
                Action::Delete | Action::Rewrite => "to do",
                Action::Manual => "manual",
                Action::None => "ok",
            };
            writeln!(out, "{} [{}]: {}", f.key, f.kind, f.problem)?;
            writeln!(out, "    {verb}: {}", f.why)?;
        }
        let summary = if findings.is_empty() {
            "no stuck or corrupt metadata found".to_string()
        } else if applied {
            format!("repaired {changes} record(s) in one atomic batch; no data record was touched")
        } else if changes > 0 {
            format!("{changes} record(s) to repair: run `strata repair --apply` to do it in one atomic batch (no data record is touched)")
        } else {
            "nothing repair can change".to_string()
        };
        writeln!(out, "{summary}")?;
        if manual > 0 {
            writeln!(
                out,
                "{manual} record(s) need a backup or another command (see `manual` above)"
            )?;
        }
    }
    out.flush()?;
    let stuck = manual > 0 || (changes > 0 && !applied);
    Ok(if stuck { UNSUPPORTED } else { OK })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use strata_store::{MemoryStore, Store};

    #[test]
    fn a_change_between_listing_and_applying_refuses_the_whole_batch() {
        let store = Store::new(MemoryStore::new());
        store
            .apply(
                Batch::new()
                    .set(b"__nx/sweep/users".to_vec(), b"{not json".to_vec())
                    .set(b"__nx/catalog-seq".to_vec(), b"\x04\x00\x00".to_vec()),
            )
            .unwrap();
        let findings = plan(&store, 0).unwrap();
        assert_eq!(
            findings.iter().filter(|f| f.is_change()).count(),
            2,
            "{findings:?}"
        );
        // Someone rewrites one of the records in between.
        store
            .apply(Batch::new().set(b"__nx/sweep/users".to_vec(), b"{still bad".to_vec()))
            .unwrap();
        let err = store.apply(batch(&findings)).unwrap_err();
        assert!(err.is_conflict(), "{err}");
        assert_eq!(
            store.get(b"__nx/catalog-seq").unwrap(),
            Some(b"\x04\x00\x00".to_vec()),
            "nothing applied"
        );
        assert_eq!(
            store.get(b"__nx/sweep/users").unwrap(),
            Some(b"{still bad".to_vec())
        );
    }
}
