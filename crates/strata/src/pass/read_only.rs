//! The store of a read-only pass ([`Pass::run_read_only`](super::Pass::run_read_only)).

use strata_store::{KvRead, KvWrite, ScanLimits, StoreError, Visit};

/// writes) and is refused.
pub(super) struct ReadOnly<'s, S: ?Sized>(pub(super) &'s S);

impl<S: KvRead + ?Sized> KvRead for ReadOnly<'_, S> {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.0.capabilities()
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        self.0.scan_visit(prefix, after, limits, visit)
    }
}

impl<S: ?Sized> KvWrite for ReadOnly<'_, S> {
    fn read_modify_write(
        &self,
        _: &[&[u8]],
        _: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        Err(StoreError::InvalidArgument(
            "a read-only pass does not write".into(),
        ))
    }
    fn flush(&self) -> strata_store::Result<()> {
        Ok(())
    }
}
