//! Unfinished work, as every read-only command reports it (#23 item 3): an unfinished
//! `strata copy` into this store (its progress record `__nx/copy/progress`), a sweep
//! running or interrupted (its marker's `in_progress`), a cutover pending or interrupted
//! (the fence), a data-key rotation interrupted (its checkpoint, or the keyring's
//! retiring key), a migration interrupted (a resumable checkpoint), a revert interrupted
//! (its record `__nx/revert/<collection>`; reported as a sweep: it is the downcast sweep).
//!
//! Each kind is its own verdict with its own exit code ([`verdict`]), reported by `status`,
//! `verify` and `collections` (and listed, `unfinished` in `--json`, with what was found
//! and what to do):
//!
//! * `unfinished_copy`, exit 7 ([`crate::exit::UNFINISHED`]): the store holds only part
//!   of its source, so the commands say so instead of judging the part (it beats every
//!   other verdict of the tables), and no command certifies, migrates or changes it
//!   ([`refuse_partial_copy`]) — the only ways forward are resuming the copy or deleting
//!   the target;
//! * `unfinished_migration` 8, `unfinished_cutover` 9, `unfinished_rotation` 10,
//!   `unfinished_sweep` 11 (in that order when several are found): in place of `ok` (0) or
//!   `migration_required` (3); damage (4) and failures (1) are reported before them.
//!
//! The commands that show what a store holds without judging it (`inspect`, `fence`,
//! `keys status`) flag an unfinished copy the same way after what they show (exit 7,
//! [`flag_partial_copy`]); `schema show`, `schema log` and `inspect` say so when what they
//! were asked for is missing (the copy may not have reached it).

use crate::exit::{
    Failure, MIGRATION_REQUIRED, OK, UNFINISHED, UNFINISHED_CUTOVER, UNFINISHED_MIGRATION,
    UNFINISHED_ROTATION, UNFINISHED_SWEEP,
};
use serde::Serialize;
use strata::layout::catalog::FIRST_COLLECTION_ID;
use strata::layout::keys::sweep_key;
use strata::migrate::{check_checkpoint, CheckpointCheck, Registry};
use strata::ops::sweep::SweepMarker;
use strata::policy::Fence;
use strata::Catalog;
use strata_store::{KvRead, Store};

/// One piece of unfinished work.
#[derive(Debug, Clone, Serialize)]
pub struct Unfinished {
    /// `copy`, `sweep`, `cutover`, `rotation` or `migration`.
    pub operation: &'static str,
    /// The collection or table, when the work is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// What was found.
    pub detail: String,
    /// What to do.
    pub next: String,
}

impl Unfinished {
    /// One line for humans.
    pub fn line(&self) -> String {
        match &self.scope {
            Some(scope) => format!(
                "unfinished {} of `{scope}`: {}; {}",
                self.operation, self.detail, self.next
            ),
            None => format!(
                "unfinished {}: {}; {}",
                self.operation, self.detail, self.next
            ),
        }
    }
}

/// Each kind of unfinished work with its exit code and verdict, the most pressing first.
const VERDICTS: [(&str, u8, &str); 5] = [
    ("copy", UNFINISHED, "unfinished_copy"),
    ("migration", UNFINISHED_MIGRATION, "unfinished_migration"),
    ("cutover", UNFINISHED_CUTOVER, "unfinished_cutover"),
    ("rotation", UNFINISHED_ROTATION, "unfinished_rotation"),
    ("sweep", UNFINISHED_SWEEP, "unfinished_sweep"),
];

/// The exit code and verdict of the most pressing unfinished work in `unfinished`, if any.
pub fn verdict(unfinished: &[Unfinished]) -> Option<(u8, &'static str)> {
    VERDICTS
        .iter()
        .find(|(op, ..)| unfinished.iter().any(|u| u.operation == *op))
        .map(|&(_, code, word)| (code, word))
}

/// The verdict a command reports, from the one its other checks gave (`code`, `word`) and
/// the unfinished work found: an unfinished copy beats everything; other unfinished work
/// replaces `ok` (0) and `migration_required` (3) only.
pub fn combine(code: u8, word: &'static str, unfinished: &[Unfinished]) -> (u8, &'static str) {
    match verdict(unfinished) {
        Some((UNFINISHED, w)) => (UNFINISHED, w),
        Some(v) if matches!(code, OK | MIGRATION_REQUIRED) => v,
        _ => (code, word),
    }
}

/// The summary line of a verdict of unfinished work (`None` for another code).
pub fn summary(code: u8) -> Option<&'static str> {
    Some(match code {
        UNFINISHED => "this store is an unfinished copy: resume the copy or delete the store (no command certifies, migrates or changes it until then)",
        UNFINISHED_MIGRATION => "a migration was interrupted: run `strata migrate` to resume it (it continues after its checkpoint)",
        UNFINISHED_CUTOVER => "a coordinated cutover is pending or was interrupted: writes to its collections are fenced until the application's `cutover` finishes it (or `strata fence abort`)",
        UNFINISHED_ROTATION => "a data-key rotation was interrupted: run `strata keys rotate` with the key to finish it (both keys open every record meanwhile)",
        UNFINISHED_SWEEP => "an eager sweep (or a revert) is running or was interrupted: run the application's `sweep` (or the same `revert`) again to finish it (rows are read through the chain meanwhile)",
        _ => return None,
    })
}

/// The unfinished copy into `store`, if its progress record is there.
pub fn copy(store: &Store, shown: &str) -> Result<Option<Unfinished>, Failure> {
    let Some(bytes) = store.get(crate::cmd::copy::PROGRESS_KEY)? else {
        return Ok(None);
    };
    let progress: Result<serde_json::Value, _> = serde_json::from_slice(&bytes);
    let (from, copied) = match &progress {
        Ok(p) => (
            p["from"].as_str().unwrap_or("?").to_string(),
            p["copied"].as_u64().unwrap_or(0),
        ),
        Err(_) => ("?".to_string(), 0),
    };
    Ok(Some(Unfinished {
        operation: "copy",
        scope: None,
        detail: format!(
            "this store is the target of a `strata copy` from `{from}` that stopped after {copied} records (its progress record `__nx/copy/progress` is here), so it holds only part of its source"
        ),
        next: format!(
            "resume it (rerun `strata copy --from {from} --to {shown}`) or delete this store; no command certifies, migrates or changes it until then"
        ),
    }))
}

/// For the read-only commands that show what a store holds without judging it
/// (`inspect`, `fence`, `keys status`): when `copy` is the store's unfinished copy, prints
/// its line and the summary of exit 7 to `out` (after what the command showed, as
/// `collections` does) and returns 7; else returns 0.
pub fn flag_partial_copy(
    out: &mut impl std::io::Write,
    copy: Option<&Unfinished>,
) -> std::io::Result<u8> {
    let Some(u) = copy else {
        return Ok(OK);
    };
    writeln!(out, "\n{}", u.line())?;
    if let Some(summary) = summary(UNFINISHED) {
        writeln!(out, "{summary}")?;
    }
    Ok(UNFINISHED)
}

/// The `--json` counterpart of [`flag_partial_copy`]: when `copy` is the store's
/// unfinished copy, adds `"verdict": "unfinished_copy"` and `"unfinished": [the copy]` to
/// `doc` (as `status`, `verify` and `collections` report it) and returns 7; else leaves
/// `doc` as it is and returns 0.
pub fn flag_partial_copy_json(
    doc: &mut serde_json::Value,
    copy: Option<&Unfinished>,
) -> Result<u8, Failure> {
    let Some(u) = copy else {
        return Ok(OK);
    };
    if let Some(map) = doc.as_object_mut() {
        map.insert("verdict".into(), "unfinished_copy".into());
        map.insert(
            "unfinished".into(),
            serde_json::to_value([u]).map_err(Failure::error)?,
        );
    }
    Ok(UNFINISHED)
}

/// Refuses (exit 7) to certify, migrate or change a store that is an unfinished copy:
/// every command that writes (`migrate`, `retire`, `repair --apply`, `fence abort`, the
/// `keys` changes, the admin's operations) calls it on its read-only open, before it
/// opens the store for writing; only resuming the copy writes to such a store.
pub fn refuse_partial_copy(store: &Store, shown: &str, command: &str) -> Result<(), Failure> {
    match copy(store, shown)? {
        Some(u) => Err(Failure::with_code(
            UNFINISHED,
            format!(
                "`{command}` refused, nothing was written: {}; {}",
                u.detail, u.next
            ),
        )),
        None => Ok(()),
    }
}

/// Every piece of unfinished work in `store` (the copy first).
pub fn find(store: &Store, catalog: &Catalog, shown: &str) -> Result<Vec<Unfinished>, Failure> {
    let mut out = Vec::new();
    out.extend(copy(store, shown)?);
    let registry = Registry::certification(catalog);
    for tm in registry.tables() {
        if let Ok(CheckpointCheck::Resumable { from, to, .. }) = check_checkpoint(store, tm) {
            out.push(Unfinished {
                operation: "migration",
                scope: Some(tm.table().name().to_string()),
                detail: format!("step v{from} -> v{to} was interrupted (its checkpoint is here)"),
                next: "run `strata migrate`: it resumes after the checkpoint".into(),
            });
        }
    }
    for t in catalog
        .tables()
        .iter()
        .filter(|t| t.id() >= FIRST_COLLECTION_ID)
    {
        if let Some(bytes) = store.get(&sweep_key(t.name()))? {
            if let Ok(m) = SweepMarker::decode(t.name(), &bytes) {
                if let Some(target) = m.in_progress {
                    out.push(Unfinished {
                        operation: "sweep",
                        scope: Some(t.name().to_string()),
                        detail: format!("a sweep to payload v{target} is running or was interrupted ({} rows scanned)", m.counters.scanned),
                        next: "run the application's `sweep` again: it resumes after its cursor (rows are upcast on read meanwhile)".into(),
                    });
                }
            }
        }
        // A revert is the downcast sweep: it reports as an unfinished sweep.
        if let Ok(Some(target)) = strata::ops::revert::unfinished(store, t.name()) {
            out.push(Unfinished {
                operation: "sweep",
                scope: Some(t.name().to_string()),
                detail: format!("a revert to payload v{target} (the downcast sweep) was interrupted (its record `__nx/revert/{}` is here)", t.name()),
                next: format!("run the application's `revert {} --to {target}` again: it resumes after its cursor (the collection is in a deploy window at v{target} meanwhile)", t.name()),
            });
        }
        if store
            .get(&strata::ops::rotate::rotation_checkpoint_key(t.name()))?
            .is_some()
        {
            out.push(Unfinished {
                operation: "rotation",
                scope: Some(t.name().to_string()),
                detail: "a data-key rotation was interrupted while re-sealing this collection (its checkpoint is here)".into(),
                next: "run `strata keys rotate` with the key: it resumes".into(),
            });
        }
    }
    // The keyring is the rotation's own record (`keys status` reads it): begun, it keeps
    // the retiring key until the rotation finishes, also when no collection's checkpoint
    // was committed yet (a rotation killed before its first batch, or whose batches a
    // crash took from a sled datastore's unflushed log).
    if !out.iter().any(|u| u.operation == "rotation") {
        if let Ok(Some((_, rec))) = strata::seal::Keyring::database().read(store) {
            if let Some(old) = rec.retiring_key_id() {
                out.push(Unfinished {
                    operation: "rotation",
                    scope: None,
                    detail: format!("a data-key rotation was begun and not finished: the keyring keeps retiring key {old} (both keys open every record)"),
                    next: "run `strata keys rotate` with the key: it resumes".into(),
                });
            }
        }
    }
    if let Ok(fence) = Fence::read(store) {
        let state = fence.state.as_str();
        if state != "normal" || !fence.pending.is_empty() {
            let names: Vec<&str> = fence
                .pending
                .iter()
                .map(|p| p.collection.as_str())
                .collect();
            out.push(Unfinished {
                operation: "cutover",
                scope: None,
                detail: format!(
                    "the fence is `{state}` with {} pending ({}); writes to them are fenced",
                    names.len(),
                    names.join(", ")
                ),
                next: "run the application's `cutover` (it resumes), or `strata fence abort`"
                    .into(),
            });
        }
    }
    Ok(out)
}
