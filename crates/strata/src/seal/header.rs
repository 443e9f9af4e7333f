//! The clear header of a sealed document value (envelope format 2), readable without the
//! key, and a scan for the first sealed document of a prefix. A leaf of the seal module
//! (the keyring uses it to tell whether sealed records exist; `document` builds on it).

use crate::payload::envelope::{Envelope, ENVELOPE_FORMAT, ENVELOPE_HEADER_LEN, ENVELOPE_MAGIC};
use strata_store::{KvRead, ScanLimits, StoreError};

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

/// The store key of the first sealed document value (envelope format 2) under `prefix`,
/// in key order: the scan stops there (it reads every value under `prefix` when none is
/// sealed).
pub fn first_sealed_document<S: KvRead + ?Sized>(
    store: &S,
    prefix: &[u8],
) -> Result<Option<Vec<u8>>, StoreError> {
    let limits = ScanLimits::new(512, 64 << 20)?;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = store.scan(prefix, after.as_deref(), limits)?;
        if let Some(r) = page
            .records
            .iter()
            .find(|r| matches!(peek(&r.value), Some((_, true))))
        {
            return Ok(Some(r.key.clone()));
        }
        match (page.more, page.records.last()) {
            (true, Some(last)) => after = Some(last.key.clone()),
            _ => return Ok(None),
        }
    }
}
