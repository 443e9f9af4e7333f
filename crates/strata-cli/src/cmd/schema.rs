//! `strata schema diff OLD... NEW [--mode M] [--against DB COLLECTION] [--json]` (a CI
//! gate: exit 6 when the change does not meet the mode), `strata schema show <collection>`
//! (the persisted baseline) and `strata schema log <collection>` (every recorded version).

use crate::db;
use crate::exit::{CmdResult, Failure, NON_ADDITIVE, OK};
use std::io::Write;
use std::path::{Path, PathBuf};
use strata::layout::catalog::FIRST_COLLECTION_ID;
use strata::policy::Baseline;

/// Arguments of `strata schema`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: SchemaCommand,
}

/// The compatibility a `schema diff` requires (exit 6 otherwise), as schema registries
/// name them; a `-transitive` mode checks the new schema against every earlier version,
/// the plain one against the latest only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Only new optional top-level properties (the `additive_only()` rule).
    Additive,
    /// Data written under the old schema is valid under the new one.
    Backward,
    /// Data written under the new schema is valid under the old one.
    Forward,
    /// Backward and forward.
    Full,
    /// Additive against every earlier version.
    AdditiveTransitive,
    /// Backward against every earlier version.
    BackwardTransitive,
    /// Forward against every earlier version.
    ForwardTransitive,
    /// Full against every earlier version.
    FullTransitive,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Additive => "additive",
            Mode::Backward => "backward",
            Mode::Forward => "forward",
            Mode::Full => "full",
            Mode::AdditiveTransitive => "additive-transitive",
            Mode::BackwardTransitive => "backward-transitive",
            Mode::ForwardTransitive => "forward-transitive",
            Mode::FullTransitive => "full-transitive",
        }
    }

    fn transitive(self) -> bool {
        matches!(
            self,
            Mode::AdditiveTransitive
                | Mode::BackwardTransitive
                | Mode::ForwardTransitive
                | Mode::FullTransitive
        )
    }

    /// True when `delta` satisfies the mode.
    fn accepts(self, delta: &strata_schema::SchemaDelta) -> bool {
        let c = &delta.compatibility;
        match self {
            Mode::Additive | Mode::AdditiveTransitive => !delta.is_non_additive(),
            Mode::Backward | Mode::BackwardTransitive => c.backward,
            Mode::Forward | Mode::ForwardTransitive => c.forward,
            Mode::Full | Mode::FullTransitive => c.backward && c.forward,
        }
    }
}

#[derive(Debug, clap::Subcommand)]
enum SchemaCommand {
    /// Compare JSON Schemas: `OLD... NEW` files (oldest first), or `NEW` with
    /// `--against DB COLLECTION` (the stored versions). Prints the delta against the
    /// latest earlier version, the path-level changes and the verdict of `--mode`. Exit 0
    /// compatible, 6 not.
    Diff {
        /// Schema files: every earlier version (oldest first), then the new one; with
        /// `--against`, only the new one.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// The compatibility required.
        #[arg(long, value_enum, default_value = "additive")]
        mode: Mode,
        /// Compare with a collection's stored schema versions (its baseline and history)
        /// in datastore DB.
        #[arg(long, num_args = 2, value_names = ["DB", "COLLECTION"])]
        against: Option<Vec<String>>,
        /// The name shown in the title (default: the collection of `--against`, else the
        /// new file's name).
        #[arg(long)]
        collection: Option<String>,
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
    /// List every recorded version of a collection's schema, with what changed at each
    /// (read-only).
    Log {
        /// The collection.
        collection: String,
        /// Print one JSON document.
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
            files,
            mode,
            against,
            collection,
            json,
        } => diff(files, mode, against, collection, json),
        SchemaCommand::Log { collection, json } => log(db_path, &collection, json),
        SchemaCommand::Show { collection, json } => {
            let store = db::open_for_reading(db_path)?;
            let Some(b) = Baseline::load(&store, &collection)? else {
                return Err(no_baseline(&store, db_path, &collection));
            };
            let mut out = std::io::stdout().lock();
            if json {
                let doc = serde_json::json!({
                    "db": db::describe(db_path),
                    "collection": collection,
                    "hash": b.hash,
                    "payload_version": b.payload_version,
                    "schema": b.schema,
                });
                crate::json::emit(&mut out, &doc)?;
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

/// One earlier schema: a label (file or `vN`) and the schema.
struct Earlier {
    label: String,
    schema: serde_json::Value,
}

/// The stored versions of `collection` in `db` (its history, or the baseline alone for a
/// store without history), oldest first.
fn stored_versions(db_arg: &str, collection: &str) -> Result<Vec<Earlier>, Failure> {
    let db_path = Path::new(db_arg);
    let store = db::open_target_for_reading(&db::target_named(db_path, false, "--against")?)?;
    let history = strata::policy::read_history(&store, collection)?;
    if !history.is_empty() {
        return Ok(history
            .into_iter()
            .map(|v| Earlier {
                label: format!("`{collection}` v{}", v.version),
                schema: v.baseline.schema,
            })
            .collect());
    }
    match Baseline::load(&store, collection)? {
        Some(b) => Ok(vec![Earlier {
            label: format!("`{collection}` baseline"),
            schema: b.schema,
        }]),
        None => Err(no_baseline(&store, db_path, collection)),
    }
}

/// The error for a `collection` of `db_path` without a persisted schema: it says whether
/// the name is a collection at all (listing the known ones when it is not), a Numax sync
/// table (which has no JSON Schema), or a collection opened without a schema.
fn no_baseline(store: &strata_store::Store, db_path: &Path, collection: &str) -> Failure {
    let db = db::describe(db_path);
    // An unfinished copy may not have brought the schema (or the collection) yet: that,
    // not "never opened with a schema", is what the user needs to hear (exit 7).
    match crate::cmd::unfinished::copy(store, &db) {
        Ok(Some(u)) => {
            return Failure::with_code(
                crate::exit::UNFINISHED,
                format!(
                    "no persisted schema for collection `{collection}` in `{db}` yet: {}, which may not have reached it; {}",
                    u.detail, u.next
                ),
            )
        }
        Ok(None) => {}
        Err(f) => return f,
    }
    let catalog = match db::catalog(store) {
        Ok(c) => c,
        Err(e) => {
            return Failure::error(format!(
                "no persisted schema for collection `{collection}` in `{db}` (its catalog cannot be read: {e})"
            ))
        }
    };
    let known: Vec<&str> = catalog
        .tables()
        .iter()
        .filter(|t| t.id() >= FIRST_COLLECTION_ID)
        .map(|t| t.name())
        .collect();
    let detail = match catalog.get(collection) {
        None if known.is_empty() => {
            "no collection of that name is recorded (the store holds none); check the name and the store".to_string()
        }
        None => format!(
            "no collection of that name is recorded (known: {}); check the name",
            known.join(", ")
        ),
        Some(t) if t.id() < FIRST_COLLECTION_ID => {
            "it is a Numax sync table, which has no JSON Schema; name a collection".to_string()
        }
        Some(_) => "the collection was never opened with a schema; an application persists one by opening it with `CollectionOptions::schema(SchemaOptions::of::<T>())`".to_string(),
    };
    Failure::error(format!(
        "no persisted schema for collection `{collection}` in `{db}`: {detail}"
    ))
}

fn diff(
    mut files: Vec<PathBuf>,
    mode: Mode,
    against: Option<Vec<String>>,
    collection: Option<String>,
    json: bool,
) -> CmdResult {
    let (earlier, new_path, default_title) = match &against {
        Some(a) => {
            let [db_arg, coll] = a.as_slice() else {
                return Err(Failure::with_code(
                    crate::exit::USAGE,
                    "`--against` takes two values: DB COLLECTION",
                ));
            };
            if files.len() != 1 {
                return Err(Failure::with_code(
                    crate::exit::USAGE,
                    "with `--against DB COLLECTION`, pass only the new schema file",
                ));
            }
            let new = files.remove(0);
            (stored_versions(db_arg, coll)?, new, coll.clone())
        }
        None => {
            if files.len() < 2 {
                return Err(Failure::with_code(
                    crate::exit::USAGE,
                    "pass OLD... NEW schema files, or NEW with `--against DB COLLECTION`",
                ));
            }
            let new = files.pop().unwrap_or_default();
            let earlier = files
                .iter()
                .map(|f| {
                    Ok(Earlier {
                        label: format!("`{}`", f.display()),
                        schema: read_json(f)?,
                    })
                })
                .collect::<Result<Vec<_>, Failure>>()?;
            let title = new.file_name().map_or_else(
                || new.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            (earlier, new, title)
        }
    };
    let title = collection.unwrap_or(default_title);
    let new_schema = read_json(&new_path)?;
    let compare = |e: &Earlier| {
        strata_schema::diff(&title, &e.schema, &new_schema).map_err(|err| {
            let new_label = format!("`{}`", new_path.display());
            Failure::error(format!(
                "cannot compare {} (old) with {new_label} (new): {}",
                e.label,
                unfit_schema(&err, &e.label, &new_label)
            ))
        })
    };
    let Some(latest) = earlier.last() else {
        return Err(Failure::error("no earlier schema to compare with"));
    };
    let delta = compare(latest)?;
    // Transitive: the new schema against every earlier version, latest included.
    let mut checks = Vec::new();
    if mode.transitive() {
        for e in &earlier {
            let d = compare(e)?;
            checks.push((e.label.clone(), mode.accepts(&d), d.compatibility.level));
        }
    } else {
        checks.push((
            latest.label.clone(),
            mode.accepts(&delta),
            delta.compatibility.level,
        ));
    }
    let compatible = checks.iter().all(|(_, ok, _)| *ok);
    let mut out = std::io::stdout().lock();
    if json {
        let mut doc = serde_json::to_value(&delta)?;
        if let Some(obj) = doc.as_object_mut() {
            obj.insert("mode".into(), mode.name().into());
            obj.insert("compatible".into(), compatible.into());
            let checked: Vec<serde_json::Value> = checks
                .iter()
                .map(|(label, ok, level)| {
                    serde_json::json!({"against": label, "compatible": ok, "level": level})
                })
                .collect();
            obj.insert("checked".into(), checked.into());
        }
        crate::json::emit(&mut out, &doc)?;
    } else {
        write!(out, "{}", strata_schema::render_human(&delta))?;
        for (label, ok, level) in &checks {
            writeln!(
                out,
                "{} against {label}: {} (level {level})",
                mode.name(),
                if *ok { "compatible" } else { "NOT compatible" }
            )?;
        }
        writeln!(
            out,
            "verdict ({}): {}",
            mode.name(),
            if compatible {
                "compatible"
            } else {
                "incompatible"
            }
        )?;
    }
    Ok(if compatible { OK } else { NON_ADDITIVE })
}

/// Why two schemas cannot be compared, naming the schema at fault by its label (a file,
/// or a stored version of a collection) rather than by the title of the diff (which, for
/// two files, is the new file's name, not a collection).
fn unfit_schema(err: &strata_schema::SchemaError, old: &str, new: &str) -> String {
    use strata_schema::{SchemaError, Side};
    let label = |side: &Side| match side {
        Side::Old => old,
        Side::New => new,
    };
    match err {
        SchemaError::NotObjectSchema { side, path, .. } => format!(
            "the {side} schema {} is not an object schema at `{path}`; derive it from a struct (the root needs `\"type\": \"object\"` or `properties`)",
            label(side)
        ),
        SchemaError::DanglingRef {
            side,
            path,
            reference,
            ..
        } => format!(
            "dangling $ref `{reference}` at `{path}` in the {side} schema {}; add the definition under `$defs` or fix the reference",
            label(side)
        ),
        SchemaError::UnsupportedRef {
            side,
            path,
            reference,
            ..
        } => format!(
            "unsupported $ref `{reference}` at `{path}` in the {side} schema {}; only local references (`#/$defs/...`) are supported, inline the referenced schema",
            label(side)
        ),
        other => other.to_string(),
    }
}

fn log(db_path: &Path, collection: &str, json: bool) -> CmdResult {
    let store = db::open_for_reading(db_path)?;
    let mut versions: Vec<(u32, Baseline)> = strata::policy::read_history(&store, collection)?
        .into_iter()
        .map(|v| (v.version, v.baseline))
        .collect();
    if versions.is_empty() {
        // A store written before the history existed: the baseline is version 1.
        match Baseline::load(&store, collection)? {
            Some(b) => versions.push((1, b)),
            None => return Err(no_baseline(&store, db_path, collection)),
        }
    }
    let mut rows = Vec::new();
    let mut previous: Option<&Baseline> = None;
    for (version, b) in &versions {
        let change = match previous {
            None => serde_json::json!({"kind": "initial"}),
            Some(p) => match strata_schema::diff(collection, &p.schema, &b.schema) {
                Ok(d) => serde_json::json!({
                    "kind": d.kind,
                    "added": d.added,
                    "removed": d.removed,
                    "changed": d.changed.iter().map(|c| c.field.clone()).collect::<Vec<_>>(),
                    "level": d.compatibility.level,
                }),
                Err(e) => serde_json::json!({"kind": "unknown", "error": e.to_string()}),
            },
        };
        rows.push(serde_json::json!({
            "version": version,
            "hash": b.hash,
            "payload_version": b.payload_version,
            "change": change,
        }));
        previous = Some(b);
    }
    let mut out = std::io::stdout().lock();
    if json {
        let doc = serde_json::json!({
            "db": db::describe(db_path),
            "collection": collection,
            "versions": rows,
        });
        crate::json::emit(&mut out, &doc)?;
        return Ok(OK);
    }
    writeln!(out, "schema versions of `{collection}`")?;
    for r in &rows {
        let c = &r["change"];
        let list = |k: &str| {
            c[k].as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default()
        };
        let what = match c["kind"].as_str().unwrap_or_default() {
            "initial" => "initial".to_string(),
            kind => format!(
                "{kind} (level {}; added: {}; removed: {}; changed: {})",
                c["level"].as_str().unwrap_or("?"),
                or_dash(list("added")),
                or_dash(list("removed")),
                or_dash(list("changed"))
            ),
        };
        writeln!(
            out,
            "v{:<4} {}  payload {}  {}",
            r["version"],
            r["hash"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(12)
                .collect::<String>(),
            r["payload_version"]
                .as_i64()
                .map_or_else(|| "-".to_string(), |v| format!("v{v}")),
            what
        )?;
    }
    Ok(OK)
}

fn or_dash(s: String) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}
