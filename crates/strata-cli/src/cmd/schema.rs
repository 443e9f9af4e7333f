//! `strata schema diff OLD.json NEW.json [--json]` (a CI gate: exit 6 on a non-additive
//! change) and `strata schema show <collection> [--json]` (the persisted baseline).

use crate::db;
use crate::exit::{CmdResult, Failure, NON_ADDITIVE, OK};
use std::io::Write;
use std::path::{Path, PathBuf};
use strata::policy::Baseline;

/// Arguments of `strata schema`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: SchemaCommand,
}

#[derive(Debug, clap::Subcommand)]
enum SchemaCommand {
    /// Compare two JSON Schema files: print the delta, the path-level changes and the
    /// compatibility verdict. Exit 0 for none/additive, 6 for non-additive.
    Diff {
        /// The old (baseline) schema file.
        old: PathBuf,
        /// The new schema file.
        new: PathBuf,
        /// The collection name shown in the delta.
        #[arg(long, default_value = "schema")]
        collection: String,
        /// Print the delta as one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Print the persisted JSON Schema baseline of a collection (read-only).
    Show {
        /// The collection.
        collection: String,
        /// Print `{"format","db","collection","hash","payload_version","schema"}` as JSON.
        #[arg(long)]
        json: bool,
    },
}

impl Args {
    /// True for the subcommands that do not read `--db`.
    pub fn ignores_db(&self) -> bool {
        matches!(self.command, SchemaCommand::Diff { .. })
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value, Failure> {
    let bytes = std::fs::read(path).map_err(|e| {
        Failure::error(format!(
            "cannot read schema file `{}`: {e}; check the path",
            path.display()
        ))
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure::error(format!(
            "schema file `{}` is not valid JSON: {e}; fix the file",
            path.display()
        ))
    })
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    match args.command {
        SchemaCommand::Diff {
            old,
            new,
            collection,
            json,
        } => {
            let (o, n) = (read_json(&old)?, read_json(&new)?);
            let delta = strata_schema::diff(&collection, &o, &n).map_err(|e| {
                Failure::error(format!(
                    "cannot compare `{}` (old) with `{}` (new): {e}",
                    old.display(),
                    new.display()
                ))
            })?;
            let mut out = std::io::stdout().lock();
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&delta)?)?;
            } else {
                write!(out, "{}", strata_schema::render_human(&delta))?;
            }
            Ok(if delta.is_non_additive() {
                NON_ADDITIVE
            } else {
                OK
            })
        }
        SchemaCommand::Show { collection, json } => {
            let store = db::open_existing(db_path)?;
            let Some(b) = Baseline::load(&store, &collection)? else {
                return Err(Failure::error(format!(
                    "no persisted schema for collection `{collection}` in `{}`; a collection persists its schema when opened with persist_json_schema(true)",
                    db::describe(db_path)
                )));
            };
            let mut out = std::io::stdout().lock();
            if json {
                let doc = serde_json::json!({
                    "format": 1,
                    "db": db::describe(db_path),
                    "collection": collection,
                    "hash": b.hash,
                    "payload_version": b.payload_version,
                    "schema": b.schema,
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            } else {
                writeln!(out, "collection       {collection}")?;
                writeln!(out, "hash             {}", b.hash)?;
                match b.payload_version {
                    Some(v) => writeln!(out, "payload version  {v}")?,
                    None => writeln!(out, "payload version  -")?,
                }
                writeln!(out, "{}", serde_json::to_string_pretty(&b.schema)?)?;
            }
            Ok(OK)
        }
    }
}
