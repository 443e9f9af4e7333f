//! `verify`: a read-only scan of every table.

use super::fixture::fixture_records;
use super::*;

#[test]
fn verify_scans_every_table_read_only() {
    let (store, m) = mem();
    for (_, k, v) in fixture_records() {
        put(&store, &k, &v);
    }
    numax_migrator().run(&store).unwrap();
    let before = m.snapshot();
    let report = verify(&store, &numax::catalog(), limits(1, 4096), |_| {}).unwrap();
    assert_eq!(report.tables.len(), 14);
    assert!(report.tables.iter().all(|t| t.records == 1));
    // A record larger than the page budget is still verified.
    let report = verify(&store, &numax::catalog(), limits(1, 16), |_| {}).unwrap();
    assert!(report.tables.iter().all(|t| t.records == 1));
    put(
        &store,
        &wire::key(wire::ORSET_PREFIX, "broken"),
        b"{not json",
    );
    let err = verify(&store, &numax::catalog(), limits(1, 4096), |_| {}).unwrap_err();
    assert_eq!(err.table(), Some("orset-materialized"));
    assert_eq!(
        err.key(),
        Some(wire::key(wire::ORSET_PREFIX, "broken").as_slice())
    );
    let mut after = before.clone();
    after.insert(
        wire::key(wire::ORSET_PREFIX, "broken"),
        b"{not json".to_vec(),
    );
    assert_eq!(m.snapshot(), after, "verify wrote nothing");
}

#[test]
fn catalog_without_decoders_verifies_everything() {
    let (store, _) = mem();
    put(&store, &key("free", "a"), b"anything");
    let catalog = Catalog::new()
        .with(TableDef::new("free", 140, b"__nx/free/".to_vec(), 1))
        .unwrap();
    let r = verify(&store, &catalog, PassLimits::default(), |_| {}).unwrap();
    assert_eq!(r.tables[0].records, 1);
}
