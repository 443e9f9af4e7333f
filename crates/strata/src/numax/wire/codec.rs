//! Value codecs of the 14 tables: fixed-width integers, materialized JSON, state JSON and
//! op-log records.

use super::{
    GCounterState, LwwMapState, LwwRegisterState, ORSetState, Op, OpLogEntry, PNCounterState,
    RgaState,
};
use crate::numax::error::DecodeError;
use serde::{de::DeserializeOwned, Serialize};

fn to_json<T: Serialize>(table: &'static str, value: &T) -> Result<Vec<u8>, DecodeError> {
    serde_json::to_vec(value).map_err(|e| DecodeError::Encode {
        table,
        reason: e.to_string(),
    })
}

fn from_json<T: DeserializeOwned>(table: &'static str, bytes: &[u8]) -> Result<T, DecodeError> {
    serde_json::from_slice(bytes)
        .map_err(|e| DecodeError::invalid(table, format!("invalid JSON: {e}")))
}

fn fixed8(table: &'static str, bytes: &[u8]) -> Result<[u8; 8], DecodeError> {
    <[u8; 8]>::try_from(bytes).map_err(|_| {
        DecodeError::invalid(
            table,
            format!("expected exactly 8 bytes, found {}", bytes.len()),
        )
    })
}

/// Encodes a `gcounter-materialized` value: u64 little-endian.
pub fn encode_gcounter_materialized(value: u64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

/// Decodes a `gcounter-materialized` value (exactly 8 bytes).
pub fn decode_gcounter_materialized(bytes: &[u8]) -> Result<u64, DecodeError> {
    fixed8("gcounter-materialized", bytes).map(u64::from_le_bytes)
}

/// Encodes a `pncounter-materialized` value: i64 little-endian.
pub fn encode_pncounter_materialized(value: i64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

/// Decodes a `pncounter-materialized` value (exactly 8 bytes).
pub fn decode_pncounter_materialized(bytes: &[u8]) -> Result<i64, DecodeError> {
    fixed8("pncounter-materialized", bytes).map(i64::from_le_bytes)
}

/// Encodes a `seen-ops` value: the sequence as u64 big-endian.
pub fn encode_seen_op(sequence: u64) -> Vec<u8> {
    sequence.to_be_bytes().to_vec()
}

/// Decodes a `seen-ops` value (exactly 8 bytes).
pub fn decode_seen_op(bytes: &[u8]) -> Result<u64, DecodeError> {
    fixed8("seen-ops", bytes).map(u64::from_be_bytes)
}

/// Encodes `lww-register-materialized`: the raw value bytes.
pub fn encode_lww_register_materialized(value: &[u8]) -> Vec<u8> {
    value.to_vec()
}

/// Encodes `lww-map-materialized`: `[[field,[u8..]],..]` in the given order.
pub fn encode_lww_map_materialized(entries: &[(String, Vec<u8>)]) -> Result<Vec<u8>, DecodeError> {
    to_json("lww-map-materialized", &entries)
}

/// Decodes `lww-map-materialized`.
pub fn decode_lww_map_materialized(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, DecodeError> {
    from_json("lww-map-materialized", bytes)
}

/// Encodes `orset-materialized`: `[element,..]`.
pub fn encode_orset_materialized(elements: &[String]) -> Result<Vec<u8>, DecodeError> {
    to_json("orset-materialized", &elements)
}

/// Decodes `orset-materialized`.
pub fn decode_orset_materialized(bytes: &[u8]) -> Result<Vec<String>, DecodeError> {
    from_json("orset-materialized", bytes)
}

/// Encodes `rga-materialized`: `[[u8..],..]` (visible values in order).
pub fn encode_rga_materialized(values: &[Vec<u8>]) -> Result<Vec<u8>, DecodeError> {
    to_json("rga-materialized", &values)
}

/// Decodes `rga-materialized`.
pub fn decode_rga_materialized(bytes: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
    from_json("rga-materialized", bytes)
}

macro_rules! state_codec {
    ($ty:ty, $table:literal, $enc:ident, $dec:ident) => {
        impl $ty {
            /// Encodes the state as its table's JSON.
            pub fn to_json(&self) -> Result<Vec<u8>, DecodeError> {
                to_json($table, self)
            }
            /// Decodes the state from its table's JSON.
            pub fn from_json(bytes: &[u8]) -> Result<Self, DecodeError> {
                from_json($table, bytes)
            }
        }
        #[doc = concat!("Encodes a `", $table, "` value.")]
        pub fn $enc(state: &$ty) -> Result<Vec<u8>, DecodeError> {
            state.to_json()
        }
        #[doc = concat!("Decodes a `", $table, "` value.")]
        pub fn $dec(bytes: &[u8]) -> Result<$ty, DecodeError> {
            <$ty>::from_json(bytes)
        }
    };
}

state_codec!(
    GCounterState,
    "gcounter-state",
    encode_gcounter_state,
    decode_gcounter_state
);
state_codec!(
    PNCounterState,
    "pncounter-state",
    encode_pncounter_state,
    decode_pncounter_state
);
state_codec!(
    LwwRegisterState,
    "lww-register-state",
    encode_lww_register_state,
    decode_lww_register_state
);
state_codec!(
    LwwMapState,
    "lww-map-state",
    encode_lww_map_state,
    decode_lww_map_state
);
state_codec!(
    ORSetState,
    "orset-state",
    encode_orset_state,
    decode_orset_state
);

/// Encodes an `rga-state` value.
pub fn encode_rga_state(state: &RgaState) -> Result<Vec<u8>, DecodeError> {
    to_json("rga-state", state)
}

/// Decodes an `rga-state` value, also checking that every element is stored under its own
/// id (an invariant every Numax release keeps).
pub fn decode_rga_state(bytes: &[u8]) -> Result<RgaState, DecodeError> {
    let state: RgaState = from_json("rga-state", bytes)?;
    if let Some((k, e)) = state.elements.iter().find(|(k, e)| **k != e.id) {
        return Err(DecodeError::invalid(
            "rga-state",
            format!("element stored under `{k}` has id `{}`", e.id),
        ));
    }
    Ok(state)
}

/// Encodes an op as its JSON.
pub fn encode_op(op: &Op) -> Result<Vec<u8>, DecodeError> {
    to_json("op-log", op)
}

/// Decodes an op from its JSON.
pub fn decode_op(bytes: &[u8]) -> Result<Op, DecodeError> {
    from_json("op-log", bytes)
}

/// Encodes an `op-log` value: u64 big-endian `sequence`, then the op JSON.
pub fn encode_op_log(sequence: u64, op: &Op) -> Result<Vec<u8>, DecodeError> {
    let json = encode_op(op)?;
    let mut out = Vec::with_capacity(8 + json.len());
    out.extend_from_slice(&sequence.to_be_bytes());
    out.extend_from_slice(&json);
    Ok(out)
}

/// Decodes an `op-log` value (sequence + op JSON). Does not check the op id against the
/// key; [`decode_op_log_record`] does.
pub fn decode_op_log(bytes: &[u8]) -> Result<OpLogEntry, DecodeError> {
    let (seq, json) = match bytes.split_first_chunk::<8>() {
        Some(parts) => parts,
        None => {
            return Err(DecodeError::invalid(
                "op-log",
                format!(
                    "expected at least 8 bytes (sequence) before the op JSON, found {}",
                    bytes.len()
                ),
            ))
        }
    };
    Ok(OpLogEntry {
        sequence: u64::from_be_bytes(*seq),
        op: decode_op(json)?,
    })
}

/// Decodes an `op-log` record and checks that the op's id equals the key suffix.
pub fn decode_op_log_record(key_suffix: &str, bytes: &[u8]) -> Result<OpLogEntry, DecodeError> {
    let entry = decode_op_log(bytes)?;
    if entry.op.id != key_suffix {
        return Err(DecodeError::invalid(
            "op-log",
            format!(
                "op id `{}` does not match key suffix `{key_suffix}`",
                entry.op.id
            ),
        ));
    }
    Ok(entry)
}
