//! `strata inspect` of a Numax sync table: each record decoded with the table's codec
//! ([`strata::numax::wire`]) into JSON a person can read — an op-log record as
//! `{"sequence", "op": {"id", "origin", "kind": {"<Variant>": {…}}}}`, a counter as its
//! number, a seen-op as `{"sequence"}`, a state as its JSON. Byte payloads (register and
//! map values, RGA elements, op values) are a string when they are UTF-8 text, else
//! `{"hex": "…"}`. A record that does not decode is shown as stored (hex) with the reason.

use serde_json::{json, Value};
use std::io::Write;
use strata::numax::decode::{self, DecodeError};
use strata::numax::wire;

/// The decoded view of one record of Numax table `table_id` (`suffix`: the key after the
/// table's prefix), or why it does not decode (the record's checks of certification,
/// [`decode::decode_record`], included).
pub(crate) fn view(table_id: u16, suffix: &[u8], value: &[u8]) -> Result<Value, String> {
    decode::decode_record(table_id, suffix, value).map_err(|e| e.reason())?;
    decoded(table_id, value).map_err(|e| e.reason())
}

fn decoded(table_id: u16, v: &[u8]) -> Result<Value, DecodeError> {
    Ok(match table_id {
        1 => json!(wire::decode_gcounter_materialized(v)?),
        2 => readable(json!(wire::decode_gcounter_state(v)?)),
        3 => json!(wire::decode_pncounter_materialized(v)?),
        4 => readable(json!(wire::decode_pncounter_state(v)?)),
        5 => bytes(v),
        6 => readable(json!(wire::decode_lww_register_state(v)?)),
        7 => Value::Object(
            wire::decode_lww_map_materialized(v)?
                .into_iter()
                .map(|(field, value)| (field, bytes(&value)))
                .collect(),
        ),
        8 => readable(json!(wire::decode_lww_map_state(v)?)),
        9 => json!(wire::decode_orset_materialized(v)?),
        10 => readable(json!(wire::decode_orset_state(v)?)),
        11 => Value::Array(
            wire::decode_rga_materialized(v)?
                .iter()
                .map(|b| bytes(b))
                .collect(),
        ),
        12 => readable(json!(wire::decode_rga_state(v)?)),
        13 => json!({ "sequence": wire::decode_seen_op(v)? }),
        14 => {
            let entry = wire::decode_op_log(v)?;
            json!({ "sequence": entry.sequence, "op": readable(json!(entry.op)) })
        }
        table_id => return Err(DecodeError::UnknownTable { table_id }),
    })
}

/// A record under `--json`: `{"key", "value"}` decoded, or `{"key", "error",
/// "value_hex"}` when it does not decode.
pub(crate) fn record_json(key: &str, value: &[u8], view: Result<Value, String>) -> Value {
    match view {
        Ok(decoded) => json!({ "key": key, "value": decoded }),
        Err(reason) => {
            json!({ "key": key, "error": reason, "value_hex": strata_store::to_hex(value) })
        }
    }
}

/// A record as one line: the key, a tab, the decoded value as compact JSON (or
/// `unreadable (why): 0x…`), cut to `max_chars`.
pub(crate) fn write_record(
    out: &mut impl Write,
    key: &str,
    value: &[u8],
    view: Result<Value, String>,
    max_chars: usize,
) -> std::io::Result<()> {
    let shown = match view {
        Ok(decoded) => decoded.to_string(),
        Err(reason) => format!(
            "unreadable ({reason}), as stored: 0x{}",
            strata_store::to_hex(value)
        ),
    };
    writeln!(out, "{key}\t{}", super::cut(&shown, max_chars))
}

/// `b` as a JSON string when it is UTF-8 text (no control characters), else
/// `{"hex": "…"}`.
fn bytes(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) if !s.chars().any(char::is_control) => Value::String(s.to_string()),
        _ => json!({ "hex": strata_store::to_hex(b) }),
    }
}

/// Every `"value"` field that holds a byte array (how serde writes the `Vec<u8>` payloads
/// of the Numax states and ops) shown with [`bytes`].
fn readable(v: Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), byte_array(&v)) {
                        ("value", Some(b)) => bytes(&b),
                        _ => readable(v),
                    };
                    (k, v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(readable).collect()),
        other => other,
    }
}

fn byte_array(v: &Value) -> Option<Vec<u8>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_u64().and_then(|n| u8::try_from(n).ok()))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn states_show_their_byte_values_readably() {
        let state = wire::LwwMapState {
            entries: [
                (
                    "a".to_string(),
                    wire::LwwMapEntry {
                        value: Some(b"x".to_vec()),
                        timestamp_ms: 3,
                        writer: "n".into(),
                    },
                ),
                (
                    "b".to_string(),
                    wire::LwwMapEntry {
                        value: None,
                        timestamp_ms: 4,
                        writer: "n".into(),
                    },
                ),
            ]
            .into_iter()
            .collect(),
        };
        let v = wire::encode_lww_map_state(&state).unwrap();
        assert_eq!(
            view(8, b"k", &v).unwrap(),
            json!({"entries": {
                "a": {"value": "x", "timestamp_ms": 3, "writer": "n"},
                "b": {"value": null, "timestamp_ms": 4, "writer": "n"},
            }})
        );
        let m = wire::encode_lww_map_materialized(&[("f".into(), vec![1, 2])]).unwrap();
        assert_eq!(view(7, b"k", &m).unwrap(), json!({"f": {"hex": "0102"}}));
        let r = wire::encode_rga_materialized(&[b"a".to_vec(), vec![]]).unwrap();
        assert_eq!(view(11, b"k", &r).unwrap(), json!(["a", ""]));
        assert_eq!(view(3, b"k", &(-5i64).to_le_bytes()).unwrap(), json!(-5));
    }

    #[test]
    fn a_record_that_does_not_decode_says_why() {
        assert_eq!(
            view(1, b"k", &[1, 2, 3]).unwrap_err(),
            "expected exactly 8 bytes, found 3"
        );
        let op = wire::Op::new(
            "a",
            "n",
            wire::OpKind::RgaDelete {
                key: "d".into(),
                id: "e".into(),
            },
        );
        let v = wire::encode_op_log(1, &op).unwrap();
        assert!(view(14, b"b", &v).unwrap_err().contains("does not match"));
        assert_eq!(
            view(14, b"a", &v).unwrap()["op"]["kind"]["RgaDelete"]["id"],
            "e"
        );
    }
}
