//! Integration tests of strata-redb: one binary, one module per capability. The crash
//! test re-runs this binary as its child (`crash::crash_child`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;
mod crash;
mod layout;
mod no_room;
