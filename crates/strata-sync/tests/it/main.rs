//! Integration tests of strata-sync: one module per capability.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod crash;
mod fixture;
mod interop;
mod manager;
mod props;
mod runtime;
