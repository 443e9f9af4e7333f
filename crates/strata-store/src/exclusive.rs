//! Exclusive sessions across processes: the store lease of migrations and other bulk
//! operations.
//!
//! The in-process [`WriteLease`] keeps the other writers *of this process* out. Whether
//! that is enough depends on the backend:
//!
//! * sled, redb and memory are opened by one process at a time (a file lock, or no file at
//!   all), so the in-process lease already excludes every other writer;
//! * a shared server (PostgreSQL) is written by many processes and machines: its backend
//!   offers a [`CrossProcessLease`](crate::CrossProcessLease) through [`Capabilities::cross_process_lease`](crate::Capabilities::cross_process_lease), which keeps
//!   the writers of every other process waiting (bounded) while it is held and gives each
//!   acquisition a growing fencing token that the holder's batches are checked against.
//!
//! [`ExclusiveSession::acquire`] takes both, in that order (cross-process first, so the
//! writers of this process are not held up while another process still has the lease),
//! and releases both when dropped.
//!
//! Online bulk operations that run *alongside* writers (the eager sweep of a collection,
//! the coordinated cutover, which fences writers itself) must not keep the store's
//! writers out; they need only to exclude each other. They take a **named lease**
//! ([`NamedLease::acquire`], `sweep/<collection>`, `cutover`): exclusive among the holders
//! of that name across processes and machines, with a holder name and a growing fencing
//! token, and no effect on anybody else's writes. Its holder writes the token into its
//! own stored lease record (the sweep marker, the fence), which every batch of the holder
//! preconditions on, so a holder that was taken over cannot commit another batch.
//!
//! ```
//! use strata_store::{Batch, ExclusiveSession, KvWrite, MemoryStore, Store};
//!
//! # fn main() -> Result<(), strata_store::StoreError> {
//! let store = Store::new(MemoryStore::new());
//! let session = ExclusiveSession::acquire(&store, "example", None)?;
//! assert_eq!(session.fencing_token(), None); // memory: the in-process lease is the lease
//! session.apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))?;
//! # Ok(()) }
//! ```

use crate::{HeldLease, KvRead, KvWrite, NamedLease, Result, ScanLimits, Store, WriteLease};
use std::time::Duration;

impl NamedLease {
    /// Takes the lease `name` of `store` for `holder` (see
    /// [`CrossProcessLease::acquire_named_lease`](crate::CrossProcessLease::acquire_named_lease)); [`NamedLease::Local`] when the
    /// backend has no cross-process lease.
    pub fn acquire(store: &Store, name: &str, holder: &str, wait: Duration) -> Result<Self> {
        let backend = store.unguarded_backend();
        match backend.capabilities().cross_process_lease {
            Some(lease) => lease.acquire_named_lease(name, holder, wait),
            None => Ok(NamedLease::Local),
        }
    }

    /// The fencing token when held across processes.
    pub fn fencing_token(&self) -> Option<u64> {
        match self {
            NamedLease::Held(h) => Some(h.fencing_token()),
            _ => None,
        }
    }
}

/// A holder name for leases: `what` and where it runs (`migrate (pid 42 on host-a)`).
pub fn lease_holder(what: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "an unknown host".to_string());
    format!("{what} (pid {} on {host})", std::process::id())
}

/// The exclusive write session of a bulk operation (RAII): the store's cross-process
/// lease when its backend has one, and the in-process [`WriteLease`]. Writes go through
/// the session; reads never block. Dropping it releases the in-process lease, then the
/// cross-process one.
#[derive(Debug)]
pub struct ExclusiveSession {
    // Declared (and so dropped) before `cross`: this process's writers resume before the
    // other processes' do.
    lease: WriteLease,
    cross: Option<Box<dyn HeldLease>>,
}

impl ExclusiveSession {
    /// Takes the cross-process lease of `store`'s backend, if it has one (waiting up to
    /// `wait`, the backend's default when `None`), then the in-process write lease
    /// (waiting for this process's writes in flight).
    ///
    /// Not re-entrant: a thread already holding the in-process lease of `store` must not
    /// call this.
    pub fn acquire(store: &Store, holder: &str, wait: Option<Duration>) -> Result<Self> {
        let backend = store.unguarded_backend();
        let cross = match backend.capabilities().cross_process_lease {
            Some(lease) => Some(lease.acquire_lease(holder, wait)?),
            None => None,
        };
        Ok(ExclusiveSession {
            lease: store.lease(),
            cross,
        })
    }

    /// The fencing token of the cross-process lease (`None` when the backend has none).
    pub fn fencing_token(&self) -> Option<u64> {
        self.cross.as_ref().map(|c| c.fencing_token())
    }

    /// The in-process lease (to hand to code that takes a [`WriteLease`]).
    pub fn write_lease(&self) -> &WriteLease {
        &self.lease
    }
}

impl KvRead for ExclusiveSession {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.lease.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> crate::Visit,
    ) -> Result<crate::VisitEnd> {
        self.lease.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> crate::Capabilities<'_> {
        self.lease.capabilities()
    }
}

impl KvWrite for ExclusiveSession {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut crate::Decide<'_>) -> Result<bool> {
        self.lease.read_modify_write(reads, decide)
    }
    fn flush(&self) -> Result<()> {
        self.lease.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::{Backend, Batch, CrossProcessLease, MemoryStore};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    /// A backend with a fake cross-process lease that records what happened.
    #[derive(Debug, Default)]
    struct Leased {
        inner: MemoryStore,
        log: Arc<Mutex<Vec<String>>>,
        tokens: AtomicU64,
        named: Mutex<std::collections::HashMap<String, String>>,
    }

    #[derive(Debug)]
    struct Held {
        holder: String,
        token: u64,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl HeldLease for Held {
        fn holder(&self) -> &str {
            &self.holder
        }
        fn fencing_token(&self) -> u64 {
            self.token
        }
    }

    impl Drop for Held {
        fn drop(&mut self) {
            self.log
                .lock()
                .unwrap()
                .push(format!("release {}", self.token));
        }
    }

    impl CrossProcessLease for Leased {
        fn acquire_lease(
            &self,
            holder: &str,
            _wait: Option<Duration>,
        ) -> Result<Box<dyn HeldLease>> {
            if holder == "refused" {
                return Err(crate::StoreError::InvalidArgument("held by someone".into()));
            }
            let token = self.tokens.fetch_add(1, Ordering::SeqCst) + 1;
            self.log.lock().unwrap().push(format!("acquire {token}"));
            Ok(Box::new(Held {
                holder: holder.to_string(),
                token,
                log: Arc::clone(&self.log),
            }))
        }

        fn acquire_named_lease(
            &self,
            name: &str,
            holder: &str,
            _wait: Duration,
        ) -> Result<NamedLease> {
            let mut held = self.named.lock().unwrap();
            if let Some(h) = held.get(name) {
                return Ok(NamedLease::Busy { holder: h.clone() });
            }
            held.insert(name.to_string(), holder.to_string());
            let token = self.tokens.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(NamedLease::Held(Box::new(Held {
                holder: holder.to_string(),
                token,
                log: Arc::clone(&self.log),
            })))
        }
    }

    impl KvRead for Leased {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.inner.get(key)
        }
        fn scan_visit(
            &self,
            prefix: &[u8],
            after: Option<&[u8]>,
            limits: crate::ScanLimits,
            visit: &mut dyn FnMut(&[u8], &[u8]) -> crate::Visit,
        ) -> Result<crate::VisitEnd> {
            self.inner.scan_visit(prefix, after, limits, visit)
        }
        fn capabilities(&self) -> crate::Capabilities<'_> {
            crate::Capabilities {
                cross_process_lease: Some(self),
                ..crate::Capabilities::default()
            }
        }
    }

    impl KvWrite for Leased {
        fn read_modify_write(
            &self,
            reads: &[&[u8]],
            decide: &mut crate::Decide<'_>,
        ) -> Result<bool> {
            self.inner.read_modify_write(reads, decide)
        }
        fn flush(&self) -> Result<()> {
            Ok(())
        }
    }

    impl Backend for Leased {
        fn name(&self) -> &'static str {
            "leased"
        }
    }

    #[test]
    fn a_backend_without_a_cross_process_lease_gets_the_in_process_one() {
        let store = Store::new(MemoryStore::new());
        let session = ExclusiveSession::acquire(&store, &lease_holder("test"), None).unwrap();
        assert_eq!(session.fencing_token(), None);
        assert!(store.is_leased());
        assert!(store.try_lease().is_none());
        session
            .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
            .unwrap();
        drop(session);
        assert!(!store.is_leased());
        assert_eq!(store.get(b"k").unwrap(), Some(b"v".to_vec()));
    }

    #[test]
    fn both_leases_are_taken_and_released_with_growing_tokens() {
        let backend = Leased::default();
        let log = Arc::clone(&backend.log);
        let store = Store::new(backend);
        let first = ExclusiveSession::acquire(&store, "a", None).unwrap();
        assert_eq!(first.fencing_token(), Some(1));
        assert!(store.is_leased());
        drop(first);
        assert!(!store.is_leased());
        let second = ExclusiveSession::acquire(&store, "b", None).unwrap();
        assert_eq!(second.fencing_token(), Some(2));
        drop(second);
        assert_eq!(
            *log.lock().unwrap(),
            ["acquire 1", "release 1", "acquire 2", "release 2"]
        );
    }

    #[test]
    fn a_refused_cross_process_lease_takes_no_in_process_lease() {
        let store = Store::new(Leased::default());
        let err = ExclusiveSession::acquire(&store, "refused", None).unwrap_err();
        assert!(err.to_string().contains("held by someone"));
        assert!(!store.is_leased());
    }

    #[test]
    fn named_leases_exclude_only_their_name_and_are_local_without_a_backend_lease() {
        let store = Store::new(Leased::default());
        let a = NamedLease::acquire(&store, "sweep/a", "one", Duration::ZERO).unwrap();
        assert_eq!(a.fencing_token(), Some(1));
        match NamedLease::acquire(&store, "sweep/a", "two", Duration::ZERO).unwrap() {
            NamedLease::Busy { holder } => assert_eq!(holder, "one"),
            other => panic!("{other:?}"),
        }
        let b = NamedLease::acquire(&store, "sweep/b", "two", Duration::ZERO).unwrap();
        assert_eq!(b.fencing_token(), Some(2));
        // Writers are not held up by a named lease.
        assert!(!store.is_leased());
        store
            .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
            .unwrap();
        let memory = Store::new(MemoryStore::new());
        assert!(matches!(
            NamedLease::acquire(&memory, "sweep/a", "one", Duration::ZERO).unwrap(),
            NamedLease::Local
        ));
    }

    #[test]
    fn holder_names_say_what_and_where() {
        let h = lease_holder("migrate");
        assert!(h.starts_with("migrate (pid "), "{h}");
        assert!(h.contains(&std::process::id().to_string()));
    }
}
