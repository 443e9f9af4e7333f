//! `window <collection> complete|rollback`: the deploy window of a collection (two
//! builds live at once), completed or checked for a rollback by the newest build.

use super::{Extension, WindowArgs};
use crate::db;
use crate::exit::{CmdResult, Failure, OK};
use std::io::Write;
use std::path::Path;

impl Extension {
    pub(super) fn window(&self, db_path: &Path, args: WindowArgs) -> CmdResult {
        let reg = self.registered(&args.collection)?;
        super::check_key(db_path, &args.key, &[&reg.name])?;
        let store = if args.action == WindowAction::Rollback {
            db::open_for_reading(db_path)?
        } else {
            db::open_existing(db_path)?
        };
        let database = super::open_database(&store, &args.key)?;
        let coll = (reg.open)(&database, &reg.name, reg.options.clone()).map_err(Failure::error)?;
        let mut out = std::io::stdout().lock();
        match args.action {
            WindowAction::Complete => {
                let options = strata::ops::window::WindowOptions::new()
                    .timeout_ms(args.timeout_secs.saturating_mul(1000));
                let r = coll.complete_window(options).map_err(Failure::error)?;
                strata_store::KvWrite::flush(&store)?;
                if args.json {
                    let doc = serde_json::json!({
                        "collection": r.collection,
                        "from": r.from,
                        "to": r.to,
                        "swept": r.swept,
                        "sweep": r.sweep.to_string(),
                    });
                    crate::json::emit(&mut out, &doc)?;
                } else {
                    match r.from {
                        None => writeln!(
                            out,
                            "{}: no deploy window is open; the store already records v{}; sweep: {} ({} rows upcast)",
                            r.collection, r.to, r.sweep, r.swept
                        )?,
                        Some(from) => writeln!(
                            out,
                            "{}: deploy window v{from} -> v{} complete; every build now writes at its own version; sweep: {} ({} rows upcast)",
                            r.collection, r.to, r.sweep, r.swept
                        )?,
                    }
                }
                Ok(OK)
            }
            WindowAction::Rollback => {
                let r = coll.rollback_window().map_err(Failure::error)?;
                let code = if r.above > 0 { crate::exit::ERROR } else { OK };
                if args.json {
                    let doc = serde_json::json!({
                        "collection": r.collection,
                        "operational": r.operational,
                        "rows": r.rows,
                        "above": r.above,
                        "above_keys": r.above_keys,
                    });
                    crate::json::emit(&mut out, &doc)?;
                } else {
                    match r.operational {
                        None => writeln!(out, "{}: no deploy window is open; after a completed window, `revert {} --to N` takes the rows back down", r.collection, r.collection)?,
                        Some(op) if r.above == 0 => writeln!(
                            out,
                            "{}: all {} rows are at v{op} or below: deploy the v{op} build again, then stop the newer one (the window stays open)",
                            r.collection, r.rows
                        )?,
                        Some(op) => writeln!(
                            out,
                            "{}: {} of {} rows are stored above v{op} (first: {}); the v{op} build cannot read those",
                            r.collection,
                            r.above,
                            r.rows,
                            r.above_keys.first().map(String::as_str).unwrap_or("-")
                        )?,
                    }
                }
                Ok(code)
            }
        }
    }
}

/// What `window` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum WindowAction {
    /// Wait for the older builds to leave, then move every row to this build's version.
    Complete,
    /// Check that the older build reads every row (read-only).
    Rollback,
}
