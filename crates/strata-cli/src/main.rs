//! The `strata` command: inspect, migrate and verify strata datastores (see the crate
//! docs of `strata_cli` for the subcommands, exit codes and the embedded admin).

use std::process::ExitCode;

fn main() -> ExitCode {
    strata_cli::Admin::new().run()
}
