//! Integration tests of the strata engine, one module per capability.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bounded_open;
mod collection;
mod collection_util;
mod cutover_step;
mod fence;
mod format;
mod limits;
mod manifest;
mod migration;
mod pass;
mod payload;
mod policy;
mod policy_util;
mod retire;
mod sealed;
mod sweep;
mod validation;
mod window;
mod window_processes;
mod window_shared;
mod write_set;
