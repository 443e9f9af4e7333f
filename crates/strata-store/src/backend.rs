//! The capability traits every backend implements.
//!
//! A backend implements exactly this: [`KvRead::get`], [`KvRead::scan_visit`] (a
//! visiting, bounded prefix scan), [`KvRead::capabilities`], the ONE write primitive
//! [`KvWrite::read_modify_write`] and [`KvWrite::flush`]. Everything else on these traits
//! ([`KvRead::scan`], [`KvRead::prefix_exists`], [`KvWrite::apply`],
//! [`KvWrite::compare_and_swap`]) is a provided convenience built on them, which no
//! backend or wrapper overrides: there is one write path, and every wrapper (fault
//! injection, the exclusive session, read-only passes) forwards exactly it.

use crate::{Batch, KeyWrite, Result, ScanLimits, ScanPage, Visit, VisitEnd};
use std::time::Duration;

/// What a write decides on the values it read: the batch to commit (its mutations, and
/// its preconditions — guards on other keys — checked in the same atomic commit), or
/// `None`: refuse, write nothing. See [`KvWrite::read_modify_write`].
pub type Decide<'a> = dyn FnMut(&[Option<&[u8]>]) -> Option<Batch> + 'a;

/// What a backend can do besides the primitives, as one value (see
/// [`KvRead::capabilities`]).
#[derive(Clone, Copy, Default)]
pub struct Capabilities<'a> {
    /// True when every read is a round trip to a server (PostgreSQL): a writer that can
    /// skip one should. `false` for embedded backends.
    pub remote_reads: bool,
    /// The store lease that is exclusive across processes, for backends that several
    /// processes write to (PostgreSQL). `None` for backends opened by one process at a
    /// time (sled's and redb's file lock, memory): there the in-process write lease
    /// already excludes every other writer. See
    /// [`ExclusiveSession`](crate::ExclusiveSession).
    pub cross_process_lease: Option<&'a dyn CrossProcessLease>,
    /// The backend's write epoch (see [`crate::epoch`]), for a backend whose writers are
    /// all ordered by one in-process lock (memory, sled): a batch whose preconditions were
    /// [observed](Batch::observed_at) at the current epoch is committed without reading
    /// them again. `None` for the others (their batches' preconditions are all checked).
    pub write_epoch: Option<&'a crate::EpochClock>,
    /// True when the backend calls a [`KvWrite::read_modify_write`] decision exactly once
    /// (redb, memory: the keys are read under the backend's own lock and the decision
    /// commits). A caller may then move what it owns into the decided batch instead of
    /// copying it; a second call (a wrapper that validates optimistically) must still be
    /// answered correctly, e.g. by refusing and writing again. `false` (the default) for
    /// backends that may decide again (sled's compare-and-swap, PostgreSQL's expected
    /// values).
    pub decides_once: bool,
}

impl Capabilities<'_> {
    /// The current write epoch, when the backend keeps one.
    pub fn write_epoch(&self) -> Option<crate::WriteEpoch> {
        self.write_epoch.map(crate::EpochClock::observe)
    }
}

impl std::fmt::Debug for Capabilities<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capabilities")
            .field("remote_reads", &self.remote_reads)
            .field("cross_process_lease", &self.cross_process_lease.is_some())
            .field("write_epoch", &self.write_epoch.is_some())
            .field("decides_once", &self.decides_once)
            .finish()
    }
}

/// Reading: point lookups and bounded, cursor-resumed prefix scans.
pub trait KvRead {
    /// The value of `key`, if present.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Records whose key starts with `prefix` and is strictly greater than `after` (when
    /// given), in ascending byte order, handed to `visit` one at a time as borrowed slices
    /// (no copy where the backend can avoid one), bounded by `limits`:
    ///
    /// * at most `max_records` records;
    /// * the sum of key+value lengths never exceeds `max_bytes`: the scan stops *before*
    ///   the record that would overflow (the first record is always taken when it fits);
    /// * a record whose key+value alone exceeds `max_bytes` is
    ///   [`StoreError::RecordTooLarge`](crate::StoreError::RecordTooLarge), raised before
    ///   its value is copied (when it is the first record of the page; otherwise the page
    ///   ends before it and the next page reports it).
    ///
    /// `visit` may end the page early with [`Visit::Stop`] (the record it just saw counts
    /// as taken).
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd>;

    /// What the backend can do besides the primitives (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities<'_>;

    /// The records [`KvRead::scan_visit`] visits, as one page (copied). A provided
    /// convenience: backends do not override it.
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limits: ScanLimits) -> Result<ScanPage> {
        let mut page = crate::PageBuilder::new(limits);
        let end = self.scan_visit(prefix, after, limits, &mut |key, value| {
            page.push(key.to_vec(), value.to_vec());
            Visit::Continue
        })?;
        let mut page = page.finish();
        page.more = end.more;
        Ok(page)
    }

    /// True when at least one key starts with `prefix`. A provided convenience: backends
    /// do not override it.
    fn prefix_exists(&self, prefix: &[u8]) -> Result<bool> {
        let one = ScanLimits::new(1, usize::MAX)?;
        let mut found = false;
        self.scan_visit(prefix, None, one, &mut |_, _| {
            found = true;
            Visit::Stop
        })?;
        Ok(found)
    }
}

/// Writing: the one read-modify-write primitive and durability.
pub trait KvWrite {
    /// THE write primitive. Inside the backend's own write transaction or lock (one redb
    /// write transaction, one sled critical section, one in-memory write lock; on
    /// PostgreSQL, values read are re-checked by the server in the statement that
    /// writes), the backend reads the current value of every key of `reads` (`None`:
    /// absent), hands them, in order, to `decide`, and commits what it decides:
    ///
    /// * `None`: the decision refused (or has nothing to write); nothing is written and
    ///   the call returns `Ok(false)`;
    /// * `Some(batch)`: the batch's preconditions (guards on any key) are checked and its
    ///   mutations applied atomically together with the read — `Ok(true)` — or, on the
    ///   first failed precondition, nothing is written and
    ///   [`StoreError::Conflict`](crate::StoreError::Conflict) is returned. A batch that
    ///   touches one key twice is refused with
    ///   [`StoreError::DuplicateKey`](crate::StoreError::DuplicateKey).
    ///
    /// No other write of the store lands between the read and the commit: the values
    /// handed to `decide` are still current when the batch commits, without the caller
    /// adding preconditions on them.
    ///
    /// `decide` must not call into the store. It may be called more than once when
    /// `reads` is not empty; only the last call's batch is committed, and the last call
    /// always sees the values current at the commit (or, for a refusal, values the
    /// backend read). A backend that validates optimistically (PostgreSQL) may hand an
    /// earlier call the values it *expects* instead of reading them — the bytes it last
    /// wrote, or absent for a key it knows nothing of — and checks them in the statement
    /// that writes: when they were wrong, nothing of that call's batch is written and the
    /// decision runs again on the current values; a refusal on expected values is never
    /// final (the keys are read and the decision runs again). So a decision must be
    /// pure and total: it takes any values (a key it knows to exist may be handed over
    /// absent — refusing then costs one read), acts on them only by returning its batch
    /// (or `None`), and whatever it records for its caller is overwritten by each call.
    /// When `reads` is empty it is called exactly once.
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<bool>;

    /// Makes every committed write durable.
    fn flush(&self) -> Result<()>;

    /// Applies `batch` atomically: [`KvWrite::read_modify_write`] reading nothing and
    /// deciding `batch`. Every precondition is checked and every mutation applied, or —
    /// on the first failed precondition — nothing is written and
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) is returned. A provided
    /// convenience: backends and wrappers do not override it.
    fn apply(&self, batch: Batch) -> Result<()> {
        let mut once = Some(batch);
        let mut again = false;
        self.read_modify_write(&[], &mut |_| {
            let b = once.take();
            again |= b.is_none();
            b
        })?;
        if again {
            return Err(crate::StoreError::InvalidArgument(
                "the backend decided a write that reads nothing twice; a backend must call the decision of such a write exactly once (a bug in the backend or wrapper)".into(),
            ));
        }
        Ok(())
    }

    /// Applies one [`KeyWrite`]: exactly [`KvWrite::apply`] of [`KeyWrite::into_batch`].
    /// A provided convenience: backends and wrappers do not override it.
    fn compare_and_swap(&self, write: KeyWrite) -> Result<()> {
        self.apply(write.into_batch())
    }
}

/// A complete backend: [`KvRead`] + [`KvWrite`], shareable across threads.
pub trait Backend: KvRead + KvWrite + Send + Sync + std::fmt::Debug {
    /// Short backend name for messages (`memory`, `sled`, `postgres`).
    fn name(&self) -> &'static str;
}

/// The values of `reads` as the slices handed to a decision.
pub fn borrowed<V: AsRef<[u8]>>(values: &[Option<V>]) -> Vec<Option<&[u8]>> {
    values
        .iter()
        .map(|v| v.as_ref().map(AsRef::as_ref))
        .collect()
}

impl<T: KvRead + ?Sized> KvRead for &T {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        (**self).get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        (**self).scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> Capabilities<'_> {
        (**self).capabilities()
    }
}

impl<T: KvWrite + ?Sized> KvWrite for &T {
    fn read_modify_write(&self, reads: &[&[u8]], decide: &mut Decide<'_>) -> Result<bool> {
        (**self).read_modify_write(reads, decide)
    }
    fn flush(&self) -> Result<()> {
        (**self).flush()
    }
}

/// A lease on a whole store that is exclusive across processes and machines (implemented
/// by backends that several processes write to).
pub trait CrossProcessLease: Send + Sync {
    /// Takes the lease for `holder` (a name the writers kept waiting will see in their
    /// error), waiting up to `wait` (the backend's default when `None`) while another
    /// holder has it; fails with a backend error naming that holder when the wait expires.
    fn acquire_lease(&self, holder: &str, wait: Option<Duration>) -> Result<Box<dyn HeldLease>>;

    /// Takes the lease called `name` of this store for `holder`: exclusive among the
    /// holders of `name` across processes and machines, holding up nobody else's writes.
    /// Waits up to `wait` (zero: one attempt) while another holder has it, then returns
    /// [`NamedLease::Busy`] naming that holder. The fencing tokens of one name grow with
    /// every acquisition; a holder whose process dies loses the lease at once.
    fn acquire_named_lease(&self, name: &str, holder: &str, wait: Duration) -> Result<NamedLease>;
}

/// The outcome of [`NamedLease::acquire`].
#[derive(Debug)]
pub enum NamedLease {
    /// The store's backend is opened by one process at a time (sled's file lock, redb,
    /// memory): there is no other process to exclude, the caller's in-process rules apply.
    Local,
    /// Held (released when dropped).
    Held(Box<dyn HeldLease>),
    /// Another holder has it (its name, as it gave it: what, pid and host).
    Busy {
        /// The current holder.
        holder: String,
    },
}

/// A held [`CrossProcessLease`]; dropping it releases the lease.
pub trait HeldLease: Send + std::fmt::Debug {
    /// Who holds it.
    fn holder(&self) -> &str;
    /// The fencing token of this acquisition: larger than that of every earlier one. The
    /// backend refuses the holder's batches once a later acquisition took the lease over.
    fn fencing_token(&self) -> u64;
}
