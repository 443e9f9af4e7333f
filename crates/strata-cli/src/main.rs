//! The `strata` command.
fn main() {}
