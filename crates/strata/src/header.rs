//! The 8-byte per-table schema header and the engine's reserved key spaces.
//!
//! ```text
//! key:   __nx/schema/<table-name>
//! value: offset 0  len 4  magic  b"NXDB"
//!        offset 4  len 2  schema version, u16 big-endian
//!        offset 6  len 2  table id,       u16 big-endian
//! ```
use crate::format::{FixedRecord, FormatError};

/// Every key strata manages starts with this prefix; application keys outside it are
/// never touched.
pub const RESERVED_PREFIX: &[u8] = crate::keys::RESERVED_PREFIX;
/// Prefix of schema header keys: `__nx/schema/<table-name>`.
pub const SCHEMA_PREFIX: &[u8] = crate::keys::SCHEMA_PREFIX;
/// Prefix of migration checkpoint keys: `__nx/migration/<table-name>`.
pub const MIGRATION_PREFIX: &[u8] = crate::keys::MIGRATION_PREFIX;
/// Magic bytes at the start of a schema header.
pub const HEADER_MAGIC: [u8; 4] = *b"NXDB";
/// Exact length of a schema header value.
pub const HEADER_LEN: usize = 8;

/// A decoded schema header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaHeader {
    /// The table's schema version.
    pub version: u16,
    /// The table id the header was written for.
    pub table_id: u16,
}

impl SchemaHeader {
    /// A header for `table_id` at `version`.
    pub fn new(version: u16, table_id: u16) -> Self {
        SchemaHeader { version, table_id }
    }

    /// The 8 header bytes.
    ///
    /// ```
    /// let h = strata::layout::header::SchemaHeader::new(1, 14);
    /// assert_eq!(h.encode(), *b"NXDB\x00\x01\x00\x0e");
    /// assert_eq!(strata::layout::header::SchemaHeader::decode(&h.encode()), Ok(h));
    /// ```
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..4].copy_from_slice(&HEADER_MAGIC);
        out[4..6].copy_from_slice(&self.version.to_be_bytes());
        out[6..8].copy_from_slice(&self.table_id.to_be_bytes());
        out
    }

    /// Decodes header bytes; length is checked before magic.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let b: &[u8; HEADER_LEN] = bytes.try_into().map_err(|_| FormatError::Length {
            record: FixedRecord::SchemaHeader,
            len: bytes.len(),
        })?;
        if b[..4] != HEADER_MAGIC {
            return Err(FormatError::Magic {
                record: FixedRecord::SchemaHeader,
                found: b[..4].to_vec(),
            });
        }
        Ok(SchemaHeader {
            version: u16::from_be_bytes([b[4], b[5]]),
            table_id: u16::from_be_bytes([b[6], b[7]]),
        })
    }
}

/// The header key of a table: `__nx/schema/<table-name>`.
pub fn header_key(table: &str) -> Vec<u8> {
    [SCHEMA_PREFIX, table.as_bytes()].concat()
}

/// The checkpoint key of a table: `__nx/migration/<table-name>`.
pub fn checkpoint_key(table: &str) -> Vec<u8> {
    [MIGRATION_PREFIX, table.as_bytes()].concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let h = SchemaHeader::new(1, 13);
        assert_eq!(SchemaHeader::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn rejects_bad_magic_and_length() {
        assert!(matches!(
            SchemaHeader::decode(b"BAD!\0\x01\0\r"),
            Err(FormatError::Magic { .. })
        ));
        assert_eq!(
            SchemaHeader::decode(b"NXDB"),
            Err(FormatError::Length {
                record: FixedRecord::SchemaHeader,
                len: 4
            })
        );
        assert_eq!(
            SchemaHeader::decode(b"NXDB\0\x01\0\x01\0"),
            Err(FormatError::Length {
                record: FixedRecord::SchemaHeader,
                len: 9
            })
        );
    }

    proptest! {
        #[test]
        fn any_header_round_trips(v: u16, id: u16) {
            let h = SchemaHeader::new(v, id);
            prop_assert_eq!(SchemaHeader::decode(&h.encode()), Ok(h));
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = SchemaHeader::decode(&bytes);
        }
    }
}
