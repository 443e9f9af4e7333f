//! `revert <collection> --to N`: a completed version taken back down through the
//! collection's downcasts (see [`strata::ops::revert`]).

use super::{Extension, RevertArgs};
use crate::db;
use crate::exit::{CmdResult, Failure, ERROR, OK};
use std::io::Write;
use std::path::Path;
use strata::ops::revert::{RevertOptions, RevertRow};

fn rows(rows: &[RevertRow]) -> Vec<serde_json::Value> {
    rows.iter()
        .map(|r| serde_json::json!({"key": r.key, "detail": r.detail}))
        .collect()
}

impl Extension {
    pub(super) fn revert(&self, db_path: &Path, args: RevertArgs) -> CmdResult {
        let reg = self.registered(&args.collection)?;
        super::check_key(db_path, &args.key, &[&reg.name])?;
        // A revert the checks refuse changes not one byte: they run on a read-only open
        // first (no schema declared, no read-repair).
        let read_only_options = reg
            .options
            .clone()
            .read_repair(false)
            .schema(strata::policy::SchemaOptions::new());
        if !args.dry_run {
            let store = db::open_for_reading(db_path)?;
            let database = super::open_database(&store, &args.key)?;
            let coll = (reg.open)(&database, &reg.name, read_only_options.clone())
                .map_err(Failure::error)?;
            coll.check_revert(args.to).map_err(Failure::error)?;
        }
        // A dry run opens the store read-only: not one byte changes.
        let store = if args.dry_run {
            db::open_for_reading(db_path)?
        } else {
            db::open_existing(db_path)?
        };
        let database = super::open_database(&store, &args.key)?;
        // A dry run declares no schema and repairs nothing on read: reading writes nothing.
        let options = if args.dry_run {
            read_only_options
        } else {
            reg.options.clone()
        };
        let coll = (reg.open)(&database, &reg.name, options).map_err(Failure::error)?;
        let options = RevertOptions::new()
            .dry_run(args.dry_run)
            .drop_newer_fields(args.drop_newer_fields);
        let r = coll.revert(args.to, options).map_err(Failure::error)?;
        if !args.dry_run {
            strata_store::KvWrite::flush(&store)?;
        }
        let code = if r.is_complete() { OK } else { ERROR };
        let mut out = std::io::stdout().lock();
        if args.json {
            let doc = serde_json::json!({
                "collection": r.collection,
                "to": r.to,
                "from": r.from,
                "dry_run": r.dry_run,
                "resumed": r.resumed,
                "finished": r.finished,
                "scanned": r.scanned,
                "reverted": r.reverted,
                "unchanged": r.unchanged,
                "ahead": r.ahead,
                "conflicted": r.conflicted,
                "failed": r.failed,
                "newer_content": r.newer_content,
                "failures": rows(&r.failures),
                "newer_rows": rows(&r.newer_rows),
                "newer_fields": if args.drop_newer_fields { "dropped" } else { "kept" },
            });
            crate::json::emit(&mut out, &doc)?;
            return Ok(code);
        }
        let verb = if r.dry_run { "would take" } else { "took" };
        writeln!(
            out,
            "{}: {verb} {} of {} rows from v{} down to v{}; {} already at or below it, {} newer than this build (left alone), {} failed",
            r.collection, r.reverted, r.scanned, r.from, r.to, r.unchanged, r.ahead, r.failed
        )?;
        if r.newer_content > 0 {
            let what = if args.drop_newer_fields {
                "drops"
            } else {
                "keeps with the row"
            };
            writeln!(
                out,
                "{} rows hold v{}-only content the downcast {what}:",
                r.newer_content, r.from
            )?;
            for row in &r.newer_rows {
                writeln!(out, "  {}: {}", row.key, row.detail)?;
            }
        }
        for row in &r.failures {
            writeln!(out, "  failed {}: {}", row.key, row.detail)?;
        }
        if !r.dry_run {
            if !r.finished {
                writeln!(out, "unfinished: run the same revert again to resume")?;
            } else if r.failed > 0 {
                writeln!(out, "the failed rows stay at their version; fix the downcast (or the rows) and run the revert again")?;
            } else {
                writeln!(
                    out,
                    "`{}` is in a deploy window at v{}: deploy the v{} build again; complete the window from a newer build later",
                    r.collection, r.to, r.to
                )?;
            }
        }
        Ok(code)
    }
}
