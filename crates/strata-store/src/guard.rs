//! The open boundary of an embedded backend: a panic inside the storage engine while it
//! reads a damaged datastore (sled and redb both panic on some damaged files) becomes
//! [`StoreError::Damaged`] instead of ending the process with a backtrace.

use crate::{Result, StoreError};
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::Once;

thread_local! {
    /// True while this thread runs inside [`guarded_open`]: its panics are reported as errors,
    /// so the panic hook stays quiet for them.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Installs (once) a panic hook that is silent for panics inside [`guarded_open`] and calls the
/// previous hook for every other panic.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) {
                tracing::debug!(%info, "panic inside a guarded datastore open");
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `open` (a backend's open of the datastore at `path`), turning a panic into
/// [`StoreError::Damaged`] naming `path`. The panic hook stays quiet for such panics (they
/// are logged at debug level); every other panic reaches the previous hook.
pub fn guarded_open<T>(path: &Path, open: impl FnOnce() -> T) -> Result<T> {
    install_hook();
    let was = GUARDED.with(|g| g.replace(true));
    let outcome = panic::catch_unwind(AssertUnwindSafe(open));
    GUARDED.with(|g| g.set(was));
    outcome.map_err(|payload| {
        let detail = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "the storage engine panicked".into());
        StoreError::Damaged {
            path: path.to_path_buf(),
            reason: format!("reading it failed ({detail})"),
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_damaged_naming_the_file() {
        let err = guarded_open(Path::new("/x/db"), || -> u8 { panic!("bad page") }).unwrap_err();
        assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("/x/db") && text.contains("bad page"),
            "{text}"
        );
        assert_eq!(guarded_open(Path::new("/x"), || 7).unwrap(), 7);
        assert!(!GUARDED.with(Cell::get));
    }
}
