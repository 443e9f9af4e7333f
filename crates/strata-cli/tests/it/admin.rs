//! The embedded admin (`strata_cli::Admin`), through the `bank_admin` example binary:
//! `sweep`, `cutover` and `schema check` on the application's own collections, with their
//! exit codes, plus the generic subcommands.

use crate::support::json_of;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The example binary `cargo test` builds next to the `strata` binary.
fn bank_admin() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_strata"));
    let exe = bin
        .parent()
        .unwrap()
        .join("examples")
        .join(format!("bank_admin{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.exists(),
        "`{}` is missing: `cargo test -p strata-cli` builds the examples",
        exe.display()
    );
    exe
}

fn run(db: &Path, args: &[&str]) -> Output {
    Command::new(bank_admin())
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

fn seeded(flags: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bank");
    let mut args = vec!["seed"];
    args.extend_from_slice(flags);
    let out = run(&db, &args);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    (dir, db)
}

fn versions(db: &Path, collection: &str) -> Value {
    let out = run(db, &["collections", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    json_of(&out)["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["collection"] == collection)
        .unwrap()["versions"]
        .clone()
}

#[test]
fn sweep_rewrites_stale_rows_with_the_applications_chain_and_exits_0() {
    let (_dir, db) = seeded(&[]);
    assert_eq!(versions(&db, "accounts"), json!({"1": 3}));
    // The application's binary knows its chain: every v1 row is behind v3.
    let out = run(&db, &["collections", "--json"]);
    let accounts = json_of(&out)["collections"][0].clone();
    assert_eq!(accounts["collection"], "accounts");
    assert_eq!(accounts["newest_version"], 3);
    assert_eq!(accounts["newest_version_source"], "application");
    assert_eq!(accounts["rows_behind"], 3);

    // The dry run writes nothing.
    let out = run(&db, &["sweep", "accounts", "--dry-run", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let d = json_of(&out);
    assert_eq!(d["would_rewrite"], 3);
    assert_eq!(d["current_version"], 3);
    assert_eq!(d["failing"], json!([]));
    assert_eq!(versions(&db, "accounts"), json!({"1": 3}));

    let out = run(&db, &["sweep", "accounts", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let d = json_of(&out);
    assert_eq!(d["verdict"], "ok");
    assert_eq!(d["rewritten"], 3);
    assert_eq!(d["format"], 1);
    assert_eq!(versions(&db, "accounts"), json!({"3": 3}));
    // The rows were upcast by the chain: dollars became cents, a tier was added.
    let out = run(&db, &["inspect", "accounts", "--json"]);
    let alice = json_of(&out)["records"][0]["document"].clone();
    assert_eq!(
        alice,
        json!({"id": "alice", "balance_cents": 1200, "tier": "basic"})
    );

    // Again: already at v3, nothing to do.
    let out = run(&db, &["sweep", "accounts"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("already at v3"));
}

#[test]
fn a_row_the_chain_cannot_read_is_named_by_the_dry_run_and_fails_the_sweep() {
    let (_dir, db) = seeded(&["--bad-row"]);
    let out = run(&db, &["sweep", "accounts", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("__nx/doc/accounts/mallory"), "{text}");
    assert!(text.contains("numeric `balance`"), "{text}");
    assert!(text.contains("nothing was written"), "{text}");
    assert_eq!(versions(&db, "accounts"), json!({"1": 4}));

    let out = run(&db, &["sweep", "accounts", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let d = json_of(&out);
    assert_eq!(d["verdict"], "incomplete");
    assert_eq!(d["failed"], 1);
    assert_eq!(d["rewritten"], 3);
    assert_eq!(versions(&db, "accounts"), json!({"1": 1, "3": 3}));
}

/// `sweep` of a collection whose writes a pending cutover fences is refused before it
/// announces a sweep, with the admin's `cutover` command as the advice (not the library
/// call), and writes nothing.
#[test]
fn sweep_of_a_fenced_collection_is_refused_first_naming_the_cutover_command() {
    let (_dir, db) = seeded(&[]);
    let rows = |db: &Path| {
        json_of(&run(db, &["inspect", "invoices", "--raw", "--json"]))["records"].clone()
    };
    let before = rows(&db);
    let out = run(&db, &["sweep", "invoices"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("sweeping"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("writes to `invoices` are fenced")
            && stderr.contains("`cutover` command")
            && !stderr.contains("run_schema_cutover()"),
        "{stderr}"
    );
    assert_eq!(rows(&db), before);
    // The same refusal with `--json`: one document on stdout.
    let out = run(&db, &["sweep", "invoices", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let message = json_of(&out)["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("`cutover` command") && !message.contains("run_schema_cutover()"),
        "{message}"
    );
}

#[test]
fn cutover_runs_the_applications_transform_and_exits_0() {
    let (_dir, db) = seeded(&[]);
    let out = run(&db, &["cutover", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let d = json_of(&out);
    assert_eq!(d["migrated"], 1);
    assert_eq!(d["records"], 2);
    assert_eq!(d["generation"], 1);
    let out = run(&db, &["inspect", "invoices", "--json"]);
    assert_eq!(
        json_of(&out)["records"][0]["document"],
        json!({"id": "i1", "amount": {"gross": 100.0}})
    );
    // Nothing pending any more.
    let out = run(&db, &["cutover"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("no cutover pending (generation 1)"));
    // The generic fence command agrees.
    let out = run(&db, &["fence", "--json"]);
    assert_eq!(json_of(&out)["generation"], 1);
}

#[test]
fn schema_check_exits_0_when_the_strategies_accept_and_6_when_they_reject() {
    let (_dir, db) = seeded(&[]);
    let out = run(&db, &["schema", "check", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let d = json_of(&out);
    assert_eq!(d["ok"], true);
    let verdict = |d: &Value, c: &str| {
        d["collections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["collection"] == c)
            .unwrap()["verdict"]
            .clone()
    };
    assert_eq!(verdict(&d, "accounts"), "new");
    assert_eq!(verdict(&d, "invoices"), "cutover");

    let (_dir2, db2) = seeded(&["--old-baseline"]);
    let before = run(&db2, &["schema", "show", "accounts", "--json"]);
    let out = run(&db2, &["schema", "check", "accounts", "--json"]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    let d = json_of(&out);
    assert_eq!(d["ok"], false);
    assert_eq!(verdict(&d, "accounts"), "rejected");
    let detail = d["collections"][0]["detail"].as_str().unwrap();
    assert!(detail.contains("legacy_code"), "{detail}");
    // Read-only: the baseline is unchanged.
    let after = run(&db2, &["schema", "show", "accounts", "--json"]);
    assert_eq!(json_of(&before)["hash"], json_of(&after)["hash"]);
    // The human form says what failed.
    let out = run(&db2, &["schema", "check"]);
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stdout).contains("schema check failed"));
}

#[test]
fn the_admin_offers_every_generic_subcommand_and_refuses_unknown_collections() {
    let (_dir, db) = seeded(&[]);
    let out = run(&db, &["status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run(&db, &["sweep", "payments", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let d = json_of(&out);
    let message = d["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`payments`") && message.contains("accounts, invoices"),
        "{message}"
    );
    let out = run(&db, &["sweep"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = run(&db, &["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("bank_admin") && help.contains("sweep") && help.contains("cutover"),
        "{help}"
    );
    // The generic `strata` binary has no typed subcommands.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--db", db.to_str().unwrap(), "sweep", "accounts"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn schema_plan_names_a_failing_row_and_writes_nothing() {
    let (_dir, db) = seeded(&["--bad-row"]);
    let snapshot = |db: &Path| {
        let c = json_of(&run(db, &["collections", "--json"]));
        let r = json_of(&run(db, &["inspect", "accounts", "--raw", "--json"]));
        (c["collections"].clone(), r["records"].clone())
    };
    let before = snapshot(&db);
    let out = run(&db, &["schema", "plan", "accounts", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let d = json_of(&out);
    assert_eq!(d["rows"], 4);
    assert_eq!(d["versions"], json!({"1": 4}));
    assert_eq!(d["rows_behind"], 4);
    assert_eq!(d["written"], false);
    let failing = d["failing"].as_array().unwrap();
    assert_eq!(failing.len(), 1, "{d}");
    assert_eq!(failing[0]["key"], "__nx/doc/accounts/mallory");
    assert!(failing[0]["reason"]
        .as_str()
        .unwrap()
        .contains("numeric `balance`"));
    assert_eq!(d["work"]["kind"], "sweep");
    assert_eq!(d["work"]["rows"], 4);
    assert!(d["work"]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(snapshot(&db), before, "schema plan wrote to the store");
    let out = run(&db, &["schema", "plan", "accounts"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("nothing was written") && text.contains("mallory"),
        "{text}"
    );
}

#[test]
fn schema_plan_reports_an_added_property_no_stored_row_uses_as_settled() {
    let (_dir, db) = seeded(&["--no-nickname-baseline"]);
    let out = run(&db, &["schema", "plan", "accounts", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let d = json_of(&out);
    assert_eq!(d["schema"]["verdict"], "allowed", "{d}");
    let settled = d["schema"]["settled_by_data"].as_array().unwrap();
    assert_eq!(settled.len(), 1, "{d}");
    assert!(settled[0].as_str().unwrap().contains("`nickname`"), "{d}");
    assert_eq!(d["schema"]["breaks"], json!([]));
    assert_eq!(d["failing"], json!([]));
    // A cutover plan covers every row.
    let out = run(&db, &["schema", "plan", "invoices", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let d = json_of(&out);
    assert_eq!(d["schema"]["verdict"], "cutover");
    assert_eq!(d["work"]["kind"], "cutover");
    assert_eq!(d["work"]["rows"], 2);
}
