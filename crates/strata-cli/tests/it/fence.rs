//! `strata fence` and `strata fence abort`: the fence of a fresh store, of a store left
//! draining by a quiesce timeout, and of a corrupted record.

use crate::support::{json_of, stderr, stdout, strata_db, with_store};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use strata::clock::ManualClock;
use strata::layout::keys::FENCE_KEY;
use strata::ops::cutover::CutoverOptions;
use strata::policy::{
    additive_only, client_key, coordinated_cutover, ClientRecord, Fence, FenceDoc, FenceState,
    PendingCutover, PolicyConfig, PolicyError, SchemaDeclaration, Verdict, CLIENT_FORMAT,
};
use strata::CollectionOptions;
use strata::Database;
use strata_store::{Batch, KvRead, KvWrite};

/// The document of a command that succeeded (exit 0).
fn ok_json(out: &Output) -> Value {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    json_of(out)
}

fn config(clock: &ManualClock) -> PolicyConfig {
    PolicyConfig::new()
        .clock(Arc::new(clock.clone()))
        .heartbeat(None)
}

#[derive(Debug, Serialize, Deserialize)]
struct InvOld {
    id: String,
    total: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Amount {
    gross: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct InvNew {
    id: String,
    amount: Amount,
}

fn old_schema() -> Value {
    json!({"type":"object","properties":{"id":{"type":"string"},"total":{"type":"number"}},"required":["id","total"]})
}

fn new_schema() -> Value {
    json!({"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"object","properties":{"gross":{"type":"number"}},"required":["gross"]}},"required":["id","amount"]})
}

fn reshape(d: Value) -> Result<Value, String> {
    Ok(json!({"id": d["id"], "amount": {"gross": d["total"]}}))
}

fn cutover_decl(version: i32) -> SchemaDeclaration {
    SchemaDeclaration::new("invoices", new_schema())
        .payload(version, [])
        .strategy(coordinated_cutover(reshape))
        .strategy(additive_only())
}

/// Leaves `db` with its fence `draining`: generation 0 writes two invoices; a holdout
/// client stays open and never heartbeats while a new build declares a coordinated
/// cutover and runs it with a short quiesce timeout. Returns (coordinator id, holdout
/// id, target schema hash).
fn left_draining(db: &Path) -> (String, String, String) {
    let clock = ManualClock::new(1_000);
    with_store(db, |store| {
        {
            let gen0 = Database::builder(store.clone())
                .policy(config(&clock))
                .open()
                .unwrap();
            let inv = gen0
                .collection::<InvOld>("invoices", CollectionOptions::new())
                .unwrap();
            gen0.declare(SchemaDeclaration::new("invoices", old_schema()).payload(1, []))
                .unwrap();
            for (id, total) in [("i1", 100.0), ("i2", 5.0)] {
                inv.put(
                    id,
                    &InvOld {
                        id: id.into(),
                        total,
                    },
                )
                .unwrap();
            }
        }
        let holdout = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        let coord = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        let inv = coord
            .collection::<InvNew>("invoices", CollectionOptions::new())
            .unwrap();
        let outcome = coord.declare(cutover_decl(inv.current_version())).unwrap();
        assert!(
            matches!(outcome.verdict, Verdict::CutoverPending { .. }),
            "{outcome:?}"
        );
        let err = coord
            .run_schema_cutover(
                CutoverOptions::new()
                    .quiesce_timeout_ms(500)
                    .poll(|| clock.advance(250)),
            )
            .unwrap_err();
        let holdout_id = holdout.policy().unwrap().client_id().to_string();
        match &err {
            PolicyError::QuiesceTimeout { holdouts, .. } => {
                assert_eq!(holdouts, std::slice::from_ref(&holdout_id), "{err}")
            }
            other => panic!("expected a quiesce timeout, got {other}"),
        }
        let fence = coord.fence_state().unwrap();
        assert_eq!(fence.state, FenceState::Draining);
        let coordinator = coord.policy().unwrap().client_id().to_string();
        assert_eq!(fence.coordinator.as_deref(), Some(coordinator.as_str()));
        let hash = fence.pending[0].target_hash.clone();
        (coordinator, holdout_id, hash)
    })
}

#[test]
fn a_fresh_store_has_a_normal_fence_at_generation_0() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    with_store(&db, |_| {});

    let v = ok_json(&strata_db(&db, &["fence", "--json"]));
    assert_eq!(v["state"], "normal");
    assert_eq!(v["generation"], 0);
    assert_eq!(v["coordinator"], Value::Null);
    assert_eq!(v["lease_until_ms"], 0);
    assert_eq!(v["pending"], json!([]));
    assert_eq!(v["clients"], json!([]));
    assert_eq!(v["windows"], json!([]));
    assert!(v["now_ms"].as_u64().unwrap() > 0, "{v}");

    let out = strata_db(&db, &["fence"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "state        normal\n",
        "generation   0\n",
        "coordinator  -\n",
        "pending      -\n",
        "windows      -\n",
        "clients      0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    // Reading the fence writes nothing: the absent record stays absent.
    with_store(&db, |store| assert_eq!(store.get(FENCE_KEY).unwrap(), None));

    // Aborting a normal fence is a no-op that says so.
    let out = strata_db(&db, &["fence", "abort"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("fence already normal, nothing to reset: state normal, generation 0, 0 cutover(s) still pending"),
        "{}",
        stdout(&out)
    );
    with_store(&db, |store| assert_eq!(store.get(FENCE_KEY).unwrap(), None));

    // An open deploy window is shown with its operational version.
    with_store(&db, |store| {
        strata::ops::window::open(store, "accts", 1).unwrap()
    });
    let v = ok_json(&strata_db(&db, &["fence", "--json"]));
    assert_eq!(
        v["windows"],
        json!([{"collection": "accts", "operational": 1, "builds": []}])
    );
    let text = stdout(&strata_db(&db, &["fence"]));
    assert!(
        text.contains("window       accts at v1 (live builds: -)\n"),
        "{text}"
    );
}

#[test]
fn fence_on_a_missing_store_is_an_error_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("nope");
    for args in [&["fence"][..], &["fence", "abort"][..]] {
        let out = strata_db(&db, args);
        assert_eq!(out.status.code(), Some(1));
        assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
        assert!(!db.exists());
    }
}

#[test]
fn abort_resets_a_draining_fence_without_bumping_the_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (coordinator, holdout, hash) = left_draining(&db);
    // A client that crashed without closing leaves its presence record behind.
    let crashed = ClientRecord {
        acked_generation: None,
        client: "00000000deadbeef".into(),
        format: CLIENT_FORMAT,
        heartbeat_ms: 1_000,
        opened_generation: 0,
        pid: 4242,
        started_ms: 1_000,
    };
    with_store(&db, |store| {
        store
            .apply(Batch::new().set(client_key(&crashed.client), crashed.encode()))
            .unwrap();
    });

    let v = ok_json(&strata_db(&db, &["fence", "--json"]));
    assert_eq!(v["state"], "draining");
    assert_eq!(v["generation"], 0);
    assert_eq!(v["coordinator"], Value::String(coordinator.clone()));
    assert!(v["lease_until_ms"].as_u64().unwrap() > 1_000, "{v}");
    assert_eq!(
        v["pending"],
        json!([{"collection": "invoices", "target_hash": hash}])
    );
    // The closed holdout and coordinator removed their records; the crashed one stays.
    let clients = v["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 1, "{v}");
    assert_eq!(clients[0]["client"], "00000000deadbeef");
    assert_eq!(clients[0]["pid"], 4242);
    assert!(!v.to_string().contains(&holdout));

    let out = strata_db(&db, &["fence"]);
    let text = stdout(&out);
    assert!(text.contains("state        draining\n"), "{text}");
    assert!(
        text.contains(&format!("coordinator  {coordinator} (lease ")),
        "{text}"
    );
    assert!(
        text.contains(&format!("pending      invoices -> schema {hash}\n")),
        "{text}"
    );
    assert!(text.contains("clients      1\n"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("00000000deadbeef") && l.contains("pid 4242")),
        "{text}"
    );

    let out = strata_db(&db, &["fence", "abort"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "fence reset: state normal, generation 0, 1 cutover(s) still pending (invoices: writes stay fenced until the application's `cutover` command finishes them)\n"
    );

    let v = ok_json(&strata_db(&db, &["fence", "--json"]));
    assert_eq!(v["state"], "normal");
    assert_eq!(v["generation"], 0);
    assert_eq!(v["coordinator"], Value::Null);
    assert_eq!(v["lease_until_ms"], 0);
    assert_eq!(v["pending"].as_array().unwrap().len(), 1);

    // The store is consistent: a new coordinator finishes the cutover from there.
    with_store(&db, |store| {
        let clock = ManualClock::new(100_000);
        store
            .apply(Batch::new().delete(client_key("00000000deadbeef")))
            .unwrap();
        let pdb = Database::builder(store.clone())
            .policy(config(&clock))
            .open()
            .unwrap();
        let inv = pdb
            .collection::<InvNew>("invoices", CollectionOptions::new())
            .unwrap();
        pdb.declare(cutover_decl(inv.current_version())).unwrap();
        let report = pdb.run_schema_cutover(CutoverOptions::new()).unwrap();
        assert_eq!(
            (report.migrated, report.records, report.generation),
            (1, 2, 1)
        );
        assert_eq!(inv.get("i1").unwrap().unwrap().amount.gross, 100.0);
    });
    let v = ok_json(&strata_db(&db, &["fence", "--json"]));
    assert_eq!(
        (v["state"].as_str(), v["generation"].as_u64()),
        (Some("normal"), Some(1))
    );
}

#[test]
fn abort_keeps_a_later_generation_and_answers_in_json() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    with_store(&db, |store| {
        Fence::update(store, |cur| {
            Ok(Some(FenceDoc {
                coordinator: Some("0123456789abcdef".into()),
                generation: 7,
                lease_until_ms: u64::MAX,
                pending: vec![PendingCutover {
                    collection: "notes".into(),
                    target_hash: "ab".repeat(32),
                }],
                state: FenceState::Migrating,
                ..cur.clone()
            }))
        })
        .unwrap();
    });
    let v = ok_json(&strata_db(&db, &["fence", "abort", "--json"]));
    assert_eq!(v["reset"], true);
    assert_eq!(v["rewritten"], false);
    assert_eq!(v["state"], "normal");
    assert_eq!(v["generation"], 7);
    assert_eq!(v["coordinator"], Value::Null);
    assert_eq!(v["lease_until_ms"], 0);
    assert_eq!(v["pending"][0]["collection"], "notes");
    let fence = with_store(&db, |store| Fence::read(store).unwrap());
    assert_eq!(
        (
            fence.state,
            fence.generation,
            fence.coordinator,
            fence.pending.len()
        ),
        (FenceState::Normal, 7, None, 1)
    );
    // Idempotent.
    let v = ok_json(&strata_db(&db, &["fence", "--json", "abort"]));
    assert_eq!(
        (v["reset"].as_bool(), v["generation"].as_u64()),
        (Some(false), Some(7))
    );
}

#[test]
fn a_corrupted_fence_is_refused_until_reset_explicitly() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    with_store(&db, |store| {
        store
            .apply(Batch::new().set(FENCE_KEY.to_vec(), b"{not json".to_vec()))
            .unwrap();
    });
    let out = strata_db(&db, &["fence"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("__nx/fence"), "{}", stderr(&out));

    let out = strata_db(&db, &["fence", "abort"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("__nx/fence") && err.contains("--reset-corrupt"),
        "{err}"
    );
    // Refused: nothing changed.
    with_store(&db, |store| {
        assert_eq!(store.get(FENCE_KEY).unwrap(), Some(b"{not json".to_vec()))
    });

    let out = strata_db(&db, &["fence", "abort", "--reset-corrupt", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("fence reset: state normal, generation 3"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("the unreadable record was rewritten"),
        "{}",
        stdout(&out)
    );
    let fence = with_store(&db, |store| Fence::read(store).unwrap());
    assert_eq!(
        fence,
        FenceDoc {
            generation: 3,
            ..FenceDoc::default()
        }
    );
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The `N` in `last heartbeat N ms ago` on the line of `client`.
fn heartbeat_age(text: &str, client: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.contains(client))
        .unwrap_or_else(|| panic!("no line for {client} in:\n{text}"));
    let rest = line
        .split("last heartbeat ")
        .nth(1)
        .unwrap_or_else(|| panic!("no `last heartbeat` in {line:?}"));
    let (n, tail) = rest.split_once(' ').unwrap();
    assert!(tail.starts_with("ms ago"), "{line:?}");
    n.parse()
        .unwrap_or_else(|e| panic!("heartbeat age {n:?} in {line:?}: {e}"))
}

#[test]
fn clients_show_their_heartbeat_and_acknowledged_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    // A client that acknowledged the drain to generation 1, and one that never did.
    let heartbeat = wall_ms();
    let acked = ClientRecord {
        acked_generation: Some(1),
        client: "aaaaaaaaaaaaaaaa".into(),
        format: CLIENT_FORMAT,
        heartbeat_ms: heartbeat,
        opened_generation: 0,
        pid: 1111,
        started_ms: heartbeat - 5_000,
    };
    let silent = ClientRecord {
        acked_generation: None,
        client: "bbbbbbbbbbbbbbbb".into(),
        heartbeat_ms: heartbeat - 60_000,
        pid: 2222,
        ..acked.clone()
    };
    with_store(&db, |store| {
        store
            .apply(
                Batch::new()
                    .set(client_key(&acked.client), acked.encode())
                    .set(client_key(&silent.client), silent.encode()),
            )
            .unwrap();
    });

    let v = ok_json(&strata_db(&db, &["fence", "--json"]));
    let clients = v["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 2, "{v}");
    assert_eq!(
        clients[0],
        json!({
            "acked_generation": 1,
            "client": "aaaaaaaaaaaaaaaa",
            "format": CLIENT_FORMAT,
            "heartbeat_ms": heartbeat,
            "opened_generation": 0,
            "pid": 1111,
            "started_ms": heartbeat - 5_000,
        })
    );
    assert_eq!(clients[1]["acked_generation"], Value::Null, "{v}");
    assert_eq!(clients[1]["heartbeat_ms"], heartbeat - 60_000, "{v}");
    assert!(v["now_ms"].as_u64().unwrap() >= heartbeat, "{v}");

    let before = wall_ms();
    let out = strata_db(&db, &["fence"]);
    let after = wall_ms();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("clients      2\n"), "{text}");
    let line = |id: &str| text.lines().find(|l| l.contains(id)).unwrap().to_string();
    let a = line("aaaaaaaaaaaaaaaa");
    assert!(a.contains("pid 1111"), "{a}");
    assert!(a.contains("opened at gen 0"), "{a}");
    assert!(a.contains("last heartbeat "), "{a}");
    assert!(a.trim_end().ends_with("acked gen 1"), "{a}");
    let b = line("bbbbbbbbbbbbbbbb");
    assert!(b.trim_end().ends_with("acked -"), "{b}");
    // The age is measured against the wall clock while the command ran.
    let age = heartbeat_age(&text, "aaaaaaaaaaaaaaaa");
    assert!(
        (before - heartbeat..=after - heartbeat).contains(&age),
        "age {age} outside {}..={}",
        before - heartbeat,
        after - heartbeat
    );
    let age = heartbeat_age(&text, "bbbbbbbbbbbbbbbb");
    assert!(
        (before - heartbeat + 60_000..=after - heartbeat + 60_000).contains(&age),
        "{text}"
    );
}
