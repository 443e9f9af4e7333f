//! Deploy windows: two builds of an application live on one store at once.
//!
//! Every deploy is a rolling one: for minutes or days, instances of build N and build N+1
//! run against the same store. A collection whose build N+1 declares the downcast
//! `N+1 → N` beside its upcast `N → N+1`
//! ([`CollectionOptions::downcast`](crate::collection::CollectionOptions::downcast)) can
//! keep both working:
//!
//! 1. **Open.** When build N+1 opens the collection under policy (a persisted schema) and
//!    the stored schema baseline records payload version N, it opens the window: the
//!    record `__nx/window/<collection>` holds the *operational version* N (format in
//!    [`crate::layout::window`]). The stored schema stays build N's until the window
//!    completes (build N+1's declaration waits).
//! 2. **Both builds write.** Build N+1 reads everything through its upcasts and writes
//!    every row at N through its downcasts; build N reads and writes every row as it always
//!    did — no "written by a newer build" refusal on either side. A field the downcast
//!    cannot express is kept with the row ([`KEPT_FIELD`](crate::payload::KEPT_FIELD)), build N's
//!    writes carry it over, and build N+1 gets it back when it reads the row.
//! 3. **Complete** ([`Collection::complete_window`]): once no live client of a build below
//!    N+1 is present (each open registers the payload version its build knows; presence
//!    decides which clients are live, as for a cutover's drain barrier), the record goes,
//!    build N+1's schema is declared, and the eager sweep upcasts the rows. A build-N
//!    holdout makes it wait and then time out naming the holdout.
//! 4. **Rollback** ([`Collection::rollback_window`]) before complete is free: every row is
//!    still at N (rows build N+1 wrote are N rows plus kept fields), so build N can simply
//!    be deployed again. It checks that and reports. After complete there is no window
//!    to roll back: it is refused, pointing at [`Collection::revert`]
//!    ([`crate::ops::revert`]), which sweeps the rows down through the downcasts.
//!
//! A coordinated cutover (a non-additive change without downcasts) still fences, as it
//! must; a sweep and read-repair never run inside a window (rows stay at N).

use crate::collection::{Collection, CollectionError};
use crate::payload::window::{build_key, decode_build, decode_window, parse_build_key, window_key};
use crate::policy::list_clients;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;
use strata_store::{Batch, KvRead, KvWrite, Pages, ScanLimits, Store};

/// Default time [`Collection::complete_window`] waits for older builds to leave.
pub const DEFAULT_COMPLETE_TIMEOUT_MS: u64 = 30_000;

fn store_err(collection: &str) -> impl Fn(strata_store::StoreError) -> CollectionError + '_ {
    move |e| CollectionError::store(collection, e)
}

use crate::collection::layout::corrupted_window as corrupted;

/// The collection's operational version while a deploy window is open (`None`: no
/// window).
pub fn operational<S: KvRead + ?Sized>(
    store: &S,
    collection: &str,
) -> Result<Option<i32>, CollectionError> {
    crate::collection::layout::window_operational(store, collection)
}

/// Every open deploy window of the store: (collection, operational version), by
/// collection name.
pub fn open_windows<S: KvRead + ?Sized>(store: &S) -> Result<Vec<(String, i32)>, CollectionError> {
    let prefix = crate::keys::WINDOW_PREFIX;
    let limits = ScanLimits::new(256, 1 << 20).map_err(store_err(""))?;
    let mut out = Vec::new();
    for r in Pages::new(store, prefix, limits).records() {
        let r = r.map_err(store_err(""))?;
        let name = String::from_utf8_lossy(&r.key[prefix.len()..]).into_owned();
        let op = decode_window(&name, &r.value).map_err(|e| corrupted(&name, e))?;
        out.push((name, op));
    }
    Ok(out)
}

/// The payload version `collection`'s stored schema baseline records (`None`: no
/// persisted schema, or one without a payload version).
fn recorded_version<S: KvRead + ?Sized>(
    store: &S,
    collection: &str,
) -> Result<Option<i32>, CollectionError> {
    let baseline = crate::policy::Baseline::load(store, collection)
        .map_err(|e| CollectionError::policy(collection, e))?;
    Ok(baseline.and_then(|b| b.payload_version))
}

/// Records this client's build (best effort: a read-only store keeps no record).
fn register_build(store: &Store, collection: &str, client: &str, version: i32) {
    if let Err(e) = crate::payload::window::register_build(store, collection, client, version) {
        tracing::debug!(collection, error = %e, "build version not recorded");
    }
}

/// One client's build as a window sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildPresence {
    /// The client id.
    pub client: String,
    /// The payload version its build knows.
    pub version: i32,
    /// Its process id (`None`: its presence record is gone).
    pub pid: Option<u32>,
    /// True when its presence heartbeat is within the stale window.
    pub live: bool,
}

/// A collection's deploy window, as [`status`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowStatus {
    /// The collection.
    pub collection: String,
    /// The operational version (`None`: no window open).
    pub operational: Option<i32>,
    /// Every build recorded for the collection, live or not, by client id.
    pub builds: Vec<BuildPresence>,
}

/// The deploy window of `collection` and the builds recorded for it; `now_ms` and
/// `stale_after_ms` decide which clients are live (as the drain barrier does).
pub fn status<S: KvRead + ?Sized>(
    store: &S,
    collection: &str,
    now_ms: u64,
    stale_after_ms: u64,
) -> Result<WindowStatus, CollectionError> {
    let operational = operational(store, collection)?;
    let clients = list_clients(store).map_err(|e| CollectionError::policy(collection, e))?;
    let limits = ScanLimits::new(256, 1 << 20).map_err(store_err(collection))?;
    let mut builds = Vec::new();
    for r in Pages::new(store, crate::keys::BUILDS_PREFIX, limits).records() {
        let r = r.map_err(store_err(collection))?;
        let Some((client, of)) = parse_build_key(&r.key) else {
            continue;
        };
        if of != collection {
            continue;
        }
        let client = client.to_string();
        let version = decode_build(&r.key, &r.value).map_err(|e| corrupted(collection, e))?;
        let rec = clients.iter().find(|c| c.client == client);
        builds.push(BuildPresence {
            live: rec.is_some_and(|c| c.is_live(now_ms, stale_after_ms)),
            pid: rec.map(|c| c.pid),
            client,
            version,
        });
    }
    Ok(WindowStatus {
        collection: collection.to_string(),
        operational,
        builds,
    })
}

/// Options of [`Collection::complete_window`], built with chained calls.
pub struct WindowOptions<'a> {
    poll: Option<Box<dyn FnMut() + 'a>>,
    poll_interval: Duration,
    timeout_ms: u64,
}

impl std::fmt::Debug for WindowOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowOptions")
            .field("poll", &self.poll.is_some())
            .field("poll_interval", &self.poll_interval)
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

impl Default for WindowOptions<'_> {
    fn default() -> Self {
        WindowOptions {
            poll: None,
            poll_interval: Duration::from_millis(100),
            timeout_ms: DEFAULT_COMPLETE_TIMEOUT_MS,
        }
    }
}

impl<'a> WindowOptions<'a> {
    /// 30 s timeout (policy clock), sleeps 100 ms between checks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Called between checks instead of sleeping: tests advance the clock here.
    pub fn poll(mut self, f: impl FnMut() + 'a) -> Self {
        self.poll = Some(Box::new(f));
        self
    }

    /// The sleep between checks when no poll hook is set.
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.poll_interval = d;
        self
    }

    /// How long (policy-clock milliseconds) `complete` waits for older builds to leave.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = ms;
        self
    }
}

/// What [`Collection::complete_window`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowReport {
    /// The collection.
    pub collection: String,
    /// The operational version the window held (`None`: no window was open, and the
    /// store already recorded this build's schema: only the sweep ran, see `sweep`).
    pub from: Option<i32>,
    /// The version the collection is at now (this build's).
    pub to: i32,
    /// Rows the eager sweep upcast (0 without an eager step: rows are upcast on read).
    pub swept: u64,
    /// How the sweep ended.
    pub sweep: crate::ops::sweep::SweepNote,
}

/// What [`Collection::rollback_window`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackReport {
    /// The collection.
    pub collection: String,
    /// The operational version every row is at (always `Some`: without an open window
    /// [`Collection::rollback_window`] is refused).
    pub operational: Option<i32>,
    /// Rows scanned.
    pub rows: u64,
    /// Rows stored above the operational version (written before the window opened, or
    /// by a build that could not take part): the older build cannot read these.
    pub above: u64,
    /// The keys of the first 100 of those.
    pub above_keys: Vec<String>,
}

impl<T: Serialize + DeserializeOwned> Collection<T> {
    /// Completes the collection's deploy window (see the [module docs](self)): waits
    /// until no live client of a build below this one's version is present (or fails
    /// with [`CollectionError::WindowHoldouts`] after the timeout, changing nothing),
    /// removes the window record (every build writes at its own version again), declares
    /// this build's schema, and runs the eager sweep.
    ///
    /// Without an open window it reports only what the store shows: when the stored
    /// schema is already this build's version (the window completed, here or in another
    /// instance) it runs the eager sweep (which reports "already at vN" only when its
    /// marker records that sweep, and otherwise finishes a `complete` killed before its
    /// sweep) and returns a report with `from: None`; otherwise it refuses with
    /// [`CollectionError::NoWindow`] (the collection is not at this build's version),
    /// changing nothing.
    pub fn complete_window(
        &self,
        mut options: WindowOptions<'_>,
    ) -> Result<WindowReport, CollectionError> {
        let name = self.name().to_string();
        let store = self.store();
        let to = self.current_version();
        let key = window_key(&name);
        let Some(raw) = store.get(&key).map_err(store_err(&name))? else {
            return self.complete_without_window(name, to);
        };
        let from = decode_window(&name, &raw).map_err(|e| corrupted(&name, e))?;
        if let Some(target) = crate::ops::revert::unfinished(store, &name)? {
            return Err(CollectionError::Revert {
                collection: name,
                to: target,
                reason: format!("it is unfinished, and the deploy window cannot complete before it: run the same revert (to v{target}) again to finish it, then complete the window").into(),
            });
        }
        if from >= to {
            return Err(CollectionError::WindowNotAbove {
                collection: name,
                operational: from,
                build: to,
            });
        }
        let policy = self
            .inner
            .policy
            .ensure()
            .map_err(|e| CollectionError::policy(&name, e))?;
        let gate = policy.gate();
        let started = gate.clock().now_ms();
        let stale = gate.presence_config().stale_after_ms;
        loop {
            let now = gate.clock().now_ms();
            let st = status(store, &name, now, stale)?;
            let holdouts: Vec<String> = st
                .builds
                .iter()
                .filter(|b| b.live && b.version < to && b.client != gate.client_id())
                .map(|b| match b.pid {
                    Some(pid) => format!("{} (pid {pid}) at v{}", b.client, b.version),
                    None => format!("{} at v{}", b.client, b.version),
                })
                .collect();
            if holdouts.is_empty() {
                // Records of clients that are gone.
                let mut batch = Batch::new();
                for b in st.builds.iter().filter(|b| !b.live) {
                    batch = batch.delete(build_key(&name, &b.client));
                }
                batch = batch
                    .require(key.clone(), Some(raw.clone()))
                    .delete(key.clone());
                store.apply(batch).map_err(|e| {
                    if e.is_conflict() {
                        CollectionError::WindowChanged {
                            collection: name.clone(),
                        }
                    } else {
                        CollectionError::store(&name, e)
                    }
                })?;
                break;
            }
            let waited = now.saturating_sub(started);
            if waited >= options.timeout_ms {
                return Err(CollectionError::WindowHoldouts {
                    collection: name,
                    operational: from,
                    build: to,
                    waited_ms: waited,
                    holdouts,
                });
            }
            tracing::debug!(collection = %name, ?holdouts, "waiting for older builds to leave the deploy window");
            match options.poll.as_mut() {
                Some(poll) => poll(),
                None => std::thread::sleep(options.poll_interval),
            }
        }
        tracing::info!(collection = %name, from, to, "deploy window complete");
        register_build(store, &name, gate.client_id(), to);
        if let Some(decl) = &self.inner.declaration {
            policy.declare(decl.clone());
        }
        let sweep = self.sweep(crate::ops::sweep::SweepOptions::new())?;
        Ok(WindowReport {
            collection: name,
            from: Some(from),
            to,
            swept: sweep.counters.rewritten,
            sweep: sweep.note,
        })
    }

    /// `complete_window` with no window open: what the store records decides. Only when
    /// its stored schema is this build's version (the window completed, here or in
    /// another instance, or the collection never needed one) is there something true to
    /// report: the eager sweep runs (a no-op that says so when the marker records it
    /// done; the rest of a `complete` killed before its sweep otherwise), and its note
    /// is the report's. Anything else is [`CollectionError::NoWindow`], nothing changed:
    /// the collection is not at this build's version, and claiming it is would be false.
    fn complete_without_window(
        &self,
        name: String,
        to: i32,
    ) -> Result<WindowReport, CollectionError> {
        let recorded = recorded_version(self.store(), &name)?;
        if recorded != Some(to) {
            return Err(CollectionError::NoWindow {
                collection: name,
                recorded,
                build: to,
            });
        }
        let sweep = self.sweep(crate::ops::sweep::SweepOptions::new())?;
        Ok(WindowReport {
            collection: name,
            from: None,
            to,
            swept: sweep.counters.rewritten,
            sweep: sweep.note,
        })
    }

    /// Checks that the collection can go back to its operational version (see the
    /// [module docs](self)): every row is at or below it, so the older build reads the
    /// whole store. The window stays open (a newer build that is still running keeps
    /// writing at the operational version); deploy the older build, then stop the newer
    /// one. Rows above the operational version are counted and the first 100 named.
    ///
    /// Without an open window it is refused with [`CollectionError::NoWindowToRollBack`]
    /// (nothing changed): after `complete` a rollback is no longer free, and
    /// [`Collection::revert`] takes the rows back down through the downcasts.
    pub fn rollback_window(&self) -> Result<RollbackReport, CollectionError> {
        let name = self.name().to_string();
        let store = self.store();
        let operational = operational(store, &name)?;
        let mut report = RollbackReport {
            collection: name.clone(),
            operational,
            rows: 0,
            above: 0,
            above_keys: Vec::new(),
        };
        let Some(op) = operational else {
            // No window: either it completed (rows may be above the older build's
            // version: only a revert takes them down) or none was opened. Either way
            // there is nothing a free rollback can do, and an empty report would read
            // as "every row is fine".
            return Err(CollectionError::NoWindowToRollBack {
                collection: name.clone(),
                recorded: recorded_version(store, &name)?,
            });
        };
        let prefix = crate::collection::layout::doc_prefix(&name);
        let limits =
            ScanLimits::new(256, crate::pass::DEFAULT_MAX_BYTES).map_err(store_err(&name))?;
        for r in Pages::new(store, &prefix, limits).records() {
            let r = r.map_err(store_err(&name))?;
            let key = &r.key;
            report.rows += 1;
            let version = crate::seal::peek(&r.value).map(|(e, _)| e.payload_version);
            if version.is_some_and(|v| v > op) {
                report.above += 1;
                if report.above_keys.len() < 100 {
                    report
                        .above_keys
                        .push(String::from_utf8_lossy(&key[prefix.len()..]).into_owned());
                }
            }
        }
        Ok(report)
    }
}

/// Opens a deploy window on `collection` at `operational` by hand (for a collection
/// without a persisted schema, whose builds cannot tell the previous version from the
/// stored baseline). Refused when a window is already open at another version, and
/// below the store's retirement ([`CollectionError::WindowBelowRetired`]).
pub fn open<S: KvRead + KvWrite + ?Sized>(
    store: &S,
    collection: &str,
    operational: i32,
) -> Result<(), CollectionError> {
    if let Some(below) = crate::collection::layout::retired_below(store, collection)? {
        if operational < below {
            return Err(CollectionError::WindowBelowRetired {
                collection: collection.to_string(),
                operational,
                below,
            });
        }
    }
    if let Some(op) = self::operational(store, collection)? {
        if op == operational {
            return Ok(());
        }
        return Err(CollectionError::WindowChanged {
            collection: collection.to_string(),
        });
    }
    match crate::payload::window::create(store, collection, operational) {
        Ok(true) => Ok(()),
        Ok(false) => Err(CollectionError::WindowChanged {
            collection: collection.to_string(),
        }),
        Err(e) => Err(CollectionError::store(collection, e)),
    }
}
