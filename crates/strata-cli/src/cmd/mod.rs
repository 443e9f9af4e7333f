//! One module per subcommand. Each exposes `Args` (clap) and `run(db, args) -> CmdResult`.

pub mod inspect;
pub mod migrate;
pub mod status;
pub mod verify;
