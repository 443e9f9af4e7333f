//! Client presence: every open handle is a client with an id, a heartbeat and the
//! generation it has quiesced at, recorded at `__nx/clients/<client-id>`.
//!
//! ```text
//! key:   __nx/clients/<client-id>          (client id: 16 lowercase hex digits)
//! value: canonical JSON, for example
//!        {"acked_generation":null,"client":"3f…","format":1,"heartbeat_ms":1700000000000,
//!         "opened_generation":0,"pid":4242,"started_ms":1700000000000}
//! ```
//!
//! A background thread ([`Heartbeat`]) calls [`Presence::tick`] every interval: it writes
//! the heartbeat and, when the fence is draining, finishes the handle's in-flight writes
//! (it briefly takes the store's write lease, which waits for every write in flight) and
//! acknowledges the target generation.

use super::fence::Fence;
use super::state::FenceState;
use super::PolicyError;
use crate::clock::SharedClock;
use serde::{Deserialize, Serialize};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};

use std::thread::JoinHandle;
use std::time::Duration;
use strata_store::{Batch, KvRead, KvWrite, Pages, ScanLimits, Store};

/// Prefix of client presence records.
pub const CLIENTS_PREFIX: &[u8] = crate::keys::CLIENTS_PREFIX;
/// Format version of a presence record.
pub const CLIENT_FORMAT: u32 = 1;
/// Default heartbeat interval.
pub const DEFAULT_HEARTBEAT_MS: u64 = 2_000;
/// Default stale window: a client silent for longer is not waited for.
pub const DEFAULT_STALE_AFTER_MS: u64 = 15_000;

/// The presence record of one client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientRecord {
    /// The target generation this client acknowledged during a drain (`None`: never).
    pub acked_generation: Option<u64>,
    /// The client id.
    pub client: String,
    /// Record format ([`CLIENT_FORMAT`]).
    pub format: u32,
    /// Clock milliseconds of the last heartbeat.
    pub heartbeat_ms: u64,
    /// The schema generation the client opened at.
    pub opened_generation: u64,
    /// Operating-system process id of the client.
    pub pid: u32,
    /// Clock milliseconds when the client opened.
    pub started_ms: u64,
}

impl ClientRecord {
    /// The record bytes (canonical JSON).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes record bytes found at `key`.
    pub fn decode(key: &[u8], bytes: &[u8]) -> Result<Self, PolicyError> {
        let rec: ClientRecord = serde_json::from_slice(bytes).map_err(|e| {
            PolicyError::corrupted(
                key,
                crate::pass::RecordError::with_cause(format!("invalid client record: {e}"), e),
            )
        })?;
        if rec.format != CLIENT_FORMAT {
            return Err(PolicyError::corrupted(
                key,
                format!("unsupported client record format {}", rec.format),
            ));
        }
        // The id is the key's last segment: it must match it and be a plain name.
        let plain = !rec.client.is_empty()
            && rec.client.len() <= 64
            && rec
                .client
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !plain {
            return Err(PolicyError::corrupted(
                key,
                format!(
                    "client id `{}` is not 1-64 characters of `A-Z a-z 0-9 _ -`",
                    rec.client.escape_debug()
                ),
            ));
        }
        if key.strip_prefix(CLIENTS_PREFIX) != Some(rec.client.as_bytes()) {
            return Err(PolicyError::corrupted(
                key,
                format!("client id `{}` does not match its key", rec.client),
            ));
        }
        Ok(rec)
    }

    /// True when the client heartbeated within `stale_after_ms` of `now_ms`.
    pub fn is_live(&self, now_ms: u64, stale_after_ms: u64) -> bool {
        now_ms.saturating_sub(self.heartbeat_ms) <= stale_after_ms
    }
}

/// The key of a client's presence record.
pub fn client_key(client: &str) -> Vec<u8> {
    let mut k = CLIENTS_PREFIX.to_vec();
    k.extend_from_slice(client.as_bytes());
    k
}

/// A fresh client id: 16 lowercase hex digits from the process id, the time and a
/// per-process random seed.
pub fn new_client_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:016x}", h.finish())
}

/// Every client recorded in the store (corrupted records are skipped with a warning).
pub fn list_clients<S: KvRead + ?Sized>(store: &S) -> Result<Vec<ClientRecord>, PolicyError> {
    let limits =
        ScanLimits::new(256, 1 << 20).map_err(|e| PolicyError::store(CLIENTS_PREFIX, e))?;
    let mut out = Vec::new();
    for r in Pages::new(store, CLIENTS_PREFIX, limits).records() {
        let r = r.map_err(|e| PolicyError::store(CLIENTS_PREFIX, e))?;
        match ClientRecord::decode(&r.key, &r.value) {
            Ok(c) => out.push(c),
            Err(e) => tracing::warn!(error = %e, "skipping unreadable client record"),
        }
    }
    Ok(out)
}

/// Removes the presence record of `client` (for example a client known to be dead).
pub fn remove_client<S: KvWrite + ?Sized>(store: &S, client: &str) -> Result<(), PolicyError> {
    let key = client_key(client);
    store
        .apply(Batch::new().delete(key.clone()))
        .map_err(|e| PolicyError::store(&key, e))
}

/// Timing of presence: heartbeat interval and stale window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresenceConfig {
    /// Interval of the background heartbeat thread; `None` runs no thread (the owner calls
    /// [`Presence::tick`] itself — tests do this from the cutover's poll hook).
    pub heartbeat: Option<Duration>,
    /// A client whose last heartbeat is older than this is stale: the drain barrier does
    /// not wait for it.
    pub stale_after_ms: u64,
}

impl Default for PresenceConfig {
    fn default() -> Self {
        PresenceConfig {
            heartbeat: Some(Duration::from_millis(DEFAULT_HEARTBEAT_MS)),
            stale_after_ms: DEFAULT_STALE_AFTER_MS,
        }
    }
}

/// This handle's presence as a client of the store.
#[derive(Debug)]
pub struct Presence {
    store: Store,
    clock: SharedClock,
    id: String,
    record: Mutex<ClientRecord>,
}

impl Presence {
    /// Registers a new client that opened at `opened_generation` and writes its record.
    pub fn register(
        store: Store,
        clock: SharedClock,
        opened_generation: u64,
    ) -> Result<Arc<Self>, PolicyError> {
        let id = new_client_id();
        let now = clock.now_ms();
        let record = ClientRecord {
            acked_generation: None,
            client: id.clone(),
            format: CLIENT_FORMAT,
            heartbeat_ms: now,
            opened_generation,
            pid: std::process::id(),
            started_ms: now,
        };
        let p = Arc::new(Presence {
            store,
            clock,
            id,
            record: Mutex::new(record),
        });
        p.write()?;
        Ok(p)
    }

    /// The client id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A copy of the record as last written.
    pub fn record(&self) -> ClientRecord {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClientRecord> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> Result<(), PolicyError> {
        let key = client_key(&self.id);
        let bytes = self.lock().encode();
        self.store
            .apply(Batch::new().set(key.clone(), bytes))
            .map_err(|e| PolicyError::store(&key, e))
    }

    /// One heartbeat: reads the fence; when it is draining (or migrating) toward a
    /// generation this client has not acknowledged, waits for the handle's in-flight
    /// writes and acknowledges it; then writes the heartbeat.
    pub fn tick(&self) -> Result<(), PolicyError> {
        let fence = Fence::read(&self.store)?;
        let target = fence.generation.saturating_add(1);
        let needs_ack = matches!(fence.state, FenceState::Draining | FenceState::Migrating)
            && self.lock().acked_generation.is_none_or(|a| a < target);
        if needs_ack {
            self.quiesce();
        }
        {
            let mut rec = self.lock();
            rec.heartbeat_ms = self.clock.now_ms();
            if needs_ack {
                rec.acked_generation = Some(target);
                tracing::debug!(client = %self.id, generation = target, "acknowledged drain");
            }
        }
        self.write()
    }

    /// Marks this client as running at `generation` (the coordinator, after its own
    /// cutover) and acknowledges it.
    pub(crate) fn advance(&self, generation: u64) -> Result<(), PolicyError> {
        {
            let mut rec = self.lock();
            rec.opened_generation = generation;
            rec.acked_generation = Some(generation);
            rec.heartbeat_ms = self.clock.now_ms();
        }
        self.write()
    }

    /// Waits until every ordinary write in flight through this store handle finished:
    /// taking the exclusive write lease waits for them (later writes check the fence
    /// again and see it draining).
    fn quiesce(&self) {
        drop(self.store.lease());
    }

    /// Deletes this client's presence record (a cleanly closed client is never waited
    /// for).
    pub fn close(&self) -> Result<(), PolicyError> {
        // The payload versions this client's build registered (deploy windows) go with it.
        let prefix = crate::payload::window::client_builds_prefix(&self.id);
        let limits = ScanLimits::new(256, 1 << 20).map_err(|e| PolicyError::store(&prefix, e))?;
        let mut batch = Batch::new();
        for r in Pages::new(&self.store, &prefix, limits).records() {
            let r = r.map_err(|e| PolicyError::store(&prefix, e))?;
            batch = batch.delete(r.key.to_vec());
        }
        if !batch.mutations().is_empty() {
            self.store
                .apply(batch)
                .map_err(|e| PolicyError::store(&prefix, e))?;
        }
        remove_client(&self.store, &self.id)
    }
}

/// The background heartbeat thread of one [`Presence`]; stopped and joined on drop.
#[derive(Debug)]
pub struct Heartbeat {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts ticking `presence` every `interval`.
    pub fn start(presence: Arc<Presence>, interval: Duration) -> Result<Self, PolicyError> {
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("strata-heartbeat-{}", presence.id()))
            .spawn(move || loop {
                match rx.recv_timeout(interval) {
                    Err(RecvTimeoutError::Timeout) => {
                        if let Err(e) = presence.tick() {
                            tracing::warn!(client = %presence.id(), error = %e, "heartbeat failed");
                        }
                    }
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            })
            .map_err(|e| PolicyError::InvalidArgument {
                reason: format!("cannot start the heartbeat thread: {e}"),
            })?;
        Ok(Heartbeat {
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use strata_store::MemoryStore;

    #[test]
    fn client_record_bytes_are_canonical_json() {
        let rec = ClientRecord {
            acked_generation: Some(2),
            client: "00000000000000ff".into(),
            format: 1,
            heartbeat_ms: 7,
            opened_generation: 1,
            pid: 42,
            started_ms: 5,
        };
        assert_eq!(
            rec.encode(),
            br#"{"acked_generation":2,"client":"00000000000000ff","format":1,"heartbeat_ms":7,"opened_generation":1,"pid":42,"started_ms":5}"#.to_vec()
        );
        let key = client_key(&rec.client);
        assert_eq!(ClientRecord::decode(&key, &rec.encode()).unwrap(), rec);
        assert!(ClientRecord::decode(&key, b"[]").is_err());
    }

    #[test]
    fn client_ids_are_checked_against_their_key() {
        let mut rec = ClientRecord {
            acked_generation: None,
            client: "00000000000000ff".into(),
            format: 1,
            heartbeat_ms: 7,
            opened_generation: 1,
            pid: 42,
            started_ms: 5,
        };
        // Another client's key.
        let e = ClientRecord::decode(&client_key("00000000000000fe"), &rec.encode());
        assert!(e.unwrap_err().to_string().contains("does not match"));
        // A path-like or empty id, even at its own key.
        for bad in ["../../etc", "", "a/b", "x".repeat(65).as_str()] {
            rec.client = bad.to_string();
            let e = ClientRecord::decode(&client_key(bad), &rec.encode()).unwrap_err();
            assert!(e.to_string().contains("client id"), "{bad}: {e}");
        }
    }

    #[test]
    fn tick_acks_a_draining_fence_and_close_removes_the_record() {
        let store = Store::new(MemoryStore::new());
        let clock = ManualClock::new(100);
        let p = Presence::register(store.clone(), Arc::new(clock.clone()), 0).unwrap();
        clock.advance(5);
        p.tick().unwrap();
        let listed = list_clients(&store).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].heartbeat_ms, 105);
        assert_eq!(listed[0].acked_generation, None);
        Fence::update(&store, |f| {
            let mut n = f.clone();
            n.state = FenceState::Draining;
            Ok(Some(n))
        })
        .unwrap();
        p.tick().unwrap();
        assert_eq!(list_clients(&store).unwrap()[0].acked_generation, Some(1));
        p.close().unwrap();
        assert!(list_clients(&store).unwrap().is_empty());
    }

    #[test]
    fn heartbeat_thread_stops_on_drop() {
        let store = Store::new(MemoryStore::new());
        let clock = ManualClock::new(0);
        let p = Presence::register(store.clone(), Arc::new(clock), 0).unwrap();
        let hb = Heartbeat::start(p.clone(), Duration::from_millis(1)).unwrap();
        drop(hb);
        // The thread is joined: the presence handle is referenced only here again.
        assert_eq!(Arc::strong_count(&p), 1);
    }

    #[test]
    fn client_ids_are_distinct() {
        assert_ne!(new_client_id(), new_client_id());
        assert_eq!(new_client_id().len(), 16);
    }
}
