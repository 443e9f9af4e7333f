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
use strata::collection::layout::{
    self, CATALOG_PREFIX, CATALOG_SEQ_KEY, DOC_PREFIX, FIRST_COLLECTION_ID, SWEEP_PREFIX,
};
use strata::header::{header_key, SchemaHeader, MIGRATION_PREFIX};
use strata::migrate::{check_checkpoint, CheckpointCheck, Registry};
use strata::payload::SweepMarker;
use strata::policy::{
    baseline_key, history_prefix, Baseline, ClientRecord, CutoverCheckpoint, FenceDoc, FenceState,
    CLIENTS_PREFIX, CUTOVER_PREFIX, DEFAULT_STALE_AFTER_MS, FENCE_KEY, JSONSCHEMA_PREFIX,
};
use strata::validate::{inspect_table, TableState};
use strata::Catalog;
use strata_store::{escape_key, Batch, KvRead, KvWrite, Pages, ScanLimits, Store, StoreError};

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

/// The `--json` document (format 1).
#[derive(Debug, Serialize)]
struct RepairDoc<'a> {
    format: u32,
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

/// The catalog records and the table-id counter. Returns the managed tables repair can
/// trust: the Numax tables in use and every readable collection.
fn catalog_findings(store: &Store, out: &mut Vec<Finding>) -> Result<Catalog, StoreError> {
    let mut catalog = strata::numax::catalog_in_use(store)?;
    let entries = records(store, CATALOG_PREFIX)?;
    // The collection each id of a readable record belongs to.
    let mut holders: BTreeMap<u16, String> = BTreeMap::new();
    let mut decoded = Vec::new();
    for (key, value) in &entries {
        decoded.push(layout::decode_catalog_entry(key, value));
    }
    // A duplicate id belongs to the collection whose schema header carries it, then to
    // one holding documents, then to the first in key order.
    let mut best: BTreeMap<u16, (bool, bool)> = BTreeMap::new();
    for (name, id) in decoded.iter().flatten() {
        let header_matches = store
            .get(&header_key(name))?
            .and_then(|h| SchemaHeader::decode(&h).ok())
            .is_some_and(|h| h.table_id == *id);
        let has_docs = store.prefix_exists(&layout::doc_prefix(name))?;
        let score = (header_matches, has_docs);
        if best.get(id).is_none_or(|b| score > *b) {
            best.insert(*id, score);
            holders.insert(*id, name.clone());
        }
    }
    let mut final_ids: Vec<(String, u16)> = Vec::new();
    for ((key, value), result) in entries.iter().zip(&decoded) {
        let problem = match result {
            Ok((name, id)) if holders.get(id) == Some(name) => {
                final_ids.push((name.clone(), *id));
                let _ = catalog.add(layout::table_def(name, *id));
                continue;
            }
            Ok((_, id)) => format!(
                "table id {id} is also recorded for collection `{}`",
                holders.get(id).map(String::as_str).unwrap_or_default()
            ),
            Err(e) => e.to_string(),
        };
        let finding = Finding::new(key, "catalog_record", Some(value.clone()), problem);
        let name_bytes = &key[CATALOG_PREFIX.len()..];
        let name = std::str::from_utf8(name_bytes)
            .ok()
            .filter(|n| layout::check_name(n).is_ok());
        let docs = [DOC_PREFIX, name_bytes, b"/"].concat();
        let has_docs = store.prefix_exists(&docs)?;
        // A valid name's schema header says which id the collection was given.
        let (hkey, header) = match name {
            Some(n) => {
                let k = header_key(n);
                let h = store.get(&k)?;
                (Some(k), h)
            }
            None => (None, None),
        };
        let header_id = header
            .as_deref()
            .and_then(|h| SchemaHeader::decode(h).ok())
            .map(|h| h.table_id)
            .filter(|id| *id >= FIRST_COLLECTION_ID && !holders.contains_key(id));
        match (name, header_id, &hkey) {
            (Some(n), Some(id), Some(hk)) => {
                final_ids.push((n.to_string(), id));
                holders.insert(id, n.to_string());
                let _ = catalog.add(layout::table_def(n, id));
                out.push(
                    finding
                        .rewrite(
                            layout::encode_catalog_record(id).to_vec(),
                            format!(
                                "rewrite it with table id {id}, the id its schema header `{}` carries",
                                escape_key(hk)
                            ),
                        )
                        .depends_on(hk, header.clone()),
                );
            }
            _ if !has_docs => {
                let f = finding.delete(format!(
                    "delete it: no document is stored under `{}`, and the next open of the collection records it again",
                    escape_key(&docs)
                ));
                // The header of that empty collection goes with it (a new registration
                // gets a new id, which a leftover header would contradict).
                if let (Some(hk), Some(h)) = (&hkey, &header) {
                    out.push(
                        Finding::new(
                            hk,
                            "schema_header",
                            Some(h.clone()),
                            format!(
                                "schema header of the unregistered collection `{}`",
                                name.unwrap_or_default()
                            ),
                        )
                        .delete("delete it with the catalog record (the collection holds no document)")
                        .depends_on(key, Some(value.clone())),
                    );
                }
                out.push(f);
            }
            _ => out.push(finding.manual(format!(
                "documents are stored under `{}` and the table id cannot be recovered from a schema header: restore the record from a backup",
                escape_key(&docs)
            ))),
        }
    }
    // The counter must decode and be at least every recorded id.
    let seq = store.get(CATALOG_SEQ_KEY)?;
    let highest = final_ids.iter().max_by_key(|(_, id)| *id);
    let problem = layout::check_seq(seq.as_deref(), highest.map(|(n, id)| (n.as_str(), *id)))
        .err()
        .map(|e| e.to_string());
    if let Some(problem) = problem {
        let f = Finding::new(CATALOG_SEQ_KEY, "catalog_counter", seq.clone(), problem);
        let mut f = match highest {
            Some((name, id)) => f.rewrite(
                id.to_be_bytes().to_vec(),
                format!("set it to {id}, the highest recorded table id (collection `{name}`)"),
            ),
            None => f.delete("delete it: no collection is recorded, so the next one gets id 1024"),
        };
        for (k, v) in &entries {
            f = f.depends_on(k, Some(v.clone()));
        }
        out.push(f);
    }
    Ok(catalog)
}

/// Migration checkpoints: corrupt, stale or orphaned ones, and interrupted migrations.
fn migration_findings(
    store: &Store,
    catalog: &Catalog,
    out: &mut Vec<Finding>,
) -> Result<(), StoreError> {
    let registry = Registry::certification(catalog);
    for (key, value) in records(store, MIGRATION_PREFIX)? {
        let name = String::from_utf8_lossy(&key[MIGRATION_PREFIX.len()..]).into_owned();
        let f = Finding::new(&key, "migration_checkpoint", Some(value.clone()), "");
        let Some(tm) = registry
            .tables()
            .iter()
            .find(|tm| tm.table().name() == name)
        else {
            let mut f = f.delete(
                "delete it: no managed table of that name is recorded, so no migration can resume it",
            );
            f.problem = format!("checkpoint of `{name}`, which is not a managed table");
            out.push(f);
            continue;
        };
        let hkey = header_key(&name);
        let header = store.get(&hkey)?;
        match check_checkpoint(store, tm) {
            Ok(CheckpointCheck::Resumable { from, to, cursor }) => {
                let at = match &cursor {
                    Some(c) => format!("resumable from `{}`", escape_key(c)),
                    None => "resumable from the beginning".to_string(),
                };
                let mut f =
                    f.info("run `strata migrate` to finish it (it resumes; nothing is stuck)");
                f.problem = format!("interrupted migration of {name} v{from} -> v{to}: {at}");
                out.push(f);
            }
            Ok(_) => {}
            Err(e) if e.is_checkpoint() => {
                let mut f = f
                    .delete("delete it: the next `strata migrate` restarts the table's step from the beginning (certification only reads records, so running it again is safe)")
                    .depends_on(&hkey, header);
                f.problem = e.to_string();
                out.push(f);
            }
            Err(strata::MigrateError::Store { source, .. }) => return Err(source),
            // Header problems (corrupt, future) are the header's, listed below.
            Err(_) => {}
        }
    }
    for t in catalog.tables() {
        let s = inspect_table(store, t)?;
        if let TableState::Corrupt { reason } = s.state {
            let hkey = header_key(t.name());
            let bytes = store.get(&hkey)?;
            out.push(
                Finding::new(&hkey, "schema_header", bytes, reason)
                    .manual("a schema version is never guessed: restore the header from a backup"),
            );
        }
    }
    Ok(())
}

/// Sweep markers: unreadable, of a collection that is not recorded, or stopped.
fn sweep_findings(store: &Store, out: &mut Vec<Finding>) -> Result<(), StoreError> {
    for (key, value) in records(store, SWEEP_PREFIX)? {
        let name = String::from_utf8_lossy(&key[SWEEP_PREFIX.len()..]).into_owned();
        let ckey = [CATALOG_PREFIX, &key[SWEEP_PREFIX.len()..]].concat();
        let recorded = store.get(&ckey)?;
        let f = Finding::new(&key, "sweep_marker", Some(value.clone()), "");
        match SweepMarker::decode(&name, &value) {
            Err(e) => {
                let mut f = f.delete("delete it: the marker is a hint (each document's payload version is the truth), the next sweep rescans the collection");
                f.problem = e.to_string();
                out.push(f);
            }
            Ok(_) if recorded.is_none() => {
                let mut f = f
                    .delete("delete it: no collection of that name is recorded")
                    .depends_on(&ckey, None);
                f.problem = format!("sweep marker of `{name}`, which is not a recorded collection");
                out.push(f);
            }
            Ok(m) => {
                if let Some(target) = m.in_progress {
                    let at = m.cursor().map_or_else(
                        || "the beginning".to_string(),
                        |c| format!("`{}`", escape_key(&c)),
                    );
                    let mut f = f.info(
                        "the next sweep resumes it once the lease expired (run the application's sweep)",
                    );
                    f.problem = format!(
                        "sweep of `{name}` toward v{target} in progress by `{}`, resumable from {at}",
                        m.runner.unwrap_or_default()
                    );
                    out.push(f);
                }
            }
        }
    }
    Ok(())
}

/// The fence and the client presence records. Returns the fence's pending collections
/// when the fence is readable.
fn policy_findings(
    store: &Store,
    now_ms: u64,
    out: &mut Vec<Finding>,
) -> Result<Option<BTreeSet<String>>, StoreError> {
    let mut generation = 0u64;
    let clients = records(store, CLIENTS_PREFIX)?;
    for (key, value) in &clients {
        let f = Finding::new(key, "client_presence", Some(value.clone()), "");
        match ClientRecord::decode(key, value) {
            Err(e) => {
                let mut f = f.delete(
                    "delete it: a live client rewrites its presence record at its next heartbeat",
                );
                f.problem = e.to_string();
                out.push(f);
            }
            Ok(c) => {
                generation = generation
                    .max(c.opened_generation)
                    .max(c.acked_generation.unwrap_or(0));
                if !c.is_live(now_ms, DEFAULT_STALE_AFTER_MS) {
                    let mut f = f.delete(format!(
                        "delete it: no heartbeat for {} s (the stale window is {} s), so the client is gone; a live one rewrites its record at its next heartbeat",
                        now_ms.saturating_sub(c.heartbeat_ms) / 1000,
                        DEFAULT_STALE_AFTER_MS / 1000
                    ));
                    f.problem =
                        format!("client `{}` (pid {}) stopped heartbeating", c.client, c.pid);
                    out.push(f);
                }
            }
        }
    }
    let Some(bytes) = store.get(FENCE_KEY)? else {
        return Ok(Some(BTreeSet::new()));
    };
    match FenceDoc::decode(&bytes) {
        Err(e) => {
            // A cutover interrupted under the damaged fence left its checkpoint: the
            // rewritten fence keeps it pending (toward the schema its checkpoint names),
            // so its writes stay fenced and the next `cutover` resumes after the
            // checkpoint instead of transforming the rows it already transformed again;
            // and no later repair takes the checkpoint for a leftover.
            let mut pending = Vec::new();
            let mut checkpoints = Vec::new();
            for (key, value) in records(store, CUTOVER_PREFIX)? {
                let name = String::from_utf8_lossy(&key[CUTOVER_PREFIX.len()..]).into_owned();
                if let Some(target_hash) = strata::ops::cutover::checkpoint_target(&value) {
                    pending.push(strata::policy::PendingCutover {
                        collection: name,
                        target_hash,
                    });
                    checkpoints.push((key, value));
                }
            }
            let doc = FenceDoc {
                generation,
                pending: pending.clone(),
                ..FenceDoc::default()
            };
            let kept = if pending.is_empty() {
                "cutovers it listed are forgotten: reopening their collections declares them again"
                    .to_string()
            } else {
                let names: Vec<&str> = pending.iter().map(|p| p.collection.as_str()).collect();
                format!(
                    "the cutovers of {} stay pending, as their checkpoints show: their writes stay fenced and the next `cutover` resumes each after its checkpoint, so no row is transformed twice; other cutovers it listed are forgotten",
                    names.join(", ")
                )
            };
            let mut f = Finding::new(FENCE_KEY, "fence", Some(bytes), e.to_string()).rewrite(
                doc.encode(),
                format!(
                    "rewrite it as a normal fence at generation {generation}, the highest any client recorded ({kept}; `strata fence abort --reset-corrupt N` picks another generation)"
                ),
            );
            for (k, v) in &clients {
                f = f.depends_on(k, Some(v.clone()));
            }
            for (k, v) in checkpoints {
                f = f.depends_on(&k, Some(v));
            }
            out.push(f);
            Ok(Some(pending.into_iter().map(|p| p.collection).collect()))
        }
        Ok(doc) => {
            if doc.state != FenceState::Normal && doc.lease_until_ms < now_ms {
                out.push(
                    Finding::new(
                        FENCE_KEY,
                        "fence",
                        Some(bytes),
                        format!(
                            "cutover {} by `{}`, whose lease expired {} ms ago",
                            doc.state,
                            doc.coordinator.clone().unwrap_or_default(),
                            now_ms - doc.lease_until_ms
                        ),
                    )
                    .info("another client takes the cutover over when it runs it; `strata fence abort` resets the fence"),
                );
            }
            Ok(Some(
                doc.pending.into_iter().map(|p| p.collection).collect(),
            ))
        }
    }
}

/// Cutover checkpoints of collections with no pending cutover.
fn cutover_findings(
    store: &Store,
    pending: Option<&BTreeSet<String>>,
    out: &mut Vec<Finding>,
) -> Result<(), StoreError> {
    for (key, value) in records(store, CUTOVER_PREFIX)? {
        let name = String::from_utf8_lossy(&key[CUTOVER_PREFIX.len()..]).into_owned();
        let f = Finding::new(&key, "cutover_checkpoint", Some(value.clone()), "");
        match pending {
            Some(p) if !p.contains(&name) => {
                let mut f = f
                    .delete("delete it: the fence lists no pending cutover of the collection, so no cutover resumes it (and a later one toward another schema would refuse it)")
                    .depends_on(FENCE_KEY, store.get(FENCE_KEY)?);
                f.problem = format!("leftover checkpoint of a cutover of `{name}`");
                out.push(f);
            }
            Some(_) => {
                if let Err(reason) = CutoverCheckpoint::new(&name, "").parse(&value) {
                    if !reason.contains("belongs to a cutover toward") {
                        let mut f = f.manual("the cutover is pending: restarting it could transform a document twice; restore the checkpoint from a backup");
                        f.problem = reason;
                        out.push(f);
                    }
                }
            }
            None => {}
        }
    }
    Ok(())
}

/// Unreadable schema baselines, rewritten from the newest history version.
fn baseline_findings(store: &Store, out: &mut Vec<Finding>) -> Result<(), StoreError> {
    for (key, value) in records(store, JSONSCHEMA_PREFIX)? {
        let name = String::from_utf8_lossy(&key[JSONSCHEMA_PREFIX.len()..]).into_owned();
        let Err(e) = Baseline::decode(&name, &value) else {
            continue;
        };
        let f = Finding::new(&key, "schema_baseline", Some(value.clone()), e.to_string());
        let newest = records(store, &history_prefix(&name))?.pop();
        match newest {
            Some((hk, hv))
                if Baseline::decode(&name, &hv).is_ok() && key == baseline_key(&name) =>
            {
                out.push(
                    f.rewrite(
                        hv.clone(),
                        format!(
                            "rewrite it from `{}`, the newest version of its schema history",
                            escape_key(&hk)
                        ),
                    )
                    .depends_on(&hk, Some(hv)),
                );
            }
            _ => out.push(f.manual(
                "no readable schema-history version to restore it from: restore it from a backup",
            )),
        }
    }
    Ok(())
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
    let prefix = strata::seal::ROTATION_CHECKPOINT_PREFIX;
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
            format: 1,
            db: db::describe(db_path),
            applied,
            changes,
            manual,
            findings: &findings,
        };
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
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
