//! The migration checkpoint record (`NXMG`) at `__nx/migration/<table-name>`.
//!
//! ```text
//! offset 0   len 4  magic          b"NXMG"
//! offset 4   len 2  format         u16 BE (= 1)
//! offset 6   len 2  table id       u16 BE
//! offset 8   len 2  from version   u16 BE
//! offset 10  len 2  to version     u16 BE
//! offset 12  len 4  cursor length  u32 BE
//! offset 16  len n  cursor         the last processed full key (n = 0: none yet)
//! ```
use crate::format::{FixedRecord, FormatError};

use crate::header::checkpoint_key;
use crate::pass::{CheckpointCodec, RecordError};

/// Magic bytes at the start of a migration checkpoint.
pub const CHECKPOINT_MAGIC: [u8; 4] = *b"NXMG";
/// The checkpoint format this build writes and reads.
pub const CHECKPOINT_FORMAT: u16 = 1;
/// Length of the fixed part before the cursor bytes.
pub const CHECKPOINT_FIXED_LEN: usize = 16;

/// A decoded migration checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationCheckpoint {
    /// The table id the checkpoint was written for.
    pub table_id: u16,
    /// The version the step migrates from.
    pub from: u16,
    /// The version the step migrates to.
    pub to: u16,
    /// The last processed key (empty: none yet).
    pub cursor: Vec<u8>,
}

impl MigrationCheckpoint {
    /// The checkpoint bytes.
    ///
    /// ```
    /// use strata::migrate::MigrationCheckpoint;
    /// let c = MigrationCheckpoint { table_id: 14, from: 0, to: 1, cursor: vec![0, 1, 2, 255] };
    /// let bytes = c.encode();
    /// assert_eq!(&bytes[..16], b"NXMG\x00\x01\x00\x0e\x00\x00\x00\x01\x00\x00\x00\x04");
    /// assert_eq!(MigrationCheckpoint::decode(&bytes), Ok(c));
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHECKPOINT_FIXED_LEN + self.cursor.len());
        out.extend_from_slice(&CHECKPOINT_MAGIC);
        out.extend_from_slice(&CHECKPOINT_FORMAT.to_be_bytes());
        out.extend_from_slice(&self.table_id.to_be_bytes());
        out.extend_from_slice(&self.from.to_be_bytes());
        out.extend_from_slice(&self.to.to_be_bytes());
        // Keys longer than 4 GiB cannot exist in any supported backend; saturate rather
        // than wrap so such a value would fail to decode instead of mis-decoding.
        let len = u32::try_from(self.cursor.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&self.cursor);
        out
    }

    /// Decodes checkpoint bytes (length, magic, format, then the cursor length are
    /// checked, in that order).
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let fixed: &[u8; CHECKPOINT_FIXED_LEN] = bytes
            .get(..CHECKPOINT_FIXED_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(FormatError::Length {
                record: FixedRecord::MigrationCheckpoint,
                len: bytes.len(),
            })?;
        if fixed[..4] != CHECKPOINT_MAGIC {
            return Err(FormatError::Magic {
                record: FixedRecord::MigrationCheckpoint,
                found: fixed[..4].to_vec(),
            });
        }
        let u16_at = |i: usize| u16::from_be_bytes([fixed[i], fixed[i + 1]]);
        let format = u16_at(4);
        if format != CHECKPOINT_FORMAT {
            return Err(FormatError::Format {
                record: FixedRecord::MigrationCheckpoint,
                found: format,
            });
        }
        let declared = u32::from_be_bytes([fixed[12], fixed[13], fixed[14], fixed[15]]);
        let cursor = &bytes[CHECKPOINT_FIXED_LEN..];
        if u64::from(declared) != cursor.len() as u64 {
            return Err(FormatError::FieldLength {
                record: FixedRecord::MigrationCheckpoint,
                declared: u64::from(declared),
                actual: cursor.len(),
            });
        }
        Ok(MigrationCheckpoint {
            table_id: u16_at(6),
            from: u16_at(8),
            to: u16_at(10),
            cursor: cursor.to_vec(),
        })
    }
}

/// The [`CheckpointCodec`] of one migration step: `NXMG` at `__nx/migration/<table>`,
/// accepting only a checkpoint of this table id and this `from → to` step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationCheckpointCodec {
    key: Vec<u8>,
    table_id: u16,
    from: u16,
    to: u16,
}

impl MigrationCheckpointCodec {
    /// The codec of step `from → to` of table `table` (id `table_id`).
    pub fn new(table: &str, table_id: u16, from: u16, to: u16) -> Self {
        MigrationCheckpointCodec {
            key: checkpoint_key(table),
            table_id,
            from,
            to,
        }
    }
}

impl CheckpointCodec for MigrationCheckpointCodec {
    fn key(&self) -> &[u8] {
        &self.key
    }

    fn encode(&self, cursor: &[u8]) -> Vec<u8> {
        MigrationCheckpoint {
            table_id: self.table_id,
            from: self.from,
            to: self.to,
            cursor: cursor.to_vec(),
        }
        .encode()
    }

    fn decode(&self, value: &[u8]) -> Result<Vec<u8>, RecordError> {
        let c = MigrationCheckpoint::decode(value).map_err(RecordError::from_error)?;
        if c.table_id != self.table_id {
            return Err(RecordError::new(format!(
                "checkpoint table id {} does not match table id {}",
                c.table_id, self.table_id
            )));
        }
        if (c.from, c.to) != (self.from, self.to) {
            return Err(RecordError::new(format!(
                "checkpoint is for step {} -> {}, not {} -> {}",
                c.from, c.to, self.from, self.to
            )));
        }
        Ok(c.cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_with_binary_cursor() {
        let c = MigrationCheckpoint {
            table_id: 7,
            from: 0,
            to: 1,
            cursor: vec![0, 1, 2, 255],
        };
        let bytes = c.encode();
        assert_eq!(bytes.len(), 20);
        assert_eq!(
            bytes,
            b"NXMG\x00\x01\x00\x07\x00\x00\x00\x01\x00\x00\x00\x04\x00\x01\x02\xff"
        );
        assert_eq!(MigrationCheckpoint::decode(&bytes), Ok(c));
    }

    #[test]
    fn rejects_each_defect() {
        let good = MigrationCheckpoint {
            table_id: 1,
            from: 0,
            to: 1,
            cursor: b"k".to_vec(),
        }
        .encode();
        assert_eq!(
            MigrationCheckpoint::decode(&good[..15]),
            Err(FormatError::Length {
                record: FixedRecord::MigrationCheckpoint,
                len: 15
            })
        );
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(matches!(
            MigrationCheckpoint::decode(&bad),
            Err(FormatError::Magic { .. })
        ));
        let mut bad = good.clone();
        bad[5] = 2;
        assert_eq!(
            MigrationCheckpoint::decode(&bad),
            Err(FormatError::Format {
                record: FixedRecord::MigrationCheckpoint,
                found: 2
            })
        );
        let mut bad = good.clone();
        bad.push(0);
        assert_eq!(
            MigrationCheckpoint::decode(&bad),
            Err(FormatError::FieldLength {
                record: FixedRecord::MigrationCheckpoint,
                declared: 1,
                actual: 2
            })
        );
    }

    #[test]
    fn codec_refuses_other_table_or_step() {
        let codec = MigrationCheckpointCodec::new("t", 3, 0, 1);
        assert_eq!(codec.key(), b"__nx/migration/t");
        let ok = codec.encode(b"__nx/t/a");
        assert_eq!(codec.decode(&ok), Ok(b"__nx/t/a".to_vec()));
        let other_table = MigrationCheckpointCodec::new("t", 4, 0, 1).encode(b"x");
        assert!(codec.decode(&other_table).is_err());
        let other_step = MigrationCheckpointCodec::new("t", 3, 1, 2).encode(b"x");
        assert!(codec.decode(&other_step).is_err());
    }

    proptest! {
        #[test]
        fn any_checkpoint_round_trips(
            table_id: u16, from: u16, to: u16,
            cursor in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let c = MigrationCheckpoint { table_id, from, to, cursor };
            prop_assert_eq!(MigrationCheckpoint::decode(&c.encode()), Ok(c));
        }

        #[test]
        fn random_bytes_decode_or_error_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(c) = MigrationCheckpoint::decode(&bytes) {
                // Whatever decodes re-encodes to the same bytes.
                prop_assert_eq!(c.encode(), bytes);
            }
        }

        #[test]
        fn valid_prefix_with_random_tail(
            cursor in proptest::collection::vec(any::<u8>(), 0..16),
            extra in proptest::collection::vec(any::<u8>(), 1..8),
        ) {
            let mut bytes = MigrationCheckpoint { table_id: 1, from: 0, to: 1, cursor }.encode();
            bytes.extend_from_slice(&extra);
            let is_cursor_length_error = matches!(
                MigrationCheckpoint::decode(&bytes),
                Err(FormatError::FieldLength {
                record: FixedRecord::MigrationCheckpoint, .. })
            );
            prop_assert!(is_cursor_length_error);
        }
    }
}
