//! The document envelope: a fixed 17-byte binary header in front of the JSON bytes, so the
//! payload version and the lock version of a stored document are readable without parsing
//! its JSON.
//!
//! ```text
//! offset 0   len 4  magic            b"NXDV"
//! offset 4   len 1  envelope format  u8 (= 1)
//! offset 5   len 4  payload version  i32 big-endian (>= 1 when written by strata)
//! offset 9   len 8  lock version     u64 big-endian (1 for the first write, +1 per write)
//! offset 17  ...    the document     UTF-8 JSON object
//! ```
//!
//! The payload version is signed on purpose: a value below 1 (0, or negative) names no
//! shape an upcast chain can start from, and the read path refuses it instead of guessing.
use crate::format::{FixedRecord, FormatError};
use crate::record_error::RecordError;

use std::fmt;

/// Magic bytes at the start of every document value.
pub const ENVELOPE_MAGIC: [u8; 4] = *b"NXDV";
/// The envelope format this build writes and reads.
pub const ENVELOPE_FORMAT: u8 = 1;
/// Length of the fixed binary header; the JSON starts at this offset.
pub const ENVELOPE_HEADER_LEN: usize = 17;

/// The fixed header of a stored document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// The payload version the document's JSON was written at.
    pub payload_version: i32,
    /// The optimistic-lock version of the document.
    pub lock_version: u64,
}

impl Envelope {
    /// An envelope header.
    pub fn new(payload_version: i32, lock_version: u64) -> Self {
        Envelope {
            payload_version,
            lock_version,
        }
    }

    /// The 17 header bytes.
    pub fn header_bytes(&self) -> [u8; ENVELOPE_HEADER_LEN] {
        let mut out = [0u8; ENVELOPE_HEADER_LEN];
        out[..4].copy_from_slice(&ENVELOPE_MAGIC);
        out[4] = ENVELOPE_FORMAT;
        out[5..9].copy_from_slice(&self.payload_version.to_be_bytes());
        out[9..17].copy_from_slice(&self.lock_version.to_be_bytes());
        out
    }
}

impl fmt::Display for Envelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "payload v{} lock {}",
            self.payload_version, self.lock_version
        )
    }
}

/// Encodes a document value: the envelope header followed by `json`.
///
/// ```
/// use strata::layout::envelope::{decode, encode, Envelope};
/// let bytes = encode(Envelope::new(2, 7), br#"{"id":"a"}"#);
/// assert_eq!(&bytes[..9], b"NXDV\x01\x00\x00\x00\x02");
/// let (env, json) = decode(&bytes)?;
/// assert_eq!(env, Envelope::new(2, 7));
/// assert_eq!(json, br#"{"id":"a"}"#);
/// # Ok::<(), strata::layout::FormatError>(())
/// ```
pub fn encode(envelope: Envelope, json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ENVELOPE_HEADER_LEN + json.len());
    out.extend_from_slice(&envelope.header_bytes());
    out.extend_from_slice(json);
    out
}

/// Reads the header of a document value and returns it with the JSON bytes (borrowed, no
/// copy, no JSON parse).
pub fn decode(bytes: &[u8]) -> Result<(Envelope, &[u8]), FormatError> {
    let Some((head, json)) = bytes.split_first_chunk::<ENVELOPE_HEADER_LEN>() else {
        return Err(FormatError::Length {
            record: FixedRecord::DocumentEnvelope,
            len: bytes.len(),
        });
    };
    if head[..4] != ENVELOPE_MAGIC {
        return Err(FormatError::Magic {
            record: FixedRecord::DocumentEnvelope,
            found: head[..4].to_vec(),
        });
    }
    if head[4] != ENVELOPE_FORMAT {
        return Err(FormatError::Format {
            record: FixedRecord::DocumentEnvelope,
            found: u16::from(head[4]),
        });
    }
    let payload_version = i32::from_be_bytes([head[5], head[6], head[7], head[8]]);
    let mut lock = [0u8; 8];
    lock.copy_from_slice(&head[9..17]);
    Ok((
        Envelope {
            payload_version,
            lock_version: u64::from_be_bytes(lock),
        },
        json,
    ))
}

/// The deepest nesting of arrays and objects a document may have: serde_json's own
/// recursion limit, so every stored document can be read back.
pub const MAX_JSON_DEPTH: usize = 128;

/// Checks the JSON of a document: an object, nested at most [`MAX_JSON_DEPTH`] levels,
/// and valid JSON. The depth is measured by one scan before parsing, so a 100,000-level
/// value is refused in linear time without recursion.
pub fn check_document_json(json: &[u8]) -> Result<(), RecordError> {
    let first = json.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(RecordError::new("document JSON is not an object"));
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in json {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Err(RecordError::new(format!(
                        "document JSON is nested deeper than {MAX_JSON_DEPTH} levels"
                    )));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(json)
        .map(drop)
        .map_err(|e| RecordError::with_cause(format!("document JSON is invalid: {e}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_bytes() {
        let bytes = encode(Envelope::new(3, 258), b"{}");
        assert_eq!(
            bytes,
            b"NXDV\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x01\x02{}".to_vec()
        );
    }

    #[test]
    fn refuses_truncated_magic_and_format() {
        assert_eq!(
            decode(b"NXDV"),
            Err(FormatError::Length {
                record: FixedRecord::DocumentEnvelope,
                len: 4
            })
        );
        assert!(matches!(
            decode(b"NXDB\x01\0\0\0\x01\0\0\0\0\0\0\0\x01{}"),
            Err(FormatError::Magic { .. })
        ));
        assert_eq!(
            decode(b"NXDV\x02\0\0\0\x01\0\0\0\0\0\0\0\x01{}"),
            Err(FormatError::Format {
                record: FixedRecord::DocumentEnvelope,
                found: 2
            })
        );
    }

    #[test]
    fn negative_version_round_trips_as_negative() {
        let bytes = encode(Envelope::new(-1, 1), b"{}");
        assert_eq!(decode(&bytes).unwrap().0.payload_version, -1);
    }

    proptest! {
        #[test]
        fn any_envelope_round_trips(v: i32, lock: u64, json in proptest::collection::vec(any::<u8>(), 0..64)) {
            let bytes = encode(Envelope::new(v, lock), &json);
            let (env, rest) = decode(&bytes).unwrap();
            prop_assert_eq!(env, Envelope::new(v, lock));
            prop_assert_eq!(rest, json.as_slice());
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode(&bytes);
        }
    }
}
