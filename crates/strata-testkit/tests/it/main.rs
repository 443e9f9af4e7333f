//! strata-testkit: given/expected checks, fixtures captured from a real store, replays.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod capture;
mod replay;
mod steps;
mod support;
