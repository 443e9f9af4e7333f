//! The legacy v0 fixture (`crates/strata/fixtures/legacy-v0/records.tsv`): it matches its
//! generator and migrates byte for byte.

use super::*;

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/legacy-v0/records.tsv")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The generator of the committed fixture: one legacy (v0) record per Numax table, as a
/// Numax release without schema headers wrote them.
pub(super) fn fixture_records() -> Vec<(String, Vec<u8>, Vec<u8>)> {
    use std::collections::{BTreeMap as M, BTreeSet as S};
    use wire::*;
    let s = |v: &str| v.to_string();
    let op = Op::new(
        "fixture-op-1",
        "node-a",
        OpKind::GCounterIncrement {
            key: s("visits"),
            increment: 12,
        },
    );
    let mut map_entries = M::new();
    map_entries.insert(
        s("region"),
        LwwMapEntry {
            value: Some(b"eu".to_vec()),
            timestamp_ms: 20,
            writer: s("node-a"),
        },
    );
    map_entries.insert(
        s("theme"),
        LwwMapEntry {
            value: None,
            timestamp_ms: 21,
            writer: s("node-b"),
        },
    );
    let mut rga = RgaState::default();
    rga.elements.insert(
        s("e1"),
        RgaElement {
            id: s("e1"),
            parent: None,
            value: b"hello".to_vec(),
        },
    );
    rga.elements.insert(
        s("e2"),
        RgaElement {
            id: s("e2"),
            parent: Some(s("e1")),
            value: b"world".to_vec(),
        },
    );
    rga.tombstones.insert(s("e2"));
    vec![
        (
            s("gcounter visits = 12"),
            key(GCOUNTER_PREFIX, "visits"),
            encode_gcounter_materialized(12),
        ),
        (
            s("gcounter visits state"),
            key(GCOUNTER_STATE_PREFIX, "visits"),
            encode_gcounter_state(&GCounterState {
                counts: M::from([(s("node-a"), 5), (s("node-b"), 7)]),
            })
            .unwrap(),
        ),
        (
            s("pncounter stock = 6"),
            key(PNCOUNTER_PREFIX, "stock"),
            encode_pncounter_materialized(6),
        ),
        (
            s("pncounter stock state: +10 -4"),
            key(PNCOUNTER_STATE_PREFIX, "stock"),
            encode_pncounter_state(&PNCounterState {
                positive: GCounterState {
                    counts: M::from([(s("node-a"), 10)]),
                },
                negative: GCounterState {
                    counts: M::from([(s("node-a"), 4)]),
                },
            })
            .unwrap(),
        ),
        (
            s("register status = online"),
            key(LWW_REGISTER_PREFIX, "status"),
            encode_lww_register_materialized(b"online"),
        ),
        (
            s("register status state"),
            key(LWW_REGISTER_STATE_PREFIX, "status"),
            encode_lww_register_state(&LwwRegisterState {
                value: b"online".to_vec(),
                timestamp_ms: 2,
                writer: s("node-a"),
            })
            .unwrap(),
        ),
        (
            s("map settings = {region: eu}"),
            key(LWW_MAP_PREFIX, "settings"),
            encode_lww_map_materialized(&[(s("region"), b"eu".to_vec())]).unwrap(),
        ),
        (
            s("map settings state, field theme tombstoned"),
            key(LWW_MAP_STATE_PREFIX, "settings"),
            encode_lww_map_state(&LwwMapState {
                entries: map_entries,
            })
            .unwrap(),
        ),
        (
            s("set tags = [blue]"),
            key(ORSET_PREFIX, "tags"),
            encode_orset_materialized(&[s("blue")]).unwrap(),
        ),
        (
            s("set tags state: red added then removed"),
            key(ORSET_STATE_PREFIX, "tags"),
            encode_orset_state(&ORSetState {
                adds: M::from([
                    (s("blue"), S::from([s("t1")])),
                    (s("red"), S::from([s("t2")])),
                ]),
                removes: M::from([(s("red"), S::from([s("t2")]))]),
            })
            .unwrap(),
        ),
        (
            s("sequence doc = [hello]"),
            key(RGA_PREFIX, "doc"),
            encode_rga_materialized(&[b"hello".to_vec()]).unwrap(),
        ),
        (
            s("sequence doc state, e2 tombstoned"),
            key(RGA_STATE_PREFIX, "doc"),
            encode_rga_state(&rga).unwrap(),
        ),
        (
            s("seen op fixture-op-1 at sequence 7"),
            key(SEEN_OP_PREFIX, "fixture-op-1"),
            encode_seen_op(7),
        ),
        (
            s("op-log sequence 9: fixture-op-1"),
            key(OP_LOG_PREFIX, "fixture-op-1"),
            encode_op_log(9, &op).unwrap(),
        ),
    ]
}

fn render_fixture() -> String {
    let mut out = String::from(
        "# strata legacy (v0) logical-store fixture: one record per Numax table, no schema keys.\n\
         # Format: hex(key)<TAB>hex(value) per line; lines starting with `#` are comments.\n\
         # Generated by `cargo test -p strata --test it -- --ignored generate_legacy_fixture`\n\
         # (crates/strata/tests/it/migration.rs); see README.md next to this file.\n",
    );
    for (comment, k, v) in fixture_records() {
        out.push_str(&format!("# {comment}\n{}\t{}\n", hex(&k), hex(&v)));
    }
    out
}

fn load_fixture() -> Vec<(Vec<u8>, Vec<u8>)> {
    let text = std::fs::read_to_string(fixture_path()).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('\t').unwrap();
            (unhex(k.trim()), unhex(v.trim()))
        })
        .collect()
}

/// Regenerates the committed fixture. Run on purpose only.
#[test]
#[ignore = "writes crates/strata/fixtures/legacy-v0/records.tsv"]
fn generate_legacy_fixture() {
    std::fs::write(fixture_path(), render_fixture()).unwrap();
}

#[test]
fn committed_fixture_matches_its_generator() {
    assert_eq!(
        std::fs::read_to_string(fixture_path()).unwrap(),
        render_fixture()
    );
}

#[test]
fn legacy_fixture_migrates_byte_for_byte() {
    let records = load_fixture();
    assert_eq!(records.len(), 14);
    assert!(records
        .iter()
        .all(|(k, _)| !k.starts_with(b"__nx/schema/") && !k.starts_with(b"__nx/migration/")));
    let (store, m) = mem();
    for (k, v) in &records {
        put(&store, k, v);
    }
    let report = numax_migrator()
        .limits(limits(2, 4 << 20))
        .run(&store)
        .unwrap();
    assert!(report.tables.iter().all(|t| t.from == 0
        && t.to == 1
        && t.records == 1
        && t.outcome == TableOutcome::Migrated));

    // Every payload byte unchanged, every header current, no checkpoint left.
    let expected: BTreeMap<_, _> = records.iter().cloned().collect();
    assert_eq!(payload(&m), expected);
    for (id, name, _) in numax::NUMAX_TABLES {
        assert_eq!(
            header(&store, name),
            Some(SchemaHeader::new(1, id)),
            "{name}"
        );
        assert!(checkpoint(&store, name).is_none());
    }
    assert!(validate_and_init(&store, &numax::catalog()).is_ok());

    // The resulting CRDT state and op log decode to the fixture's values.
    use wire::*;
    let get = |prefix: &str, k: &str| store.get(&key(prefix, k)).unwrap().unwrap();
    assert_eq!(
        decode_gcounter_materialized(&get(GCOUNTER_PREFIX, "visits")).unwrap(),
        12
    );
    assert_eq!(
        decode_gcounter_state(&get(GCOUNTER_STATE_PREFIX, "visits"))
            .unwrap()
            .counts
            .values()
            .sum::<u64>(),
        12
    );
    assert_eq!(
        decode_pncounter_materialized(&get(PNCOUNTER_PREFIX, "stock")).unwrap(),
        6
    );
    let pn = decode_pncounter_state(&get(PNCOUNTER_STATE_PREFIX, "stock")).unwrap();
    assert_eq!(
        pn.positive.counts.values().sum::<u64>() - pn.negative.counts.values().sum::<u64>(),
        6
    );
    assert_eq!(get(LWW_REGISTER_PREFIX, "status"), b"online");
    assert_eq!(
        decode_lww_register_state(&get(LWW_REGISTER_STATE_PREFIX, "status"))
            .unwrap()
            .value,
        b"online"
    );
    assert_eq!(
        decode_lww_map_materialized(&get(LWW_MAP_PREFIX, "settings")).unwrap(),
        vec![("region".to_string(), b"eu".to_vec())]
    );
    let map = decode_lww_map_state(&get(LWW_MAP_STATE_PREFIX, "settings")).unwrap();
    let visible: Vec<_> = map
        .entries
        .iter()
        .filter_map(|(f, e)| e.value.as_ref().map(|v| (f.as_str(), v.as_slice())))
        .collect();
    assert_eq!(
        visible,
        vec![("region", b"eu".as_slice())],
        "tombstoned field absent"
    );
    assert_eq!(
        decode_orset_materialized(&get(ORSET_PREFIX, "tags")).unwrap(),
        vec!["blue".to_string()]
    );
    let set = decode_orset_state(&get(ORSET_STATE_PREFIX, "tags")).unwrap();
    let live: Vec<_> = set
        .adds
        .iter()
        .filter(|(e, tags)| {
            tags.iter()
                .any(|t| !set.removes.get(*e).is_some_and(|r| r.contains(t)))
        })
        .map(|(e, _)| e.as_str())
        .collect();
    assert_eq!(live, vec!["blue"]);
    assert_eq!(
        decode_rga_materialized(&get(RGA_PREFIX, "doc")).unwrap(),
        vec![b"hello".to_vec()]
    );
    let rga = decode_rga_state(&get(RGA_STATE_PREFIX, "doc")).unwrap();
    let seq: Vec<_> = rga
        .elements
        .values()
        .filter(|e| !rga.tombstones.contains(&e.id))
        .map(|e| e.value.clone())
        .collect();
    assert_eq!(seq, vec![b"hello".to_vec()]);
    assert_eq!(
        decode_seen_op(&get(SEEN_OP_PREFIX, "fixture-op-1")).unwrap(),
        7
    );
    let entry = decode_op_log_record("fixture-op-1", &get(OP_LOG_PREFIX, "fixture-op-1")).unwrap();
    assert_eq!(entry.sequence, 9);
    assert_eq!(entry.op.id, "fixture-op-1");
}
