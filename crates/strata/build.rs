//! Compiles the PostgreSQL tests of the engine (`tests/it/postgres/`) as ignored ("needs
//! STRATA_PG_URL") unless a server URL is in the environment when they are built: `cargo
//! test` then reports them as ignored, not as passed, and rebuilds them (this script
//! reruns) when the variable changes.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(strata_pg)");
    println!("cargo::rerun-if-env-changed=STRATA_PG_URL");
    if std::env::var("STRATA_PG_URL").is_ok_and(|u| !u.trim().is_empty()) {
        println!("cargo::rustc-cfg=strata_pg");
    }
}
