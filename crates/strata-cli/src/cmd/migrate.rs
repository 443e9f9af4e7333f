//! `strata migrate` (being implemented; see issue 3).

use crate::exit::{CmdResult, Failure};
use std::path::Path;

/// Arguments of `strata migrate`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_db: &Path, _args: Args) -> CmdResult {
    Err(Failure::error(
        "`strata migrate` is not available in this build yet",
    ))
}
