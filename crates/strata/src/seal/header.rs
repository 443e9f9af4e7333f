//! The clear header of a sealed document value (envelope format 2), readable without the
//! key: a leaf of the seal layer (the keyring and the sealed marks read it too).

use crate::payload::envelope::{Envelope, ENVELOPE_FORMAT, ENVELOPE_HEADER_LEN, ENVELOPE_MAGIC};

/// The envelope format of a document whose body is sealed.
pub const SEALED_ENVELOPE_FORMAT: u8 = 2;

/// The 17 header bytes of a sealed document value.
pub fn sealed_header(envelope: Envelope) -> [u8; ENVELOPE_HEADER_LEN] {
    let mut head = envelope.header_bytes();
    head[4] = SEALED_ENVELOPE_FORMAT;
    head
}

/// Reads the clear header of a document value — clear (format 1) or sealed (format 2) —
/// without the key: the envelope and whether the body is sealed. `None` when the value is
/// not an envelope of either format.
pub fn peek(value: &[u8]) -> Option<(Envelope, bool)> {
    let (head, _) = value.split_first_chunk::<ENVELOPE_HEADER_LEN>()?;
    if head[..4] != ENVELOPE_MAGIC {
        return None;
    }
    let sealed = match head[4] {
        ENVELOPE_FORMAT => false,
        SEALED_ENVELOPE_FORMAT => true,
        _ => return None,
    };
    let payload_version = i32::from_be_bytes([head[5], head[6], head[7], head[8]]);
    let mut lock = [0u8; 8];
    lock.copy_from_slice(&head[9..17]);
    Some((
        Envelope::new(payload_version, u64::from_be_bytes(lock)),
        sealed,
    ))
}
