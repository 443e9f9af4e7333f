//! `sweep <collection> [--dry-run]`: the eager sweep with the collection's chain, and its
//! read-only dry run.

use super::{Extension, Registered, SweepArgs};
use crate::cmd::collections::survey;
use crate::db;
use crate::exit::{CmdResult, Failure, OK};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use strata::layout::envelope;
use strata::layout::keys::{doc_prefix, sweep_key};
use strata::ops::sweep::{SweepMarker, SweepOptions};
use strata::policy::SchemaOptions;
use strata_store::{escape_key, KvRead, Pages, ScanLimits, Store};

impl Extension {
    pub(super) fn sweep(&self, db_path: &Path, args: SweepArgs) -> CmdResult {
        let reg = self.registered(&args.collection)?;
        super::check_key(db_path, &args.key, &[&reg.name])?;
        // A dry run only reads: the datastore is opened read-only (its files stay as they
        // were, a redb header included).
        let store = if args.dry_run {
            db::open_for_reading(db_path)?
        } else {
            db::open_existing(db_path)?
        };
        let shown = db::describe(db_path);
        let recorded = strata::layout::read_catalog(&store)
            .map_err(Failure::error)?
            .get(&reg.name)
            .cloned();
        let mut out = std::io::stdout().lock();
        let Some(table) = recorded else {
            let msg = format!(
                "collection `{}` is not recorded in `{shown}` yet: nothing to sweep",
                reg.name
            );
            if args.json {
                let doc = serde_json::json!({"db": shown, "collection": reg.name, "note": "not_recorded"});
                crate::json::emit(&mut out, &doc)?;
            } else {
                writeln!(out, "{msg}")?;
            }
            return Ok(OK);
        };
        if args.dry_run {
            return self.sweep_dry_run(&store, &shown, reg, &table, &args);
        }
        let database = super::open_database(&store, &args.key)?;
        let coll = (reg.open)(&database, &reg.name, reg.options.clone()).map_err(Failure::error)?;
        // A write the policy refuses (a pending cutover's fence, a rejected schema change)
        // is refused before the sweep is announced: the sweep would write nothing.
        if let Some(policy) = database.policy() {
            policy.check_write(&reg.name).map_err(Failure::error)?;
        }
        let before = survey(&store, &table, None, Some(reg.current_version()))?;
        eprintln!(
            "sweeping `{}` to payload v{}: {} of {} rows behind (resumable: an interrupted sweep continues from its cursor)",
            reg.name,
            reg.current_version(),
            before.rows_behind,
            before.rows
        );
        // Progress from the durable marker, about once a second.
        let progress_store = store.clone();
        let marker_key = sweep_key(&reg.name);
        let name = reg.name.clone();
        let last = std::sync::Mutex::new(Instant::now());
        let limits =
            strata::pass::PassLimits::new(args.batch_size, strata::pass::DEFAULT_MAX_BYTES)
                .map_err(Failure::error)?;
        let options = SweepOptions::new().limits(limits).abort_when(move || {
            let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
            if last.elapsed() >= Duration::from_secs(1) {
                *last = Instant::now();
                if let Ok(Some(bytes)) = progress_store.get(&marker_key) {
                    if let Ok(m) = SweepMarker::decode(&name, &bytes) {
                        eprintln!(
                            "  {name}: {} rows scanned, {} rewritten",
                            m.counters.scanned, m.counters.rewritten
                        );
                    }
                }
            }
            false
        });
        let report = coll.sweep(options).map_err(Failure::error)?;
        strata_store::KvWrite::flush(&store)?;
        use strata::ops::sweep::SweepNote;
        let (code, word) = match report.note {
            SweepNote::Complete | SweepNote::AlreadyAt(_) | SweepNote::NoEagerStep => (OK, "ok"),
            SweepNote::Incomplete => (crate::exit::ERROR, "incomplete"),
            SweepNote::WindowOpen(_) => (OK, "window_open"),
            _ => (crate::exit::ERROR, "not_run"),
        };
        if args.json {
            let doc = serde_json::json!({
                "db": shown,
                "collection": reg.name,
                "verdict": word,
                "note": report.note.to_string(),
                "target_version": report.target_version,
                "current_version": report.current_version,
                "scanned": report.scanned(),
                "rewritten": report.rewritten(),
                "conflicted": report.conflicted(),
                "skipped_ahead": report.skipped_ahead(),
                "failed": report.failed(),
                "resumed": report.resumed_from.is_some(),
                "holder": report.holder,
            });
            crate::json::emit(&mut out, &doc)?;
        } else {
            writeln!(
                out,
                "sweep of `{}`: {}; scanned {}, rewritten {}, conflicted {}, skipped (newer) {}, failed {}{}",
                reg.name,
                report.note,
                report.scanned(),
                report.rewritten(),
                report.conflicted(),
                report.skipped_ahead(),
                report.failed(),
                if report.resumed_from.is_some() { " (resumed)" } else { "" }
            )?;
            match report.note {
                SweepNote::Incomplete => writeln!(
                    out,
                    "some rows cannot be upcast; run `sweep {} --dry-run` to name them, fix them, then sweep again",
                    reg.name
                )?,
                SweepNote::NoEagerStep => writeln!(
                    out,
                    "the collection declares no eager step: rows are upcast on read only"
                )?,
                SweepNote::Complete | SweepNote::AlreadyAt(_) => {}
                SweepNote::WindowOpen(v) => writeln!(
                    out,
                    "a deploy window holds `{}` at v{v} while an older build may still run: rows stay at v{v}; the window's `complete` sweeps them",
                    reg.name
                )?,
                _ => match &report.holder {
                    Some(holder) => writeln!(
                        out,
                        "the sweep of `{}` is running elsewhere: its lease is held by {holder}; run it again once that sweep ended (it resumes from its cursor)",
                        reg.name
                    )?,
                    None => writeln!(
                        out,
                        "the sweep did not run to the end: another runner holds or took its lease, or it was stopped; run it again later (it resumes from its cursor)"
                    )?,
                },
            }
        }
        Ok(code)
    }

    fn sweep_dry_run(
        &self,
        store: &Store,
        shown: &str,
        reg: &Registered,
        table: &strata::TableDef,
        args: &SweepArgs,
    ) -> CmdResult {
        // No read-repair, no schema declaration: reading writes nothing.
        let options = reg
            .options
            .clone()
            .read_repair(false)
            .schema(SchemaOptions::new());
        let database = super::open_database(store, &args.key)?;
        let coll = (reg.open)(&database, &reg.name, options).map_err(Failure::error)?;
        let current = reg.current_version();
        let prefix = doc_prefix(&reg.name);
        let limits = ScanLimits::new(args.batch_size, 64 << 20)?;
        let (mut rows, mut behind, mut ahead) = (0u64, 0u64, 0u64);
        let mut failing: Vec<(String, String)> = Vec::new();
        for r in Pages::new(store, table.prefix(), limits).records() {
            let r = r?;
            rows += 1;
            let id = String::from_utf8_lossy(&r.key[prefix.len().min(r.key.len())..]);
            // The clear header of a clear or a sealed row; the read below opens a sealed
            // one with the key.
            let version = match envelope::decode(&r.value) {
                Ok((env, _)) => Ok(env.payload_version),
                Err(e) => strata::seal::peek(&r.value)
                    .filter(|(_, sealed)| *sealed)
                    .map(|(env, _)| env.payload_version)
                    .ok_or_else(|| e.to_string()),
            };
            match version {
                Ok(v) if v < current => {
                    behind += 1;
                    if let Err(e) = coll.read(&id) {
                        failing.push((escape_key(&r.key), crate::exit::message(&e)));
                    }
                }
                Ok(v) if v > current => ahead += 1,
                Ok(_) => {}
                Err(reason) => failing.push((escape_key(&r.key), reason)),
            }
        }
        let code = if failing.is_empty() {
            OK
        } else {
            crate::exit::ERROR
        };
        let mut out = std::io::stdout().lock();
        if args.json {
            let failing_json: Vec<_> = failing
                .iter()
                .map(|(k, r)| serde_json::json!({"key": k, "reason": r}))
                .collect();
            let doc = serde_json::json!({
                "db": shown,
                "collection": reg.name,
                "dry_run": true,
                "current_version": current,
                "rows": rows,
                "would_rewrite": behind - failing.len() as u64,
                "rows_ahead": ahead,
                "failing": failing_json,
            });
            crate::json::emit(&mut out, &doc)?;
        } else {
            writeln!(
                out,
                "dry run of the sweep of `{}` to v{current}: {rows} rows, {} would be rewritten, {ahead} ahead (left alone), {} would fail; nothing was written",
                reg.name,
                behind.saturating_sub(failing.len() as u64),
                failing.len()
            )?;
            for (k, r) in failing.iter().take(50) {
                writeln!(out, "  {k}: {r}")?;
            }
            if failing.len() > 50 {
                writeln!(out, "  … and {} more", failing.len() - 50)?;
            }
        }
        Ok(code)
    }
}
