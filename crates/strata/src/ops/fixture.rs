//! Fixtures captured from a real store: a portable, versioned file holding the rows of one
//! collection (each with its payload version, lock version and JSON body) and the records
//! that describe it (registration, container header, schema baseline and history, sweep
//! marker, retirement), with chosen JSON paths redacted. `strata fixture capture` writes
//! one; `strata-testkit` replays it against an application's chain before a deploy.
//!
//! The file is JSON Lines: the first line is the [`FixtureHeader`] (`"kind":
//! "strata-fixture"`, `"format": 1`), then one [`FixtureRow`] per line, in key order.
//!
//! **Sealed collections** are captured only with the key: each body is decrypted,
//! redacted, and stored **in clear** in the fixture (the header says `"sealed": true`).
//! A fixture is a test asset: redact every path that holds a secret, and keep the file
//! where the test code is kept.
//!
//! **Redaction** (`--redact PATH`): a path is dot-separated object keys, `[]` or `*`
//! stepping into every element of an array (`email`, `customer.email`, `lines[].sku`,
//! `$.lines.*.sku`). The value found there is replaced by a placeholder of the same JSON
//! type: a string by `"redacted"`, an integer by `0`, another number by `0.0`, a boolean
//! by `false`; an array or object keeps its length and keys, each member replaced the same
//! way; `null` stays `null`. A path that a row does not have is skipped for that row.

use crate::collection::layout;
use crate::payload::envelope::{self, Envelope};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use strata_store::{Batch, KvRead, KvWrite, Pages, ScanLimits, Store, StoreError};

/// The fixture file's format.
pub const FIXTURE_FORMAT: u32 = 1;
/// The header's `kind`.
pub const FIXTURE_KIND: &str = "strata-fixture";

/// The first line of a fixture file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixtureHeader {
    /// [`FIXTURE_KIND`].
    pub kind: String,
    /// [`FIXTURE_FORMAT`].
    pub format: u32,
    /// The collection.
    pub collection: String,
    /// Rows in the fixture.
    pub rows: u64,
    /// Rows the collection held when captured.
    pub total_rows: u64,
    /// Rows per stored payload version in the whole collection.
    pub versions: BTreeMap<i32, u64>,
    /// `--sample N`, if the rows are a sample.
    pub sample: Option<usize>,
    /// The redacted paths.
    pub redacted: Vec<String>,
    /// True when the collection was sealed (bodies are stored decrypted, see the module
    /// docs).
    pub sealed: bool,
    /// The collection's container header (`__nx/schema/<collection>`): table version and id.
    pub container_header: Option<ContainerHeader>,
    /// The sweep marker, as stored (JSON).
    pub sweep_marker: Option<Value>,
    /// The retirement (`__nx/retired/<collection>`): versions below it are retired.
    pub retired_below: Option<i32>,
    /// The schema history's versions (`__nx/jsonschema-log/…`), oldest first, each the
    /// stored baseline record (JSON).
    pub schema_history: Vec<Value>,
    /// The metadata records, byte for byte (key and value as hex): the registration, the
    /// table-id counter, the container header, the baseline and its history, the sweep
    /// marker and the retirement record. Replay loads them as they are.
    pub records: Vec<RawRecord>,
}

/// A container header as captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerHeader {
    /// The table version.
    pub version: u16,
    /// The table id.
    pub table_id: u16,
}

/// A metadata record, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawRecord {
    /// The key, as text (reserved keys are ASCII; escaped otherwise).
    pub key: String,
    /// The key's bytes, hex.
    pub key_hex: String,
    /// The value's bytes, hex.
    pub value_hex: String,
}

/// One row of a fixture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixtureRow {
    /// The document key.
    pub key: String,
    /// The payload version it was stored at.
    pub payload_version: i32,
    /// Its lock version.
    pub lock_version: u64,
    /// Its JSON body (redacted).
    pub body: Value,
}

/// A fixture: header and rows.
///
/// Two fixtures are equal when their headers and rows are: the file one was read from
/// ([`Fixture::path`]) is where it came from, not part of it.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// The header.
    pub header: FixtureHeader,
    /// The rows, in key order.
    pub rows: Vec<FixtureRow>,
    /// The file it was read from ([`Fixture::read`]), for errors that name it.
    path: Option<std::path::PathBuf>,
}

impl PartialEq for Fixture {
    fn eq(&self, other: &Self) -> bool {
        self.header == other.header && self.rows == other.rows
    }
}

/// Why a fixture could not be captured, read or loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FixtureError {
    /// The collection is not recorded in the store.
    #[error("collection `{collection}` is not recorded in this store; check the name (`strata collections` lists them)")]
    UnknownCollection {
        /// The collection.
        collection: String,
    },
    /// A sealed collection and no key.
    #[error("collection `{collection}` is sealed: capturing it needs its key (`--passphrase-env VAR` or `--key-file PATH`); its bodies are then stored decrypted and redacted in the fixture")]
    NeedsKey {
        /// The collection.
        collection: String,
    },
    /// A row that cannot be read.
    #[error("row `{key}` of collection `{collection}` cannot be captured: {reason}")]
    Row {
        /// The collection.
        collection: String,
        /// The document key.
        key: String,
        /// Why.
        reason: String,
    },
    /// An invalid redaction path.
    #[error("invalid redaction path `{path}`: {reason}; write object keys separated by dots, `[]` or `*` for every array element (`customer.email`, `lines[].sku`)")]
    Path {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// `--sample 0`.
    #[error("a sample of 0 rows captures nothing; give --sample 1 or more, or leave it out to capture every row")]
    EmptySample,
    /// A fixture file that is not one.
    #[error("fixture line {line}: {reason}")]
    Parse {
        /// The line (1-based).
        line: usize,
        /// Why.
        reason: String,
    },
    /// A fixture file that is not one, naming the file ([`Fixture::read`]).
    #[error("fixture file `{}`, line {line}: {reason}", path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// The line (1-based).
        line: usize,
        /// Why, and what to do.
        reason: String,
    },
    /// Reading or writing the file.
    #[error("fixture file: {0}")]
    Io(#[from] std::io::Error),
    /// The store.
    #[error("store error while handling the fixture of `{collection}`: {source}")]
    Store {
        /// The collection.
        collection: String,
        /// The store error.
        #[source]
        source: StoreError,
    },
}

/// A parsed redaction path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactPath {
    text: String,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Each,
}

impl RedactPath {
    /// Parses `customer.email`, `lines[].sku`, `$.lines.*.sku`.
    pub fn parse(text: &str) -> Result<Self, FixtureError> {
        let fail = |reason: &str| FixtureError::Path {
            path: text.to_string(),
            reason: reason.to_string(),
        };
        let body = text.strip_prefix("$.").unwrap_or(text);
        if body.is_empty() {
            return Err(fail("it is empty"));
        }
        let mut steps = Vec::new();
        for part in body.split('.') {
            let (name, each) = match part.strip_suffix("[]") {
                Some(n) => (n, true),
                None => (part, false),
            };
            match name {
                "" if each => {}
                "" => return Err(fail("it has an empty segment")),
                "*" => steps.push(Step::Each),
                n => steps.push(Step::Key(n.to_string())),
            }
            if each {
                steps.push(Step::Each);
            }
        }
        Ok(RedactPath {
            text: text.to_string(),
            steps,
        })
    }

    /// The path as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Replaces what `value` holds at this path by type-preserving placeholders.
    pub fn redact(&self, value: &mut Value) {
        redact_at(value, &self.steps);
    }
}

fn redact_at(value: &mut Value, steps: &[Step]) {
    let Some((first, rest)) = steps.split_first() else {
        placeholder(value);
        return;
    };
    match (first, value) {
        (Step::Key(k), Value::Object(map)) => {
            if let Some(v) = map.get_mut(k) {
                redact_at(v, rest);
            }
        }
        (Step::Each, Value::Array(items)) => {
            for v in items {
                redact_at(v, rest);
            }
        }
        (Step::Each, Value::Object(map)) => {
            for v in map.values_mut() {
                redact_at(v, rest);
            }
        }
        _ => {}
    }
}

/// The placeholder of `value`'s type (see the module docs).
fn placeholder(value: &mut Value) {
    match value {
        Value::Null => {}
        Value::Bool(b) => *b = false,
        Value::Number(n) => {
            *value = if n.is_f64() {
                Value::from(0.0)
            } else {
                Value::from(0)
            }
        }
        Value::String(s) => *s = "redacted".to_string(),
        Value::Array(items) => items.iter_mut().for_each(placeholder),
        Value::Object(map) => map.values_mut().for_each(placeholder),
    }
}

/// What to capture.
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    sample: Option<usize>,
    redact: Vec<RedactPath>,
    sealer: Option<crate::seal::Sealer>,
}

impl CaptureOptions {
    /// Every row, nothing redacted, no key.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `n` rows, spread over the stored versions: every version present gets
    /// rows (round robin over versions, in key order within each).
    pub fn sample(mut self, n: usize) -> Self {
        self.sample = Some(n);
        self
    }

    /// Redacts `path` in every row.
    pub fn redact(mut self, path: RedactPath) -> Self {
        self.redact.push(path);
        self
    }

    /// The key of a sealed collection.
    pub fn sealer(mut self, sealer: Option<crate::seal::Sealer>) -> Self {
        self.sealer = sealer;
        self
    }
}

/// Captures `collection` of `store` (read-only: nothing is written).
pub fn capture<S: KvRead>(
    store: &S,
    collection: &str,
    options: &CaptureOptions,
) -> Result<Fixture, FixtureError> {
    let st = |source| FixtureError::Store {
        collection: collection.to_string(),
        source,
    };
    if options.sample == Some(0) {
        return Err(FixtureError::EmptySample);
    }
    let catalog = crate::database::read_catalog(store).map_err(|e| FixtureError::Row {
        collection: collection.to_string(),
        key: String::new(),
        reason: e.to_string(),
    })?;
    let Some(table) = catalog.get(collection) else {
        return Err(FixtureError::UnknownCollection {
            collection: collection.to_string(),
        });
    };
    let table_id = table.id();
    let prefix = layout::doc_prefix(collection);
    let limits = ScanLimits::new(256, 64 << 20).map_err(st)?;
    let mut versions: BTreeMap<i32, u64> = BTreeMap::new();
    let mut total = 0u64;
    let mut sealed = false;
    // Per version, the rows kept (all of them without a sample, at most `n` with one).
    let mut kept: BTreeMap<i32, Vec<FixtureRow>> = BTreeMap::new();
    for rec in Pages::new(store, &prefix, limits).records() {
        let rec = rec.map_err(st)?;
        total += 1;
        let key = String::from_utf8_lossy(&rec.key[prefix.len()..]).into_owned();
        let row_error = |reason: String| FixtureError::Row {
            collection: collection.to_string(),
            key: key.clone(),
            reason,
        };
        let (env, json): (Envelope, Vec<u8>) = match crate::seal::peek(&rec.value) {
            Some((_, true)) => {
                sealed = true;
                let Some(sealer) = &options.sealer else {
                    return Err(FixtureError::NeedsKey {
                        collection: collection.to_string(),
                    });
                };
                crate::seal::open_document(sealer, &rec.key, table_id, &rec.value)
                    .map_err(|e| row_error(e.to_string()))?
            }
            _ => {
                let (env, json) =
                    envelope::decode(&rec.value).map_err(|e| row_error(e.to_string()))?;
                (env, json.to_vec())
            }
        };
        *versions.entry(env.payload_version).or_insert(0) += 1;
        let bucket = kept.entry(env.payload_version).or_default();
        if options.sample.is_some_and(|n| bucket.len() >= n) {
            continue;
        }
        let mut body: Value = serde_json::from_slice(&json)
            .map_err(|e| row_error(format!("its JSON does not parse: {e}")))?;
        for p in &options.redact {
            p.redact(&mut body);
        }
        bucket.push(FixtureRow {
            key,
            payload_version: env.payload_version,
            lock_version: env.lock_version,
            body,
        });
    }
    let mut rows: Vec<FixtureRow> = match options.sample {
        None => kept.into_values().flatten().collect(),
        Some(n) => {
            // Round robin over the versions, so each is represented.
            let mut queues: Vec<std::collections::VecDeque<FixtureRow>> =
                kept.into_values().map(Into::into).collect();
            let mut out = Vec::new();
            while out.len() < n && queues.iter().any(|q| !q.is_empty()) {
                for q in &mut queues {
                    if out.len() < n {
                        if let Some(r) = q.pop_front() {
                            out.push(r);
                        }
                    }
                }
            }
            out
        }
    };
    rows.sort_by(|a, b| a.key.cmp(&b.key));

    let mut records = Vec::new();
    let mut keys: Vec<Vec<u8>> = vec![
        layout::catalog_key(collection),
        crate::keys::CATALOG_SEQ_KEY.to_vec(),
        crate::header::header_key(collection),
        crate::policy::baseline_key(collection),
        crate::keys::sweep_key(collection),
        crate::payload::retired::retired_key(collection),
    ];
    let history_prefix = crate::policy::history_prefix(collection);
    for rec in Pages::new(store, &history_prefix, limits).records() {
        keys.push(rec.map_err(st)?.key);
    }
    let mut schema_history = Vec::new();
    let mut container_header = None;
    let mut sweep_marker = None;
    let mut retired_below = None;
    for key in keys {
        let Some(value) = store.get(&key).map_err(st)? else {
            continue;
        };
        if key.starts_with(&history_prefix) {
            if let Ok(v) = serde_json::from_slice::<Value>(&value) {
                schema_history.push(v);
            }
        } else if key == crate::header::header_key(collection) {
            container_header =
                crate::header::SchemaHeader::decode(&value)
                    .ok()
                    .map(|h| ContainerHeader {
                        version: h.version,
                        table_id: h.table_id,
                    });
        } else if key == crate::keys::sweep_key(collection) {
            sweep_marker = serde_json::from_slice::<Value>(&value).ok();
        } else if key == crate::payload::retired::retired_key(collection) {
            retired_below = crate::payload::retired::decode(collection, &value).ok();
        }
        records.push(RawRecord {
            key: strata_store::escape_key(&key),
            key_hex: hex::encode(&key),
            value_hex: hex::encode(&value),
        });
    }
    Ok(Fixture {
        header: FixtureHeader {
            kind: FIXTURE_KIND.to_string(),
            format: FIXTURE_FORMAT,
            collection: collection.to_string(),
            rows: rows.len() as u64,
            total_rows: total,
            versions,
            sample: options.sample,
            redacted: options.redact.iter().map(|p| p.text.clone()).collect(),
            sealed,
            container_header,
            sweep_marker,
            retired_below,
            schema_history,
            records,
        },
        rows,
        path: None,
    })
}

impl Fixture {
    /// Writes the fixture as JSON Lines.
    pub fn write_to(&self, mut out: impl Write) -> Result<(), FixtureError> {
        out.write_all(line(&self.header)?.as_bytes())?;
        for r in &self.rows {
            out.write_all(line(r)?.as_bytes())?;
        }
        out.flush()?;
        Ok(())
    }

    /// Reads a fixture written by [`Fixture::write_to`].
    pub fn read_from(input: impl BufRead) -> Result<Self, FixtureError> {
        let mut lines = input.lines();
        let first = lines.next().ok_or_else(|| FixtureError::Parse {
            line: 1,
            reason: "the file is empty".into(),
        })??;
        let header: FixtureHeader =
            serde_json::from_str(&first).map_err(|e| FixtureError::Parse {
                line: 1,
                reason: format!("not a fixture header: {e}"),
            })?;
        if header.kind != FIXTURE_KIND {
            return Err(FixtureError::Parse {
                line: 1,
                reason: format!("kind `{}` is not `{FIXTURE_KIND}`", header.kind),
            });
        }
        if header.format != FIXTURE_FORMAT {
            return Err(FixtureError::Parse {
                line: 1,
                reason: format!(
                    "format {} is not supported (this build reads format {FIXTURE_FORMAT})",
                    header.format
                ),
            });
        }
        let mut rows = Vec::new();
        for (i, line) in lines.enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            rows.push(
                serde_json::from_str(&line).map_err(|e| FixtureError::Parse {
                    line: i + 2,
                    reason: format!("not a fixture row: {e}"),
                })?,
            );
        }
        // A file cut at a line boundary parses: the header's count tells.
        if rows.len() as u64 != header.rows {
            return Err(FixtureError::Parse {
                line: rows.len() + 2,
                reason: format!(
                    "the header counts {} row(s) of `{}` but the file holds {}: it was cut short or edited; capture it again (`strata fixture capture --collection {}`)",
                    header.rows,
                    header.collection,
                    rows.len(),
                    header.collection
                ),
            });
        }
        Ok(Fixture {
            header,
            rows,
            path: None,
        })
    }

    /// Reads a fixture file; an error names the file (and the line). The fixture remembers
    /// the file ([`Fixture::path`]).
    pub fn read(path: &std::path::Path) -> Result<Self, FixtureError> {
        let file = std::fs::File::open(path)
            .map_err(|e| std::io::Error::new(e.kind(), format!("`{}`: {e}", path.display())))?;
        let mut fixture = Self::read_from(std::io::BufReader::new(file)).map_err(|e| match e {
            FixtureError::Parse { line, reason } => FixtureError::File {
                path: path.to_path_buf(),
                line,
                reason,
            },
            FixtureError::Io(io) => FixtureError::Io(std::io::Error::new(
                io.kind(),
                format!("`{}`: {io}", path.display()),
            )),
            other => other,
        })?;
        fixture.path = Some(path.to_path_buf());
        Ok(fixture)
    }

    /// The file this fixture was read from by [`Fixture::read`]; `None` for a fixture
    /// captured in this process ([`capture`]) or read by [`Fixture::read_from`].
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// Loads the fixture into `store` (meant for a new, empty scratch store): its metadata
    /// records byte for byte, then every row as a clear envelope at its payload and lock
    /// version, in batches.
    pub fn load_into(&self, store: &Store) -> Result<(), FixtureError> {
        let collection = &self.header.collection;
        let st = |source| FixtureError::Store {
            collection: collection.clone(),
            source,
        };
        let mut batch = Batch::new();
        for r in &self.header.records {
            let bad = |what: &str| FixtureError::Parse {
                line: 1,
                reason: format!("record `{}`: {what} is not hex", r.key),
            };
            let key = hex::decode(&r.key_hex).map_err(|_| bad("key_hex"))?;
            let value = hex::decode(&r.value_hex).map_err(|_| bad("value_hex"))?;
            batch = batch.set(key, value);
        }
        store.apply(batch).map_err(st)?;
        for chunk in self.rows.chunks(256) {
            let mut batch = Batch::new();
            for r in chunk {
                let json = serde_json::to_vec(&r.body).map_err(|e| FixtureError::Parse {
                    line: 0,
                    reason: format!("row `{}`: {e}", r.key),
                })?;
                batch = batch.set(
                    layout::doc_key(collection, &r.key),
                    envelope::encode(Envelope::new(r.payload_version, r.lock_version), &json),
                );
            }
            store.apply(batch).map_err(st)?;
        }
        store.flush().map_err(st)?;
        Ok(())
    }
}

/// One JSON line of a part of the file.
fn line<T: Serialize>(part: &T) -> Result<String, FixtureError> {
    let mut s = serde_json::to_string(part).map_err(|e| FixtureError::Parse {
        line: 0,
        reason: e.to_string(),
    })?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redaction_keeps_types_and_shapes() {
        let mut v = json!({"email": "a@b.c", "age": 41, "score": 2.5, "vip": true,
            "tags": ["x", "y"], "addr": {"city": "Oslo", "zip": 123}, "none": null,
            "lines": [{"sku": "s1", "qty": 2}, {"sku": "s2", "qty": 1}]});
        for p in [
            "email",
            "age",
            "score",
            "vip",
            "tags",
            "addr",
            "none",
            "lines[].sku",
        ] {
            RedactPath::parse(p).unwrap().redact(&mut v);
        }
        assert_eq!(
            v,
            json!({"email": "redacted", "age": 0, "score": 0.0, "vip": false,
                "tags": ["redacted", "redacted"], "addr": {"city": "redacted", "zip": 0},
                "none": null,
                "lines": [{"sku": "redacted", "qty": 2}, {"sku": "redacted", "qty": 1}]})
        );
        let mut w = json!({"lines": [{"sku": "s1"}]});
        RedactPath::parse("$.lines.*.sku").unwrap().redact(&mut w);
        assert_eq!(w, json!({"lines": [{"sku": "redacted"}]}));
        assert!(RedactPath::parse("").is_err());
        assert!(RedactPath::parse("a..b").is_err());
    }
}
