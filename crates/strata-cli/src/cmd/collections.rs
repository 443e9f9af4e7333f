//! `strata collections [--json]`: per collection its row count, the histogram of stored
//! payload versions, the rows behind and ahead of the newest version the store knows of,
//! the sweep marker and the fence (read-only).
//!
//! Only the 17-byte envelope header of each row is read: no JSON is parsed.
//!
//! The reference version ("newest version seen") is, in an application's embedded admin,
//! the version its registered chain reaches; otherwise the highest of the persisted schema
//! baseline's payload version and the sweep marker's completed or in-progress target; a
//! store with neither uses the highest stored version (then no row is ahead).

use crate::db;
use crate::exit::{CmdResult, Failure, OK};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use strata::layout;
use strata::layout::envelope;
use strata::ops::sweep::SweepMarker;
use strata::policy::{Baseline, Fence, FenceDoc};
use strata::TableDef;
use strata_store::{KvRead, Store};

/// Arguments of `strata collections`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

/// Where the reference version of a collection comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VersionSource {
    /// The persisted JSON Schema baseline (written by the application).
    Baseline,
    /// The sweep marker (the target of a completed or running sweep).
    SweepMarker,
    /// Neither is recorded: the highest payload version stored.
    Stored,
    /// The application's registered upcast chain (an embedded `Admin`).
    Application,
    /// The collection has no rows and nothing recorded.
    None,
}

/// The sweep marker of a collection, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum SweepState {
    /// No sweep ever ran.
    None,
    /// The last sweep completed (to `completed`), none is running.
    Completed {
        /// The version it brought the rows to.
        completed: i32,
    },
    /// A sweep is in progress (or was interrupted and will resume).
    InProgress {
        /// Its target version.
        target: i32,
        /// The runner holding (or last holding) the lease.
        runner: Option<String>,
        /// Rows processed so far.
        scanned: u64,
    },
    /// The marker cannot be read.
    Corrupt {
        /// Why.
        reason: String,
    },
}

/// The fence as it concerns one collection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FenceInfo {
    /// The store's fence state (`normal`, `draining`, `migrating`, `complete`), or
    /// `corrupt`.
    pub state: String,
    /// The store's schema generation (absent when the record is unreadable).
    pub generation: Option<u64>,
    /// True when a cutover of this collection is pending.
    pub cutover_pending: bool,
}

/// What `strata collections` reports about one collection.
#[derive(Debug, Clone, Serialize)]
pub struct CollectionSurvey {
    /// The collection name.
    pub collection: String,
    /// Its table id.
    pub table_id: u16,
    /// Rows stored.
    pub rows: u64,
    /// Rows per stored payload version (versions as strings, JSON object keys).
    pub versions: BTreeMap<i32, u64>,
    /// Rows whose envelope cannot be read (`strata verify` names them).
    pub unreadable: u64,
    /// The reference version rows are compared with.
    pub newest_version: Option<i32>,
    /// Where [`CollectionSurvey::newest_version`] comes from.
    pub newest_version_source: VersionSource,
    /// Rows stored below the reference version (a sweep would rewrite them).
    pub rows_behind: u64,
    /// Rows stored above the reference version (written by a newer build).
    pub rows_ahead: u64,
    /// Versions below this one are retired (`retire`): no build reads rows stored there.
    pub retired_below: Option<i32>,
    /// Rows stored below [`CollectionSurvey::retired_below`] (restored from a backup,
    /// copied in or written by an old build): every read refuses them.
    pub rows_retired: u64,
    /// The sweep marker.
    pub sweep: SweepState,
    /// The fence.
    pub fence: FenceInfo,
    /// The deploy window (two builds live at once), when one is open.
    pub window: Option<WindowInfo>,
}

/// A collection's open deploy window, as `strata collections` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct WindowInfo {
    /// The operational version every build writes at while the window is open.
    pub operational: i32,
    /// The builds recorded for the collection (client id, version, pid, live).
    pub builds: Vec<WindowBuild>,
}

/// One client's build in a [`WindowInfo`].
#[derive(Debug, Clone, Serialize)]
pub struct WindowBuild {
    /// The client id.
    pub client: String,
    /// The payload version its build knows.
    pub version: i32,
    /// Its process id, when its presence record is there.
    pub pid: Option<u32>,
    /// True when its heartbeat is recent (within the default stale window).
    pub live: bool,
}

impl CollectionSurvey {
    /// True when rows are stored at an older payload version.
    pub fn sweep_pending(&self) -> bool {
        self.rows_behind > 0
    }
}

/// The `--json` document (written by [`crate::json::emit`], which adds its format).
#[derive(Debug, Serialize)]
struct CollectionsDoc<'a> {
    db: String,
    /// `ok`, or the verdict of unfinished work (`unfinished_copy` 7, `unfinished_migration`
    /// 8, `unfinished_cutover` 9, `unfinished_rotation` 10, `unfinished_sweep` 11; see
    /// [`crate::cmd::unfinished`]).
    verdict: &'static str,
    collections: &'a [CollectionSurvey],
    /// Unfinished work (see `strata status`).
    unfinished: &'a [crate::cmd::unfinished::Unfinished],
    /// PostgreSQL: which servers answered (`read_from` is `replica` when the URL names a
    /// read replica that answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    hosts: Option<db::Hosts>,
}

/// The fence record, read once per command.
pub(crate) fn read_fence(store: &Store) -> Result<Option<FenceDoc>, Failure> {
    match Fence::read(store) {
        Ok(f) => Ok(Some(f)),
        Err(strata::policy::PolicyError::Corrupted { .. }) => Ok(None),
        Err(e) => Err(Failure::error(e)),
    }
}

/// The payload version an application's code reaches, per collection (from an embedded
/// `Admin`'s registered chains; empty for the generic binary).
pub(crate) type CodeVersions = BTreeMap<String, i32>;

/// Surveys every collection recorded in `store` (in name order).
pub(crate) fn survey_all(
    store: &Store,
    code: &CodeVersions,
) -> Result<Vec<CollectionSurvey>, Failure> {
    let catalog = strata::layout::read_catalog(store).map_err(Failure::error)?;
    let fence = read_fence(store)?;
    catalog
        .tables()
        .iter()
        .map(|t| survey(store, t, fence.as_ref(), code.get(t.name()).copied()))
        .collect()
}

/// Surveys one collection: reads every row's envelope header, the baseline, the sweep
/// marker; `fence` is the fence record (`None`: unreadable); `code_version` is the
/// version the application's chain reaches, when known (it is then the reference).
pub(crate) fn survey(
    store: &Store,
    table: &TableDef,
    fence: Option<&FenceDoc>,
    code_version: Option<i32>,
) -> Result<CollectionSurvey, Failure> {
    let name = table.name();
    let mut versions: BTreeMap<i32, u64> = BTreeMap::new();
    let mut rows = 0u64;
    let mut unreadable = 0u64;
    // Every row, oversize ones read alone (the read-only rule of `crate::scan`).
    crate::scan::each_record(store, table.prefix(), crate::scan::limits()?, |_, value| {
        rows += 1;
        // A clear row, or the clear header of a sealed one (no key needed).
        let version = match envelope::decode(value) {
            Ok((env, _json)) => Some(env.payload_version),
            Err(_) => strata::seal::peek(value)
                .filter(|(_, sealed)| *sealed)
                .map(|(env, _)| env.payload_version),
        };
        match version {
            Some(v) => *versions.entry(v).or_insert(0) += 1,
            None => unreadable += 1,
        }
    })?;

    let sweep = match store.get(&layout::keys::sweep_key(name))? {
        None => SweepState::None,
        Some(bytes) => match SweepMarker::decode(name, &bytes) {
            Ok(m) => match m.in_progress {
                Some(target) => SweepState::InProgress {
                    target,
                    runner: m.runner.clone(),
                    scanned: m.counters.scanned,
                },
                None => SweepState::Completed {
                    completed: m.completed,
                },
            },
            Err(e) => SweepState::Corrupt {
                reason: e.to_string(),
            },
        },
    };
    // An unreadable baseline is `strata verify`'s business; here it only gives no version.
    let baseline_version = Baseline::load(store, name)
        .ok()
        .flatten()
        .and_then(|b| b.payload_version);
    let marker_version = match &sweep {
        SweepState::Completed { completed } if *completed > 0 => Some(*completed),
        SweepState::InProgress { target, .. } => Some(*target),
        _ => None,
    };
    let (newest_version, newest_version_source) = match (baseline_version, marker_version) {
        _ if code_version.is_some() => (code_version, VersionSource::Application),
        (Some(b), Some(m)) if m > b => (Some(m), VersionSource::SweepMarker),
        (Some(b), _) => (Some(b), VersionSource::Baseline),
        (None, Some(m)) => (Some(m), VersionSource::SweepMarker),
        (None, None) => match versions.keys().next_back() {
            Some(&v) => (Some(v), VersionSource::Stored),
            None => (None, VersionSource::None),
        },
    };
    let (mut rows_behind, mut rows_ahead) = (0, 0);
    if let Some(newest) = newest_version {
        for (&v, &n) in &versions {
            if v < newest {
                rows_behind += n;
            } else if v > newest {
                rows_ahead += n;
            }
        }
    }
    let fence = match fence {
        Some(f) => FenceInfo {
            state: f.state.to_string(),
            generation: Some(f.generation),
            cutover_pending: f.is_pending(name),
        },
        None => FenceInfo {
            state: "corrupt".into(),
            generation: None,
            cutover_pending: false,
        },
    };
    // A damaged retirement record is `strata verify`'s business (and a read's error).
    let retired_below = strata::ops::retire::retired_below(store, name)
        .ok()
        .flatten();
    let rows_retired = retired_below.map_or(0, |k| versions.range(..k).map(|(_, n)| n).sum());
    let window = window_info(store, name);
    Ok(CollectionSurvey {
        collection: name.to_string(),
        table_id: table.id(),
        rows,
        versions,
        unreadable,
        newest_version,
        newest_version_source,
        rows_behind,
        rows_ahead,
        retired_below,
        rows_retired,
        sweep,
        fence,
        window,
    })
}

/// The collection's deploy window, if one is open (a damaged record is `None` here: a
/// read of the collection reports it).
fn window_info(store: &Store, name: &str) -> Option<WindowInfo> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let st = strata::ops::window::status(store, name, now, strata::policy::DEFAULT_STALE_AFTER_MS)
        .ok()?;
    let operational = st.operational?;
    Some(WindowInfo {
        operational,
        builds: st
            .builds
            .into_iter()
            .map(|b| WindowBuild {
                client: b.client,
                version: b.version,
                pid: b.pid,
                live: b.live,
            })
            .collect(),
    })
}

/// The line describing an open deploy window.
pub(crate) fn window_line(collection: &str, w: &WindowInfo) -> String {
    let live: Vec<String> = w
        .builds
        .iter()
        .filter(|b| b.live)
        .map(|b| match b.pid {
            Some(pid) => format!("v{} (pid {pid})", b.version),
            None => format!("v{}", b.version),
        })
        .collect();
    format!(
        "{collection}: deploy window open at v{}: every build writes there (newer builds through their downcasts); live builds: {}. Complete it from the newest build (`complete_window`, or `window {collection} complete` in the application's admin) once the older builds stopped; until then going back to the older build is free",
        w.operational,
        if live.is_empty() { "none".to_string() } else { live.join(", ") }
    )
}

/// The line naming rows stored below a collection's retired versions.
pub(crate) fn retired_line(collection: &str, rows: u64, below: Option<i32>) -> String {
    let below = below.unwrap_or(0);
    format!(
        "{collection}: {rows} row(s) stored below v{below}, whose versions were retired: no build reads them (restored from a backup, copied in or written by an old build); delete them or rewrite them at v{below} or newer (`strata verify` names them)"
    )
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    run_with(db_path, args, &CodeVersions::new())
}

/// Runs the command with the application's code versions as references.
pub(crate) fn run_with(db_path: &Path, args: Args, code: &CodeVersions) -> CmdResult {
    // Stale-tolerant: a read replica the URL names answers (nothing here decides a write).
    let (store, hosts) = db::open_reading(db_path, db::Reads::StaleTolerant)?;
    let surveys = survey_all(&store, code)?;
    let shown = db::describe(db_path);
    let catalog = db::catalog(&store).map_err(crate::exit::catalog_failure)?;
    let unfinished = crate::cmd::unfinished::find(&store, &catalog, &shown)?;
    // The store's verdict, as `status` gives it: a store that needs `strata migrate` (a
    // Numax store's tables, or a collection table at an older header) or that this build
    // cannot open is not reported healthy because its collections list well.
    let (tables, _) = crate::cmd::verdict::inspect_tables(&store, &catalog)?;
    let (code, word) = crate::cmd::verdict::verdict(&tables);
    let (exit, verdict) = crate::cmd::unfinished::combine(code, word, &unfinished);
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = CollectionsDoc {
            db: shown,
            verdict,
            collections: &surveys,
            unfinished: &unfinished,
            hosts,
        };
        crate::json::emit(&mut out, &doc)?;
        return Ok(exit);
    }
    if surveys.is_empty() {
        writeln!(
            out,
            "no collections in `{shown}` (an application records one when it first opens it)"
        )?;
        for u in &unfinished {
            writeln!(out, "{}", u.line())?;
        }
        if exit != OK {
            writeln!(out, "{}", crate::cmd::verdict::summary(exit))?;
        }
        if let Some(h) = &hosts {
            writeln!(out, "{}", h.line())?;
        }
        return Ok(exit);
    }
    let name_w = surveys
        .iter()
        .map(|s| s.collection.len())
        .max()
        .unwrap_or(10)
        .max(10);
    writeln!(
        out,
        "{:<name_w$}  {:>9}  {:<24}  {:>6}  {:>6}  {:>6}  {:<18}  FENCE",
        "COLLECTION", "ROWS", "VERSIONS", "NEWEST", "BEHIND", "AHEAD", "SWEEP"
    )?;
    for s in &surveys {
        let mut hist: Vec<String> = s
            .versions
            .iter()
            .map(|(v, n)| format!("v{v}:{n}"))
            .collect();
        if s.unreadable > 0 {
            hist.push(format!("unreadable:{}", s.unreadable));
        }
        if s.rows_retired > 0 {
            hist.push(format!("retired:{}", s.rows_retired));
        }
        let hist = if hist.is_empty() {
            "-".to_string()
        } else {
            hist.join(" ")
        };
        let newest = s
            .newest_version
            .map_or_else(|| "-".to_string(), |v| format!("v{v}"));
        let sweep = match &s.sweep {
            SweepState::None if s.sweep_pending() => "pending".to_string(),
            SweepState::None => "-".to_string(),
            SweepState::Completed { completed } if s.sweep_pending() && *completed > 0 => {
                format!("pending (done v{completed})")
            }
            SweepState::Completed { .. } if s.sweep_pending() => "pending".to_string(),
            SweepState::Completed { completed } => format!("done v{completed}"),
            SweepState::InProgress { target, .. } => format!("running to v{target}"),
            SweepState::Corrupt { .. } => "corrupt marker".to_string(),
        };
        let fence = if s.fence.cutover_pending {
            format!("{}, cutover pending", s.fence.state)
        } else {
            s.fence.state.clone()
        };
        let line = format!(
            "{:<name_w$}  {:>9}  {:<24}  {:>6}  {:>6}  {:>6}  {:<18}  {}",
            s.collection, s.rows, hist, newest, s.rows_behind, s.rows_ahead, sweep, fence
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    for s in &surveys {
        if let Some(w) = &s.window {
            writeln!(out, "{}", window_line(&s.collection, w))?;
        }
    }
    for s in surveys.iter().filter(|s| s.rows_retired > 0) {
        writeln!(
            out,
            "{}",
            retired_line(&s.collection, s.rows_retired, s.retired_below)
        )?;
    }
    let pending: Vec<&str> = surveys
        .iter()
        .filter(|s| s.sweep_pending() && s.window.is_none())
        .map(|s| s.collection.as_str())
        .collect();
    if !pending.is_empty() {
        writeln!(
            out,
            "\nsweep pending for {}: rows are stored at an older payload version (they are upcast on read; run the application's sweep to rewrite them)",
            pending.join(", ")
        )?;
    }
    if !unfinished.is_empty() {
        writeln!(out)?;
    }
    for u in &unfinished {
        writeln!(out, "{}", u.line())?;
    }
    if exit != OK {
        writeln!(out, "{}", crate::cmd::verdict::summary(exit))?;
    }
    if let Some(h) = &hosts {
        writeln!(out, "{}", h.line())?;
    }
    Ok(exit)
}
