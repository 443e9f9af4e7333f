//! Record decoders of the 14 Numax sync tables (DESIGN.md §2), used by certification.
//!
//! Each decoder takes the key suffix (after the table prefix) and the value and checks,
//! without changing anything, that the record is one a Numax release could have written:
//! the suffix is UTF-8; fixed-width values have exactly 8 bytes; JSON values have the
//! table's shape (unknown object fields are tolerated, as Numax's serde types tolerate
//! them); an op-log value is an 8-byte sequence followed by op JSON whose `id` equals the
//! key suffix. `lww-register-materialized` accepts any bytes.
//!
//! ```
//! use strata::numax::decode::decode_record;
//! assert!(decode_record(1, b"visits", &12u64.to_le_bytes()).is_ok());
//! let err = decode_record(1, b"visits", &[1, 2, 3, 4, 5]).unwrap_err();
//! assert_eq!(err.reason(), "expected exactly 8 bytes, found 5");
//! ```

use crate::numax::wire;

pub use super::error::DecodeError;

/// A record decoder: `(key suffix, value)`.
pub type Decoder = fn(&[u8], &[u8]) -> Result<(), DecodeError>;

fn utf8_key<'a>(table: &'static str, suffix: &'a [u8]) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(suffix).map_err(|e| {
        DecodeError::invalid(table, format!("key suffix is not UTF-8 ({e})")).with_key(suffix)
    })
}

macro_rules! decoder {
    ($name:ident, $table:literal, |$key:ident, $value:ident| $body:expr) => {
        #[doc = concat!("Decodes one `", $table, "` record.")]
        pub fn $name(suffix: &[u8], $value: &[u8]) -> Result<(), DecodeError> {
            let $key = utf8_key($table, suffix)?;
            let _ = (&$key, &$value);
            let result: Result<(), DecodeError> = $body;
            result.map_err(|e| e.with_key(suffix))
        }
    };
}

decoder!(gcounter_materialized, "gcounter-materialized", |k, v| {
    wire::decode_gcounter_materialized(v).map(drop)
});
decoder!(gcounter_state, "gcounter-state", |k, v| {
    wire::decode_gcounter_state(v).map(drop)
});
decoder!(pncounter_materialized, "pncounter-materialized", |k, v| {
    wire::decode_pncounter_materialized(v).map(drop)
});
decoder!(pncounter_state, "pncounter-state", |k, v| {
    wire::decode_pncounter_state(v).map(drop)
});
decoder!(
    lww_register_materialized,
    "lww-register-materialized",
    |k, v| { Ok(()) }
);
decoder!(lww_register_state, "lww-register-state", |k, v| {
    wire::decode_lww_register_state(v).map(drop)
});
decoder!(lww_map_materialized, "lww-map-materialized", |k, v| {
    wire::decode_lww_map_materialized(v).map(drop)
});
decoder!(lww_map_state, "lww-map-state", |k, v| {
    wire::decode_lww_map_state(v).map(drop)
});
decoder!(orset_materialized, "orset-materialized", |k, v| {
    wire::decode_orset_materialized(v).map(drop)
});
decoder!(orset_state, "orset-state", |k, v| {
    wire::decode_orset_state(v).map(drop)
});
decoder!(rga_materialized, "rga-materialized", |k, v| {
    wire::decode_rga_materialized(v).map(drop)
});
decoder!(rga_state, "rga-state", |k, v| {
    wire::decode_rga_state(v).map(drop)
});
decoder!(seen_ops, "seen-ops", |k, v| {
    wire::decode_seen_op(v).map(drop)
});
decoder!(op_log, "op-log", |k, v| {
    wire::decode_op_log_record(k, v).map(drop)
});

/// The decoder of table `table_id` (1..=14), if it is a Numax table.
pub fn decoder_for_id(table_id: u16) -> Option<Decoder> {
    let d: Decoder = match table_id {
        1 => gcounter_materialized,
        2 => gcounter_state,
        3 => pncounter_materialized,
        4 => pncounter_state,
        5 => lww_register_materialized,
        6 => lww_register_state,
        7 => lww_map_materialized,
        8 => lww_map_state,
        9 => orset_materialized,
        10 => orset_state,
        11 => rga_materialized,
        12 => rga_state,
        13 => seen_ops,
        14 => op_log,
        _ => return None,
    };
    Some(d)
}

/// The decoder of the table named `name` (e.g. `op-log`), if it is a Numax table.
pub fn decoder_for_name(name: &str) -> Option<Decoder> {
    wire::table_by_name(name).and_then(|t| decoder_for_id(t.0))
}

/// Validates one record of Numax table `table_id`: `key_suffix` is the key after the
/// table's prefix.
pub fn decode_record(table_id: u16, key_suffix: &[u8], value: &[u8]) -> Result<(), DecodeError> {
    match decoder_for_id(table_id) {
        Some(d) => d(key_suffix, value),
        None => Err(DecodeError::UnknownTable { table_id }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::numax::wire::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn non_utf8_key_is_rejected_for_every_table() {
        for id in 1..=14u16 {
            let err = decode_record(id, b"\xff", b"").unwrap_err();
            assert!(err.reason().contains("not UTF-8"), "{id}: {err}");
            assert!(err.to_string().contains("`\\xff`"), "{err}");
        }
    }

    #[test]
    fn unknown_table_is_an_error() {
        assert_eq!(
            decode_record(15, b"k", b""),
            Err(DecodeError::UnknownTable { table_id: 15 })
        );
        assert!(decoder_for_id(0).is_none());
        assert!(decoder_for_name("op-log").is_some());
        assert!(decoder_for_name("nope").is_none());
    }

    #[test]
    fn error_names_table_key_and_reason() {
        let err = decode_record(13, b"op-1", b"12345").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("`seen-ops`"), "{text}");
        assert!(text.contains("`op-1`"), "{text}");
        assert!(text.contains("expected exactly 8 bytes, found 5"), "{text}");
    }

    #[test]
    fn json_shapes_are_checked() {
        assert!(decode_record(2, b"k", br#"{"counts":{"n":1}}"#).is_ok());
        assert!(decode_record(2, b"k", br#"{"counts":{"n":-1}}"#).is_err());
        assert!(decode_record(2, b"k", br#"{"count":{}}"#).is_err());
        // Unknown fields are tolerated like Numax's own serde types do.
        assert!(decode_record(2, b"k", br#"{"counts":{},"extra":1}"#).is_ok());
        assert!(decode_record(7, b"k", br#"[["f",[1,2]]]"#).is_ok());
        assert!(decode_record(7, b"k", br#"[["f",[256]]]"#).is_err());
        assert!(decode_record(
            8,
            b"k",
            br#"{"entries":{"f":{"value":null,"timestamp_ms":1,"writer":"n"}}}"#
        )
        .is_ok());
        assert!(decode_record(9, b"k", br#"["a","b"]"#).is_ok());
        assert!(decode_record(9, b"k", br#"[1]"#).is_err());
        assert!(decode_record(11, b"k", br#"[[1],[]]"#).is_ok());
        assert!(decode_record(12, b"k", br#"{"elements":{},"tombstones":{}}"#).is_err());
        assert!(decode_record(12, b"k", br#"{"elements":{},"tombstones":["a"]}"#).is_ok());
        assert!(decode_record(5, b"k", b"\xff\x00anything").is_ok());
        assert!(decode_record(10, b"k", br#"{"adds":{"e":["t"]},"removes":{}}"#).is_ok());
    }

    #[test]
    fn op_log_checks_length_and_id() {
        let op = Op::new(
            "a",
            "n",
            OpKind::RgaDelete {
                key: "k".into(),
                id: "x".into(),
            },
        );
        let v = encode_op_log(1, &op).unwrap();
        assert!(decode_record(14, b"a", &v).is_ok());
        let err = decode_record(14, b"b", &v).unwrap_err();
        assert_eq!(err.reason(), "op id `a` does not match key suffix `b`");
        assert!(decode_record(14, b"a", &v[..7]).is_err());
        assert!(decode_record(14, b"a", &v[..8]).is_err());
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>(), 0..8)
    }
    fn s() -> impl Strategy<Value = String> {
        "[a-z\\-é\"\\\\]{0,6}"
    }
    fn gcounter() -> impl Strategy<Value = GCounterState> {
        prop::collection::btree_map(s(), any::<u64>(), 0..4)
            .prop_map(|counts| GCounterState { counts })
    }
    fn op_kind() -> impl Strategy<Value = OpKind> {
        prop_oneof![
            (s(), any::<u64>())
                .prop_map(|(key, increment)| OpKind::GCounterIncrement { key, increment }),
            (s(), any::<u64>())
                .prop_map(|(key, increment)| OpKind::PNCounterIncrement { key, increment }),
            (s(), any::<u64>())
                .prop_map(|(key, decrement)| OpKind::PNCounterDecrement { key, decrement }),
            (s(), bytes(), any::<u64>()).prop_map(|(key, value, timestamp_ms)| {
                OpKind::LwwRegisterSet {
                    key,
                    value,
                    timestamp_ms,
                }
            }),
            (s(), s(), bytes(), any::<u64>()).prop_map(|(key, field, value, timestamp_ms)| {
                OpKind::LwwMapSet {
                    key,
                    field,
                    value,
                    timestamp_ms,
                }
            }),
            (s(), s(), any::<u64>()).prop_map(|(key, field, timestamp_ms)| OpKind::LwwMapRemove {
                key,
                field,
                timestamp_ms
            }),
            (s(), s(), s()).prop_map(|(key, element, tag)| OpKind::ORSetAdd { key, element, tag }),
            (s(), s(), prop::collection::vec(s(), 0..3)).prop_map(
                |(key, element, observed_tags)| OpKind::ORSetRemove {
                    key,
                    element,
                    observed_tags
                }
            ),
            (s(), s(), prop::option::of(s()), bytes()).prop_map(|(key, id, parent, value)| {
                OpKind::RgaInsert {
                    key,
                    id,
                    parent,
                    value,
                }
            }),
            (s(), s()).prop_map(|(key, id)| OpKind::RgaDelete { key, id }),
        ]
    }

    proptest! {
        #[test]
        fn every_encoder_output_decodes(
            key in s(),
            n in any::<u64>(),
            i in any::<i64>(),
            raw in bytes(),
            g in gcounter(),
            g2 in gcounter(),
            fields in prop::collection::vec((s(), bytes()), 0..4),
            elems in prop::collection::vec(s(), 0..4),
            values in prop::collection::vec(bytes(), 0..4),
            map in prop::collection::btree_map(s(), (prop::option::of(bytes()), any::<u64>(), s()), 0..4),
            adds in prop::collection::btree_map(s(), prop::collection::btree_set(s(), 0..3), 0..3),
            rga_elems in prop::collection::vec((s(), prop::option::of(s()), bytes()), 0..4),
            tombs in prop::collection::btree_set(s(), 0..3),
            kind in op_kind(),
        ) {
            let k = key.as_bytes();
            prop_assert_eq!(wire::decode_gcounter_materialized(&encode_gcounter_materialized(n)).unwrap(), n);
            decode_record(1, k, &encode_gcounter_materialized(n)).unwrap();
            decode_record(2, k, &encode_gcounter_state(&g).unwrap()).unwrap();
            prop_assert_eq!(decode_gcounter_state(&encode_gcounter_state(&g).unwrap()).unwrap(), g.clone());
            prop_assert_eq!(decode_pncounter_materialized(&encode_pncounter_materialized(i)).unwrap(), i);
            decode_record(3, k, &encode_pncounter_materialized(i)).unwrap();
            let pn = PNCounterState { positive: g.clone(), negative: g2 };
            prop_assert_eq!(decode_pncounter_state(&encode_pncounter_state(&pn).unwrap()).unwrap(), pn.clone());
            decode_record(4, k, &encode_pncounter_state(&pn).unwrap()).unwrap();
            decode_record(5, k, &encode_lww_register_materialized(&raw)).unwrap();
            let reg = LwwRegisterState { value: raw.clone(), timestamp_ms: n, writer: key.clone() };
            prop_assert_eq!(decode_lww_register_state(&encode_lww_register_state(&reg).unwrap()).unwrap(), reg.clone());
            decode_record(6, k, &encode_lww_register_state(&reg).unwrap()).unwrap();
            prop_assert_eq!(decode_lww_map_materialized(&encode_lww_map_materialized(&fields).unwrap()).unwrap(), fields.clone());
            decode_record(7, k, &encode_lww_map_materialized(&fields).unwrap()).unwrap();
            let m = LwwMapState { entries: map.into_iter().map(|(f, (value, timestamp_ms, writer))| (f, LwwMapEntry { value, timestamp_ms, writer })).collect() };
            prop_assert_eq!(decode_lww_map_state(&encode_lww_map_state(&m).unwrap()).unwrap(), m.clone());
            decode_record(8, k, &encode_lww_map_state(&m).unwrap()).unwrap();
            prop_assert_eq!(decode_orset_materialized(&encode_orset_materialized(&elems).unwrap()).unwrap(), elems.clone());
            decode_record(9, k, &encode_orset_materialized(&elems).unwrap()).unwrap();
            let set = ORSetState { adds: adds.clone(), removes: adds };
            prop_assert_eq!(decode_orset_state(&encode_orset_state(&set).unwrap()).unwrap(), set.clone());
            decode_record(10, k, &encode_orset_state(&set).unwrap()).unwrap();
            prop_assert_eq!(decode_rga_materialized(&encode_rga_materialized(&values).unwrap()).unwrap(), values.clone());
            decode_record(11, k, &encode_rga_materialized(&values).unwrap()).unwrap();
            let rga = RgaState {
                elements: rga_elems.into_iter().map(|(id, parent, value)| (id.clone(), RgaElement { id, parent, value })).collect::<BTreeMap<_, _>>(),
                tombstones: tombs.into_iter().collect::<BTreeSet<_>>(),
            };
            prop_assert_eq!(decode_rga_state(&encode_rga_state(&rga).unwrap()).unwrap(), rga.clone());
            decode_record(12, k, &encode_rga_state(&rga).unwrap()).unwrap();
            prop_assert_eq!(decode_seen_op(&encode_seen_op(n)).unwrap(), n);
            decode_record(13, k, &encode_seen_op(n)).unwrap();
            let op = Op::new(key.clone(), "node", kind);
            let v = encode_op_log(n, &op).unwrap();
            prop_assert_eq!(decode_op_log(&v).unwrap(), OpLogEntry { sequence: n, op: op.clone() });
            decode_record(14, k, &v).unwrap();
        }

        #[test]
        fn random_bytes_never_panic(id in 0u16..16, key in prop::collection::vec(any::<u8>(), 0..12), value in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_record(id, &key, &value);
        }

        #[test]
        fn random_json_like_bytes_never_panic(id in 1u16..15, value in "[\\[\\]{}\":,0-9a-z null]{0,40}") {
            let mut v = 0u64.to_be_bytes().to_vec();
            v.extend_from_slice(value.as_bytes());
            let _ = decode_record(id, b"k", value.as_bytes());
            let _ = decode_record(id, b"k", &v);
        }
    }
}
