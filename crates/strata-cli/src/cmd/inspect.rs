//! `strata inspect <table|collection>`: print the first records of one managed table
//! (read-only). Documents of a collection are decoded: payload version, lock version and
//! the JSON, pretty-printed (`--raw` keeps the stored bytes as hex). A value cut to
//! `--max-chars` ends with `…`.

use crate::db;
use crate::exit::{CmdResult, Failure};
use std::io::Write;
use std::path::Path;
use strata::collection::layout::FIRST_COLLECTION_ID;
use strata::payload::envelope;
use strata_store::{escape_key, KvRead, ScanLimits};

/// Default cut of a raw (hex or text) value, in characters.
const RAW_MAX_CHARS: usize = 160;
/// Default cut of a decoded document's pretty JSON, in characters.
const DOC_MAX_CHARS: usize = 4000;

/// Arguments of `strata inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The managed table or collection (see `strata status` and `strata collections`).
    table: String,
    /// How many records to print.
    #[arg(long, default_value = "20", value_parser = crate::size::parse_nonzero)]
    limit: usize,
    /// Show a collection's documents as stored (hex) instead of decoding their envelopes.
    #[arg(long)]
    raw: bool,
    /// Cut each shown value after this many characters (marked `…`); default 160 for raw
    /// values, 4000 for decoded documents. Not applied to `--json`.
    #[arg(long, value_name = "N", value_parser = crate::size::parse_nonzero)]
    max_chars: Option<usize>,
    /// Print JSON Lines: `{"key","value_hex","value_utf8"}` per record; a collection's
    /// documents (without `--raw`) as `{"key","id","payload_version","lock_version",
    /// "document"}` (or `"error"` and `"value_hex"` when the envelope is unreadable).
    #[arg(long)]
    json: bool,
}

/// `s` cut to `max` characters, ending with `…` when something was cut.
pub(crate) fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    let store = db::open_existing(db_path)?;
    let catalog = db::catalog(&store).map_err(Failure::error)?;
    let Some(table) = catalog.get(&args.table) else {
        let names: Vec<&str> = catalog.tables().iter().map(|t| t.name()).collect();
        let known = if names.is_empty() {
            "none (the store holds no collection and no sync data)".to_string()
        } else {
            names.join(", ")
        };
        return Err(Failure::error(format!(
            "no managed table or collection `{}` in `{}`; known: {known}",
            args.table,
            db::describe(db_path),
        )));
    };
    let decode_docs = table.id() >= FIRST_COLLECTION_ID && !args.raw;
    let max_chars = args.max_chars.unwrap_or(if decode_docs {
        DOC_MAX_CHARS
    } else {
        RAW_MAX_CHARS
    });
    let mut out = std::io::stdout().lock();
    let mut printed = 0;
    let mut cursor: Option<Vec<u8>> = None;
    // Page through with bounded scans; a huge value is shown, not refused.
    while printed < args.limit {
        let limits = ScanLimits::new(args.limit - printed, 64 << 20)?;
        let page = store.scan(table.prefix(), cursor.as_deref(), limits)?;
        for r in &page.records {
            if decode_docs {
                let id = String::from_utf8_lossy(&r.key[table.prefix().len().min(r.key.len())..]);
                write_document(
                    &mut out,
                    &escape_key(&r.key),
                    &id,
                    &r.value,
                    args.json,
                    max_chars,
                )?;
            } else {
                write_raw(
                    &mut out,
                    &escape_key(&r.key),
                    &r.value,
                    args.json,
                    max_chars,
                )?;
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

fn write_raw(
    out: &mut impl Write,
    key: &str,
    value: &[u8],
    json: bool,
    max_chars: usize,
) -> std::io::Result<()> {
    let utf8 = std::str::from_utf8(value).ok();
    if json {
        let line = serde_json::json!({
            "key": key,
            "value_hex": hex(value),
            "value_utf8": utf8,
        });
        return writeln!(out, "{line}");
    }
    let shown = match utf8 {
        Some(s) if s.chars().all(|c| !c.is_control()) => s.to_string(),
        _ => format!("0x{}", hex(value)),
    };
    writeln!(out, "{key}\t{}", cut(&shown, max_chars))
}

fn write_document(
    out: &mut impl Write,
    key: &str,
    id: &str,
    value: &[u8],
    json: bool,
    max_chars: usize,
) -> std::io::Result<()> {
    let decoded = envelope::decode(value)
        .map_err(|e| e.to_string())
        .and_then(|(env, body)| {
            serde_json::from_slice::<serde_json::Value>(body)
                .map(|doc| (env, doc))
                .map_err(|e| format!("{env}: the document JSON is invalid: {e}"))
        });
    match (decoded, json) {
        (Ok((env, doc)), true) => {
            let line = serde_json::json!({
                "key": key,
                "id": id,
                "payload_version": env.payload_version,
                "lock_version": env.lock_version,
                "document": doc,
            });
            writeln!(out, "{line}")
        }
        (Ok((env, doc)), false) => {
            let pretty = serde_json::to_string_pretty(&doc).unwrap_or_default();
            writeln!(
                out,
                "{id}  payload v{}  lock {}\n{}\n",
                env.payload_version,
                env.lock_version,
                cut(&pretty, max_chars)
            )
        }
        (Err(reason), true) => {
            let line = serde_json::json!({
                "key": key,
                "id": id,
                "error": reason,
                "value_hex": hex(value),
            });
            writeln!(out, "{line}")
        }
        (Err(reason), false) => writeln!(
            out,
            "{id}  unreadable: {reason}\n0x{}\n",
            cut(&hex(value), max_chars)
        ),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_value_ends_with_an_ellipsis_and_a_short_one_is_kept() {
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("ééé", 2), "éé…");
    }
}
