//! The shared conformance suite, run against [`MemoryStore`].

use strata_store::{MemoryStore, Store};

strata_store::conformance_tests!(|_dir: &std::path::Path| Store::new(MemoryStore::new()));
