//! Replay of a fixture against an application's chain: every path a deploy runs.

mod interrupt;

use interrupt::ChildSpec;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use strata::ops::fixture::Fixture;
use strata::ops::sweep::SweepOptions;
use strata::pass::PassLimits;
use strata::{Collection, CollectionOptions, Database};
use strata_store::{Pages, ScanLimits, Store};

/// The environment variable that makes a test process the child of a kill replay.
pub const CHILD_ENV: &str = "STRATA_TESTKIT_CHILD";
/// How long a child may take to reach its boundary before it is killed and reported.
const CHILD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);
/// The line a child prints at each batch boundary (followed by its number).
const BOUNDARY_LINE: &str = "strata-testkit boundary ";

/// What one sweep run is handed: the options to pass to [`Collection::sweep`] (runner id,
/// batch limits and the boundary hook the kills use) and the hook itself, for a sweep
/// written by hand.
pub struct SweepRun {
    options: Box<dyn Fn() -> SweepOptions>,
    boundary: Arc<dyn Fn() + Send + Sync>,
    batch_rows: usize,
}

impl SweepRun {
    /// The options of [`Collection::sweep`] for this run.
    pub fn options(&self) -> SweepOptions {
        (self.options)()
    }

    /// A hand-written sweep calls this at each batch boundary (before each batch and after
    /// the last), as the engine's sweep polls its abort check: a kill replay kills the
    /// child there.
    pub fn boundary(&self) {
        (self.boundary)()
    }

    /// Rows per batch.
    pub fn batch_rows(&self) -> usize {
        self.batch_rows
    }
}

/// A sweep: the engine's ([`Collection::sweep`]) unless [`Replay::sweep_with`] gives
/// another (a test double, or an application's own rewrite loop).
pub type Sweeper<T> = Arc<dyn Fn(&Collection<T>, &SweepRun) -> Result<(), String> + Send + Sync>;

/// One row that failed a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowFailure {
    /// The check (`read`, `sweep`, `kill at boundary N`).
    pub check: String,
    /// The document key.
    pub key: String,
    /// The payload version the fixture stores it at.
    pub stored_version: i32,
    /// What went wrong.
    pub reason: String,
}

/// Why a replay was refused before it ran anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The fixture was captured from another collection than the one replayed: its rows
    /// would only show as rows that do not read into the build's type.
    #[error(
        "{} was captured from collection `{fixture_collection}`, but this replay is of collection `{collection}`; replay it against `{fixture_collection}` (`replay::<T>(&fixture, \"{fixture_collection}\", options)` with that collection's type and options), or capture a fixture of `{collection}` (`strata fixture capture --collection {collection}`)",
        fixture_label(.file.as_deref())
    )]
    CollectionMismatch {
        /// The fixture's file, when it was read from one ([`Fixture::path`]).
        file: Option<PathBuf>,
        /// The collection the fixture was captured from (its header's `collection`).
        fixture_collection: String,
        /// The collection the replay was asked for.
        collection: String,
    },
}

/// How an error names a fixture: its file, or where it came from.
fn fixture_label(file: Option<&Path>) -> String {
    match file {
        Some(path) => format!("fixture file `{}`", path.display()),
        None => "the fixture (not read from a file)".to_string(),
    }
}

/// What a replay found.
#[derive(Debug, Clone, Default)]
pub struct ReplayReport {
    /// The collection replayed.
    pub collection: String,
    /// Why the replay was refused before it ran anything (nothing else is then filled in).
    pub refused: Option<ReplayError>,
    /// Rows replayed.
    pub rows: usize,
    /// Rows per stored version.
    pub versions: BTreeMap<i32, u64>,
    /// The chain's current version.
    pub current_version: i32,
    /// Rows that failed a check.
    pub failures: Vec<RowFailure>,
    /// Batch boundaries of the uninterrupted sweep.
    pub boundaries: usize,
    /// Kill runs made (one per boundary, each in a child process when the test's name is
    /// known, see [`Replay::run`]).
    pub kills: usize,
    /// True when the kills ran in child processes killed with SIGKILL.
    pub killed_children: bool,
    /// `schema check` against the fixture's schema history: its exit code (0 compatible
    /// or a cutover the strategies plan, 6 rejected), when the collection has a schema.
    pub schema_check: Option<u8>,
    /// `schema plan` of the collection on the loaded fixture: its exit code (0 clean, 1
    /// rows that fail — the reads name them —, 6 rejected).
    pub schema_plan: Option<u8>,
    /// Problems that are not about one row.
    pub problems: Vec<String>,
    /// What was not checked, and why.
    pub notes: Vec<String>,
}

impl ReplayReport {
    /// True when the replay ran, no row failed and nothing else did.
    pub fn is_ok(&self) -> bool {
        self.refused.is_none() && self.failures.is_empty() && self.problems.is_empty()
    }

    /// The failures of one check.
    pub fn failures_of(&self, check: &str) -> Vec<&RowFailure> {
        self.failures
            .iter()
            .filter(|f| f.check.starts_with(check))
            .collect()
    }

    /// Panics with the whole report unless [`ReplayReport::is_ok`]: the assertion for
    /// `cargo test`.
    #[track_caller]
    pub fn assert_ok(&self) {
        assert!(self.is_ok(), "{self}");
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(e) = &self.refused {
            return writeln!(f, "replay of `{}` refused: {e}", self.collection);
        }
        let versions: Vec<String> = self
            .versions
            .iter()
            .map(|(v, n)| format!("v{v}: {n}"))
            .collect();
        writeln!(
            f,
            "replay of `{}`: {} row(s) ({}) read by a chain at v{}; sweep with {} batch boundaries, {} kill run(s){}",
            self.collection,
            self.rows,
            versions.join(", "),
            self.current_version,
            self.boundaries,
            self.kills,
            if self.killed_children { " (child processes, SIGKILL)" } else { "" }
        )?;
        if let Some(code) = self.schema_check {
            writeln!(f, "schema check: exit {code}")?;
        }
        if let Some(code) = self.schema_plan {
            writeln!(f, "schema plan: exit {code}")?;
        }
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        for r in &self.failures {
            writeln!(
                f,
                "{}: row `{}` (stored at v{}): {}",
                r.check, r.key, r.stored_version, r.reason
            )?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        if self.is_ok() {
            writeln!(f, "ok")?;
        }
        Ok(())
    }
}

/// A replay of a fixture (see [`replay`]).
pub struct Replay<T> {
    fixture: Fixture,
    /// The collection replayed (the fixture must have been captured from it).
    collection: String,
    options: CollectionOptions,
    batch_rows: Option<usize>,
    kills: bool,
    max_kills: usize,
    sweeper: Option<Sweeper<T>>,
    schema_check: bool,
    /// The options declared the collection sealed (replayed unsealed).
    sealed: bool,
}

/// Replays `fixture` against a build whose collection `collection` has the type `T` and
/// is opened with `options`, with every check on: see [`Replay::run`]. A fixture captured
/// from another collection is refused before anything runs ([`ReplayError`]).
///
/// ```no_run
/// # #[derive(serde::Serialize, serde::Deserialize)] struct Account { id: String }
/// # fn options() -> strata::CollectionOptions { strata::CollectionOptions::new() }
/// let fixture = strata::ops::fixture::Fixture::read("tests/fixtures/accounts.jsonl".as_ref()).unwrap();
/// strata_testkit::replay::<Account>(&fixture, "accounts", options()).assert_ok();
/// ```
pub fn replay<T>(
    fixture: &Fixture,
    collection: impl Into<String>,
    options: CollectionOptions,
) -> ReplayReport
where
    T: Serialize + DeserializeOwned + 'static,
{
    Replay::<T>::new(fixture, collection, options).run()
}

thread_local! {
    /// Which `Replay::run` of the current test this is (a child acts on its own).
    static RUNS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl<T: Serialize + DeserializeOwned + 'static> Replay<T> {
    /// A replay of `collection` (its type `T`, opened with `options`, as the application
    /// declares it) with every check on, batches of about an eighth of the rows, at most
    /// 64 kill runs.
    ///
    /// The fixture must have been captured from `collection` (its header names it):
    /// otherwise [`Replay::run`] refuses it before anything runs
    /// ([`ReplayError::CollectionMismatch`]).
    ///
    /// Options that declare the collection [sealed](CollectionOptions::sealed) are
    /// replayed [unsealed](CollectionOptions::unsealed): a fixture holds the bodies
    /// decrypted, and the scratch store has no key (the report notes it).
    pub fn new(
        fixture: &Fixture,
        collection: impl Into<String>,
        options: CollectionOptions,
    ) -> Self {
        Replay {
            fixture: fixture.clone(),
            collection: collection.into(),
            sealed: options.is_sealed(),
            options: options.unsealed(),
            batch_rows: None,
            kills: true,
            max_kills: 64,
            sweeper: None,
            schema_check: true,
        }
    }

    /// Rows per sweep batch (default: an eighth of the rows, at least 1).
    pub fn batch_rows(mut self, n: usize) -> Self {
        self.batch_rows = Some(n.max(1));
        self
    }

    /// Whether to kill the sweep at every batch boundary (default on).
    pub fn kills(mut self, on: bool) -> Self {
        self.kills = on;
        self
    }

    /// At most this many kill runs, spread over the boundaries (default 64).
    pub fn max_kills(mut self, n: usize) -> Self {
        self.max_kills = n.max(1);
        self
    }

    /// Whether to run the embedded admin's `schema check` against the fixture's schema
    /// history (default on; only for a collection with a persisted schema).
    pub fn schema_check(mut self, on: bool) -> Self {
        self.schema_check = on;
        self
    }

    /// Replaces the engine's sweep by `sweeper` (a test double, or an application's own
    /// rewrite loop): it must call [`SweepRun::boundary`] at each batch boundary.
    pub fn sweep_with(
        mut self,
        sweeper: impl Fn(&Collection<T>, &SweepRun) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.sweeper = Some(Arc::new(sweeper));
        self
    }

    /// Runs the replay, once the fixture is known to be of the collection replayed (else
    /// the report says why it was [refused](ReplayReport::refused) and nothing runs):
    ///
    /// 1. **lazy reads**: the fixture is loaded into a scratch redb store and every row is
    ///    read into `T` from the version it is stored at (a v1 row read by a v4 chain runs
    ///    every step, skipping the versions it was never written at);
    /// 2. **the eager sweep**, uninterrupted: every rewritten row must hold what its lazy
    ///    read gave (same version, same JSON), with its lock version unchanged;
    /// 3. **kills at every batch boundary**: for each boundary, a fresh copy of the
    ///    loaded store is swept by a child process (the current test, run again with
    ///    `--exact` and [`CHILD_ENV`] set) that is killed with SIGKILL at that boundary;
    ///    the sweep is then resumed in this process and every row must end exactly as in
    ///    the uninterrupted run — a row rewritten twice shows as a different lock version
    ///    or body. When the test's name is unknown (not run by libtest), the kill is
    ///    simulated in-process by stopping the sweep at the boundary (said in the notes);
    /// 4. **`schema check`** of the embedded admin against the fixture's schema history.
    ///
    /// Downcast steps ([`CollectionOptions::downcast`]) are not replayed: check them
    /// with [`assert_downcasts`](crate::assert_downcasts).
    pub fn run(self) -> ReplayReport {
        let run_index = RUNS.with(|r| {
            let n = r.get();
            r.set(n + 1);
            n
        });
        if let Err(e) = self.check_collection() {
            return ReplayReport {
                collection: self.collection.clone(),
                refused: Some(e),
                ..ReplayReport::default()
            };
        }
        if let Ok(spec) = std::env::var(CHILD_ENV) {
            if let Some(child) = ChildSpec::parse(&spec) {
                if child.run_index == run_index {
                    self.child(&child);
                }
            }
        }
        let mut report = ReplayReport {
            collection: self.collection.clone(),
            rows: self.fixture.rows.len(),
            ..ReplayReport::default()
        };
        for r in &self.fixture.rows {
            *report.versions.entry(r.payload_version).or_insert(0) += 1;
        }
        if self.sealed {
            report.notes.push("the options declare the collection sealed: the fixture's bodies are decrypted, so it is replayed unsealed (the sealed read and rewrite paths are not replayed)".into());
        }
        if let Err(e) = self.run_checks(run_index, &mut report) {
            report.problems.push(e);
        }
        report
    }

    /// The fixture must be of the collection replayed.
    fn check_collection(&self) -> Result<(), ReplayError> {
        if self.fixture.header.collection == self.collection {
            return Ok(());
        }
        Err(ReplayError::CollectionMismatch {
            file: self.fixture.path().map(Path::to_path_buf),
            fixture_collection: self.fixture.header.collection.clone(),
            collection: self.collection.clone(),
        })
    }

    fn name(&self) -> &str {
        &self.collection
    }

    fn batch(&self) -> usize {
        self.batch_rows
            .unwrap_or_else(|| (self.fixture.rows.len() / 8).max(1))
    }

    fn run_checks(&self, run_index: usize, report: &mut ReplayReport) -> Result<(), String> {
        let dir =
            tempfile::tempdir().map_err(|e| format!("cannot create a scratch directory: {e}"))?;
        let base = dir.path().join("base.redb");
        {
            let store = create(&base)?;
            self.fixture
                .load_into(&store)
                .map_err(|e| format!("cannot load the fixture: {e}"))?;
        }
        // 1. Lazy reads.
        let reads = dir.path().join("reads.redb");
        copy(&base, &reads)?;
        let expected = {
            let store = open(&reads)?;
            let c = self.open(&store)?;
            report.current_version = c.current_version();
            let mut expected = BTreeMap::new();
            for r in &self.fixture.rows {
                match c.get_document(&r.key) {
                    Ok(Some(doc)) => match serde_json::to_value(&doc.value) {
                        Ok(v) => {
                            expected.insert(r.key.clone(), v);
                        }
                        Err(e) => report.failures.push(self.failure("read", r, e.to_string())),
                    },
                    Ok(None) => {
                        report
                            .failures
                            .push(self.failure("read", r, "the row is missing".into()))
                    }
                    Err(e) => report.failures.push(self.failure("read", r, e.to_string())),
                }
            }
            expected
        };
        // 2 and 3: the sweep, uninterrupted and killed (a failure here is reported and
        // the schema checks still run).
        if let Err(e) = self.sweeps(dir.path(), &base, &expected, run_index, report) {
            report.problems.push(e);
        }
        // 4. schema check.
        if self.schema_check && self.options.schema_options().schema_value().is_some() {
            let path = dir.path().join("schema.redb");
            copy(&base, &path)?;
            let code = self.admin(&path, &["schema", "check", self.name(), "--json"]);
            report.schema_check = Some(code);
            if code != 0 {
                report.problems.push(format!(
                    "`schema check` of `{}` against the fixture's schema history exited {code} (6: the change is rejected by the collection's strategies)",
                    self.name()
                ));
            }
            let plan = self.admin(&path, &["schema", "plan", self.name(), "--json"]);
            report.schema_plan = Some(plan);
            // Exit 1 names failing rows, which the reads already report.
            let explained = plan == 1 && !report.failures.is_empty();
            if plan != 0 && !explained {
                report.problems.push(format!(
                    "`schema plan` of `{}` on the fixture exited {plan}",
                    self.name()
                ));
            }
        } else if self.schema_check && !self.fixture.header.schema_history.is_empty() {
            report.notes.push("the fixture has a schema history but the options declare no schema: `schema check` not run".into());
        }
        Ok(())
    }

    /// Steps 2 and 3 of [`Replay::run`].
    fn sweeps(
        &self,
        dir: &Path,
        base: &Path,
        expected: &BTreeMap<String, Value>,
        run_index: usize,
        report: &mut ReplayReport,
    ) -> Result<(), String> {
        // 2. The uninterrupted sweep.
        let reference = dir.join("reference.redb");
        copy(base, &reference)?;
        let boundaries = Arc::new(AtomicUsize::new(0));
        let reference_rows = {
            let store = open(&reference)?;
            let c = self.open(&store)?;
            let counter = Arc::clone(&boundaries);
            self.sweep(
                &c,
                "strata-testkit-reference",
                Arc::new(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                }),
            )
            .map_err(|e| format!("the uninterrupted sweep failed: {e}"))?;
            rows_of(&store, self.name())?
        };
        report.boundaries = boundaries.load(Ordering::SeqCst);
        let before = rows_of(&open(base)?, self.name())?;
        for r in &self.fixture.rows {
            let key = &r.key;
            let (Some(now), Some(was)) = (reference_rows.get(key), before.get(key)) else {
                report.failures.push(self.failure(
                    "sweep",
                    r,
                    "the row is gone after the sweep".into(),
                ));
                continue;
            };
            if now == was {
                if r.payload_version < report.current_version && self.sweeper.is_none() {
                    if let Some(exp) = expected.get(key) {
                        if now.2 != *exp {
                            report.notes.push(format!(
                                "row `{key}` was left at v{} by the sweep (no eager step reaches it, or its marker says it already ran)",
                                now.0
                            ));
                        }
                    }
                }
                continue;
            }
            if self.sweeper.is_none() && now.1 != was.1 {
                report.failures.push(self.failure(
                    "sweep",
                    r,
                    format!(
                        "the sweep changed its lock version from {} to {}",
                        was.1, now.1
                    ),
                ));
            }
            match expected.get(key) {
                Some(exp)
                    if self.sweeper.is_none()
                        && (now.2 != *exp || now.0 != report.current_version) =>
                {
                    report.failures.push(self.failure(
                        "sweep",
                        r,
                        format!(
                            "the sweep wrote v{} {} but a read gives v{} {exp}",
                            now.0, now.2, report.current_version
                        ),
                    ));
                }
                _ => {}
            }
        }
        // 3. Kills at every boundary.
        if !self.kills || report.boundaries == 0 {
            if self.kills {
                report
                    .notes
                    .push("the sweep had no batch boundary: nothing to kill".into());
            }
        } else {
            let test = std::thread::current()
                .name()
                .filter(|n| *n != "main")
                .map(str::to_string);
            report.killed_children = test.is_some();
            if test.is_none() {
                report.notes.push("the test's name is unknown (not run by libtest): kills are simulated in-process by stopping the sweep at each boundary".into());
            }
            let points = spread(report.boundaries, self.max_kills);
            for k in points {
                report.kills += 1;
                let path = dir.join(format!("kill-{k}.redb"));
                copy(base, &path)?;
                let runner = format!("strata-testkit-kill-{k}");
                match &test {
                    Some(test) => self.kill_child(test, run_index, &path, k, &runner)?,
                    None => self.stop_in_process(&path, k, &runner)?,
                }
                let store = open(&path)?;
                let c = self.open(&store)?;
                self.sweep(&c, &runner, Arc::new(|| {})).map_err(|e| {
                    format!("the sweep resumed after a kill at boundary {k} failed: {e}")
                })?;
                let after = rows_of(&store, self.name())?;
                for r in &self.fixture.rows {
                    let (Some(a), Some(b)) = (after.get(&r.key), reference_rows.get(&r.key)) else {
                        continue;
                    };
                    if a != b {
                        report.failures.push(self.failure(
                            &format!("kill at boundary {k}"),
                            r,
                            format!(
                                "after the kill and the resumed sweep it holds v{} lock {} {}, but v{} lock {} {} after an uninterrupted sweep{}",
                                a.0, a.1, a.2, b.0, b.1, b.2,
                                if a.1 > b.1 { " (rewritten more than once)" } else { "" }
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs the embedded admin with this collection on the store at `path`; its exit code.
    fn admin(&self, path: &Path, args: &[&str]) -> u8 {
        let mut all = vec!["strata-testkit", "--db"];
        let db = path.display().to_string();
        all.push(&db);
        all.extend_from_slice(args);
        let code = strata_cli::Admin::new()
            .name("strata-testkit")
            .collection::<T>(self.name().to_string(), self.options.clone())
            .run_from(all);
        exit_code(code)
    }

    fn failure(
        &self,
        check: &str,
        r: &strata::ops::fixture::FixtureRow,
        reason: String,
    ) -> RowFailure {
        RowFailure {
            check: check.to_string(),
            key: r.key.clone(),
            stored_version: r.payload_version,
            reason,
        }
    }

    fn open(&self, store: &Store) -> Result<Collection<T>, String> {
        let db = Database::builder(store.clone())
            .open()
            .map_err(|e| format!("the scratch database does not open: {e}"))?;
        db.collection::<T>(self.name(), self.options.clone())
            .map_err(|e| format!("the collection does not open with these options: {e}"))
    }

    /// One sweep run through the sweeper, with `boundary` called at each batch boundary.
    fn sweep(
        &self,
        c: &Collection<T>,
        runner: &str,
        boundary: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<(), String> {
        let batch = self.batch();
        let hook = Arc::clone(&boundary);
        let runner = runner.to_string();
        let run = SweepRun {
            options: Box::new(move || {
                let hook = Arc::clone(&hook);
                let limits = PassLimits::new(batch, 64 << 20).unwrap_or_default();
                SweepOptions::new()
                    .runner_id(runner.clone())
                    .limits(limits)
                    .abort_when(move || {
                        hook();
                        false
                    })
            }),
            boundary,
            batch_rows: batch,
        };
        match &self.sweeper {
            Some(s) => s(c, &run),
            // Rows the sweep fails are reported by the reads (the same chain fails them).
            None => c
                .sweep(run.options())
                .map(|_| ())
                .map_err(|e| e.to_string()),
        }
    }
}

/// At most `max` boundary numbers from 1..=n, spread evenly (all of them when n ≤ max).
fn spread(n: usize, max: usize) -> Vec<usize> {
    if n <= max {
        return (1..=n).collect();
    }
    let mut out: Vec<usize> = (0..max)
        .map(|i| 1 + i * (n - 1) / (max - 1).max(1))
        .collect();
    out.dedup();
    out
}

fn create(path: &Path) -> Result<Store, String> {
    strata_redb::RedbStore::create_store(path)
        .map_err(|e| format!("cannot create the scratch store `{}`: {e}", path.display()))
}

fn open(path: &Path) -> Result<Store, String> {
    strata_redb::RedbStore::open_existing(path)
        .map(strata_redb::RedbStore::into_store)
        .map_err(|e| format!("cannot open the scratch store `{}`: {e}", path.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy the scratch store to `{}`: {e}", to.display()))
}

/// Every row of `collection`: key → (payload version, lock version, JSON).
fn rows_of(store: &Store, collection: &str) -> Result<BTreeMap<String, (i32, u64, Value)>, String> {
    let prefix = strata::layout::keys::doc_prefix(collection);
    let limits = ScanLimits::new(256, 64 << 20).map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    for rec in Pages::new(store, &prefix, limits).records() {
        let rec = rec.map_err(|e| e.to_string())?;
        let key = String::from_utf8_lossy(&rec.key[prefix.len()..]).into_owned();
        let (env, json) = strata::layout::envelope::decode(&rec.value)
            .map_err(|e| format!("row `{key}`: {e}"))?;
        let body: Value = serde_json::from_slice(json).map_err(|e| format!("row `{key}`: {e}"))?;
        out.insert(key, (env.payload_version, env.lock_version, body));
    }
    Ok(out)
}

/// The number of an [`std::process::ExitCode`] (it has no accessor: compared with each).
fn exit_code(code: std::process::ExitCode) -> u8 {
    (0..=255u8)
        .find(|n| std::process::ExitCode::from(*n) == code)
        .unwrap_or(255)
}
