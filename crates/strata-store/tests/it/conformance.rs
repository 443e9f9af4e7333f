//! The shared conformance suite, run against [`MemoryStore`].
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use strata_store::{MemoryStore, Store};

strata_store::conformance_tests!(|_dir: &std::path::Path| Store::new(MemoryStore::new()));
