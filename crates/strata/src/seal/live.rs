//! [`LiveSealer`]: the unlocked keys of a database handle, refreshed when the keyring
//! changes (a data-key rotation started or finished elsewhere, an entry re-wrapped).
//!
//! Every sealed write takes ONE snapshot ([`LiveSealer::current`]), seals with it and
//! carries that snapshot's [`Sealer::keyring_precondition`]: a write sealed under a key a
//! concurrent rotation has since retired (or is retiring) cannot commit. On a conflict the
//! writer calls [`LiveSealer::refresh`] — one keyring read, no passphrase, no Argon2 run —
//! and retries with the new snapshot.

use super::{SealError, Sealer};
use std::sync::{Arc, RwLock};
use strata_store::KvRead;

/// The shared, refreshable unlocked keys of a database handle (see the module docs).
/// Cheap to clone; clones share the snapshot.
#[derive(Debug, Clone)]
pub struct LiveSealer {
    cell: Arc<RwLock<Sealer>>,
}

impl LiveSealer {
    /// Starts from `sealer`.
    pub fn new(sealer: Sealer) -> Self {
        LiveSealer {
            cell: Arc::new(RwLock::new(sealer)),
        }
    }

    /// The current snapshot. Seal with it AND put its keyring precondition on the batch.
    pub fn current(&self) -> Sealer {
        self.cell.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Runs `f` with the current snapshot, borrowed under the read lock (no `Arc` clone:
    /// the read path). `f` must not call [`LiveSealer::refresh`] on this handle.
    pub fn with_current<R>(&self, f: impl FnOnce(&Sealer) -> R) -> R {
        let guard = self.cell.read().unwrap_or_else(|e| e.into_inner());
        f(&guard)
    }

    /// Re-reads the keyring and installs the sealer for it when it changed (see
    /// [`Sealer::refresh`]). Refreshes are serialized and read the store while holding
    /// the slot, so the snapshot only ever moves forward.
    pub fn refresh<S: KvRead + ?Sized>(&self, store: &S) -> Result<Sealer, SealError> {
        let mut slot = self.cell.write().unwrap_or_else(|e| e.into_inner());
        let next = slot.refresh(store)?;
        *slot = next.clone();
        Ok(next)
    }
}
