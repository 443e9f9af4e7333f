//! Integration tests of the `strata` command and the embedded `Admin`: one binary, one
//! module per behaviour, the helpers they share in `support` (the `strata` runner,
//! `json_of`, store seeders, PostgreSQL scratch tables).
//!
//! PostgreSQL tests are compiled as ignored unless `STRATA_PG_URL` is set when they are
//! built (`build.rs`, cfg `strata_pg`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod admin;
mod admin_revert;
mod admin_sealed;
mod admin_sealed_refusals;
mod backends;
mod bounded_input;
mod collections;
mod conventions;
mod copy;
mod crash_migrate;
mod demo;
mod exit_codes;
mod fence;
mod full_disk;
mod full_disk_layout;
mod inspect_numax;
mod json_documents;
mod keyring_verdicts;
mod keys;
mod kill_verdicts;
mod manifest;
mod migrate;
mod not_found;
mod nothing_to_do;
mod other_writer;
mod pg_async_loss;
mod pg_coordination;
mod pg_failover_ops;
mod pg_patroni_soak;
mod pg_processes;
mod pg_replica;
mod pg_restart;
mod read_only_bytes;
mod redb_damage;
mod repair;
mod repair_cutover;
mod retire;
mod schema;
mod seal;
mod secrets;
mod sled_damage;
mod sled_private_copy;
mod sled_read_only;
mod status;
mod unfinished_copy;
mod unfinished_work;
mod verify_remedy;
