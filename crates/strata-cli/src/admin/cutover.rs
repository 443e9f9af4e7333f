//! `cutover`: the pending coordinated cutover with the collections' transforms.

use super::{CutoverArgs, Extension};
use crate::db;
use crate::exit::{CmdResult, Failure, OK};
use std::io::Write;
use std::path::Path;
use strata::ops::cutover::CutoverOptions;
use strata::policy::Fence;

impl Extension {
    pub(super) fn cutover(&self, db_path: &Path, args: CutoverArgs) -> CmdResult {
        let names: Vec<&str> = self
            .admin
            .collections
            .iter()
            .filter(|reg| reg.options.schema_options().persists())
            .map(|reg| reg.name.as_str())
            .collect();
        super::check_key(db_path, &args.key, &names)?;
        let store = db::open_existing(db_path)?;
        let shown = db::describe(db_path);
        let database = super::open_database(&store, &args.key)?;
        // Opening each collection under policy declares its schema with its transform
        // (which registers a cutover the strategies plan).
        let mut opened = Vec::new();
        for reg in &self.admin.collections {
            if reg.options.schema_options().persists() {
                opened.push(
                    (reg.open)(&database, &reg.name, reg.options.clone())
                        .map_err(Failure::error)?,
                );
            }
        }
        let fence = Fence::read(&store)?;
        let mut out = std::io::stdout().lock();
        if fence.pending.is_empty() {
            if args.json {
                let doc = serde_json::json!({"db": shown, "migrated": 0, "records": 0, "generation": fence.generation, "collections": []});
                crate::json::emit(&mut out, &doc)?;
            } else {
                writeln!(
                    out,
                    "no cutover pending (generation {}): nothing to do",
                    fence.generation
                )?;
            }
            return Ok(OK);
        }
        for p in &fence.pending {
            self.registered(&p.collection).map_err(|_| {
                Failure::error(format!(
                    "a cutover of `{}` is pending but this application does not register that collection; run the cutover from the application that declares its transform",
                    p.collection
                ))
            })?;
        }
        let names: Vec<&str> = fence
            .pending
            .iter()
            .map(|p| p.collection.as_str())
            .collect();
        eprintln!(
            "running the cutover of {} (generation {} -> {}); writes stay fenced until it completes",
            names.join(", "),
            fence.generation,
            fence.generation + 1
        );
        let options = CutoverOptions::new().on_progress(|p| {
            if p.done {
                eprintln!("  {}: {} records rewritten, done", p.collection, p.records);
            } else {
                eprintln!("  {}: {} records rewritten", p.collection, p.records);
            }
        });
        let report = database.run_schema_cutover(options)?;
        drop(opened);
        strata_store::KvWrite::flush(&store)?;
        if args.json {
            let collections: Vec<_> = report
                .collections
                .iter()
                .map(|c| serde_json::json!({"collection": c.collection, "records": c.records, "resumed": c.resumed_from.is_some()}))
                .collect();
            let doc = serde_json::json!({
                "db": shown,
                "migrated": report.migrated,
                "records": report.records,
                "generation": report.generation,
                "collections": collections,
            });
            crate::json::emit(&mut out, &doc)?;
        } else {
            writeln!(
                out,
                "cutover complete: {} collection(s), {} records rewritten; generation {}",
                report.migrated, report.records, report.generation
            )?;
        }
        Ok(OK)
    }
}
