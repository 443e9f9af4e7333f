//! `strata inspect <table|collection>`: print the first records of one managed table
//! (read-only). Documents of a collection are decoded: payload version, lock version and
//! the JSON, pretty-printed (`--raw` keeps the stored bytes as hex). A value cut to
//! `--max-chars` ends with `…`. A sealed document always shows its clear header; its body
//! only with the key (`--passphrase-env VAR` / `--key-file PATH`). Records of the Numax
//! sync tables are decoded too (module [`numax`]): ops, counters, CRDT states. On a store
//! that is the target of an unfinished `strata copy` the records are shown, then flagged as
//! part of their source (exit 7, `"verdict": "unfinished_copy"` in `--json`).

mod numax;

use crate::db;
use crate::exit::{CmdResult, Failure};
use std::io::Write;
use std::path::Path;
use strata::layout::catalog::FIRST_COLLECTION_ID;
use strata::layout::envelope;
use strata_store::{escape_key, Pages, ScanLimits};

/// Default cut of a raw (hex or text) value, in characters.
const RAW_MAX_CHARS: usize = 160;
/// Default cut of a decoded document's pretty JSON, in characters.
const DOC_MAX_CHARS: usize = 4000;
/// Default cut of a decoded sync record's JSON line, in characters.
const SYNC_MAX_CHARS: usize = 1000;

/// Arguments of `strata inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The managed table or collection (see `strata status` and `strata collections`).
    table: String,
    /// How many records to print.
    #[arg(long, default_value = "20", value_parser = crate::size::parse_nonzero)]
    limit: usize,
    /// Show the records as stored (hex, or text when the bytes are text) instead of
    /// decoding them (a collection's envelopes, a sync table's ops, counters and states).
    #[arg(long)]
    raw: bool,
    /// Cut each shown value after this many characters (marked `…`); default 160 for raw
    /// values, 4000 for decoded documents, 1000 for decoded sync records. Not applied to
    /// `--json`.
    #[arg(long, value_name = "N", value_parser = crate::size::parse_nonzero)]
    max_chars: Option<usize>,
    /// The byte budget of one scan page (key + value): a record larger than this is
    /// refused before its value is read. Raise it to inspect a bigger value.
    #[arg(long, default_value = "64MiB", value_parser = crate::size::parse_size)]
    max_bytes: usize,
    /// Print one JSON document `{"format":1,"db","table","records":[…]}`: each record
    /// `{"key","value_hex","value_utf8"}`; a collection's documents (without `--raw`)
    /// `{"key","id","payload_version","lock_version","document"}` (or `"error"` and
    /// `"value_hex"` when the envelope is unreadable); a sync table's records (without
    /// `--raw`) `{"key","value"}`, the value decoded (or `"error"` and `"value_hex"`).
    #[arg(long)]
    json: bool,
    /// The key of sealed documents: without it their bodies are not shown.
    #[command(flatten)]
    key: crate::cmd::keys::KeyArgs,
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
    // Stale-tolerant: a read replica the URL names answers (nothing here decides a write).
    let (store, hosts) = db::open_reading(db_path, db::Reads::StaleTolerant)?;
    let catalog = db::catalog(&store).map_err(Failure::error)?;
    // Only part of a copy's source: what is shown is flagged (exit 7), and a table the
    // copy has not brought yet is not "unknown".
    let copy = crate::cmd::unfinished::copy(&store, &db::describe(db_path))?;
    let Some(table) = catalog.get(&args.table) else {
        let names: Vec<&str> = catalog.tables().iter().map(|t| t.name()).collect();
        let known = if names.is_empty() {
            "none (the store holds no collection and no sync data)".to_string()
        } else {
            names.join(", ")
        };
        let missing = format!(
            "no managed table or collection `{}` in `{}`; known: {known}",
            args.table,
            db::describe(db_path),
        );
        return Err(match copy {
            Some(u) => Failure::with_code(
                crate::exit::UNFINISHED,
                format!(
                    "{missing}; {}, which may not have reached it; {}",
                    u.detail, u.next
                ),
            ),
            None => Failure::error(missing),
        });
    };
    let decode_docs = table.id() >= FIRST_COLLECTION_ID && !args.raw;
    let decode_sync = !args.raw && strata::numax::decode::decoder_for_id(table.id()).is_some();
    let max_chars = args.max_chars.unwrap_or(if decode_docs {
        DOC_MAX_CHARS
    } else if decode_sync {
        SYNC_MAX_CHARS
    } else {
        RAW_MAX_CHARS
    });
    // A wrong key fails here, before any record is read. Without a keyring on only part
    // of a copy's source, the keyring may be what the copy has not brought yet.
    let sealer = match (args.key.unlock(&store), &copy) {
        (Err(e), Some(u)) if strata::seal::Keyring::database().read(&store)?.is_none() => {
            return Err(Failure::with_code(
                crate::exit::UNFINISHED,
                format!(
                    "{}; {}, which may not have reached the keyring; {}",
                    crate::exit::message(e.error.as_ref()),
                    u.detail,
                    u.next
                ),
            ))
        }
        (r, _) => r?,
    };
    let mut out = std::io::stdout().lock();
    let mut records: Vec<serde_json::Value> = Vec::new();
    // Bounded pages (the store's rule for a record over `--max-bytes`: one clear error),
    // at most `--limit` records.
    let limits = ScanLimits::new(args.limit.max(1), args.max_bytes)?;
    for r in Pages::new(&store, table.prefix(), limits)
        .records()
        .take(args.limit)
    {
        let r = r?;
        let key = escape_key(&r.key);
        if decode_docs {
            let id = String::from_utf8_lossy(&r.key[table.prefix().len().min(r.key.len())..]);
            let decoded = decode_document(&r.value, &r.key, table.id(), sealer.as_ref());
            if args.json {
                records.push(document_json(&key, &id, &r.value, decoded));
            } else {
                write_document(&mut out, &id, &r.value, decoded, max_chars)?;
            }
        } else if decode_sync {
            let suffix = &r.key[table.prefix().len().min(r.key.len())..];
            let view = numax::view(table.id(), suffix, &r.value);
            if args.json {
                records.push(numax::record_json(&key, &r.value, view));
            } else {
                numax::write_record(&mut out, &key, &r.value, view, max_chars)?;
            }
        } else if args.json {
            records.push(raw_json(&key, &r.value));
        } else {
            write_raw(&mut out, &key, &r.value, max_chars)?;
        }
    }
    if args.json {
        let mut doc = serde_json::json!({
            "db": db::describe(db_path),
            "table": table.name(),
            "records": records,
        });
        if let Some(h) = &hosts {
            doc["hosts"] = serde_json::to_value(h).map_err(Failure::error)?;
        }
        let code = crate::cmd::unfinished::flag_partial_copy_json(&mut doc, copy.as_ref())?;
        crate::json::emit(&mut out, &doc)?;
        return Ok(code);
    }
    let code = crate::cmd::unfinished::flag_partial_copy(&mut out, copy.as_ref())?;
    if let Some(h) = &hosts {
        writeln!(out, "{}", h.line())?;
    }
    Ok(code)
}

fn raw_json(key: &str, value: &[u8]) -> serde_json::Value {
    serde_json::json!({
        "key": key,
        "value_hex": strata_store::to_hex(value),
        "value_utf8": std::str::from_utf8(value).ok(),
    })
}

fn write_raw(
    out: &mut impl Write,
    key: &str,
    value: &[u8],
    max_chars: usize,
) -> std::io::Result<()> {
    let shown = match std::str::from_utf8(value) {
        Ok(s) if s.chars().all(|c| !c.is_control()) => s.to_string(),
        _ => format!("0x{}", strata_store::to_hex(value)),
    };
    writeln!(out, "{key}\t{}", cut(&shown, max_chars))
}

/// A document's envelope and parsed JSON (`None`: sealed, shown without the key), or why
/// they cannot be read.
type Decoded = Result<(envelope::Envelope, Option<serde_json::Value>), String>;

fn decode_document(
    value: &[u8],
    key: &[u8],
    table_id: u16,
    sealer: Option<&strata::seal::Sealer>,
) -> Decoded {
    let opened;
    let (env, body) = match (strata::seal::peek(value), sealer) {
        (Some((env, true)), None) => return Ok((env, None)),
        (Some((_, true)), Some(s)) => {
            opened =
                strata::seal::open_document(s, key, table_id, value).map_err(|e| e.to_string())?;
            (opened.0, opened.1.as_slice())
        }
        _ => envelope::decode(value).map_err(|e| e.to_string())?,
    };
    serde_json::from_slice::<serde_json::Value>(body)
        .map(|doc| (env, Some(doc)))
        .map_err(|e| format!("{env}: the document JSON is invalid: {e}"))
}

fn document_json(key: &str, id: &str, value: &[u8], decoded: Decoded) -> serde_json::Value {
    match decoded {
        Ok((env, Some(doc))) => serde_json::json!({
            "key": key,
            "id": id,
            "payload_version": env.payload_version,
            "lock_version": env.lock_version,
            "document": doc,
        }),
        Ok((env, None)) => serde_json::json!({
            "key": key,
            "id": id,
            "payload_version": env.payload_version,
            "lock_version": env.lock_version,
            "sealed": true,
            "document": null,
        }),
        Err(reason) => serde_json::json!({
            "key": key,
            "id": id,
            "error": reason,
            "value_hex": strata_store::to_hex(value),
        }),
    }
}

fn write_document(
    out: &mut impl Write,
    id: &str,
    value: &[u8],
    decoded: Decoded,
    max_chars: usize,
) -> std::io::Result<()> {
    match decoded {
        Ok((env, None)) => writeln!(
            out,
            "{id}  payload v{}  lock {}  sealed (body not shown: pass `--passphrase-env VAR` or `--key-file PATH`)\n",
            env.payload_version, env.lock_version,
        ),
        Ok((env, Some(doc))) => {
            let pretty = serde_json::to_string_pretty(&doc).unwrap_or_default();
            writeln!(
                out,
                "{id}  payload v{}  lock {}\n{}\n",
                env.payload_version,
                env.lock_version,
                cut(&pretty, max_chars)
            )
        }
        Err(reason) => writeln!(
            out,
            "{id}  unreadable: {reason}\n0x{}\n",
            cut(&strata_store::to_hex(value), max_chars)
        ),
    }
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
