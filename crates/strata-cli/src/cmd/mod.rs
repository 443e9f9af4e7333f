//! One module per subcommand. Each exposes `Args` (clap) and `run(db, args) -> CmdResult`.

pub mod collections;
pub mod copy;
pub mod demo;
pub mod fence;
pub mod fixture;
pub mod inspect;
pub mod keys;
pub mod migrate;
pub mod repair;
pub mod retire;
pub mod schema;
pub mod status;
pub mod unfinished;
pub mod verdict;
pub mod verify;
