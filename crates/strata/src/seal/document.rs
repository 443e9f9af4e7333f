//! Sealed document values: the clear envelope header with **envelope format 2**, then the
//! sealed body of the document's JSON.
//!
//! ```text
//! offset 0   len 4  magic            b"NXDV"
//! offset 4   len 1  envelope format  u8 (= 2: sealed body)
//! offset 5   len 4  payload version  i32 big-endian
//! offset 9   len 8  lock version     u64 big-endian
//! offset 17  ...    sealed body      key id | nonce | ciphertext | tag (see `cipher`)
//! ```
//!
//! The header stays readable without the key (status, version histogram, the sweep's skip
//! of current rows, the ahead guard); the 17 header bytes, the record's full store key and
//! the collection id are the body's associated data.

pub use super::header::{peek, sealed_header, SEALED_ENVELOPE_FORMAT};
use super::{RecordContext, SealError, Sealer};
use crate::payload::envelope::{Envelope, ENVELOPE_FORMAT, ENVELOPE_HEADER_LEN};

/// Encodes a sealed document value: the format-2 header for `envelope`, then `json`
/// sealed for `key` (the full store key) in collection `collection_id`.
pub fn seal_document(
    sealer: &Sealer,
    key: &[u8],
    collection_id: u16,
    envelope: Envelope,
    json: &[u8],
) -> Result<Vec<u8>, SealError> {
    let head = sealed_header(envelope);
    let mut out = Vec::with_capacity(ENVELOPE_HEADER_LEN + json.len() + super::SEAL_OVERHEAD);
    out.extend_from_slice(&head);
    sealer.seal_into(
        RecordContext {
            key,
            collection_id,
            header: &head,
        },
        json,
        &mut out,
    )?;
    Ok(out)
}

/// Opens a sealed document value: its envelope and the JSON bytes. A value that is not a
/// format-2 envelope is [`SealError::NotSealed`]; a body that does not authenticate is
/// [`SealError::Authentication`].
pub fn open_document(
    sealer: &Sealer,
    key: &[u8],
    collection_id: u16,
    value: &[u8],
) -> Result<(Envelope, Vec<u8>), SealError> {
    let not_sealed = || SealError::NotSealed { key: key.to_vec() };
    let (env, sealed) = peek(value).ok_or_else(not_sealed)?;
    if !sealed {
        return Err(not_sealed());
    }
    let (head, body) = value.split_at(ENVELOPE_HEADER_LEN);
    let json = sealer.open(
        RecordContext {
            key,
            collection_id,
            header: head,
        },
        body,
    )?;
    Ok((env, json))
}

/// True when a document value must be re-sealed by a data-key rotation: a sealed value
/// under another key than the sealer's active one, or a clear value.
pub fn needs_reseal(sealer: &Sealer, value: &[u8]) -> bool {
    match peek(value) {
        Some((_, true)) => sealer.needs_reseal(&value[ENVELOPE_HEADER_LEN..]),
        _ => true,
    }
}

/// The clear form (envelope format 1) of a stored document value, for the engine's read
/// and rewrite paths: a clear value is borrowed as is (refused with
/// [`SealError::NotSealed`] when `strict` and a sealer is given: a sealed collection
/// holds only sealed values); a sealed one is authenticated and decrypted (it needs the
/// sealer: [`SealError::NeedsKey`] without). A value that is no envelope at all is
/// returned as is, for the envelope decoder to report. The flag tells whether the value
/// was sealed.
pub(crate) fn unseal_row<'b>(
    sealer: Option<&Sealer>,
    strict: bool,
    key: &[u8],
    collection_id: u16,
    value: &'b [u8],
) -> Result<(std::borrow::Cow<'b, [u8]>, bool), SealError> {
    use std::borrow::Cow;
    match (peek(value), sealer) {
        (Some((_, false)), Some(_)) if strict => Err(SealError::NotSealed { key: key.to_vec() }),
        (None, _) | (Some((_, false)), _) => Ok((Cow::Borrowed(value), false)),
        (Some((_, true)), None) => Err(SealError::NeedsKey { key: key.to_vec() }),
        (Some((env, true)), Some(s)) => {
            // The clear header, then the body decrypted straight behind it (one copy).
            let (head, body) = value.split_at(ENVELOPE_HEADER_LEN);
            let mut clear = Vec::with_capacity(value.len().saturating_sub(super::SEAL_OVERHEAD));
            clear.extend_from_slice(&env.header_bytes());
            s.open_into(
                RecordContext {
                    key,
                    collection_id,
                    header: head,
                },
                body,
                &mut clear,
            )?;
            Ok((Cow::Owned(clear), true))
        }
    }
}

/// Turns a sealed document value (envelope format 2) into its clear form (format 1) in
/// the buffer holding it — the one the store returned: the body is authenticated and
/// decrypted to right behind the header (no second buffer, no copy of the document).
/// [`SealError::NotSealed`] (buffer untouched) for a value that is not sealed;
/// [`SealError::UnknownDataKey`] leaves it untouched too (refresh the keys and retry); on
/// [`SealError::Authentication`] its contents are unspecified (the read fails).
pub(crate) fn unseal_in_place(
    sealer: &Sealer,
    key: &[u8],
    collection_id: u16,
    value: &mut Vec<u8>,
) -> Result<(), SealError> {
    let Some((head, _)) = value.split_first_chunk::<ENVELOPE_HEADER_LEN>() else {
        return Err(SealError::NotSealed { key: key.to_vec() });
    };
    let head = *head;
    if !matches!(peek(&head), Some((_, true))) {
        return Err(SealError::NotSealed { key: key.to_vec() });
    }
    sealer.open_in_place(
        RecordContext {
            key,
            collection_id,
            header: &head,
        },
        value,
        ENVELOPE_HEADER_LEN,
    )?;
    // The clear header is the sealed one with envelope format 1.
    value[4] = ENVELOPE_FORMAT;
    Ok(())
}

/// Seals a clear document value (envelope format 1) produced by the engine.
pub(crate) fn seal_clear_row(
    sealer: &Sealer,
    key: &[u8],
    collection_id: u16,
    clear: &[u8],
) -> Result<Vec<u8>, SealError> {
    let (env, json) = crate::payload::envelope::decode(clear)
        .map_err(|_| SealError::NotSealed { key: key.to_vec() })?;
    seal_document(sealer, key, collection_id, env, json)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::payload::envelope;
    use crate::seal::{Credential, KdfParams, Keyring};
    use strata_store::{MemoryStore, Store};

    fn sealer() -> Sealer {
        let store = Store::new(MemoryStore::new());
        Keyring::database()
            .create(
                &store,
                &Credential::passphrase("p").with_kdf(KdfParams::insecure_fast()),
                "main",
            )
            .unwrap()
    }

    #[test]
    fn sealed_value_layout_and_round_trip() {
        let s = sealer();
        let key = b"__nx/doc/accounts/a1";
        let json = br#"{"id":"a1","balance_cents":501}"#;
        let v = seal_document(&s, key, 1024, Envelope::new(1, 2), json).unwrap();
        assert_eq!(
            &v[..21],
            b"NXDV\x02\0\0\0\x01\0\0\0\0\0\0\0\x02\0\0\0\x01",
            "header, then data key id 1"
        );
        assert_eq!(v.len(), 17 + 4 + 24 + json.len() + 16);
        assert_eq!(peek(&v), Some((Envelope::new(1, 2), true)));
        let (env, back) = open_document(&s, key, 1024, &v).unwrap();
        assert_eq!(env, Envelope::new(1, 2));
        assert_eq!(back, json);
        assert!(!needs_reseal(&s, &v));
        // The clear reader refuses a sealed value instead of handing out ciphertext.
        assert!(envelope::decode(&v).is_err());
    }

    #[test]
    fn header_changes_fail_authentication() {
        let s = sealer();
        let key = b"__nx/doc/c/a";
        let v = seal_document(&s, key, 1024, Envelope::new(3, 9), b"{}").unwrap();
        for i in 5..17 {
            let mut t = v.clone();
            t[i] ^= 0x01;
            let err = open_document(&s, key, 1024, &t).unwrap_err();
            assert!(err.is_authentication(), "byte {i}: {err}");
        }
    }

    #[test]
    fn unseal_row_yields_the_clear_envelope() {
        let s = sealer();
        let key = b"__nx/doc/c/a";
        let json = br#"{"id":"a","n":1}"#;
        let v = seal_document(&s, key, 1024, Envelope::new(4, 7), json).unwrap();
        let (clear, sealed) = unseal_row(Some(&s), true, key, 1024, &v).unwrap();
        assert!(sealed);
        assert_eq!(
            &*clear,
            envelope::encode(Envelope::new(4, 7), json).as_slice()
        );
        // Another record key, a flipped ciphertext bit: authentication errors.
        let err = unseal_row(Some(&s), true, b"__nx/doc/c/b", 1024, &v).unwrap_err();
        assert!(err.is_authentication(), "{err}");
        let mut t = v.clone();
        t[30] ^= 0x04;
        let err = unseal_row(Some(&s), true, key, 1024, &t).unwrap_err();
        assert!(err.is_authentication(), "{err}");
        // No key: refused, not handed out as ciphertext.
        assert!(matches!(
            unseal_row(None, true, key, 1024, &v),
            Err(SealError::NeedsKey { .. })
        ));
    }

    #[test]
    fn unseal_in_place_yields_the_clear_envelope_in_the_same_buffer() {
        let s = sealer();
        let key = b"__nx/doc/c/a";
        for json in [&b""[..], b"{}", br#"{"id":"a","n":1}"#, &[b'x'; 1500][..]] {
            let v = seal_document(&s, key, 1024, Envelope::new(4, 7), json).unwrap();
            let mut buf = v.clone();
            let cap = buf.capacity();
            let ptr = buf.as_ptr();
            unseal_in_place(&s, key, 1024, &mut buf).unwrap();
            assert_eq!(buf, envelope::encode(Envelope::new(4, 7), json));
            assert_eq!(
                (buf.as_ptr(), buf.capacity()),
                (ptr, cap),
                "no reallocation"
            );
            let (clear, _) = unseal_row(Some(&s), true, key, 1024, &v).unwrap();
            assert_eq!(&*clear, buf.as_slice(), "same as the copying path");
        }
        let v = seal_document(&s, key, 1024, Envelope::new(4, 7), b"{}").unwrap();
        // Another record key, another collection, a flipped bit anywhere: authentication.
        let mut buf = v.clone();
        let err = unseal_in_place(&s, b"__nx/doc/c/b", 1024, &mut buf).unwrap_err();
        assert!(err.is_authentication(), "{err}");
        let mut buf = v.clone();
        let err = unseal_in_place(&s, key, 1025, &mut buf).unwrap_err();
        assert!(err.is_authentication(), "{err}");
        for i in 5..v.len() {
            let mut t = v.clone();
            t[i] ^= 0x10;
            match unseal_in_place(&s, key, 1024, &mut t) {
                Err(e) if e.is_authentication() => {}
                // The key id bytes: a key this keyring does not hold.
                Err(SealError::UnknownDataKey { .. }) if (17..21).contains(&i) => {
                    t[i] ^= 0x10;
                    assert_eq!(t, v, "untouched on an unknown key");
                }
                other => panic!("byte {i}: {other:?}"),
            }
        }
        // Truncated bodies, clear values and non-envelopes: refused, buffer untouched.
        for n in [17, 20, 60] {
            let mut t = v[..n].to_vec();
            let err = unseal_in_place(&s, key, 1024, &mut t).unwrap_err();
            assert!(err.is_authentication(), "{n}: {err}");
            assert_eq!(t, &v[..n]);
        }
        let clear = envelope::encode(Envelope::new(1, 1), b"{}");
        let mut t = clear.clone();
        assert!(matches!(
            unseal_in_place(&s, key, 1024, &mut t),
            Err(SealError::NotSealed { .. })
        ));
        assert_eq!(t, clear);
        let mut t = b"NXDV".to_vec();
        assert!(matches!(
            unseal_in_place(&s, key, 1024, &mut t),
            Err(SealError::NotSealed { .. })
        ));
    }

    #[test]
    fn clear_values_are_not_sealed() {
        let s = sealer();
        let clear = envelope::encode(Envelope::new(1, 1), b"{}");
        assert_eq!(peek(&clear), Some((Envelope::new(1, 1), false)));
        assert!(matches!(
            open_document(&s, b"k", 1024, &clear),
            Err(SealError::NotSealed { .. })
        ));
        assert!(needs_reseal(&s, &clear));
        assert_eq!(peek(b"NXDV\x03\0\0\0\x01\0\0\0\0\0\0\0\x01"), None);
        assert_eq!(peek(b"NXDV"), None);
    }
}
