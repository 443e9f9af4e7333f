//! Migrating by path, interruption and resume without double processing, flushing on
//! success and on failure, and the write lease (writers wait, readers continue).

use super::fixture::fixture_records;
use super::*;

#[test]
fn migrate_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let records: Vec<(Vec<u8>, Vec<u8>)> = fixture_records()
        .into_iter()
        .map(|(_, k, v)| (k, v))
        .collect();
    {
        let store = strata_sled::SledStore::open_store(&path).unwrap();
        for (k, v) in &records {
            put(&store, k, v);
        }
        store.flush().unwrap();
    }
    {
        let store = strata_sled::SledStore::open_existing(&path)
            .unwrap()
            .into_store();
        assert!(validate_and_init(&store, &numax::catalog())
            .unwrap_err()
            .is_migration_required());
        let report = numax_migrator()
            .limits(limits(2, 4096))
            .run(&store)
            .unwrap();
        assert!(report.tables.iter().all(|t| t.to == 1));
    }
    let store = strata_sled::SledStore::open_existing(&path)
        .unwrap()
        .into_store();
    assert!(validate_and_init(&store, &numax::catalog())
        .unwrap()
        .initialized
        .is_empty());
    for (k, v) in &records {
        assert_eq!(store.get(k).unwrap().as_ref(), Some(v));
    }
}

#[test]
fn missing_path_is_refused_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing");
    let err = strata_sled::SledStore::open_existing(&path).unwrap_err();
    assert!(
        matches!(err, strata_store::StoreError::NotFound { .. }),
        "{err}"
    );
    assert!(!path.exists());
}

#[test]
fn interrupted_migration_resumes_without_double_processing() {
    let (store, m) = mem();
    let t = table("int", 130, 1);
    for i in 1..=5 {
        put(
            &store,
            &key("int", &format!("r{i}")),
            format!("v{i}").as_bytes(),
        );
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let registry = || {
        let calls = calls.clone();
        Registry::new().table(TableMigrations::new(t.clone()).step(RecordStep::records(
            0,
            1,
            move |r: &RecordRef<'_>| {
                calls.fetch_add(1, Ordering::SeqCst);
                let mut idx = b"__nx/int-index/".to_vec();
                idx.extend_from_slice(r.value);
                Ok(vec![RecordRef::create(idx, r.key.to_vec())])
            },
        )))
    };
    // The second write (batch r3, r4) fails: the process "dies" there.
    let faulty = FaultyStore::crash_at_write(store.unguarded_backend(), 2);
    let err = Migrator::new(registry())
        .unwrap()
        .limits(limits(2, 4096))
        .run(&Store::new(faulty.clone()))
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::Pass(PassError::Store { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("rerun to resume"), "{err}");
    assert_eq!(err.checkpoint(), Some(key("int", "r2").as_slice()));
    assert_eq!(faulty.writes(), 2);
    let snap = m.snapshot();
    assert!(snap.contains_key(b"__nx/int-index/v2".as_slice()));
    assert!(
        !snap.contains_key(b"__nx/int-index/v3".as_slice()),
        "the failed batch applied nothing"
    );
    assert_eq!(checkpoint(&store, "int").unwrap().cursor, key("int", "r2"));
    assert!(header(&store, "int").is_none());
    drop(store);

    // Reopen and finish.
    let reopened = Store::new(m.clone());
    calls.store(0, Ordering::SeqCst);
    let report = Migrator::new(registry())
        .unwrap()
        .limits(limits(2, 4096))
        .run(&reopened)
        .unwrap();
    assert_eq!(report.tables[0].records, 3);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "r1 and r2 are not processed twice"
    );
    assert_eq!(header(&reopened, "int"), Some(SchemaHeader::new(1, 130)));
    assert!(checkpoint(&reopened, "int").is_none());
    for i in 1..=5 {
        assert_eq!(
            reopened.get(&key("int", &format!("r{i}"))).unwrap(),
            Some(format!("v{i}").into_bytes())
        );
        assert_eq!(
            reopened
                .get(format!("__nx/int-index/v{i}").as_bytes())
                .unwrap(),
            Some(key("int", &format!("r{i}")))
        );
    }
    assert_eq!(len_without_manifests(&m), 11);
}

/// A backend wrapper that logs every `apply` (`"apply"`, or `"apply failed"`) and every
/// `flush`, in order.
#[derive(Debug)]
struct FlushLog {
    inner: Arc<dyn strata_store::Backend>,
    log: Arc<Mutex<Vec<&'static str>>>,
}

impl KvRead for FlushLog {
    fn get(&self, key: &[u8]) -> strata_store::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: strata_store::ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> strata_store::Visit,
    ) -> strata_store::Result<strata_store::VisitEnd> {
        self.inner.scan_visit(prefix, after, limits, visit)
    }
    fn capabilities(&self) -> strata_store::Capabilities<'_> {
        self.inner.capabilities()
    }
}

impl KvWrite for FlushLog {
    fn read_modify_write(
        &self,
        reads: &[&[u8]],
        decide: &mut strata_store::Decide<'_>,
    ) -> strata_store::Result<bool> {
        let r = self.inner.read_modify_write(reads, decide);
        self.log
            .lock()
            .unwrap()
            .push(if r.is_ok() { "apply" } else { "apply failed" });
        r
    }
    fn flush(&self) -> strata_store::Result<()> {
        self.log.lock().unwrap().push("flush");
        self.inner.flush()
    }
}

impl strata_store::Backend for FlushLog {
    fn name(&self) -> &'static str {
        "flush-log"
    }
}

#[test]
fn migrate_flushes_before_returning_on_success_and_on_failure() {
    let t = table("fl", 131, 1);
    let registry = || {
        Registry::new().table(TableMigrations::new(t.clone()).step(RecordStep::records(
            0,
            1,
            |_: &RecordRef<'_>| Ok(vec![]),
        )))
    };
    let seeded = || {
        let (store, m) = mem();
        for i in 1..=5 {
            put(&store, &key("fl", &format!("r{i}")), b"v");
        }
        (store, m)
    };

    // Success: the last thing done to the backend is a flush, after every write.
    let (store, _m) = seeded();
    let log = Arc::new(Mutex::new(Vec::new()));
    let logged = Store::new(FlushLog {
        inner: store.unguarded_backend(),
        log: log.clone(),
    });
    let report = Migrator::new(registry())
        .unwrap()
        .limits(limits(2, 4096))
        .run(&logged)
        .unwrap();
    assert_eq!(report.tables[0].records, 5);
    assert_eq!(header(&store, "fl"), Some(SchemaHeader::new(1, 131)));
    let ops = log.lock().unwrap().clone();
    assert!(ops.contains(&"apply"), "{ops:?}");
    assert_eq!(ops.last(), Some(&"flush"), "{ops:?}");

    // A batch fails: the batches committed before it are flushed before the error returns.
    let (store, _m) = seeded();
    let log = Arc::new(Mutex::new(Vec::new()));
    let logged = Store::new(FlushLog {
        inner: Arc::new(FaultyStore::fail_nth_write(store.unguarded_backend(), 2)),
        log: log.clone(),
    });
    let err = Migrator::new(registry())
        .unwrap()
        .limits(limits(2, 4096))
        .run(&logged)
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::Pass(PassError::Store { .. })),
        "{err}"
    );
    assert_eq!(err.checkpoint(), Some(key("fl", "r2").as_slice()));
    let ops = log.lock().unwrap().clone();
    assert_eq!(ops.first(), Some(&"apply"), "{ops:?}");
    let failed = ops.iter().position(|op| *op == "apply failed").unwrap();
    assert_eq!(&ops[failed..], ["apply failed", "flush"], "{ops:?}");
}

#[test]
fn writers_wait_for_the_migration_session_while_readers_continue() {
    let (store, _m) = mem();
    for i in 0..4u64 {
        put(&store, &gkey(&format!("k{i}")), &i.to_le_bytes());
    }
    let (in_session_tx, in_session_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let migrating = {
        let store = store.clone();
        std::thread::spawn(move || {
            let mut first = true;
            numax_migrator()
                .limits(limits(1, 4096))
                .on_event(move |e| {
                    if first && matches!(e, MigrationEvent::Progress { .. }) {
                        first = false;
                        in_session_tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                    }
                })
                .run(&store)
        })
    };
    in_session_rx.recv().unwrap();
    assert!(store.is_leased());
    let (written_tx, written_rx) = mpsc::channel::<()>();
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            put(&store, b"app/key", b"v");
            written_tx.send(()).unwrap();
        })
    };
    while store.waiting_writers() == 0 {
        std::thread::yield_now();
    }
    // Readers are not blocked; the writer is.
    assert_eq!(
        store.get(&gkey("k1")).unwrap(),
        Some(1u64.to_le_bytes().to_vec())
    );
    assert!(store
        .scan(
            b"__nx/crdt/",
            None,
            strata_store::ScanLimits::new(10, 4096).unwrap()
        )
        .is_ok());
    assert_eq!(written_rx.try_recv(), Err(mpsc::TryRecvError::Empty));
    assert_eq!(store.get(b"app/key").unwrap(), None);
    go_tx.send(()).unwrap();
    let report = migrating.join().unwrap().unwrap();
    assert_eq!(report.tables[0].records, 4);
    written_rx.recv().unwrap();
    writer.join().unwrap();
    assert!(!store.is_leased());
    assert_eq!(store.get(b"app/key").unwrap(), Some(b"v".to_vec()));
}
