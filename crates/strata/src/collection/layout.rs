//! Keys and fixed records of the collections layer (see `docs/format.md`, "Collections and
//! payload").
//!
//! ```text
//! __nx/catalog/<collection>  b"NXCL" | format u8 (=1) | table id u16 BE        (7 bytes)
//! __nx/catalog-seq           last allocated collection table id, u16 BE        (2 bytes)
//! __nx/schema/<collection>   the 8-byte NXDB header (version 1, the table id)
//! __nx/doc/<collection>/<id> the document envelope (see payload::envelope)
//! __nx/sweep/<collection>    the sweep marker (JSON, see ops::sweep)
//! ```

use crate::catalog::{RecordDecoder, TableDef};
use crate::collection::CollectionError;
use crate::keys::{CATALOG_PREFIX, CATALOG_SEQ_KEY};
use crate::payload::envelope;
use crate::record_error::RecordError;
use std::sync::Arc;

/// Magic of a catalog record.
pub const CATALOG_MAGIC: [u8; 4] = *b"NXCL";
/// Format byte of a catalog record.
pub const CATALOG_FORMAT: u8 = 1;
/// Length of a catalog record.
pub const CATALOG_RECORD_LEN: usize = 7;
/// The first table id given to a collection; ids below are reserved for built-in tables.
pub const FIRST_COLLECTION_ID: u16 = 1024;
/// The schema (container) version of every collection table: documents in envelope
/// format 1.
pub const COLLECTION_TABLE_VERSION: u16 = 1;
/// The longest collection name, in bytes.
pub const MAX_NAME_LEN: usize = 200;

pub(crate) use crate::keys::{catalog_key, doc_key, doc_prefix, sweep_key};

/// Encodes a catalog record.
///
/// ```
/// assert_eq!(strata::layout::catalog::encode_catalog_record(1024), *b"NXCL\x01\x04\x00");
/// ```
pub fn encode_catalog_record(table_id: u16) -> [u8; CATALOG_RECORD_LEN] {
    let mut out = [0u8; CATALOG_RECORD_LEN];
    out[..4].copy_from_slice(&CATALOG_MAGIC);
    out[4] = CATALOG_FORMAT;
    out[5..7].copy_from_slice(&table_id.to_be_bytes());
    out
}

/// Decodes a catalog record into the table id.
pub fn decode_catalog_record(collection: &str, bytes: &[u8]) -> Result<u16, CollectionError> {
    let corrupt = |reason: String| CollectionError::CorruptCatalog {
        collection: collection.to_string(),
        key: catalog_key(collection),
        reason: reason.into(),
    };
    let b: &[u8; CATALOG_RECORD_LEN] = bytes
        .try_into()
        .map_err(|_| corrupt(format!("length {} (expected 7 bytes)", bytes.len())))?;
    if b[..4] != CATALOG_MAGIC {
        return Err(corrupt("magic is not `NXCL`".into()));
    }
    if b[4] != CATALOG_FORMAT {
        return Err(corrupt(format!("unknown format {}", b[4])));
    }
    let id = u16::from_be_bytes([b[5], b[6]]);
    if id < FIRST_COLLECTION_ID {
        return Err(corrupt(format!(
            "table id {id} is below the collection range (1024-65535)"
        )));
    }
    Ok(id)
}

/// Decodes the sequence counter.
pub fn decode_seq(bytes: &[u8]) -> Result<u16, CollectionError> {
    let b: [u8; 2] = bytes.try_into().map_err(|_| {
        seq_corrupt(format!(
            "length {} (expected 2 bytes: the last allocated table id, u16 BE)",
            bytes.len()
        ))
    })?;
    Ok(u16::from_be_bytes(b))
}

fn seq_corrupt(reason: String) -> CollectionError {
    CollectionError::CorruptCatalog {
        collection: String::new(),
        key: CATALOG_SEQ_KEY.to_vec(),
        reason: reason.into(),
    }
}

/// Decodes one record under `__nx/catalog/`: the key must name a valid collection
/// (UTF-8, [`check_name`]: not a built-in table) and the value be a valid catalog record.
/// Returns the collection name and its table id.
pub fn decode_catalog_entry(key: &[u8], value: &[u8]) -> Result<(String, u16), CollectionError> {
    let name_bytes = key.strip_prefix(CATALOG_PREFIX).unwrap_or(key);
    let corrupt = |collection: String, reason: String| CollectionError::CorruptCatalog {
        collection,
        key: key.to_vec(),
        reason: reason.into(),
    };
    let name = std::str::from_utf8(name_bytes).map_err(|_| {
        corrupt(
            strata_store::escape_key(name_bytes),
            "the collection name is not UTF-8".into(),
        )
    })?;
    if let Err(CollectionError::InvalidName { reason, .. }) = check_name(name) {
        return Err(corrupt(
            name.to_string(),
            format!("`{name}` is not a valid collection name: {reason}"),
        ));
    }
    let id = decode_catalog_record(name, value)?;
    Ok((name.to_string(), id))
}

/// Checks the table-id counter `seq` (the bytes of `__nx/catalog-seq`, if any) against
/// the highest table id recorded under `__nx/catalog/` (`highest`: the collection and its
/// id, if any). The counter must decode and be at least that id: a counter behind it, or
/// missing beside recorded collections, would hand out an id already in use.
pub fn check_seq(seq: Option<&[u8]>, highest: Option<(&str, u16)>) -> Result<(), CollectionError> {
    let value = seq.map(decode_seq).transpose()?;
    match (value, highest) {
        (None, Some((name, id))) => Err(seq_corrupt(format!(
            "it is missing although collection `{name}` holds table id {id}, so the next collection would get an id already in use"
        ))),
        (Some(v), Some((name, id))) if v < id => Err(seq_corrupt(format!(
            "it holds {v}, below table id {id} of collection `{name}`, so the next collection would get an id already in use"
        ))),
        _ => Ok(()),
    }
}

/// Checks a collection name: 1-200 bytes of `A-Z a-z 0-9 _ - .`, not `.` or `..`.
pub fn check_name(name: &str) -> Result<(), CollectionError> {
    let invalid = |reason: &str| CollectionError::InvalidName {
        collection: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(invalid("the length must be 1-200 bytes"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(invalid(
            "it contains a character outside `A-Z a-z 0-9 _ - .`",
        ));
    }
    if name == "." || name == ".." {
        return Err(invalid("`.` and `..` are reserved"));
    }
    if crate::numax::catalog().get(name).is_some() {
        return Err(invalid("it is the name of a built-in table"));
    }
    Ok(())
}

/// The managed-table definition of a collection: its name, id, document prefix, table
/// version 1, and a decoder that certifies document envelopes.
pub fn table_def(collection: &str, table_id: u16) -> TableDef {
    let decoder: RecordDecoder = Arc::new(|suffix, value| {
        if suffix.is_empty() {
            return Err(RecordError::new("empty document key"));
        }
        std::str::from_utf8(suffix)
            .map_err(|e| RecordError::with_cause("document key is not UTF-8", e))?;
        // A sealed document (envelope format 2) is certified by its clear header only:
        // its body cannot be checked without the key.
        if let Some((env, true)) = crate::seal::peek(value) {
            if env.payload_version < crate::payload::INITIAL_PAYLOAD_VERSION {
                return Err(RecordError::new(format!(
                    "payload version {} is below 1",
                    env.payload_version
                )));
            }
            if value.len() < envelope::ENVELOPE_HEADER_LEN + crate::seal::SEAL_OVERHEAD {
                return Err(RecordError::new(
                    "sealed body is shorter than its key id, nonce and tag",
                ));
            }
            return Ok(());
        }
        let (env, json) = envelope::decode(value).map_err(RecordError::from_error)?;
        if env.payload_version < crate::payload::INITIAL_PAYLOAD_VERSION {
            return Err(RecordError::new(format!(
                "payload version {} is below 1",
                env.payload_version
            )));
        }
        envelope::check_document_json(json)
    });
    TableDef::new(
        collection,
        table_id,
        doc_prefix(collection),
        COLLECTION_TABLE_VERSION,
    )
    .with_decoder(decoder)
}

/// The version below which `collection`'s rows are retired, from its retirement record
/// (see [`crate::layout::retired`]); a damaged record is [`CollectionError::Corrupted`].
pub fn decode_retired(collection: &str, bytes: &[u8]) -> Result<i32, CollectionError> {
    crate::payload::retired::decode(collection, bytes).map_err(|e| CollectionError::Corrupted {
        collection: collection.to_string(),
        key: String::from_utf8_lossy(&crate::payload::retired::retired_key(collection))
            .into_owned(),
        reason: RecordError::with_cause(e.reason.clone(), e),
    })
}

/// The version below which `collection`'s rows are retired in `store` (`None`: none).
pub fn retired_below<S: strata_store::KvRead + ?Sized>(
    store: &S,
    collection: &str,
) -> Result<Option<i32>, CollectionError> {
    match store.get(&crate::payload::retired::retired_key(collection)) {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => decode_retired(collection, &bytes).map(Some),
        Err(e) => Err(CollectionError::store(collection, e)),
    }
}

/// The operational version of `collection`'s open deploy window in `store` (`None`: no
/// window); a damaged record is [`CollectionError::Corrupted`] naming it.
pub fn window_operational<S: strata_store::KvRead + ?Sized>(
    store: &S,
    collection: &str,
) -> Result<Option<i32>, CollectionError> {
    crate::payload::window::read_operational(store, collection)
        .map_err(|e| CollectionError::store(collection, e))?
        .map_err(|e| corrupted_window(collection, e))
}

/// A damaged deploy-window or build record of `collection`.
pub(crate) fn corrupted_window(
    collection: &str,
    e: crate::payload::window::WindowRecordError,
) -> CollectionError {
    CollectionError::Corrupted {
        collection: collection.to_string(),
        key: e.key.clone(),
        reason: RecordError::from_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("accounts.v2-x_1").is_ok());
        for bad in ["", "a/b", "op-log", "..", "é", &"x".repeat(201)] {
            assert!(matches!(
                check_name(bad),
                Err(CollectionError::InvalidName { .. })
            ));
        }
    }

    #[test]
    fn catalog_record_round_trip_and_corruption() {
        assert_eq!(
            decode_catalog_record("c", &encode_catalog_record(2000)).unwrap(),
            2000
        );
        assert!(decode_catalog_record("c", b"NXCL\x01\x00\x05").is_err());
        assert!(decode_catalog_record("c", b"NXCL\x02\x04\x00").is_err());
        assert!(decode_catalog_record("c", b"NXCL\x01\x04").is_err());
    }

    #[test]
    fn decoder_certifies_envelopes() {
        let t = table_def("c", 1024);
        let ok = envelope::encode(envelope::Envelope::new(1, 1), b"{}");
        assert!(t.decode(b"__nx/doc/c/a", &ok).is_ok());
        let zero = envelope::encode(envelope::Envelope::new(0, 1), b"{}");
        assert!(t.decode(b"__nx/doc/c/a", &zero).is_err());
        let bad_json = envelope::encode(envelope::Envelope::new(1, 1), b"{");
        assert!(t.decode(b"__nx/doc/c/a", &bad_json).is_err());
        assert!(t.decode(b"__nx/doc/c/a", b"{}").is_err());
    }
}
