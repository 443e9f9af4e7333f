//! Integration tests of strata-store: the conformance suite over `MemoryStore` and through
//! the fault-injection wrapper, and the property test against a `BTreeMap` model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;
mod faults_conformance;
mod model;
