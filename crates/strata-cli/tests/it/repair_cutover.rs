//! Repair is idempotent and never loses progress (#23 item 4): after a cutover
//! interrupted under a fence that was then damaged, `strata repair --apply` run 1, 2 and
//! 3 times converges after the first run and keeps the cutover's checkpoint (the
//! rewritten fence keeps the cutover pending toward the schema the checkpoint names);
//! the cutover then resumes and transforms each row exactly once. Before #23 the first
//! run dropped the pending cutover and the second deleted its checkpoint, so the next
//! cutover transformed the first rows again.

use crate::support::{json_of, stderr, strata_db};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use strata::clock::ManualClock;
use strata::ops::cutover::CutoverOptions;
use strata::policy::{coordinated_cutover, FenceState, PolicyConfig, SchemaOptions};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite, Store};

const ROWS: usize = 40;

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvOld {
    id: String,
    total: u64,
}

/// The new shape counts how many times the cutover's transform ran on a row.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvNew {
    id: String,
    total: u64,
    transformed: u32,
}

/// Works on its own output too (a second run would make `transformed` 2).
fn transform(mut d: serde_json::Value) -> Result<serde_json::Value, String> {
    let n = d["transformed"].as_u64().unwrap_or(0);
    d["transformed"] = json!(n + 1);
    Ok(d)
}

fn config(clock: &ManualClock) -> PolicyConfig {
    PolicyConfig::new()
        .clock(Arc::new(clock.clone()))
        .heartbeat(None)
}

fn open(path: &Path) -> Store {
    strata_redb::RedbStore::open_existing(path)
        .unwrap()
        .into_store()
}

fn new_shape(store: &Store, clock: &ManualClock) -> (Database, strata::Collection<InvNew>) {
    let db = Database::builder(store.clone())
        .policy(config(clock))
        .open()
        .unwrap();
    let inv = db
        .collection::<InvNew>(
            "invoices",
            CollectionOptions::new()
                .schema(SchemaOptions::of::<InvNew>().strategy(coordinated_cutover(transform))),
        )
        .unwrap();
    (db, inv)
}

fn raw(path: &Path, key: &[u8]) -> Option<Vec<u8>> {
    let store = open(path);
    store.get(key).unwrap()
}

#[test]
fn repair_after_an_interrupted_cutover_with_a_damaged_fence_converges_and_keeps_it_resumable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bank.redb");
    let clock = ManualClock::new(1_000);
    {
        let store = strata_redb::RedbStore::create_store(&path).unwrap();
        let db = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        let inv = db
            .collection::<InvOld>(
                "invoices",
                CollectionOptions::new().schema(SchemaOptions::of::<InvOld>()),
            )
            .unwrap();
        for i in 0..ROWS {
            let id = format!("i{i:03}");
            inv.put(
                &id,
                &InvOld {
                    id: id.clone(),
                    total: i as u64,
                },
            )
            .unwrap();
        }
    }
    // The cutover stops after two batches of 5 rows: fence migrating, checkpoint kept.
    {
        let store = open(&path);
        let (db, _) = new_shape(&store, &clock);
        let limits = strata::pass::PassLimits::new(5, 1 << 20).unwrap();
        let mut polls = 0;
        let err = db
            .run_schema_cutover(CutoverOptions::new().limits(limits).abort_when(|| {
                polls += 1;
                polls > 2
            }))
            .unwrap_err();
        assert!(err.to_string().contains("abort"), "{err}");
        assert_eq!(db.fence_state().unwrap().state, FenceState::Migrating);
        // The fence is damaged (a torn write, a bad restore).
        store
            .unguarded_backend()
            .apply(Batch::new().set(b"__nx/fence".to_vec(), b"{torn".to_vec()))
            .unwrap();
        store.flush().unwrap();
    }
    let checkpoint = raw(&path, b"__nx/cutover/invoices").expect("the cutover's checkpoint");

    // Run 1 rewrites the fence, keeping the cutover pending; runs 2 and 3 change nothing.
    let out = strata_db(&path, &["repair", "--apply", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["applied"], true, "{doc}");
    let why = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "fence")
        .unwrap()["why"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(why.contains("invoices stay pending"), "{why}");
    let fence_after_first = raw(&path, b"__nx/fence").unwrap();
    for run in 2..=3 {
        let out = strata_db(&path, &["repair", "--apply", "--json"]);
        assert_eq!(out.status.code(), Some(0), "run {run}: {}", stderr(&out));
        let doc = json_of(&out);
        assert_eq!(doc["applied"], false, "run {run}: {doc}");
        assert_eq!(doc["changes"], 0, "run {run}: {doc}");
        assert_eq!(
            raw(&path, b"__nx/fence").unwrap(),
            fence_after_first,
            "run {run}"
        );
        assert_eq!(
            raw(&path, b"__nx/cutover/invoices").as_ref(),
            Some(&checkpoint),
            "run {run}: the checkpoint of the pending cutover was deleted"
        );
    }

    // The cutover resumes after its checkpoint: every row transformed exactly once.
    let store = open(&path);
    let (db, inv) = new_shape(&store, &clock);
    let report = db.run_schema_cutover(CutoverOptions::new()).unwrap();
    assert!(report.collections[0].resumed_from.is_some(), "{report:?}");
    for i in 0..ROWS {
        let row = inv.get(&format!("i{i:03}")).unwrap().unwrap();
        assert_eq!(
            row.transformed, 1,
            "row {i} was transformed {} times",
            row.transformed
        );
        assert_eq!(row.total, i as u64);
    }
    assert_eq!(db.fence_state().unwrap().state, FenceState::Normal);
}
