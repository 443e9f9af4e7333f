//! The open boundary: a panic inside sled while it reads a damaged datastore becomes
//! [`StoreError::Damaged`] instead of ending the process with a backtrace.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::Once;
use strata_store::{Result, StoreError};

thread_local! {
    /// True while this thread runs inside [`guarded`]: its panics are reported as errors,
    /// so the panic hook stays quiet for them.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Installs (once) a panic hook that is silent for panics inside [`guarded`] and calls the
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

/// Runs `open`, turning a panic into [`StoreError::Damaged`] naming `path`.
pub(crate) fn guarded<T>(path: &Path, open: impl FnOnce() -> T) -> Result<T> {
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
        let err = guarded(Path::new("/x/db"), || -> u8 { panic!("bad page") }).unwrap_err();
        assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("/x/db") && text.contains("bad page"),
            "{text}"
        );
        assert_eq!(guarded(Path::new("/x"), || 7).unwrap(), 7);
        assert!(!GUARDED.with(Cell::get));
    }
}
