//! Replays of a captured fixture: a correct chain passes; broken steps, steps that break
//! only when versions are skipped, and a sweep that rewrites rows twice are reported.

use crate::support::{options, seeded_redb, Account};
use serde_json::json;
use strata::{Collection, CollectionOptions, Mode, StepError};
use strata_testkit::{capture, CaptureOptions, Fixture, Replay, ReplayError, SweepRun};

fn fixture(n: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = seeded_redb(&dir.path().join("app.redb"), n);
    capture(&store, "accounts", &CaptureOptions::new()).unwrap()
}

#[test]
fn a_correct_chain_passes_with_kills_in_child_processes() {
    let f = fixture(24);
    let report = Replay::<Account>::new(&f, "accounts", options())
        .batch_rows(4)
        .run();
    report.assert_ok();
    assert_eq!(report.rows, 24);
    assert!(report.boundaries >= 5, "{report}");
    assert_eq!(report.kills, report.boundaries);
    assert!(report.killed_children, "{report}");
}

/// A fixture of `accounts` replayed as `orders` (another collection's name, whatever its
/// type and steps) is refused before anything runs, in one error naming the file and both
/// collections. (It was replayed, and showed only as rows that do not read.)
#[test]
fn a_fixture_of_another_collection_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("accounts.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    fixture(8).write_to(&mut file).unwrap();
    drop(file);
    let f = Fixture::read(&path).unwrap();
    let report = strata_testkit::replay::<Account>(&f, "orders", options());
    assert!(!report.is_ok());
    assert_eq!(
        report.refused,
        Some(ReplayError::CollectionMismatch {
            file: Some(path.clone()),
            fixture_collection: "accounts".into(),
            collection: "orders".into(),
        }),
        "{report}"
    );
    // Nothing ran: no row, no sweep, no kill, no per-row error.
    assert_eq!((report.rows, report.boundaries, report.kills), (0, 0, 0));
    assert!(
        report.failures.is_empty() && report.problems.is_empty(),
        "{report}"
    );
    let text = report.to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    for part in [
        path.display().to_string().as_str(),
        "captured from collection `accounts`",
        "this replay is of collection `orders`",
        "strata fixture capture --collection orders",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    // A fixture captured in this process has no file, and says so.
    let in_memory = Replay::<Account>::new(&fixture(4), "orders", options()).run();
    let text = in_memory.to_string();
    assert!(
        text.contains("the fixture (not read from a file) was captured from collection `accounts`"),
        "{text}"
    );
}

/// A fixture file written by an earlier build (format 1, frozen in
/// `tests/fixtures/accounts-format1.jsonl`: 8 rows of `accounts`, v1..v4) still reads and
/// replays against its collection.
#[test]
fn a_format_1_fixture_file_still_replays() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/accounts-format1.jsonl");
    let f = Fixture::read(&path).unwrap();
    assert_eq!(
        (f.header.format, f.header.collection.as_str()),
        (1, "accounts")
    );
    let report = Replay::<Account>::new(&f, "accounts", options())
        .batch_rows(4)
        .kills(false)
        .run();
    report.assert_ok();
    assert_eq!(report.rows, 8);
    assert_eq!(report.refused, None);
}

#[test]
fn a_broken_step_is_reported_for_exactly_its_rows() {
    let f = fixture(16);
    // Step 3 -> 4 fails for the rows whose balance is a multiple of 500.
    let broken = options_with_step3(|o| {
        if o.get("balance_cents").and_then(|v| v.as_i64()).unwrap_or(0) % 500 == 0 {
            return Err(StepError::new("balance multiple of 500"));
        }
        o.insert("steps".into(), json!(1));
        Ok(())
    });
    let report = Replay::<Account>::new(&f, "accounts", broken)
        .kills(false)
        .run();
    assert!(!report.is_ok());
    let keys: Vec<&str> = report
        .failures_of("read")
        .iter()
        .map(|r| r.key.as_str())
        .collect();
    // Rows below v4 with i % 5 == 0: a000 (v1), a005 (v2), a010 (v3), a015 (v4: not upcast).
    assert_eq!(keys, ["a000", "a005", "a010"], "{report}");
}

#[test]
fn a_step_that_breaks_only_when_a_version_is_skipped_is_found() {
    let f = fixture(12);
    // Step 3 -> 4 needs `tier` as v3 writers stored it ("gold"); a v1 or v2 row reaches v3
    // through step 2 -> 3, which writes "basic" — this step assumes it never sees that.
    let fragile = options_with_step3(|o| {
        if o.get("tier") != Some(&json!("gold")) {
            return Err(StepError::new("tier is not gold"));
        }
        o.insert("steps".into(), json!(1));
        Ok(())
    });
    let report = Replay::<Account>::new(&f, "accounts", fragile)
        .kills(false)
        .run();
    let failed: Vec<(&str, i32)> = report
        .failures_of("read")
        .iter()
        .map(|r| (r.key.as_str(), r.stored_version))
        .collect();
    assert_eq!(
        failed,
        [
            ("a000", 1),
            ("a001", 2),
            ("a004", 1),
            ("a005", 2),
            ("a008", 1),
            ("a009", 2)
        ],
        "{report}"
    );
}

#[test]
fn a_kill_replay_finds_a_sweep_that_rewrites_rows_twice() {
    let f = fixture(12);
    // A test double with no checkpoint: every run rewrites every row from the start.
    let double = |c: &Collection<Account>, run: &SweepRun| -> Result<(), String> {
        let keys: Vec<String> = c.iter().map(|d| d.unwrap().key).collect();
        for chunk in keys.chunks(run.batch_rows()) {
            run.boundary();
            for k in chunk {
                let v = c.get(k).map_err(|e| e.to_string())?.unwrap();
                c.put(k, &v).map_err(|e| e.to_string())?;
            }
        }
        run.boundary();
        Ok(())
    };
    let report = Replay::<Account>::new(&f, "accounts", options())
        .batch_rows(4)
        .sweep_with(double)
        .run();
    assert!(!report.is_ok());
    let twice = report.failures_of("kill at boundary");
    assert!(
        twice
            .iter()
            .any(|r| r.reason.contains("rewritten more than once")),
        "{report}"
    );
    // The reads themselves are fine: only the sweep is at fault.
    assert!(report.failures_of("read").is_empty(), "{report}");
}

fn options_with_step3(
    step: impl Fn(&mut strata::JsonObject) -> Result<(), StepError> + Send + Sync + 'static,
) -> CollectionOptions {
    let base = options();
    let mut o = CollectionOptions::new().identity_fields(["id"]);
    for s in base.steps().iter().filter(|s| s.from() < 3) {
        o = o.step(s.clone());
    }
    o.upcast(3, Mode::Eager, step)
}

/// A later build's shape that drops `tier`: not additive.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Slim {
    id: String,
    balance_cents: i64,
    email: String,
    steps: i64,
}

#[test]
fn schema_check_and_plan_run_against_the_fixtures_history() {
    use strata::policy::additive_only;
    use strata::policy::SchemaOptions;
    let dir = tempfile::tempdir().unwrap();
    let store = seeded_redb(&dir.path().join("app.redb"), 8);
    // The v4 build declares its schema: the baseline and its history are recorded.
    let governed = || options().schema(SchemaOptions::of::<Account>().strategy(additive_only()));
    strata::Database::builder(store.clone())
        .open()
        .unwrap()
        .collection::<Account>("accounts", governed())
        .unwrap();
    let f = capture(&store, "accounts", &CaptureOptions::new()).unwrap();
    assert_eq!(f.header.schema_history.len(), 1);
    let same = Replay::<Account>::new(&f, "accounts", governed())
        .kills(false)
        .run();
    same.assert_ok();
    assert_eq!((same.schema_check, same.schema_plan), (Some(0), Some(0)));
    // A build that drops a field under `additive_only` is rejected by the check.
    let slim = options().schema(SchemaOptions::of::<Slim>().strategy(additive_only()));
    let rejected = Replay::<Slim>::new(&f, "accounts", slim).kills(false).run();
    assert_eq!(rejected.schema_check, Some(6), "{rejected}");
    assert!(!rejected.is_ok());
}
