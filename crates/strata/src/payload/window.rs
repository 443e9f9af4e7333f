//! The deploy window of a collection: two builds live at once.
//!
//! ```text
//! key:   __nx/window/<collection>
//! value: 9 bytes: b"NXWN" | format u8 (= 1) | operational version i32 BE
//!
//! key:   __nx/builds/<client-id>/<collection>
//! value: 9 bytes: b"NXBV" | format u8 (= 1) | the payload version the client's build knows i32 BE
//! ```
//!
//! While the window record exists, the collection's *operational version* is the one it
//! holds: a build that knows a newer version and declares the downcasts down to it reads
//! everything through its upcasts and writes every row at the operational version through
//! its downcasts, so builds at the operational version keep reading and writing every
//! document. [`crate::ops::window`] opens, completes (the operational version moves up,
//! the sweep upcasts the rows, the record goes) and rolls back windows. The build records
//! let `complete` wait for the clients of older builds (their presence decides which are
//! live).

use crate::keys::{BUILDS_PREFIX, WINDOW_PREFIX};

/// The window record's magic.
pub const WINDOW_MAGIC: [u8; 4] = *b"NXWN";
/// A build record's magic.
pub const BUILD_MAGIC: [u8; 4] = *b"NXBV";
/// The format of both records.
pub const WINDOW_FORMAT: u8 = 1;
/// The length of both records.
pub const WINDOW_LEN: usize = 9;

/// The key of a collection's window record: `__nx/window/<collection>`.
pub fn window_key(collection: &str) -> Vec<u8> {
    [WINDOW_PREFIX, collection.as_bytes()].concat()
}

/// The prefix of one client's build records: `__nx/builds/<client-id>/` (removed with
/// its presence record when the client closes).
pub fn client_builds_prefix(client: &str) -> Vec<u8> {
    [BUILDS_PREFIX, client.as_bytes(), b"/"].concat()
}

/// The key of one client's build record for `collection`:
/// `__nx/builds/<client-id>/<collection>`.
pub fn build_key(collection: &str, client: &str) -> Vec<u8> {
    [client_builds_prefix(client), collection.as_bytes().to_vec()].concat()
}

/// The client id and collection of a build record's key (`None`: not one).
pub fn parse_build_key(key: &[u8]) -> Option<(&str, &str)> {
    let rest = std::str::from_utf8(key.strip_prefix(BUILDS_PREFIX)?).ok()?;
    rest.split_once('/')
}

fn encode(magic: [u8; 4], version: i32) -> [u8; WINDOW_LEN] {
    let mut out = [0u8; WINDOW_LEN];
    out[..4].copy_from_slice(&magic);
    out[4] = WINDOW_FORMAT;
    out[5..].copy_from_slice(&version.to_be_bytes());
    out
}

/// The window record holding `operational`.
pub fn encode_window(operational: i32) -> [u8; WINDOW_LEN] {
    encode(WINDOW_MAGIC, operational)
}

/// A build record for a build that knows `version`.
pub fn encode_build(version: i32) -> [u8; WINDOW_LEN] {
    encode(BUILD_MAGIC, version)
}

/// Why a window or build record cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupted deploy-window record `{key}`: {reason}; no document is affected: delete this record (a window record: the window closes and every build writes at its own version; a build record: it is written again when that client reopens the collection)")]
pub struct WindowRecordError {
    /// The record's key, escaped.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

fn decode(magic: [u8; 4], key: &[u8], bytes: &[u8]) -> Result<i32, WindowRecordError> {
    let fail = |reason: String| WindowRecordError {
        key: strata_store::escape_key(key),
        reason,
    };
    if bytes.len() != WINDOW_LEN {
        return Err(fail(format!(
            "expected {WINDOW_LEN} bytes, found {}",
            bytes.len()
        )));
    }
    if bytes[..4] != magic {
        return Err(fail(format!(
            "wrong magic (expected {})",
            String::from_utf8_lossy(&magic)
        )));
    }
    if bytes[4] != WINDOW_FORMAT {
        return Err(fail(format!(
            "unsupported format {} (this build reads format {WINDOW_FORMAT})",
            bytes[4]
        )));
    }
    let mut v = [0u8; 4];
    v.copy_from_slice(&bytes[5..]);
    let version = i32::from_be_bytes(v);
    if version < crate::payload::INITIAL_PAYLOAD_VERSION {
        return Err(fail(format!("names payload version {version}, below 1")));
    }
    Ok(version)
}

/// The operational version from a window record's bytes.
pub fn decode_window(collection: &str, bytes: &[u8]) -> Result<i32, WindowRecordError> {
    decode(WINDOW_MAGIC, &window_key(collection), bytes)
}

/// The version a build record names.
pub fn decode_build(key: &[u8], bytes: &[u8]) -> Result<i32, WindowRecordError> {
    decode(BUILD_MAGIC, key, bytes)
}

/// Reads `collection`'s operational version: `Ok(None)` when no window is open.
pub fn read_operational<S: strata_store::KvRead + ?Sized>(
    store: &S,
    collection: &str,
) -> Result<Result<Option<i32>, WindowRecordError>, strata_store::StoreError> {
    Ok(match store.get(&window_key(collection))? {
        None => Ok(None),
        Some(bytes) => decode_window(collection, &bytes).map(Some),
    })
}

/// Opens `collection`'s window at `operational` if no window is open: `Ok(false)` when a
/// record was there already (written concurrently; nothing was written).
pub fn create<S: strata_store::KvWrite + ?Sized>(
    store: &S,
    collection: &str,
    operational: i32,
) -> Result<bool, strata_store::StoreError> {
    let key = window_key(collection);
    let batch = strata_store::Batch::new()
        .require(key.clone(), None)
        .set(key, encode_window(operational).to_vec());
    match store.apply(batch) {
        Ok(()) => Ok(true),
        Err(e) if e.is_conflict() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Records that client `client` runs a build knowing payload `version` of `collection`.
pub fn register_build<S: strata_store::KvWrite + ?Sized>(
    store: &S,
    collection: &str,
    client: &str,
    version: i32,
) -> Result<(), strata_store::StoreError> {
    store.apply(strata_store::Batch::new().set(
        build_key(collection, client),
        encode_build(version).to_vec(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_nine_bytes_and_round_trip() {
        assert_eq!(encode_window(2), [b'N', b'X', b'W', b'N', 1, 0, 0, 0, 2]);
        assert_eq!(decode_window("c", &encode_window(2)), Ok(2));
        assert_eq!(window_key("orders"), b"__nx/window/orders".to_vec());
        let k = build_key("orders", "abc");
        assert_eq!(k, b"__nx/builds/abc/orders".to_vec());
        assert_eq!(parse_build_key(&k), Some(("abc", "orders")));
        assert_eq!(decode_build(&k, &encode_build(3)), Ok(3));
    }

    #[test]
    fn damaged_records_are_refused_naming_the_key() {
        let e = decode_window("c", &encode_build(2)).unwrap_err();
        assert!(e.to_string().contains("__nx/window/c"), "{e}");
        assert!(decode_window("c", &[1, 2]).is_err());
        let mut f = encode_window(2);
        f[4] = 9;
        assert!(decode_window("c", &f).is_err());
        assert!(decode_window("c", &encode_window(0)).is_err());
    }
}
