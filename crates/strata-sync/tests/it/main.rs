//! Integration tests of strata-sync: one module per capability.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bounded;
mod common;
mod concurrent;
mod crash;
mod faults;
mod fixture;
mod interop;
mod limits;
mod manager;
mod pg_failover;
mod pg_processes;
mod props;
mod runtime;
