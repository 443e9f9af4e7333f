//! The lease holders alive in this process: sweep runners and policy clients, each
//! registered while it runs or its handle is open.
//!
//! A lease recorded in the store (a sweep marker's runner, the fence's cutover
//! coordinator) normally proves itself only by expiring. On a store one process at a time
//! opens — redb and sled lock their files, a memory store lives in one process
//! ([`strata_store::NamedLease::Local`]) — there is a better proof: a holder recorded in
//! the store that is not alive in this process ended without releasing its lease (it was
//! killed, or its release failed on a full disk), so the lease is taken over at once
//! instead of after it expires. One registry for every kind of holder, so that each
//! operation that records a lease asks the same question the same way.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

/// What a registered id holds: ids of different kinds never answer for each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Holder {
    /// A sweep's runner id (the runner recorded in the sweep marker).
    SweepRunner,
    /// A policy client's id (the coordinator recorded in the fence): registered by its
    /// handle while it is open, and by a cutover it coordinates while that runs.
    PolicyClient,
}

/// How many registrations of each `(kind, id)` are alive in this process.
static ALIVE: LazyLock<Mutex<HashMap<(Holder, String), usize>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A holder registered as alive in this process until the guard is dropped.
#[derive(Debug)]
pub(crate) struct Alive(Holder, String);

impl Alive {
    /// Registers `id` as a holder of `kind` alive in this process while the guard lives.
    pub(crate) fn enter(kind: Holder, id: &str) -> Self {
        *ALIVE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((kind, id.to_string()))
            .or_default() += 1;
        Alive(kind, id.to_string())
    }

    /// True while a holder of `kind` with `id` is alive in this process.
    pub(crate) fn contains(kind: Holder, id: &str) -> bool {
        ALIVE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&(kind, id.to_string()))
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        let mut alive = ALIVE.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (self.0, std::mem::take(&mut self.1));
        if let Some(n) = alive.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                alive.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_is_alive_while_any_of_its_guards_lives_and_kinds_do_not_mix() {
        let id = "alive-test-holder";
        assert!(!Alive::contains(Holder::SweepRunner, id));
        let a = Alive::enter(Holder::SweepRunner, id);
        let b = Alive::enter(Holder::SweepRunner, id);
        assert!(Alive::contains(Holder::SweepRunner, id));
        assert!(!Alive::contains(Holder::PolicyClient, id));
        drop(a);
        assert!(Alive::contains(Holder::SweepRunner, id));
        drop(b);
        assert!(!Alive::contains(Holder::SweepRunner, id));
    }
}
