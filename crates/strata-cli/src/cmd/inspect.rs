//! `strata inspect <table>`: print the first records of one managed table (read-only).

use crate::db;
use crate::exit::{CmdResult, Failure};
use std::io::Write;
use std::path::Path;
use strata_store::{escape_key, KvRead, ScanLimits};

/// Arguments of `strata inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The managed table (see `strata status`).
    table: String,
    /// How many records to print.
    #[arg(long, default_value = "20", value_parser = crate::size::parse_nonzero)]
    limit: usize,
    /// Print JSON Lines (`{"key": "...", "value_hex": "...", "value_utf8": "..."|null}`).
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    let store = db::open_existing(db_path)?;
    let catalog = db::catalog(&store).map_err(Failure::error)?;
    let Some(table) = catalog.get(&args.table) else {
        let names: Vec<&str> = catalog.tables().iter().map(|t| t.name()).collect();
        return Err(Failure::error(format!(
            "no managed table `{}` in `{}`; known tables: {}",
            args.table,
            db::describe(db_path),
            names.join(", ")
        )));
    };
    let mut out = std::io::stdout().lock();
    let mut printed = 0;
    let mut cursor: Option<Vec<u8>> = None;
    // Page through with bounded scans; a huge value is shown, not refused.
    while printed < args.limit {
        let limits = ScanLimits::new(args.limit - printed, 64 << 20)?;
        let page = store.scan(table.prefix(), cursor.as_deref(), limits)?;
        for r in &page.records {
            let utf8 = std::str::from_utf8(&r.value).ok();
            if args.json {
                let line = serde_json::json!({
                    "key": escape_key(&r.key),
                    "value_hex": hex(&r.value),
                    "value_utf8": utf8,
                });
                writeln!(out, "{line}")?;
            } else {
                let shown = match utf8 {
                    Some(s) if s.chars().all(|c| !c.is_control()) => s.to_string(),
                    _ => format!("0x{}", hex(&r.value)),
                };
                let shown: String = shown.chars().take(160).collect();
                writeln!(out, "{}\t{}", escape_key(&r.key), shown)?;
            }
            printed += 1;
        }
        if !page.more {
            break;
        }
        cursor = page.cursor().map(<[u8]>::to_vec);
    }
    Ok(0)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
