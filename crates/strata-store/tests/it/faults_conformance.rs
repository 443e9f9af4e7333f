//! The shared conformance suite through the fault-injection wrapper (never failing): a
//! wrapper forwards exactly the one write primitive, so it passes every check the backend
//! under it passes — and fault tests run the production write path.

use strata_store::faults::{FaultKind, FaultyStore};
use strata_store::{MemoryStore, Store};

strata_store::conformance_tests!(|_dir: &std::path::Path| Store::new(FaultyStore::new(
    MemoryStore::new(),
    FaultKind::Any,
    0
)));
