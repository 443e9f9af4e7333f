//! Fault injection at every store call of `strata migrate`, the eager sweep and the
//! coordinated cutover: the N-th read (or write batch) fails, for every N until the
//! operation completes without reaching N. After each failure: a clear error, the store
//! still opens and reads, nothing is half-applied (every document is either untouched or
//! fully rewritten, markers, fence and checkpoints consistent with the documents), and a
//! rerun completes with the same final state as a run without faults.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use strata::clock::ManualClock;
use strata::layout;
use strata::layout::envelope::{self, Envelope};
use strata::layout::header::{header_key, SchemaHeader};
use strata::layout::keys::FENCE_KEY;
use strata::migrate::{Migrator, RecordStep, Registry, TableMigrations};
use strata::ops::cutover::{cutover_key, CutoverOptions};
use strata::ops::sweep::SweepOptions;
use strata::ops::sweep::{SweepMarker, SweepNote};
use strata::pass::PassLimits;
use strata::policy::{coordinated_cutover, Fence, FenceState, PolicyConfig, SchemaOptions};
use strata::CollectionOptions;
use strata::TableDef;
use strata::{Collection, Database};
use strata::{Mode, StepError};
use strata_store::faults::{FaultKind, FaultyStore};
use strata_store::{Batch, KvRead, KvWrite, MemoryStore, Store};

/// The records under `prefix`.
fn under(m: &MemoryStore, prefix: &[u8]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    m.snapshot()
        .into_iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .collect()
}

/// The error and its sources, one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

fn table() -> TableDef {
    TableDef::new("t", 900, b"__nx/t/".to_vec(), 1).with_decoder(Arc::new(|_, _| Ok(())))
}

fn migrator<'a>() -> Migrator<'a> {
    let registry =
        Registry::new().table(TableMigrations::new(table()).step(RecordStep::certify(0, 1)));
    Migrator::new(registry)
        .unwrap()
        .limits(PassLimits::new(2, 1 << 20).unwrap())
}

fn data(m: &MemoryStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    m.snapshot()
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"__nx/t/"))
        .collect()
}

#[test]
fn migrate_survives_a_failure_at_every_store_call() {
    let seed = || {
        let m = MemoryStore::new();
        let mut batch = Batch::new();
        for i in 0..7 {
            batch = batch.set(
                format!("__nx/t/k{i}").into_bytes(),
                format!("v{i}").into_bytes(),
            );
        }
        m.apply(batch).unwrap();
        m
    };
    let reference = seed();
    migrator().run(&Store::new(reference.clone())).unwrap();
    let expected = settled(&reference);
    for kind in [FaultKind::Write, FaultKind::Read] {
        let mut sites = 0;
        for n in 1.. {
            assert!(
                n < 500,
                "{kind:?}: the migration never stopped reaching new sites"
            );
            let m = seed();
            let before = data(&m);
            let faulty = FaultyStore::new(m.clone(), kind, n);
            let result = migrator().run(&Store::new(faulty.clone()));
            if faulty.calls() < n {
                assert!(result.is_ok(), "{kind:?}: no fault");
                assert_eq!(settled(&m), expected);
                break;
            }
            sites += 1;
            let site = format!("{kind:?} call {n}");
            let e = result.map(|_| ()).expect_err(&site);
            let msg = chain(&e);
            assert!(msg.contains("injected fault"), "{site}: {msg}");
            // Nothing half-applied: data untouched, header old (absent) or new, a
            // checkpoint only while the header is old, and inside the table.
            assert_eq!(data(&m), before, "{site} changed data records");
            let snap = m.snapshot();
            let header = snap
                .get(&header_key("t"))
                .map(|b| SchemaHeader::decode(b).unwrap());
            assert!(
                header.is_none() || header.map(|h| h.version) == Some(1),
                "{site}: header {header:?}"
            );
            if let Some(ck) = snap.get(&strata::layout::header::checkpoint_key("t")) {
                assert!(header.is_none(), "{site}: checkpoint left after the header");
                let c = strata::migrate::MigrationCheckpoint::decode(ck).unwrap();
                assert!(c.cursor.starts_with(b"__nx/t/"), "{site}: {c:?}");
            }
            // The store opens again and a rerun completes to the fault-free state.
            migrator()
                .run(&Store::new(m.clone()))
                .unwrap_or_else(|e| panic!("rerun after {site}: {e}"));
            assert_eq!(settled(&m), expected, "{site}: final state differs");
        }
        println!("migrate: {sites} {kind:?} sites failed, each recovered");
        assert!(sites >= 2, "{kind:?}: only {sites} sites were exercised");
    }
}

/// Issue bullet: a dry run after a killed migrate reports the resume point instead of a
/// false "stale checkpoint"; the real migrate then completes.
#[test]
fn dry_run_after_an_interrupted_migrate_is_resumable() {
    let m = MemoryStore::new();
    let mut batch = Batch::new();
    for i in 0..7 {
        batch = batch.set(
            format!("__nx/t/k{i}").into_bytes(),
            format!("v{i}").into_bytes(),
        );
    }
    m.apply(batch).unwrap();
    // The second batch fails: the first one's checkpoint stays, the header is not written.
    let faulty = Store::new(FaultyStore::new(m.clone(), FaultKind::Write, 2));
    assert!(migrator().run(&faulty).is_err());
    assert!(m
        .snapshot()
        .contains_key(&strata::layout::header::checkpoint_key("t")));
    assert!(!m.snapshot().contains_key(&header_key("t")));

    let mut resumed = None;
    migrator()
        .dry_run(true)
        .on_event(|e| {
            if let strata::migrate::MigrationEvent::StepStarted { resumed_after, .. } = e {
                resumed = resumed_after.map(<[u8]>::to_vec);
            }
        })
        .run(&Store::new(m.clone()))
        .unwrap_or_else(|e| panic!("dry run after an interrupted migrate: {e}"));
    assert_eq!(resumed.as_deref(), Some(&b"__nx/t/k1"[..]));
    // The dry run wrote nothing; the real run completes.
    assert!(!m.snapshot().contains_key(&header_key("t")));
    migrator().run(&Store::new(m.clone())).unwrap();
    let h = SchemaHeader::decode(&m.snapshot()[&header_key("t")]).unwrap();
    assert_eq!(h.version, 1);
}

// ---------------------------------------------------------------------------------------
// The eager sweep.

const SWEPT: &str = "swept";
const SWEEP_DOCS: usize = 7;

#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    id: String,
    n: i64,
}

fn bump(o: &mut serde_json::Map<String, Value>) -> Result<(), StepError> {
    let n = o
        .get("n")
        .and_then(Value::as_i64)
        .ok_or_else(|| StepError::new("missing counter `n`"))?;
    o.insert("n".into(), json!(n + 1));
    Ok(())
}

fn swept(db: &Database) -> Result<Collection<Doc>, strata::CollectionError> {
    db.collection(
        SWEPT,
        CollectionOptions::new()
            .identity_fields(["id"])
            .upcast(1, Mode::Lazy, bump)
            .upcast(2, Mode::Eager, bump),
    )
}

fn sweep_options() -> SweepOptions {
    SweepOptions::new()
        .runner_id("faults")
        .clock(Arc::new(ManualClock::new(1_000)))
        .limits(PassLimits::new(2, 1 << 20).unwrap())
}

/// A store with the collection registered and `SWEEP_DOCS` documents at v1 (`n == 0`).
fn seed_sweep() -> MemoryStore {
    let m = MemoryStore::new();
    let db = Database::builder(Store::new(m.clone())).open().unwrap();
    swept(&db).unwrap();
    let mut b = Batch::new();
    for i in 0..SWEEP_DOCS {
        let id = format!("d{i}");
        b = b.set(
            layout::keys::doc_key(SWEPT, &id),
            envelope::encode(
                Envelope::new(1, 1),
                format!(r#"{{"id":"{id}","n":0}}"#).as_bytes(),
            ),
        );
    }
    m.apply(b).unwrap();
    m
}

/// Opens the database, declares the collection and sweeps it.
fn run_sweep(store: Store) -> Result<SweepNote, String> {
    let db = Database::builder(store).open().map_err(|e| chain(&e))?;
    let c = swept(&db).map_err(|e| chain(&e))?;
    c.sweep(sweep_options())
        .map(|r| r.note)
        .map_err(|e| chain(&e))
}

/// Every document untouched (v1, n 0) or fully upcast (v3, n 2), none lost; a marker
/// (if any) decodes and its counters match the upcast documents. Returns the upcast count.
fn check_sweep_state(m: &MemoryStore, site: &str) -> usize {
    let docs = under(m, &layout::keys::doc_prefix(SWEPT));
    assert_eq!(docs.len(), SWEEP_DOCS, "{site}: documents lost");
    let mut upcast = 0;
    for (k, v) in &docs {
        let (env, json) = envelope::decode(v).unwrap();
        let doc: Value = serde_json::from_slice(json).unwrap();
        assert_eq!(env.lock_version, 1, "{site}: lock version changed");
        match (env.payload_version, doc["n"].as_i64()) {
            (1, Some(0)) => {}
            (3, Some(2)) => upcast += 1,
            other => panic!(
                "{site}: {} half-applied: {other:?}",
                String::from_utf8_lossy(k)
            ),
        }
    }
    if let Some(b) = m.snapshot().get(&layout::keys::sweep_key(SWEPT)) {
        let marker = SweepMarker::decode(SWEPT, b).unwrap();
        if marker.in_progress.is_some() {
            assert_eq!(
                marker.counters.rewritten as usize, upcast,
                "{site}: marker counters drifted from the documents"
            );
        }
    }
    upcast
}

#[test]
fn the_eager_sweep_survives_a_failure_at_every_store_call() {
    // The reference: a run without faults.
    let reference = seed_sweep();
    assert_eq!(
        run_sweep(Store::new(reference.clone())),
        Ok(SweepNote::Complete)
    );
    assert_eq!(check_sweep_state(&reference, "reference"), SWEEP_DOCS);
    let expected = settled(&reference);

    for kind in [FaultKind::Write, FaultKind::Read] {
        let mut sites = 0;
        for n in 1.. {
            assert!(
                n < 500,
                "{kind:?}: the sweep never stopped reaching new sites"
            );
            let m = seed_sweep();
            let faulty = FaultyStore::new(m.clone(), kind, n);
            let result = run_sweep(Store::new(faulty.clone()));
            if faulty.calls() < n {
                assert_eq!(result, Ok(SweepNote::Complete), "{kind:?} no fault");
                assert_eq!(settled(&m), expected);
                break;
            }
            sites += 1;
            let site = format!("{kind:?} call {n}");
            match &result {
                Err(msg) => assert!(msg.contains("injected fault"), "{site}: {msg}"),
                Ok(note) => assert_ne!(
                    *note,
                    SweepNote::Complete,
                    "{site}: a failed sweep reported complete"
                ),
            }
            check_sweep_state(&m, &site);
            // The store opens again and a rerun completes with the fault-free state.
            let rerun = run_sweep(Store::new(m.clone()));
            assert_eq!(rerun, Ok(SweepNote::Complete), "{site}: rerun");
            assert_eq!(check_sweep_state(&m, &site), SWEEP_DOCS);
            assert_eq!(settled(&m), expected, "{site}: final state differs");
        }
        println!("sweep: {sites} {kind:?} sites failed, each recovered");
        assert!(sites >= 5, "{kind:?}: only {sites} sites were exercised");
    }
}

// ---------------------------------------------------------------------------------------
// The coordinated cutover.

const INVOICES: &str = "invoices";
const CUTOVER_DOCS: usize = 7;

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvOld {
    id: String,
    total: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Amount {
    gross: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct InvNew {
    id: String,
    amount: Amount,
}

fn reshape(d: Value) -> Result<Value, String> {
    Ok(json!({"id": d["id"], "amount": {"gross": d["total"]}}))
}

/// A deterministic config: manual clock, no heartbeat thread, 1 s stale window, 5 s lease.
fn policy(clock: &ManualClock) -> PolicyConfig {
    PolicyConfig::new()
        .clock(Arc::new(clock.clone()))
        .heartbeat(None)
        .stale_after_ms(1_000)
        .lease_ms(5_000)
}

/// Generation 0: `invoices` in the old shape with `CUTOVER_DOCS` documents.
fn seed_cutover(clock: &ManualClock) -> MemoryStore {
    let m = MemoryStore::new();
    let db = Database::builder(Store::new(m.clone()))
        .policy(policy(clock))
        .open()
        .unwrap();
    let inv = db
        .collection::<InvOld>(
            INVOICES,
            CollectionOptions::new().schema(SchemaOptions::of::<InvOld>()),
        )
        .unwrap();
    for i in 0..CUTOVER_DOCS {
        let id = format!("i{i}");
        inv.put(
            &id,
            &InvOld {
                id: id.clone(),
                total: i as f64,
            },
        )
        .unwrap();
    }
    m
}

/// Opens a new handle, declares the new shape (a pending coordinated cutover) and runs
/// the cutover in batches of 2.
fn run_cutover(store: Store, clock: &ManualClock) -> Result<u64, String> {
    let db = Database::builder(store)
        .policy(policy(clock))
        .open()
        .map_err(|e| chain(&e))?;
    db.collection::<InvNew>(
        INVOICES,
        CollectionOptions::new()
            .schema(SchemaOptions::of::<InvNew>().strategy(coordinated_cutover(reshape))),
    )
    .map_err(|e| chain(&e))?;
    let poll_clock = clock.clone();
    db.run_schema_cutover(
        CutoverOptions::new()
            .limits(PassLimits::new(2, 1 << 20).unwrap())
            .poll_interval(std::time::Duration::ZERO)
            .quiesce_timeout_ms(60_000)
            .poll(move || poll_clock.advance(100)),
    )
    .map(|r| r.generation)
    .map_err(|e| chain(&e))
}

/// Every document in the old shape (lock 1) or rewritten exactly once (new shape, lock
/// 2); the fence decodes and agrees with the documents. Returns (generation, rewritten).
fn check_cutover_state(m: &MemoryStore, site: &str) -> (u64, usize) {
    let store = Store::new(m.clone());
    let docs = under(m, &layout::keys::doc_prefix(INVOICES));
    assert_eq!(docs.len(), CUTOVER_DOCS, "{site}: documents lost");
    let mut rewritten = 0;
    for (k, v) in &docs {
        let (env, json) = envelope::decode(v).unwrap();
        let doc: Value = serde_json::from_slice(json).unwrap();
        let i: f64 = String::from_utf8_lossy(&k[k.len() - 1..]).parse().unwrap();
        if env.lock_version == 1 {
            assert_eq!(doc, json!({"id": doc["id"], "total": i}), "{site}");
        } else {
            assert_eq!(env.lock_version, 2, "{site}: rewritten more than once");
            assert_eq!(
                doc,
                json!({"id": doc["id"], "amount": {"gross": i}}),
                "{site}"
            );
            rewritten += 1;
        }
    }
    let fence = Fence::read(&store).unwrap_or_else(|e| panic!("{site}: fence: {e}"));
    match (fence.state, fence.generation) {
        (FenceState::Normal, 0) => assert_eq!(rewritten, 0, "{site}: rewrote before the fence"),
        (FenceState::Draining, 0) => assert_eq!(rewritten, 0, "{site}: rewrote while draining"),
        (FenceState::Migrating, 0) => {}
        (FenceState::Normal | FenceState::Complete, 1) => {
            assert_eq!(
                rewritten, CUTOVER_DOCS,
                "{site}: bumped before every rewrite"
            );
        }
        other => panic!("{site}: unexpected fence {other:?}"),
    }
    if fence.generation == 1 && fence.state == FenceState::Normal {
        assert!(fence.pending.is_empty(), "{site}");
        assert_eq!(store.get(&cutover_key(INVOICES)).unwrap(), None, "{site}");
    }
    (fence.generation, rewritten)
}

/// The final state to compare: every record except client presence (ids are random per
/// handle) and the fence (its coordinator and lease differ), plus the fence's state,
/// generation and pending list.
/// The store's records with each bulk-operation manifest's wall-clock stamp (`at_ms`)
/// zeroed: a rerun certifies the same records at another instant.
fn settled(m: &MemoryStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    m.snapshot()
        .into_iter()
        .map(|(k, v)| {
            if k.starts_with(strata_store::manifest::MANIFEST_PREFIX) {
                let mut doc = strata_store::manifest::Manifest::decode(&v).unwrap();
                doc.at_ms = 0;
                (k, doc.encode())
            } else {
                (k, v)
            }
        })
        .collect()
}

fn cutover_final(m: &MemoryStore) -> (BTreeMap<Vec<u8>, Vec<u8>>, String) {
    let fence = Fence::read(&Store::new(m.clone())).unwrap();
    let records = settled(m)
        .into_iter()
        // Build records (deploy windows) are keyed by client id too.
        .filter(|(k, _)| {
            !k.starts_with(b"__nx/clients/")
                && !k.starts_with(b"__nx/builds/")
                && k.as_slice() != FENCE_KEY
        })
        .collect();
    (
        records,
        format!("{:?} {} {:?}", fence.state, fence.generation, fence.pending),
    )
}

#[test]
fn the_coordinated_cutover_survives_a_failure_at_every_store_call() {
    let clock = ManualClock::new(1_000);
    let reference = seed_cutover(&clock);
    assert_eq!(run_cutover(Store::new(reference.clone()), &clock), Ok(1));
    assert_eq!(
        check_cutover_state(&reference, "reference"),
        (1, CUTOVER_DOCS)
    );
    let expected = cutover_final(&reference);

    for kind in [FaultKind::Write, FaultKind::Read] {
        let mut sites = 0;
        for n in 1.. {
            assert!(
                n < 2000,
                "{kind:?}: the cutover never stopped reaching new sites"
            );
            let clock = ManualClock::new(1_000);
            let m = seed_cutover(&clock);
            let faulty = FaultyStore::new(m.clone(), kind, n);
            let result = run_cutover(Store::new(faulty.clone()), &clock);
            if faulty.calls() < n {
                assert_eq!(result, Ok(1), "{kind:?} no fault");
                assert_eq!(cutover_final(&m), expected);
                break;
            }
            sites += 1;
            let site = format!("{kind:?} call {n}");
            if let Err(msg) = &result {
                assert!(msg.contains("injected fault"), "{site}: {msg}");
            }
            check_cutover_state(&m, &site);
            // The store opens again; a new client, once the failed one's lease and
            // presence expired, reruns the cutover to the fault-free state.
            clock.advance(10_000);
            let rerun = run_cutover(Store::new(m.clone()), &clock);
            assert_eq!(rerun, Ok(1), "{site}: rerun");
            assert_eq!(check_cutover_state(&m, &site), (1, CUTOVER_DOCS));
            assert_eq!(cutover_final(&m), expected, "{site}: final state differs");
        }
        println!("cutover: {sites} {kind:?} sites failed, each recovered");
        assert!(sites >= 5, "{kind:?}: only {sites} sites were exercised");
    }
}
