//! The one error for bytes of a fixed-layout record that do not decode: the schema
//! header (`NXDB`), the document envelope (`NXDV`) and the migration checkpoint (`NXMG`)
//! fail the same ways — too short, a wrong magic, a format this build does not read, a
//! length field that disagrees with the bytes — so they share one error type
//! ([`FormatError`], naming the [`FixedRecord`]).

use std::fmt;
use strata_store::escape_key;

/// A record with a fixed binary layout (docs/format.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FixedRecord {
    /// The 8-byte schema header at `__nx/schema/<table>` (`NXDB`).
    SchemaHeader,
    /// A document's value: the 17-byte envelope header and the JSON (`NXDV`).
    DocumentEnvelope,
    /// A migration checkpoint at `__nx/migration/<table>` (`NXMG`).
    MigrationCheckpoint,
}

impl FixedRecord {
    /// The record's magic bytes.
    pub fn magic(self) -> &'static [u8; 4] {
        match self {
            FixedRecord::SchemaHeader => b"NXDB",
            FixedRecord::DocumentEnvelope => b"NXDV",
            FixedRecord::MigrationCheckpoint => b"NXMG",
        }
    }
}

impl fmt::Display for FixedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FixedRecord::SchemaHeader => "schema header",
            FixedRecord::DocumentEnvelope => "document envelope",
            FixedRecord::MigrationCheckpoint => "migration checkpoint",
        })
    }
}

/// Why the bytes of a [`FixedRecord`] could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// Not the record's length (a header is exactly 8 bytes; an envelope or a checkpoint
    /// at least its fixed part).
    #[error("{}", length_message(*.record, *.len))]
    Length {
        /// The record.
        record: FixedRecord,
        /// The length found.
        len: usize,
    },
    /// The value does not start with the record's magic.
    #[error("{}", magic_message(*.record, .found))]
    Magic {
        /// The record.
        record: FixedRecord,
        /// The four bytes found.
        found: Vec<u8>,
    },
    /// A format this build does not know (it reads format 1).
    #[error("{}", format_message(*.record, *.found))]
    Format {
        /// The record.
        record: FixedRecord,
        /// The format found.
        found: u16,
    },
    /// A length field disagrees with the bytes present (a checkpoint's cursor length).
    #[error("{} length {declared} does not match the {actual} bytes present", field_name(*.record))]
    FieldLength {
        /// The record.
        record: FixedRecord,
        /// The length the field declares.
        declared: u64,
        /// The bytes present.
        actual: usize,
    },
}

fn field_name(record: FixedRecord) -> &'static str {
    match record {
        FixedRecord::MigrationCheckpoint => "checkpoint cursor",
        FixedRecord::SchemaHeader => "schema header field",
        FixedRecord::DocumentEnvelope => "document envelope field",
    }
}

fn length_message(record: FixedRecord, len: usize) -> String {
    match record {
        FixedRecord::SchemaHeader => format!("invalid header length {len} (expected 8 bytes)"),
        FixedRecord::DocumentEnvelope => {
            format!("document value is {len} bytes, shorter than the 17-byte envelope header")
        }
        FixedRecord::MigrationCheckpoint => {
            format!("checkpoint is {len} bytes, shorter than the 16-byte fixed part")
        }
    }
}

fn magic_message(record: FixedRecord, found: &[u8]) -> String {
    let expected = String::from_utf8_lossy(record.magic());
    match record {
        FixedRecord::DocumentEnvelope => format!(
            "document value does not start with the `{expected}` magic (found {})",
            escape_key(found)
        ),
        FixedRecord::SchemaHeader => format!(
            "invalid header magic {} (expected `{expected}`)",
            escape_key(found)
        ),
        FixedRecord::MigrationCheckpoint => format!(
            "invalid checkpoint magic {} (expected `{expected}`)",
            escape_key(found)
        ),
    }
}

fn format_message(record: FixedRecord, found: u16) -> String {
    match record {
        FixedRecord::DocumentEnvelope => {
            format!("document envelope format {found} is not supported (this build reads format 1)")
        }
        FixedRecord::SchemaHeader => {
            format!("unknown schema header format {found} (this build reads format 1)")
        }
        FixedRecord::MigrationCheckpoint => {
            format!("unknown checkpoint format {found} (this build reads format 1)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each record keeps the words its message always had (operators grep logs for them).
    #[test]
    fn messages_name_the_record_and_what_is_wrong() {
        let cases = [
            (
                FormatError::Length {
                    record: FixedRecord::SchemaHeader,
                    len: 4,
                },
                "invalid header length 4 (expected 8 bytes)",
            ),
            (
                FormatError::Magic {
                    record: FixedRecord::DocumentEnvelope,
                    found: b"XXXX".to_vec(),
                },
                "document value does not start with the `NXDV` magic (found XXXX)",
            ),
            (
                FormatError::Format {
                    record: FixedRecord::MigrationCheckpoint,
                    found: 2,
                },
                "unknown checkpoint format 2 (this build reads format 1)",
            ),
            (
                FormatError::FieldLength {
                    record: FixedRecord::MigrationCheckpoint,
                    declared: 9,
                    actual: 3,
                },
                "checkpoint cursor length 9 does not match the 3 bytes present",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }
}
