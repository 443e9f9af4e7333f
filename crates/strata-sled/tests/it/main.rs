//! Integration tests of strata-sled: one binary, one module per capability. The
//! process-lock test re-runs this binary as its child (`conformance::open_child`), the
//! durability test as a writer it kills (`durability::durable_writer_child`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;
mod durability;
mod epoch;
mod other_writer;
mod read_only;
mod safety;
mod writers;
