//! Real crash tests (`harness = false`, STYLE §4): each scenario seeds a sled store, runs
//! this binary again as a child in a role (`STRATA_CRASH_ROLE`), SIGKILLs it at a random
//! point and checks the store after every kill and after a final uninterrupted run.
//!
//! * `crash_sweep`: the eager sweep (role `sweeper`);
//! * `crash_rotate`: the data-key rotation (role `rotator`);
//! * `crash_cutover`: the coordinated cutover (role `coordinator`);
//! * `crash_revert`: a revert through the downcasts (role `reverter`).
//!
//! `cargo test -p strata --test crash -- sweep` runs only the scenarios whose name contains
//! one of the given words; `STRATA_CRASH_ITERS`, `STRATA_CRASH_SEED` and the scenarios' own
//! variables are described in their modules. The child-process harness is [`harness`].
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cutover;
mod harness;
mod revert;
mod rotate;
mod sweep;

/// Every scenario, by the name `--list` prints and a filter matches.
const SCENARIOS: [(&str, fn()); 4] = [
    ("crash_sweep", sweep::run),
    ("crash_rotate", rotate::run),
    ("crash_cutover", cutover::run),
    ("crash_revert", revert::run),
];

fn main() {
    if let Ok(role) = std::env::var(harness::ROLE_ENV) {
        let dir = std::env::var(harness::DIR_ENV).unwrap();
        match role.as_str() {
            "sweeper" => sweep::child(&dir),
            "rotator" => rotate::child(&dir),
            "coordinator" => cutover::child(std::path::Path::new(&dir)),
            "reverter" => revert::child(&dir),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test` passes harness flags such as `--list`; answer them politely.
    if args.iter().any(|a| a == "--list") {
        for (name, _) in SCENARIOS {
            println!("{name}: test");
        }
        return;
    }
    let filters: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    for (name, run) in SCENARIOS {
        if filters.is_empty() || filters.iter().any(|f| name.contains(f)) {
            run();
        }
    }
}
