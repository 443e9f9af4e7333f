//! Integration tests of the strata engine, one module per capability.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bounded_open;
mod collection;
mod collection_util;
mod cutover_step;
mod error_messages;
mod faults;
mod fence;
mod format;
mod fuzz;
mod getting_started;
mod keyring;
mod layers;
mod limits;
mod manifest;
mod migration;
mod pass;
mod payload;
mod policy;
mod policy_util;
mod retire;
mod rotate_damaged;
mod seal;
mod seal_fixture;
mod seal_rotate;
mod sealed;
mod sealed_marks;
mod sealed_stays_sealed;
mod sealed_tamper;
mod sweep;
mod validation;
mod verify_sealed;
mod window;
mod window_processes;
mod window_shared;
mod write_set;
