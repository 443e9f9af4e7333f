//! `strata copy --from A --to B`: the whole store, every key and value, from one backend
//! to another (sled → redb, sled → PostgreSQL, …). This is how a Numax user leaves sled.
//!
//! * **On the bulk pass** ([`strata::pass::Pass::run_between`]): the source is read in
//!   batches bounded by `--max-records` and the `--max-bytes` budget; each batch is one
//!   atomic batch in the target.
//! * **Resumable**: each batch also writes the progress record
//!   [`PROGRESS_KEY`] (the source, the last copied key, the count so far) with a
//!   precondition on its previous value, so a copy killed at any instant resumes after
//!   its last committed batch when rerun with the same `--from`/`--to`, and two copies
//!   into one target cannot interleave.
//! * **Refuses a non-empty target** that holds no progress record of this same copy.
//! * **Verified**: the source's record count and SHA-256 digest (over every key and value
//!   in key order) are computed as the records are copied (a resumed copy scans the source
//!   again), the target is scanned once at the end, and both must be equal; then the
//!   progress record is replaced, in one atomic batch, by the bulk-operation manifest
//!   [`MANIFEST_KEY`] (count + digest), which `strata verify` checks later.
//!
//! Keys under [`COPY_PREFIX`] (`__nx/copy/`) belong to copy itself: they are neither copied nor digested.

use crate::db::{self, Target};
use crate::exit::{CmdResult, Failure, OK};
use crate::size::{parse_nonzero, parse_size};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use strata::layout::keys::COPY_PREFIX;
use strata_store::{
    from_hex, to_hex, Batch, KvRead, KvWrite, Pages, ScanLimits, Store, StoreError, Visit,
};

/// The progress record of an unfinished copy, in the target.
pub const PROGRESS_KEY: &[u8] = b"__nx/copy/progress";
/// The last copied key of an unfinished copy, in the target: the key itself is the value
/// (raw, so the record is never larger than the copied record it points at and stays
/// inside the byte budget the copy was given).
pub const CURSOR_KEY: &[u8] = b"__nx/copy/cursor";
/// The manifest of a finished copy, in the target: what was copied (count + digest).
pub const MANIFEST_KEY: &[u8] = b"__nx/copy/manifest";

/// Arguments of `strata copy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The store to read: a redb file, a sled directory, `redb:PATH`, `sled:PATH` or
    /// `postgres://…`. Never written.
    #[arg(long, value_name = "DB")]
    from: PathBuf,
    /// The store to write: as `--from`; a missing plain path becomes a new redb file. Must
    /// be empty (or hold the progress record of this same copy, which then resumes).
    #[arg(long, value_name = "DB")]
    to: PathBuf,
    /// Records per batch (at least 1).
    #[arg(long, value_name = "N", default_value = "10000", value_parser = parse_nonzero)]
    max_records: usize,
    /// Byte budget per batch (keys + values): 4MiB, 512KiB, 100B or a bare number.
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_size)]
    max_bytes: usize,
    /// Print one JSON summary document on stdout.
    #[arg(long)]
    json: bool,
}

/// Errors of `strata copy`.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The target holds data that is not an unfinished copy of this source.
    #[error("target `{to}` is not empty; copy only writes into an empty store (or resumes its own unfinished copy): choose a new path or empty it")]
    TargetNotEmpty {
        /// The target, as shown.
        to: String,
    },
    /// The target holds an unfinished copy of another source.
    #[error("target `{to}` holds an unfinished copy from `{started_from}`, not from `{from}`; rerun with --from {started_from}, or choose a new target")]
    OtherSource {
        /// The target, as shown.
        to: String,
        /// The source of the unfinished copy.
        started_from: String,
        /// The source given now.
        from: String,
    },
    /// The source is itself an unfinished copy.
    #[error("source `{from}` is an unfinished copy (it holds a copy progress record); finish that copy first by rerunning it")]
    SourceUnfinished {
        /// The source, as shown.
        from: String,
    },
    /// `--from` and `--to` name the same store.
    #[error("--from and --to both name `{0}`; copy needs two different stores")]
    SameStore(String),
    /// The progress record cannot be read.
    #[error("the copy progress record in `{to}` is unreadable ({detail}); delete the target and copy again")]
    BadProgress {
        /// The target, as shown.
        to: String,
        /// What is wrong.
        detail: String,
    },
    /// The bulk-operation manifest cannot be read.
    #[error("the bulk-operation manifest `__nx/copy/manifest` is unreadable ({0}); the store cannot be compared with what its last copy certified: copy it again from its source")]
    BadManifest(String),
    /// The final verification found a difference.
    #[error("copy verification failed: the source has {from_records} records (digest {from_digest}), the target {to_records} (digest {to_digest}); the target keeps its progress record, do not use it (was the source written during the copy?): delete it and copy again")]
    Mismatch {
        /// Source record count.
        from_records: u64,
        /// Source digest.
        from_digest: String,
        /// Target record count.
        to_records: u64,
        /// Target digest.
        to_digest: String,
    },
    /// `verify --strict-manifest`: the store differs from its bulk-operation manifest.
    #[error("the store differs from what its last `{operation}` certified ({records} records then, {now} now, different digest): records were lost or changed since; restore it from its source or a backup")]
    ManifestDiffers {
        /// The operation that wrote the manifest.
        operation: String,
        /// Records it certified.
        records: u64,
        /// Records now.
        now: u64,
    },
    /// The bulk pass under the copy failed in another way (its own message).
    #[error("{0}")]
    Pass(Box<strata::pass::PassError>),
    /// A store error (its own message; the error itself is the source, so the exit code
    /// and the hints of `exit` see it).
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// What `strata verify` found comparing the store with its bulk-operation manifest.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestCheck {
    /// The operation that wrote the manifest (`copy`).
    pub operation: String,
    /// Records it certified.
    pub records: u64,
    /// The digest it certified.
    pub digest: String,
    /// Records now (outside the reserved prefix).
    pub now_records: u64,
    /// The digest now.
    pub now_digest: String,
    /// True when count and digest are both unchanged.
    pub matches: bool,
}

impl ManifestCheck {
    /// One line for humans.
    pub fn describe(&self) -> String {
        if self.matches {
            format!(
                "manifest: the store holds exactly the {} records its last `{}` certified ({})",
                self.records, self.operation, self.digest
            )
        } else {
            format!(
                "manifest: the store differs from what its last `{}` certified ({} records then, {} now): expected if it was written since; otherwise records were lost or changed (verify --strict-manifest fails on this)",
                self.operation, self.records, self.now_records
            )
        }
    }
}

/// Reads the bulk-operation manifest of `store`, if any, and compares the store with it
/// (one full scan, only when a manifest exists).
/// `limits` bound each page of that scan (`verify --max-bytes`).
pub fn check_manifest(
    store: &Store,
    limits: ScanLimits,
) -> Result<Option<ManifestCheck>, CopyError> {
    let Some(raw) = store.get(MANIFEST_KEY)? else {
        return Ok(None);
    };
    let manifest: Manifest =
        serde_json::from_slice(&raw).map_err(|e| CopyError::BadManifest(e.to_string()))?;
    let (now_records, _, now_digest) = digest(store, limits)?;
    Ok(Some(ManifestCheck {
        matches: now_records == manifest.records && now_digest == manifest.digest,
        operation: manifest.operation,
        records: manifest.records,
        digest: manifest.digest,
        now_records,
        now_digest,
    }))
}

/// The progress record (JSON, format 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Progress {
    format: u32,
    from: String,
    /// The last copied key, hex, as older builds wrote it; empty when the key is in the
    /// cursor record [`CURSOR_KEY`] (or before the first batch).
    cursor: String,
    copied: u64,
    /// The last copied key is the value of [`CURSOR_KEY`] (a hex cursor doubled the key,
    /// so the progress record of a store with a 3 MiB key exceeded a 4 MiB budget).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    cursor_in_record: bool,
    /// The source's identity ([`SourceName::id`]): its backend and absolute path (or its
    /// URL without the password), so a resume that names the same source another way
    /// (`./a.redb`, `redb:a.redb`, an absolute path, another working directory) is
    /// recognised. Absent in records of older builds (then `from` must match as typed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

/// The source of a copy: as shown to the user (and recorded as `from`), and its identity.
struct SourceName {
    shown: String,
    id: String,
}

impl SourceName {
    fn new(shown: String, target: &Target) -> Self {
        let canon = |p: &Path| {
            std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.to_path_buf())
                .display()
                .to_string()
        };
        let id = match target {
            Target::Redb(p) => format!("redb:{}", canon(p)),
            Target::Sled(p) => format!("sled:{}", canon(p)),
            Target::Postgres(url) => format!("postgres:{}", db::describe(Path::new(url))),
        };
        SourceName { shown, id }
    }

    /// True when a progress record was written by a copy from this source.
    fn started(&self, p: &Progress) -> bool {
        p.from == self.shown || p.source.as_deref() == Some(self.id.as_str())
    }
}

/// The bulk-operation manifest (JSON, format 1): what a finished bulk operation saw and
/// left in the store, checked by `strata verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always 1.
    pub format: u32,
    /// Which operation wrote it (`copy`).
    pub operation: String,
    /// Where the data came from (shown form).
    pub from: String,
    /// Records in the store outside the reserved prefix, when the operation finished.
    pub records: u64,
    /// `sha256:` hex digest of those records (see [`digest`]).
    pub digest: String,
}

/// The `--json` document (written by [`crate::json::emit`], which adds its format).
#[derive(Debug, Serialize)]
struct CopyDoc {
    from: String,
    from_backend: &'static str,
    to: String,
    to_backend: &'static str,
    resumed: bool,
    records: u64,
    bytes: u64,
    digest: String,
    verified: bool,
}

/// One record into a copy digest: key length (u64 LE), key, value length (u64 LE), value.
fn hash_record(hasher: &mut Sha256, key: &[u8], value: &[u8]) {
    hasher.update((key.len() as u64).to_le_bytes());
    hasher.update(key);
    hasher.update((value.len() as u64).to_le_bytes());
    hasher.update(value);
}

/// Count, bytes and SHA-256 over every record outside [`COPY_PREFIX`], in key order: each
/// record hashes as key length (u64 LE), key, value length (u64 LE), value.
pub fn digest(store: &Store, limits: ScanLimits) -> Result<(u64, u64, String), StoreError> {
    let mut hasher = Sha256::new();
    let (mut records, mut bytes) = (0u64, 0u64);
    Pages::new(store, b"", limits).visit(|k, v| {
        if !k.starts_with(COPY_PREFIX) {
            hash_record(&mut hasher, k, v);
            records += 1;
            bytes += (k.len() + v.len()) as u64;
        }
        Visit::Continue
    })?;
    Ok((
        records,
        bytes,
        format!("sha256:{}", to_hex(&hasher.finalize())),
    ))
}

fn same_store(a: &Target, b: &Target) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    match (a, b) {
        (Target::Redb(x), Target::Redb(y)) | (Target::Sled(x), Target::Sled(y)) => {
            canon(x) == canon(y)
        }
        (Target::Postgres(x), Target::Postgres(y)) => x == y,
        _ => false,
    }
}

/// What one copy did.
struct Outcome {
    resumed: bool,
    records: u64,
    bytes: u64,
    digest: String,
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    let from_shown = db::describe(&args.from);
    let to_shown = db::describe(&args.to);
    let limits = ScanLimits::new(args.max_records, args.max_bytes).map_err(Failure::error)?;
    let from_target = db::target_named(&args.from, false, "--from")?;
    let to_target = db::target_named(&args.to, true, "--to")?;
    if same_store(&from_target, &to_target) {
        return Err(Failure::error(CopyError::SameStore(from_shown)));
    }
    let source = db::open_target_for_reading(&from_target)?;
    if source.get(PROGRESS_KEY)?.is_some() {
        return Err(Failure::error(CopyError::SourceUnfinished {
            from: from_shown,
        }));
    }
    // A refusal writes nothing: an existing target is first read read-only (a redb file
    // opened for writing rewrites its header), and only a target this copy may write
    // (empty, or its own unfinished copy) is opened for writing.
    let from_name = SourceName::new(from_shown.clone(), &from_target);
    precheck_target(&to_target, &from_name, &to_shown)?;
    let target = db::open_target(&to_target, true)?;
    let outcome = match copy(&source, &target, limits, &from_name, &to_shown) {
        Ok(outcome) => outcome,
        Err(e) => {
            close_within(target, CLOSE_DEADLINE, &to_shown);
            return Err(e.into());
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = CopyDoc {
            from: from_shown,
            from_backend: from_target.backend(),
            to: to_shown,
            to_backend: to_target.backend(),
            resumed: outcome.resumed,
            records: outcome.records,
            bytes: outcome.bytes,
            digest: outcome.digest,
            verified: true,
        };
        crate::json::emit(&mut out, &doc)?;
    } else {
        writeln!(
            out,
            "copied {} records ({} bytes) from {} ({}) to {} ({}){}",
            outcome.records,
            outcome.bytes,
            from_shown,
            from_target.backend(),
            to_shown,
            to_target.backend(),
            if outcome.resumed { ", resumed" } else { "" }
        )?;
        writeln!(
            out,
            "verified: both stores hold {} records, digest {}",
            outcome.records, outcome.digest
        )?;
    }
    out.flush()?;
    Ok(OK)
}

/// The checks `copy` makes on its target before it writes, on a read-only open of an
/// existing target: [`CopyError::TargetNotEmpty`], [`CopyError::OtherSource`] and
/// [`CopyError::BadProgress`] refuse it without changing one byte. A missing target (or
/// an empty file or directory a new store may be created in) needs no check.
fn precheck_target(target: &Target, from: &SourceName, to: &str) -> Result<(), Failure> {
    let exists = match target {
        Target::Redb(path) => std::fs::metadata(path).is_ok_and(|m| m.len() > 0),
        Target::Sled(path) => strata_sled::is_sled_dir(path),
        Target::Postgres(_) => true,
    };
    if !exists {
        // A new redb file is created in an existing directory only: say which directory
        // is missing (redb's own error reads as a file of a datastore gone missing).
        if let Target::Redb(path) = target {
            let dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if !dir.is_dir() {
                return Err(Failure::error(format!(
                    "the directory `{}` of `--to {to}` does not exist or is not a directory; create it or choose another path (nothing was created)",
                    dir.display()
                )));
            }
        }
        return Ok(());
    }
    let store = match db::open_target_for_reading(target) {
        Ok(store) => store,
        // A PostgreSQL table that does not exist yet: the copy creates it.
        Err(StoreError::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    start_point(&store, from, to)?;
    Ok(())
}

/// Where a copy into `target` starts: `None` for an empty target, else the progress
/// record of this same copy (raw and decoded), which it resumes.
fn start_point(
    target: &Store,
    from: &SourceName,
    to: &str,
) -> Result<Option<(Vec<u8>, Progress)>, CopyError> {
    let Some(bytes) = target.get(PROGRESS_KEY)? else {
        if target.prefix_exists(b"")? {
            return Err(CopyError::TargetNotEmpty { to: to.to_string() });
        }
        return Ok(None);
    };
    let p: Progress = serde_json::from_slice(&bytes).map_err(|e| CopyError::BadProgress {
        to: to.to_string(),
        detail: e.to_string(),
    })?;
    if !from.started(&p) {
        return Err(CopyError::OtherSource {
            to: to.to_string(),
            started_from: p.from,
            from: from.shown.clone(),
        });
    }
    Ok(Some((bytes, p)))
}

/// How long a failed copy waits for its target to close before it reports anyway.
const CLOSE_DEADLINE: Duration = Duration::from_secs(10);

/// Closes `target` (its last handle: a sled target flushes and seals on close) on a
/// thread of its own and waits for it at most `deadline`. After a failure — a full disk
/// above all — sled's flush on close can block for good; the command then reports its
/// error and exits anyway (the batches already committed stay committed, and a rerun
/// resumes from the progress record).
fn close_within(target: Store, deadline: Duration, to: &str) {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("strata-close-target".into())
        .spawn(move || {
            drop(target);
            let _ = done_tx.send(());
        });
    if spawned.is_err() {
        return;
    }
    if done_rx.recv_timeout(deadline).is_err() {
        tracing::warn!(target = %to, ?deadline, "the copy target did not close in time after the failure; exiting without waiting for it");
    }
}

/// Progress lines on stderr: one per batch when `STRATA_PROGRESS=batch` (used by the
/// crash tests to kill at batch boundaries), otherwise at most one a second.
struct Reporter {
    every_batch: bool,
    last: Instant,
}

impl Reporter {
    fn new() -> Self {
        Reporter {
            every_batch: std::env::var("STRATA_PROGRESS").is_ok_and(|v| v == "batch"),
            last: Instant::now(),
        }
    }

    fn batch(&mut self, copied: u64) {
        if self.every_batch || self.last.elapsed() >= Duration::from_secs(1) {
            eprintln!("copy: {copied} records copied");
            self.last = Instant::now();
        }
    }
}

/// The copy's checkpoint on the bulk pass: the progress record [`PROGRESS_KEY`] in the
/// target (the last copied key goes to [`CURSOR_KEY`], added by the batch hook, so the
/// record stays small whatever the key). Every batch advances it under a precondition on
/// its previous value; the final batch leaves it saying every record is copied (it is
/// replaced by the manifest once both stores verified equal).
struct CopyCheckpoint {
    from: String,
    /// The source's identity ([`SourceName::id`]).
    source: String,
    /// Records copied before this run.
    base: u64,
    /// Records this run committed (the pass's progress).
    run: std::cell::Cell<u64>,
    /// The cursor read from the target before the pass (the codec cannot read it).
    resume: Option<Vec<u8>>,
}

impl CopyCheckpoint {
    fn value(&self, batch: &strata::pass::RowCounters) -> Vec<u8> {
        let progress = Progress {
            format: 1,
            from: self.from.clone(),
            cursor: String::new(),
            copied: self.base + self.run.get() + batch.rewritten,
            cursor_in_record: true,
            source: Some(self.source.clone()),
        };
        serde_json::to_vec(&progress).unwrap_or_default()
    }
}

impl strata::pass::CheckpointCodec for CopyCheckpoint {
    fn key(&self) -> &[u8] {
        PROGRESS_KEY
    }
    fn encode(&self, _cursor: &[u8]) -> Vec<u8> {
        self.value(&strata::pass::RowCounters::default())
    }
    fn encode_counted(&self, _cursor: &[u8], batch: &strata::pass::RowCounters) -> Vec<u8> {
        self.value(batch)
    }
    fn decode(&self, _value: &[u8]) -> Result<Vec<u8>, strata::pass::RecordError> {
        // Checked by `start_point` (source, format) before the pass; the cursor was read
        // from its own record.
        Ok(self.resume.clone().unwrap_or_default())
    }
    fn finished_counted(&self, batch: &strata::pass::RowCounters) -> Option<Vec<u8>> {
        Some(self.value(batch))
    }
}

/// A pass error as the copy reports it: store errors (a full disk, a conflicting second
/// copy, a record over the budget) keep their own message, exit code and hints.
fn pass_error(e: strata::pass::PassError) -> CopyError {
    use strata::pass::PassError;
    match e {
        PassError::Store { source, .. } => CopyError::Store(source),
        PassError::RecordTooLarge {
            key, size, limit, ..
        } => CopyError::Store(StoreError::RecordTooLarge { key, size, limit }),
        other => CopyError::Pass(Box::new(other)),
    }
}

/// The copy on the [bulk pass](strata::pass) from `source` into `target`: each record is
/// read once to copy it (its bytes hashed on the way, so the source's digest costs no
/// second read unless the copy resumed) and once, in the target, to verify it.
fn copy(
    source: &Store,
    target: &Store,
    limits: ScanLimits,
    from: &SourceName,
    to: &str,
) -> Result<Outcome, CopyError> {
    let bad = |detail: String| CopyError::BadProgress {
        to: to.to_string(),
        detail,
    };
    let start = start_point(target, from, to)?;
    let resumed = start.is_some();
    let (base, resume) = match &start {
        Some((_, p)) => {
            eprintln!("copy: resuming after {} records", p.copied);
            let cursor = if p.cursor_in_record {
                Some(target.get(CURSOR_KEY)?.ok_or_else(|| {
                    bad("it names a cursor record `__nx/copy/cursor` that is missing".into())
                })?)
            } else if p.cursor.is_empty() {
                None
            } else {
                Some(from_hex(&p.cursor).ok_or_else(|| bad("cursor is not hex".into()))?)
            };
            (p.copied, cursor)
        }
        None => {
            // The progress record goes first, durably, before any record is copied: a
            // copy stopped at any point after this (a kill before the first batch, or a
            // first batch sled had not flushed yet) leaves a store every command reports
            // as an unfinished copy, not an empty (or whole-looking) one.
            let progress = Progress {
                format: 1,
                from: from.shown.clone(),
                cursor: String::new(),
                copied: 0,
                cursor_in_record: false,
                source: Some(from.id.clone()),
            };
            let value =
                serde_json::to_vec(&progress).map_err(|e| bad(format!("cannot encode it: {e}")))?;
            target.apply(
                strata_store::Batch::new()
                    .require(PROGRESS_KEY.to_vec(), None)
                    .set(PROGRESS_KEY.to_vec(), value),
            )?;
            target.flush()?;
            (0, None)
        }
    };
    let checkpoint = CopyCheckpoint {
        from: from.shown.clone(),
        source: from.id.clone(),
        base,
        run: std::cell::Cell::new(0),
        resume,
    };
    let pass_limits = strata::pass::PassLimits::new(limits.max_records(), limits.max_bytes())
        .map_err(pass_error)?;
    let mut reporter = Reporter::new();
    // The source's digest, hashed as the records go by (valid when the copy started from
    // the first record).
    let mut hasher = (!resumed).then(Sha256::new);
    let (mut hashed_records, mut hashed_bytes) = (0u64, 0u64);
    let processor = |r: &strata::pass::RecordRef<'_>,
                     out: &mut Vec<strata_store::Mutation>|
     -> Result<(), strata::pass::RecordError> {
        if r.key.starts_with(COPY_PREFIX) {
            return Ok(());
        }
        if let Some(h) = hasher.as_mut() {
            hash_record(h, r.key, r.value);
            hashed_records += 1;
            hashed_bytes += (r.key.len() + r.value.len()) as u64;
        }
        out.push(strata_store::Mutation::Set {
            key: r.key.to_vec(),
            value: r.value.to_vec(),
        });
        Ok(())
    };
    strata::pass::Pass::new("copy", Vec::new(), &checkpoint)
        .limits(pass_limits)
        .guard_checkpoint(true)
        .on_batch(|batch, info| {
            if let Some(cursor) = info.cursor {
                batch.push(strata_store::Mutation::Set {
                    key: CURSOR_KEY.to_vec(),
                    value: cursor.to_vec(),
                });
            }
            Ok(())
        })
        .on_progress(|p| {
            checkpoint.run.set(p.counters.rewritten);
            reporter.batch(base + p.counters.rewritten);
        })
        .run_between(source, target, processor)
        .map_err(pass_error)?;
    let copied = base + checkpoint.run.get();
    eprintln!("copy: {copied} records copied; verifying the target");
    let (from_records, bytes, from_digest) = match hasher {
        Some(h) => (
            hashed_records,
            hashed_bytes,
            format!("sha256:{}", to_hex(&h.finalize())),
        ),
        None => digest(source, limits)?,
    };
    let (to_records, _, to_digest) = digest(target, limits)?;
    if from_records != to_records || from_digest != to_digest {
        return Err(CopyError::Mismatch {
            from_records,
            from_digest,
            to_records,
            to_digest,
        });
    }
    let manifest = Manifest {
        format: 1,
        operation: "copy".into(),
        from: from.shown.clone(),
        records: to_records,
        digest: to_digest.clone(),
    };
    let manifest = serde_json::to_vec(&manifest).map_err(|e| bad(e.to_string()))?;
    let raw = target.get(PROGRESS_KEY)?;
    target.apply(
        Batch::new()
            .require(PROGRESS_KEY.to_vec(), raw)
            .delete(PROGRESS_KEY.to_vec())
            .delete(CURSOR_KEY.to_vec())
            .set(MANIFEST_KEY.to_vec(), manifest),
    )?;
    target.flush()?;
    Ok(Outcome {
        resumed,
        records: to_records,
        bytes,
        digest: to_digest,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
