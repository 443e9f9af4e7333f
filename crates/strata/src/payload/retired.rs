//! The retirement record of a collection: `__nx/retired/<collection>`, written by
//! [`crate::ops::retire`] once the store proved that no row is stored below a version.
//!
//! Value, 9 bytes: `b"NXRV" | format u8 (= 1) | below i32 BE`. Rows stored below `below`
//! are refused by every reader ([`crate::collection::CollectionError::Retired`]), and a
//! chain may start at `below` ([`crate::collection::CollectionOptions::retired_below`]).

use crate::keys::RETIRED_PREFIX;
use strata_store::{KvRead, StoreError};

/// The record's magic.
pub const RETIRED_MAGIC: [u8; 4] = *b"NXRV";
/// The record's format.
pub const RETIRED_FORMAT: u8 = 1;
/// The record's length.
pub const RETIRED_LEN: usize = 9;

/// The key of a collection's retirement record: `__nx/retired/<collection>`.
pub fn retired_key(collection: &str) -> Vec<u8> {
    [RETIRED_PREFIX, collection.as_bytes()].concat()
}

/// The record retiring every version below `below`.
pub fn encode(below: i32) -> [u8; RETIRED_LEN] {
    let mut out = [0u8; RETIRED_LEN];
    out[..4].copy_from_slice(&RETIRED_MAGIC);
    out[4] = RETIRED_FORMAT;
    out[5..].copy_from_slice(&below.to_be_bytes());
    out
}

/// Why a retirement record cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupted retirement record `__nx/retired/{collection}`: {reason}; restore the record from a backup, or delete it and run `retire` again (it proves the retirement anew)")]
pub struct RetiredRecordError {
    /// The collection.
    pub collection: String,
    /// What is wrong.
    pub reason: String,
}

/// The version below which `collection`'s rows are retired, from the record's bytes.
pub fn decode(collection: &str, bytes: &[u8]) -> Result<i32, RetiredRecordError> {
    let fail = |reason: String| RetiredRecordError {
        collection: collection.to_string(),
        reason,
    };
    if bytes.len() != RETIRED_LEN {
        return Err(fail(format!(
            "expected {RETIRED_LEN} bytes, found {}",
            bytes.len()
        )));
    }
    if bytes[..4] != RETIRED_MAGIC {
        return Err(fail("wrong magic (expected NXRV)".into()));
    }
    if bytes[4] != RETIRED_FORMAT {
        return Err(fail(format!(
            "unsupported format {} (this build reads format {RETIRED_FORMAT})",
            bytes[4]
        )));
    }
    let mut v = [0u8; 4];
    v.copy_from_slice(&bytes[5..]);
    let below = i32::from_be_bytes(v);
    if below <= crate::payload::INITIAL_PAYLOAD_VERSION {
        return Err(fail(format!(
            "retires below v{below}, which retires nothing"
        )));
    }
    Ok(below)
}

/// Reads `collection`'s retirement: `Ok(None)` when nothing is retired.
pub fn read<S: KvRead + ?Sized>(
    store: &S,
    collection: &str,
) -> Result<Result<Option<i32>, RetiredRecordError>, StoreError> {
    Ok(match store.get(&retired_key(collection))? {
        None => Ok(None),
        Some(bytes) => decode(collection, &bytes).map(Some),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_nine_bytes_and_round_trips() {
        let bytes = encode(3);
        assert_eq!(bytes, [b'N', b'X', b'R', b'V', 1, 0, 0, 0, 3]);
        assert_eq!(decode("c", &bytes), Ok(3));
        assert_eq!(retired_key("accounts"), b"__nx/retired/accounts".to_vec());
    }

    #[test]
    fn damaged_records_are_refused_with_the_collection() {
        assert!(decode("c", &[]).is_err());
        let mut wrong_magic = encode(3);
        wrong_magic[0] = b'X';
        assert!(decode("c", &wrong_magic).is_err());
        let mut wrong_format = encode(3);
        wrong_format[4] = 2;
        let e = decode("c", &wrong_format).unwrap_err();
        assert!(e.to_string().contains("__nx/retired/c"), "{e}");
        assert!(
            decode("c", &encode(1)).is_err(),
            "retiring below v1 retires nothing"
        );
    }
}
