//! Sealing and opening record bodies with XChaCha20-Poly1305.
//!
//! A sealed body (the bytes after the clear envelope header) is:
//!
//! ```text
//! offset 0   len 4   data key id   u32 big-endian (which key of the keyring sealed it)
//! offset 4   len 24  nonce         random, fresh for every seal (192 bits: no bookkeeping)
//! offset 28  len n   ciphertext    the document bytes, encrypted
//! offset 28+n len 16 tag           Poly1305 authentication tag
//! ```
//!
//! The associated data binds the body to where it lives, so a body copied to another
//! record key, collection or envelope header fails to open:
//!
//! ```text
//! b"NXSD" | 0x01 | collection id u16 BE | key length u32 BE | record key
//!         | header length u8 | envelope header bytes | data key id u32 BE
//! ```
//!
//! The AEAD is computed by `seal/aead.rs`: ring's assembly ChaCha20-Poly1305 under the
//! HChaCha20 subkey, byte-identical to the `chacha20poly1305` crate's XChaCha20-Poly1305
//! (what sealed every record before; proved by a property test and the frozen fixtures).

use super::aead::{self, XChaCha};
use super::SealError;
use zeroize::Zeroizing;

/// Length of the data key id in front of a sealed body.
pub const KEY_ID_LEN: usize = 4;
/// Length of the XChaCha20-Poly1305 nonce.
pub const NONCE_LEN: usize = aead::XNONCE_LEN;
/// Length of the Poly1305 tag.
pub const TAG_LEN: usize = aead::TAG_LEN;
/// Bytes a sealed body adds to the plaintext: key id + nonce + tag (44).
pub const SEAL_OVERHEAD: usize = KEY_ID_LEN + NONCE_LEN + TAG_LEN;
/// Length of a data key (256 bits).
pub const DATA_KEY_LEN: usize = aead::KEY_LEN;
/// Domain tag at the start of a record's associated data.
const RECORD_AAD_MAGIC: &[u8; 4] = b"NXSD";
/// Format of the record associated data.
const RECORD_AAD_FORMAT: u8 = 1;

/// Where a sealed body lives: everything bound into its associated data.
#[derive(Debug, Clone, Copy)]
pub struct RecordContext<'a> {
    /// The record's full store key (e.g. `__nx/doc/<collection>/<id>`).
    pub key: &'a [u8],
    /// The collection's table id.
    pub collection_id: u16,
    /// The clear envelope header stored in front of the body (format, payload version,
    /// lock version), as stored.
    pub header: &'a [u8],
}

/// Associated data up to this long is built on the stack (no allocation per record).
const AAD_INLINE: usize = 256;

impl RecordContext<'_> {
    /// Runs `f` with the record's associated data for data key `key_id` (see the module
    /// docs), built in this frame: on the stack when it fits [`AAD_INLINE`] bytes, else in
    /// a vector.
    #[inline(always)]
    pub(crate) fn with_aad<R>(
        &self,
        key_id: u32,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, SealError> {
        let key_len = u32::try_from(self.key.len()).map_err(|_| SealError::InvalidParameters {
            reason: "record key longer than 4 GiB".into(),
        })?;
        let header_len =
            u8::try_from(self.header.len()).map_err(|_| SealError::InvalidParameters {
                reason: "envelope header longer than 255 bytes".into(),
            })?;
        let parts: [&[u8]; 8] = [
            RECORD_AAD_MAGIC,
            &[RECORD_AAD_FORMAT],
            &self.collection_id.to_be_bytes(),
            &key_len.to_be_bytes(),
            self.key,
            &[header_len],
            self.header,
            &key_id.to_be_bytes(),
        ];
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > AAD_INLINE {
            return Ok(f(&parts.concat()));
        }
        let mut inline = [0u8; AAD_INLINE];
        let mut at = 0;
        for p in parts {
            inline[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        Ok(f(&inline[..len]))
    }
}

/// Fills `N` bytes from the operating system's generator.
pub(crate) fn random<const N: usize>() -> Result<[u8; N], SealError> {
    aead::os_random::<N>()
}

/// A fresh random 256-bit data key (zeroized on drop).
pub(crate) fn new_data_key() -> Result<Zeroizing<[u8; DATA_KEY_LEN]>, SealError> {
    let mut key = Zeroizing::new([0u8; DATA_KEY_LEN]);
    *key = random::<DATA_KEY_LEN>()?;
    Ok(key)
}

/// Builds a cipher from 32 key bytes (the cipher zeroizes its copy on drop).
pub(crate) fn cipher(key: &[u8; DATA_KEY_LEN]) -> XChaCha {
    XChaCha::new(key)
}

/// Encrypts `plaintext` under `cipher` with a fresh nonce, appending
/// `nonce | ciphertext | tag` to `out`.
pub(crate) fn seal_raw(
    cipher: &XChaCha,
    aad: &[u8],
    plaintext: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), SealError> {
    let nonce = aead::nonce()?;
    out.reserve(NONCE_LEN + plaintext.len() + TAG_LEN);
    out.extend_from_slice(&nonce);
    let start = out.len();
    out.extend_from_slice(plaintext);
    let tag = cipher.seal_in_place(&nonce, aad, &mut out[start..])?;
    out.extend_from_slice(&tag);
    Ok(())
}

/// Opens `nonce | ciphertext | tag`; `None` when it does not authenticate.
pub(crate) fn open_raw(cipher: &XChaCha, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    open_raw_into(cipher, aad, sealed, &mut buf).then_some(buf)
}

/// Opens `nonce | ciphertext | tag`, appending the plaintext to `out`; `false` (and `out`
/// as it was) when it does not authenticate.
pub(crate) fn open_raw_into(
    cipher: &XChaCha,
    aad: &[u8],
    sealed: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    if sealed.len() < NONCE_LEN + TAG_LEN {
        return false;
    }
    let (nonce, rest) = sealed.split_at(NONCE_LEN);
    let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
    let (Ok(nonce), Ok(tag)) = (
        <&[u8; NONCE_LEN]>::try_from(nonce),
        <&[u8; TAG_LEN]>::try_from(tag),
    ) else {
        return false;
    };
    let start = out.len();
    out.extend_from_slice(ciphertext);
    if cipher.open_in_place(nonce, aad, tag, &mut out[start..]) {
        true
    } else {
        out.truncate(start);
        false
    }
}

/// The data key id a sealed body names, without opening it (`None`: too short to be a
/// sealed body).
pub fn body_key_id(body: &[u8]) -> Option<u32> {
    let (id, _) = body.split_first_chunk::<KEY_ID_LEN>()?;
    Some(u32::from_be_bytes(*id))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    /// The documented associated data, on the stack or the heap alike.
    #[test]
    fn record_aad_bytes() {
        for key_len in [0usize, 1, 20, 222, 223, 224, 300, 5000] {
            let key = vec![b'k'; key_len];
            let header = [9u8; 17];
            let ctx = RecordContext {
                key: &key,
                collection_id: 0x0400,
                header: &header,
            };
            let mut want = b"NXSD\x01\x04\x00".to_vec();
            want.extend_from_slice(&(key_len as u32).to_be_bytes());
            want.extend_from_slice(&key);
            want.push(17);
            want.extend_from_slice(&header);
            want.extend_from_slice(&[0, 0, 0, 7]);
            let aad = ctx.with_aad(7, <[u8]>::to_vec).unwrap();
            assert_eq!(aad, want, "key length {key_len}");
        }
    }

    /// A record key too long for the stack buffer seals and opens the same way.
    #[test]
    fn long_record_keys_round_trip() {
        let c = cipher(&[3u8; DATA_KEY_LEN]);
        let key = vec![b'x'; 1000];
        let ctx = RecordContext {
            key: &key,
            collection_id: 1,
            header: b"h",
        };
        let aad = ctx.with_aad(1, <[u8]>::to_vec).unwrap();
        let mut sealed = Vec::new();
        seal_raw(&c, &aad, b"{}", &mut sealed).unwrap();
        assert_eq!(open_raw(&c, &aad, &sealed).unwrap(), b"{}");
        let other = RecordContext {
            key: &key[..999],
            ..ctx
        };
        let other_aad = other.with_aad(1, <[u8]>::to_vec).unwrap();
        assert!(open_raw(&c, &other_aad, &sealed).is_none());
    }
}
