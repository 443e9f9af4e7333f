//! Real crash tests: each scenario seeds a sled store, runs this test binary again as a
//! child in a role (`STRATA_CRASH_ROLE`; the child is the ignored test [`child`], run with
//! `--exact crash::child --ignored`), SIGKILLs it at a random point and checks the store
//! after every kill and after a final uninterrupted run.
//!
//! * `crash_sweep`: the eager sweep (role `sweeper`);
//! * `crash_rotate`: the data-key rotation (role `rotator`);
//! * `crash_cutover`: the coordinated cutover (role `coordinator`);
//! * `crash_revert`: a revert through the downcasts (role `reverter`).
//!
//! `cargo test -p strata --test it -- crash::crash_sweep` runs one scenario;
//! `STRATA_CRASH_ITERS`, `STRATA_CRASH_SEED` and the scenarios' own variables are
//! described in their modules. The child-process harness is [`harness`].

mod cutover;
pub mod harness;
mod revert;
mod rotate;
mod sweep;

#[test]
fn crash_sweep() {
    sweep::run();
}

#[test]
fn crash_rotate() {
    rotate::run();
}

#[test]
fn crash_cutover() {
    cutover::run();
}

#[test]
fn crash_revert() {
    revert::run();
}

/// The child process of every scenario: the role named by `STRATA_CRASH_ROLE` on the
/// store in `STRATA_CRASH_DIR` (nothing without them). Only the scenarios run it.
#[test]
#[ignore = "the child process of the crash tests; the scenarios run it"]
fn child() {
    let Ok(role) = std::env::var(harness::ROLE_ENV) else {
        return;
    };
    let dir = std::env::var(harness::DIR_ENV).unwrap();
    match role.as_str() {
        "sweeper" => sweep::child(&dir),
        "rotator" => rotate::child(&dir),
        "coordinator" => cutover::child(std::path::Path::new(&dir)),
        "reverter" => revert::child(&dir),
        other => panic!("unknown role {other}"),
    }
}
