//! Unit tests of the wire types and codecs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;

#[test]
fn op_json_matches_design_example() {
    let op = Op::new(
        "op-1",
        "node",
        OpKind::GCounterIncrement {
            key: "visits".into(),
            increment: 3,
        },
    );
    let json = String::from_utf8(encode_op(&op).unwrap()).unwrap();
    assert_eq!(
        json,
        r#"{"id":"op-1","origin":"node","kind":{"GCounterIncrement":{"key":"visits","increment":3}}}"#
    );
    assert_eq!(decode_op(json.as_bytes()).unwrap(), op);
}

#[test]
fn every_op_kind_has_numax_json() {
    let cases: Vec<(OpKind, &str)> = vec![
        (
            OpKind::PNCounterIncrement {
                key: "k".into(),
                increment: 1,
            },
            r#"{"PNCounterIncrement":{"key":"k","increment":1}}"#,
        ),
        (
            OpKind::PNCounterDecrement {
                key: "k".into(),
                decrement: 2,
            },
            r#"{"PNCounterDecrement":{"key":"k","decrement":2}}"#,
        ),
        (
            OpKind::LwwRegisterSet {
                key: "k".into(),
                value: vec![1, 2],
                timestamp_ms: 5,
            },
            r#"{"LwwRegisterSet":{"key":"k","value":[1,2],"timestamp_ms":5}}"#,
        ),
        (
            OpKind::LwwMapSet {
                key: "k".into(),
                field: "f".into(),
                value: vec![9],
                timestamp_ms: 5,
            },
            r#"{"LwwMapSet":{"key":"k","field":"f","value":[9],"timestamp_ms":5}}"#,
        ),
        (
            OpKind::LwwMapRemove {
                key: "k".into(),
                field: "f".into(),
                timestamp_ms: 6,
            },
            r#"{"LwwMapRemove":{"key":"k","field":"f","timestamp_ms":6}}"#,
        ),
        (
            OpKind::ORSetAdd {
                key: "k".into(),
                element: "e".into(),
                tag: "t".into(),
            },
            r#"{"ORSetAdd":{"key":"k","element":"e","tag":"t"}}"#,
        ),
        (
            OpKind::ORSetRemove {
                key: "k".into(),
                element: "e".into(),
                observed_tags: vec!["t".into()],
            },
            r#"{"ORSetRemove":{"key":"k","element":"e","observed_tags":["t"]}}"#,
        ),
        (
            OpKind::RgaInsert {
                key: "k".into(),
                id: "a".into(),
                parent: None,
                value: vec![104],
            },
            r#"{"RgaInsert":{"key":"k","id":"a","parent":null,"value":[104]}}"#,
        ),
        (
            OpKind::RgaDelete {
                key: "k".into(),
                id: "a".into(),
            },
            r#"{"RgaDelete":{"key":"k","id":"a"}}"#,
        ),
    ];
    for (kind, json) in cases {
        assert_eq!(serde_json::to_string(&kind).unwrap(), json);
        assert_eq!(serde_json::from_str::<OpKind>(json).unwrap(), kind);
    }
}

#[test]
fn state_json_matches_design() {
    let mut g = GCounterState::default();
    g.counts.insert("n1".into(), 4);
    assert_eq!(g.to_json().unwrap(), br#"{"counts":{"n1":4}}"#);

    let pn = PNCounterState {
        positive: g.clone(),
        negative: GCounterState::default(),
    };
    assert_eq!(
        pn.to_json().unwrap(),
        br#"{"positive":{"counts":{"n1":4}},"negative":{"counts":{}}}"#
    );

    let r = LwwRegisterState {
        value: vec![111],
        timestamp_ms: 7,
        writer: "n".into(),
    };
    assert_eq!(
        r.to_json().unwrap(),
        br#"{"value":[111],"timestamp_ms":7,"writer":"n"}"#
    );

    let mut m = LwwMapState::default();
    m.entries.insert(
        "gone".into(),
        LwwMapEntry {
            value: None,
            timestamp_ms: 2,
            writer: "n".into(),
        },
    );
    assert_eq!(
        m.to_json().unwrap(),
        br#"{"entries":{"gone":{"value":null,"timestamp_ms":2,"writer":"n"}}}"#
    );

    let mut s = ORSetState::default();
    s.adds.insert("blue".into(), ["t1".to_string()].into());
    assert_eq!(
        s.to_json().unwrap(),
        br#"{"adds":{"blue":["t1"]},"removes":{}}"#
    );

    let mut rga = RgaState::default();
    rga.elements.insert(
        "a".into(),
        RgaElement {
            id: "a".into(),
            parent: None,
            value: vec![104],
        },
    );
    rga.tombstones.insert("z".into());
    assert_eq!(
        encode_rga_state(&rga).unwrap(),
        br#"{"elements":{"a":{"id":"a","parent":null,"value":[104]}},"tombstones":["z"]}"#
    );
}

#[test]
fn materialized_encodings() {
    assert_eq!(encode_gcounter_materialized(12), 12u64.to_le_bytes());
    assert_eq!(encode_pncounter_materialized(-6), (-6i64).to_le_bytes());
    assert_eq!(encode_seen_op(7), 7u64.to_be_bytes());
    assert_eq!(
        encode_lww_map_materialized(&[("region".into(), b"eu".to_vec())]).unwrap(),
        br#"[["region",[101,117]]]"#
    );
    assert_eq!(
        encode_orset_materialized(&["blue".into()]).unwrap(),
        br#"["blue"]"#
    );
    assert_eq!(
        encode_rga_materialized(&[b"hi".to_vec()]).unwrap(),
        br#"[[104,105]]"#
    );
}

#[test]
fn op_log_layout_and_id_check() {
    let op = Op::new(
        "fixture-op-1",
        "n",
        OpKind::RgaDelete {
            key: "k".into(),
            id: "a".into(),
        },
    );
    let bytes = encode_op_log(9, &op).unwrap();
    assert_eq!(&bytes[..8], &9u64.to_be_bytes());
    let entry = decode_op_log_record("fixture-op-1", &bytes).unwrap();
    assert_eq!(entry, OpLogEntry { sequence: 9, op });
    let err = decode_op_log_record("other", &bytes).unwrap_err();
    assert!(err
        .reason()
        .contains("op id `fixture-op-1` does not match key suffix `other`"));
}

#[test]
fn short_values_are_rejected_with_length() {
    let err = decode_gcounter_materialized(&[1, 2, 3, 4, 5]).unwrap_err();
    assert_eq!(err.reason(), "expected exactly 8 bytes, found 5");
    assert!(decode_op_log(&[0; 7]).is_err());
}

#[test]
fn rga_element_must_sit_under_its_id() {
    let json = br#"{"elements":{"a":{"id":"b","parent":null,"value":[]}},"tombstones":[]}"#;
    assert!(decode_rga_state(json).is_err());
}

#[test]
fn table_lookup() {
    assert_eq!(table_by_id(14).unwrap().1, "op-log");
    assert_eq!(table_by_name("rga-state").unwrap().2, RGA_STATE_PREFIX);
    assert!(table_by_id(15).is_none());
    let prefixes = [
        GCOUNTER_PREFIX,
        GCOUNTER_STATE_PREFIX,
        PNCOUNTER_PREFIX,
        PNCOUNTER_STATE_PREFIX,
        LWW_REGISTER_PREFIX,
        LWW_REGISTER_STATE_PREFIX,
        LWW_MAP_PREFIX,
        LWW_MAP_STATE_PREFIX,
        ORSET_PREFIX,
        ORSET_STATE_PREFIX,
        RGA_PREFIX,
        RGA_STATE_PREFIX,
        SEEN_OP_PREFIX,
        OP_LOG_PREFIX,
    ];
    for (i, t) in NUMAX_TABLES.iter().enumerate() {
        assert_eq!(usize::from(t.0), i + 1);
        assert_eq!(t.2, prefixes[i]);
    }
}
