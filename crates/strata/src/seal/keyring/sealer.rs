//! The unlocked keyring: [`Sealer`] holds the data keys a [`Keyring`](super::Keyring)
//! entry opened and seals and opens record bodies with them (the body format and the
//! associated data are in `seal/cipher.rs`). It lives under the keyring because it
//! refreshes itself from the keyring it was unlocked from.

use super::Origin;
use crate::seal::aead::XChaCha;
use crate::seal::cipher::{
    body_key_id, cipher, open_raw_into, seal_raw, RecordContext, DATA_KEY_LEN, KEY_ID_LEN,
    NONCE_LEN, SEAL_OVERHEAD, TAG_LEN,
};
use crate::seal::SealError;
use std::fmt;
use std::sync::Arc;
use strata_store::{KvRead, Precondition};
use zeroize::Zeroizing;

struct SealerInner {
    keyring: Vec<u8>,
    origin: Origin,
    active: u32,
    /// Every data key the keyring holds (one, or two during a rotation), by id.
    keys: Vec<(u32, XChaCha)>,
}

/// The unlocked data keys of one keyring: seals new bodies under the active key and opens
/// bodies sealed under any key the keyring holds (both during a rotation).
///
/// Cheap to clone (shared). The keys are zeroized when the last clone is dropped and never
/// appear in `Debug` output. Obtained from [`Keyring::unlock`](super::Keyring::unlock).
#[derive(Clone)]
pub struct Sealer {
    inner: Arc<SealerInner>,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<u32> = self.inner.keys.iter().map(|(id, _)| *id).collect();
        f.debug_struct("Sealer")
            .field("keyring", &strata_store::escape_key(&self.inner.keyring))
            .field("active_key_id", &self.inner.active)
            .field("key_ids", &ids)
            .finish_non_exhaustive()
    }
}

impl Sealer {
    pub(crate) fn new(
        origin: Origin,
        active: u32,
        keys: Vec<(u32, Zeroizing<[u8; DATA_KEY_LEN]>)>,
    ) -> Self {
        let keys = keys.iter().map(|(id, k)| (*id, cipher(k))).collect();
        Sealer {
            inner: Arc::new(SealerInner {
                keyring: origin.scope.store_key().to_vec(),
                origin,
                active,
                keys,
            }),
        }
    }

    /// "The keyring still holds the bytes this sealer was unlocked from": a write sealed
    /// with this sealer carries it, so it cannot commit after a data-key rotation started
    /// (or a re-wrap) elsewhere. On a conflict, [`Sealer::refresh`] and retry.
    pub fn keyring_precondition(&self) -> Precondition {
        Precondition::Equals {
            key: self.inner.keyring.clone(),
            value: self.inner.origin.bytes.clone(),
        }
    }

    /// The sealer for the keyring as it is now: this one when it is unchanged, else the
    /// keyring re-opened through the same entry with the KEK kept from unlocking (no
    /// passphrase, no Argon2 run) — it then holds the keys of a rotation that started
    /// meanwhile. [`SealError::WrongKey`] when that entry was re-wrapped or removed: unlock
    /// again with the current credential.
    pub fn refresh<S: KvRead + ?Sized>(&self, store: &S) -> Result<Sealer, SealError> {
        let origin = &self.inner.origin;
        Ok(origin
            .scope
            .reopen(store, origin)?
            .unwrap_or_else(|| self.clone()))
    }

    /// The id of the data key new seals use.
    pub fn active_key_id(&self) -> u32 {
        self.inner.active
    }

    /// Ids of every data key this sealer can open with (ascending).
    pub fn key_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.inner.keys.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids
    }

    /// True when `body` was sealed under another key than the active one (a data-key
    /// rotation still has to re-seal it), or is not a sealed body at all.
    pub fn needs_reseal(&self, body: &[u8]) -> bool {
        body_key_id(body) != Some(self.inner.active)
    }

    /// Seals `plaintext` for `ctx` under the active key, returning the sealed body
    /// (`key id | nonce | ciphertext | tag`, [`SEAL_OVERHEAD`] bytes longer).
    pub fn seal(&self, ctx: RecordContext<'_>, plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut out = Vec::with_capacity(plaintext.len() + SEAL_OVERHEAD);
        self.seal_into(ctx, plaintext, &mut out)?;
        Ok(out)
    }

    /// Like [`Sealer::seal`], appending the sealed body to `out` (e.g. after the envelope
    /// header).
    pub fn seal_into(
        &self,
        ctx: RecordContext<'_>,
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), SealError> {
        let active = self.inner.active;
        let cipher = self.key_for(&ctx, active)?;
        ctx.with_aad(active, |aad| {
            out.extend_from_slice(&active.to_be_bytes());
            seal_raw(cipher, aad, plaintext, out)
        })?
    }

    /// Opens a sealed body for `ctx`, returning the plaintext. A body that was altered,
    /// truncated or belongs to another key, collection or header is
    /// [`SealError::Authentication`]; one sealed under a key this keyring does not hold is
    /// [`SealError::UnknownDataKey`].
    pub fn open(&self, ctx: RecordContext<'_>, body: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut out = Vec::with_capacity(body.len().saturating_sub(SEAL_OVERHEAD));
        self.open_into(ctx, body, &mut out)?;
        Ok(out)
    }

    /// Like [`Sealer::open`], appending the plaintext to `out` (e.g. after a clear
    /// envelope header); on an error `out` is left as it was.
    pub fn open_into(
        &self,
        ctx: RecordContext<'_>,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), SealError> {
        let auth = || SealError::Authentication {
            key: ctx.key.to_vec(),
        };
        let (id, sealed) = body.split_first_chunk::<KEY_ID_LEN>().ok_or_else(auth)?;
        let key_id = u32::from_be_bytes(*id);
        let cipher = self.key_for(&ctx, key_id)?;
        if ctx.with_aad(key_id, |aad| open_raw_into(cipher, aad, sealed, out))? {
            Ok(())
        } else {
            Err(auth())
        }
    }

    /// Like [`Sealer::open_into`], but the sealed body is the tail `buf[at..]` and its
    /// plaintext replaces it in place: on success `buf` holds `buf[..at]` followed by the
    /// plaintext (the ciphertext is decrypted to where the key id began — no second
    /// buffer, no copy). A body that does not authenticate is
    /// [`SealError::Authentication`] and leaves `buf[at..]` unspecified; an unknown data
    /// key ([`SealError::UnknownDataKey`]) or a body too short to be sealed leaves `buf`
    /// untouched.
    pub fn open_in_place(
        &self,
        ctx: RecordContext<'_>,
        buf: &mut Vec<u8>,
        at: usize,
    ) -> Result<(), SealError> {
        let auth = || SealError::Authentication {
            key: ctx.key.to_vec(),
        };
        let body = buf.get(at..).ok_or_else(auth)?;
        if body.len() < SEAL_OVERHEAD {
            return Err(auth());
        }
        let (id, rest) = body.split_first_chunk::<KEY_ID_LEN>().ok_or_else(auth)?;
        let (nonce, _) = rest.split_first_chunk::<NONCE_LEN>().ok_or_else(auth)?;
        let (_, tag) = body.split_last_chunk::<TAG_LEN>().ok_or_else(auth)?;
        let (key_id, nonce, tag) = (u32::from_be_bytes(*id), *nonce, *tag);
        let cipher = self.key_for(&ctx, key_id)?;
        let end = buf.len() - TAG_LEN;
        let shift = KEY_ID_LEN + NONCE_LEN;
        let body = &mut buf[at..end];
        if !ctx.with_aad(key_id, |aad| {
            cipher.open_within(&nonce, aad, &tag, body, shift)
        })? {
            return Err(auth());
        }
        buf.truncate(end - shift);
        Ok(())
    }

    /// The cipher of `key_id`, or the error naming the record and the keyring.
    fn key_for(&self, ctx: &RecordContext<'_>, key_id: u32) -> Result<&XChaCha, SealError> {
        self.cipher(key_id)
            .ok_or_else(|| SealError::UnknownDataKey {
                key: ctx.key.to_vec(),
                key_id,
                keyring: self.inner.keyring.clone(),
            })
    }

    fn cipher(&self, key_id: u32) -> Option<&XChaCha> {
        self.inner
            .keys
            .iter()
            .find(|(id, _)| *id == key_id)
            .map(|(_, c)| c)
    }
}
