//! Integration tests of the strata engine, one module per capability.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod migration;
mod pass;
mod validation;
