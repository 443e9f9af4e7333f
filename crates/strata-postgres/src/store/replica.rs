//! Reads that tolerate staleness, from a read replica ([`PgStore::stale_reads`]).
//!
//! The URL's `strata_replica=HOST:PORT[,HOST:PORT…]` names a hot standby (the same user,
//! database and other parameters as the store; its `target_session_attrs` is dropped).
//! [`StaleReads`] — and only it — reads there: it implements [`KvRead`] and nothing else,
//! so no write of the store, no precondition, no lease and no fence check ever decides on
//! what a replica said. Every read of the [`PgStore`] itself (including the reads inside
//! [`KvWrite::read_modify_write`]) goes to the
//! primary.
//!
//! **Staleness rule.** A replica replays the primary's commits in commit order, so a read
//! there sees the store as it was after some earlier commit of the primary: never part of
//! a batch, never a commit the primary does not have, but possibly without the latest ones
//! (the replication lag: usually milliseconds, unbounded while the standby is behind or its
//! replay is paused). One replica server only moves forward, so later reads there see at
//! least what earlier ones saw; with several replica hosts (a failover list) a read
//! answered by another host may be older. A synchronous standby with
//! `synchronous_commit = remote_apply` on the primary has applied every acknowledged
//! commit when the commit returns.

use crate::pool::describe;
use crate::pool::Timeouts;
use crate::store::PgOptions;
use crate::tls::Connector;
use crate::PgStore;
use std::sync::{Arc, Mutex};
use strata_store::{
    Backend, Capabilities, Decide, KvRead, KvWrite, Result, ScanLimits, Visit, VisitEnd,
};
use tokio_postgres::Config;

/// A store's read replica, connected on first use (and again after a failed open).
pub(crate) struct ReplicaSlot {
    config: Config,
    connector: Connector,
    timeouts: Timeouts,
    table: String,
    options: PgOptions,
    target: String,
    open: Mutex<Option<Arc<PgStore>>>,
}

impl ReplicaSlot {
    pub(crate) fn new(
        config: Config,
        connector: Connector,
        timeouts: Timeouts,
        table: String,
        options: PgOptions,
    ) -> Self {
        ReplicaSlot {
            target: describe(&config),
            config,
            connector,
            timeouts,
            table,
            options,
            open: Mutex::new(None),
        }
    }

    /// The replica's store handle: unnamed statements only and no session functions (a
    /// standby refuses `CREATE FUNCTION`), the table never created.
    fn store(&self) -> Result<Arc<PgStore>> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = open.as_ref() {
            return Ok(Arc::clone(store));
        }
        let store = Arc::new(PgStore::open(
            self.config.clone(),
            self.connector.clone(),
            self.timeouts,
            self.table.clone(),
            self.options.clone(),
            crate::pool::Sessions {
                functions: false,
                pooled: true,
                direct: None,
            },
            None,
        )?);
        *open = Some(Arc::clone(&store));
        Ok(store)
    }
}

/// Stale-tolerant reads of a [`PgStore`] from its read replica (see the module docs for
/// the staleness rule). From [`PgStore::stale_reads`].
pub struct StaleReads<'a> {
    pub(crate) slot: &'a ReplicaSlot,
}

impl std::fmt::Debug for StaleReads<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaleReads")
            .field("host", &self.slot.target)
            .field("table", &self.slot.table)
            .finish()
    }
}

impl StaleReads<'_> {
    /// The replica that answers these reads (hosts, port, database, user; never the
    /// password): what a status report names as the host that answered.
    pub fn host(&self) -> &str {
        &self.slot.target
    }

    /// The replica server that answers, as `HOST:PORT` (connecting when not yet
    /// connected); see [`PgStore::answering_server`].
    pub fn answering_server(&self) -> Result<String> {
        self.slot.store()?.answering_server()
    }
}

/// A store's read replica as a [`Backend`] of its own, for a read-only command whose
/// reads tolerate staleness (`strata collections`, `verify`, `inspect`, `schema plan`):
/// every read is answered by the replica under the staleness rule of this module, and
/// every write is refused ([`PgError::ReplicaReadOnly`](crate::PgError::ReplicaReadOnly))
/// without touching a server — so nothing decided on what it read can be committed
/// through it. It has no lease ([`Capabilities::cross_process_lease`] is `None`). From
/// [`PgStore::replica_store`].
#[derive(Clone)]
pub struct ReplicaStore {
    pub(crate) slot: Arc<ReplicaSlot>,
}

impl std::fmt::Debug for ReplicaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaStore")
            .field("host", &self.slot.target)
            .field("table", &self.slot.table)
            .finish()
    }
}

impl ReplicaStore {
    /// The replica that answers (hosts, port, database, user; never the password).
    pub fn host(&self) -> &str {
        &self.slot.target
    }

    /// The replica server that answers, as `HOST:PORT`; connects when not yet connected,
    /// so an error here says the replica cannot answer (see
    /// [`PgStore::answering_server`]).
    pub fn answering_server(&self) -> Result<String> {
        self.slot.store()?.answering_server()
    }
}

impl KvRead for ReplicaStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.slot.store()?.get(key)
    }

    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        self.slot.store()?.scan_visit(prefix, after, limits, visit)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            remote_reads: true,
            cross_process_lease: None,
            write_epoch: None,
            // A write decides on expected values first, then again on those read.
            decides_once: false,
        }
    }
}

/// Refuses every write: a replica answers stale-tolerant reads only.
impl KvWrite for ReplicaStore {
    fn read_modify_write(&self, _reads: &[&[u8]], _decide: &mut Decide<'_>) -> Result<bool> {
        Err(self.refused())
    }

    fn flush(&self) -> Result<()> {
        // Nothing was written through it.
        Ok(())
    }
}

impl Backend for ReplicaStore {
    fn name(&self) -> &'static str {
        crate::BACKEND
    }
}

impl ReplicaStore {
    fn refused(&self) -> strata_store::StoreError {
        crate::PgError::ReplicaReadOnly {
            target: self.slot.target.clone(),
            table: self.slot.table.clone(),
        }
        .into()
    }
}

impl KvRead for StaleReads<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.slot.store()?.get(key)
    }

    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        self.slot.store()?.scan_visit(prefix, after, limits, visit)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            remote_reads: true,
            // Never a lease through a replica: nothing decided here may write.
            cross_process_lease: None,
            write_epoch: None,
            // A write decides on expected values first, then again on those read.
            decides_once: false,
        }
    }
}
