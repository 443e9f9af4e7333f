//! The keyring: a database's (or a collection's) data keys, stored only wrapped.
//!
//! A keyring is one store record (`__nx/keys/database`, or
//! `__nx/keys/collection/<name>` for a per-collection key: usable through this API, but
//! sealed collections always use the database keyring, see the module docs of
//! [`crate::seal`]). It holds the id of the active
//! data key, the id of the key being retired by a rotation (if any), and one or more
//! **wrapping entries**. Each entry names how its key-encryption key (KEK) is obtained —
//! Argon2id over a passphrase (salt and parameters stored in the entry) or raw key bytes
//! the application supplies (e.g. from a KMS) — and holds every data key sealed under that
//! KEK with XChaCha20-Poly1305. The byte layout is in `docs/format.md` ("Sealed
//! documents").
//!
//! Every change is one atomic store write guarded by the keyring bytes read, so two
//! concurrent keyring operations cannot both win, and a failure writes nothing.

mod sealer;

pub use sealer::Sealer;

use super::cipher::{self, DATA_KEY_LEN};
use super::credential::Credential;
use super::record::{validate_label, Entry, KeyringRecord};
use super::SealError;
use std::fmt;
use strata_store::{Batch, KvRead, KvWrite, StoreError};
use zeroize::Zeroizing;

/// Store key of the database keyring.
pub const DATABASE_KEYRING_KEY: &[u8] = b"__nx/keys/database";
/// Prefix of per-collection keyrings (followed by the collection name).
pub const COLLECTION_KEYRING_PREFIX: &[u8] = b"__nx/keys/collection/";

/// What a keyring protects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyScope {
    /// Every sealed collection of the database (`__nx/keys/database`).
    Database,
    /// One collection (`__nx/keys/collection/<name>`).
    Collection(String),
}

impl KeyScope {
    /// The keyring's store key.
    pub fn store_key(&self) -> Vec<u8> {
        match self {
            KeyScope::Database => DATABASE_KEYRING_KEY.to_vec(),
            KeyScope::Collection(name) => {
                let mut k = COLLECTION_KEYRING_PREFIX.to_vec();
                k.extend_from_slice(name.as_bytes());
                k
            }
        }
    }
}

impl fmt::Display for KeyScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyScope::Database => f.write_str("the database"),
            KeyScope::Collection(name) => write!(f, "collection `{name}`"),
        }
    }
}

/// An entry opened by a credential: its index, its KEK and every data key.
struct Opened {
    index: usize,
    kek: Zeroizing<[u8; DATA_KEY_LEN]>,
    keys: Vec<(u32, Zeroizing<[u8; DATA_KEY_LEN]>)>,
}

/// Where a [`Sealer`] came from: the keyring bytes it was unlocked from and the entry
/// (label and KEK, zeroized on drop) that opened it.
pub(crate) struct Origin {
    pub(crate) scope: Keyring,
    pub(crate) bytes: Vec<u8>,
    pub(crate) label: String,
    pub(crate) kek: Zeroizing<[u8; DATA_KEY_LEN]>,
}

/// The keyring of one scope: creating, unlocking, re-wrapping and rotating.
///
/// ```
/// use strata::seal::{Credential, KdfParams, Keyring, RecordContext};
/// use strata_store::{MemoryStore, Store};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Store::new(MemoryStore::new());
/// let pass = Credential::passphrase("correct horse").with_kdf(KdfParams::insecure_fast());
/// let ring = Keyring::database();
/// ring.create(&store, &pass, "primary")?;
///
/// let sealer = ring.unlock(&store, &pass)?; // a wrong passphrase fails here
/// let ctx = RecordContext { key: b"__nx/doc/accounts/a1", collection_id: 1024, header: b"hdr" };
/// let body = sealer.seal(ctx, br#"{"id":"a1"}"#)?;
/// assert_eq!(sealer.open(ctx, &body)?, br#"{"id":"a1"}"#);
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Keyring {
    scope: KeyScope,
    key: Vec<u8>,
}

/// The keyring's store key as text (`__nx/keys/database`), not a byte array.
impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("scope", &self.scope)
            .field("key", &strata_store::shown_key(&self.key))
            .finish()
    }
}

impl Keyring {
    /// The keyring of `scope`.
    pub fn new(scope: KeyScope) -> Self {
        let key = scope.store_key();
        Keyring { scope, key }
    }

    /// The database keyring (`__nx/keys/database`).
    pub fn database() -> Self {
        Keyring::new(KeyScope::Database)
    }

    /// The keyring of one collection (`__nx/keys/collection/<name>`). Collections opened
    /// through a [`Database`](crate::Database) never seal under it (keys are per database,
    /// see [`crate::seal`]); it is for applications sealing with a [`Sealer`] themselves.
    pub fn collection(name: impl Into<String>) -> Self {
        Keyring::new(KeyScope::Collection(name.into()))
    }

    /// The keyring's store key.
    pub fn store_key(&self) -> &[u8] {
        &self.key
    }

    /// What it protects.
    pub fn scope(&self) -> &KeyScope {
        &self.scope
    }

    /// Reads and decodes the keyring: `None` when absent. Returns the bytes read too (the
    /// precondition of any change).
    pub fn read<S: KvRead + ?Sized>(
        &self,
        store: &S,
    ) -> Result<Option<(Vec<u8>, KeyringRecord)>, SealError> {
        match store.get(&self.key)? {
            None => Ok(None),
            Some(bytes) => {
                let rec = KeyringRecord::decode(&self.key, &bytes)?;
                Ok(Some((bytes, rec)))
            }
        }
    }

    fn read_existing<S: KvRead + ?Sized>(
        &self,
        store: &S,
    ) -> Result<(Vec<u8>, KeyringRecord), SealError> {
        match self.read(store)? {
            Some(found) => Ok(found),
            None => Err(self.missing(store)?),
        }
    }

    /// The collection this keyring seals (`None`: every collection of the database).
    fn sealed_collection(&self) -> Option<&str> {
        match &self.scope {
            KeyScope::Database => None,
            KeyScope::Collection(name) => Some(name),
        }
    }

    /// The error for an absent keyring: [`SealError::KeyringMissing`] when sealed
    /// documents exist in its scope (the keyring was lost), else
    /// [`SealError::NoKeyring`].
    fn missing<S: KvRead + ?Sized>(&self, store: &S) -> Result<SealError, SealError> {
        Ok(
            match super::mark::first_sealed_document(store, self.sealed_collection())? {
                Some(record) => SealError::KeyringMissing {
                    keyring: self.key.clone(),
                    record,
                },
                None => SealError::NoKeyring {
                    scope: self.scope.to_string(),
                    keyring: self.key.clone(),
                },
            },
        )
    }

    fn wrong_key(&self) -> SealError {
        SealError::WrongKey {
            scope: self.scope.to_string(),
            keyring: self.key.clone(),
        }
    }

    /// Opens `rec` with `cred`: the index of the entry it opened and every data key.
    fn open_with(
        &self,
        rec: &KeyringRecord,
        cred: &Credential,
    ) -> Result<Option<Opened>, SealError> {
        for (index, entry) in rec.entries.iter().enumerate() {
            let Some(kek) = cred.kek(&entry.spec)? else {
                continue;
            };
            if let Some(keys) = entry.unwrap_all(&self.key, &kek)? {
                return Ok(Some(Opened { index, kek, keys }));
            }
        }
        Ok(None)
    }

    fn open_or_wrong(&self, rec: &KeyringRecord, cred: &Credential) -> Result<Opened, SealError> {
        self.open_with(rec, cred)?.ok_or_else(|| self.wrong_key())
    }

    /// Writes `next` in place of `read` (one batch, guarded by the bytes read).
    fn replace<S: KvWrite + ?Sized>(
        &self,
        store: &S,
        read: Vec<u8>,
        next: &KeyringRecord,
    ) -> Result<(), SealError> {
        let batch = Batch::new()
            .require_eq(self.key.clone(), read)
            .set(self.key.clone(), next.encode());
        store.apply(batch).map_err(|e| self.map_conflict(e))
    }

    fn map_conflict(&self, e: StoreError) -> SealError {
        if e.is_conflict() {
            SealError::KeyringChanged {
                keyring: self.key.clone(),
            }
        } else {
            SealError::Store(e)
        }
    }

    /// A sealer for the keyring `bytes` (= `rec`), opened through entry `label` with
    /// `kek` (kept so [`Sealer::refresh`] can re-open the keyring after a change).
    fn sealer(
        &self,
        bytes: Vec<u8>,
        rec: &KeyringRecord,
        label: &str,
        kek: Zeroizing<[u8; DATA_KEY_LEN]>,
        keys: Vec<(u32, Zeroizing<[u8; DATA_KEY_LEN]>)>,
    ) -> Sealer {
        Sealer::new(
            Origin {
                scope: self.clone(),
                bytes,
                label: label.to_owned(),
                kek,
            },
            rec.active,
            keys,
        )
    }

    /// Re-opens the keyring for `origin` after it may have changed: the same sealer when
    /// the bytes are unchanged, else the entry with the same label unwrapped with the kept
    /// KEK ([`SealError::WrongKey`] when that entry was re-wrapped or removed).
    pub(crate) fn reopen<S: KvRead + ?Sized>(
        &self,
        store: &S,
        origin: &Origin,
    ) -> Result<Option<Sealer>, SealError> {
        let (bytes, rec) = self.read_existing(store)?;
        if bytes == origin.bytes {
            return Ok(None);
        }
        let Some(entry) = rec.entries.iter().find(|e| e.label == origin.label) else {
            return Err(self.wrong_key());
        };
        let keys = entry
            .unwrap_all(&self.key, &origin.kek)?
            .ok_or_else(|| self.wrong_key())?;
        let kek = Zeroizing::new(*origin.kek);
        Ok(Some(self.sealer(bytes, &rec, &origin.label, kek, keys)))
    }

    /// Creates the keyring: a fresh random data key (id 1), wrapped by `cred` in an entry
    /// named `label`. Refused when a keyring exists (nothing is overwritten), and with
    /// [`SealError::KeyringMissing`] when sealed documents exist in its scope without one
    /// (the keyring that sealed them was lost: a fresh data key could not open them).
    pub fn create<S: KvRead + KvWrite + ?Sized>(
        &self,
        store: &S,
        cred: &Credential,
        label: &str,
    ) -> Result<Sealer, SealError> {
        validate_label(label)?;
        let exists = || SealError::KeyringExists {
            scope: self.scope.to_string(),
            keyring: self.key.clone(),
        };
        if store.get(&self.key)?.is_some() {
            return Err(exists());
        }
        let spec = cred.new_spec()?;
        if let e @ SealError::KeyringMissing { .. } = self.missing(store)? {
            return Err(e);
        }
        let keys = vec![(1u32, cipher::new_data_key()?)];
        let Some(kek) = cred.kek(&spec)? else {
            return Err(self.wrong_key());
        };
        let rec = KeyringRecord {
            active: 1,
            retiring: None,
            entries: vec![Entry::wrap_all(&self.key, label, spec, &kek, &keys)?],
        };
        let bytes = rec.encode();
        let batch = Batch::new()
            .require_absent(self.key.clone())
            .set(self.key.clone(), bytes.clone());
        store.apply(batch).map_err(|e| {
            if e.is_conflict() {
                exists()
            } else {
                SealError::Store(e)
            }
        })?;
        tracing::info!(keyring = %strata_store::escape_key(&self.key), "keyring created");
        Ok(self.sealer(bytes, &rec, label, kek, keys))
    }

    /// Unlocks the keyring with `cred`: [`SealError::WrongKey`] when no entry opens with
    /// it (checked before any record is read). During a rotation the sealer opens bodies
    /// under both keys and seals under the new one.
    pub fn unlock<S: KvRead + ?Sized>(
        &self,
        store: &S,
        cred: &Credential,
    ) -> Result<Sealer, SealError> {
        let (bytes, rec) = self.read_existing(store)?;
        let opened = self.open_or_wrong(&rec, cred)?;
        let label = rec.entries[opened.index].label.clone();
        Ok(self.sealer(bytes, &rec, &label, opened.kek, opened.keys))
    }

    /// Adds an entry `label` wrapping the data key(s) under `new`, authorized by `unlock`
    /// (any existing credential). One atomic write.
    pub fn add_entry<S: KvRead + KvWrite + ?Sized>(
        &self,
        store: &S,
        unlock: &Credential,
        label: &str,
        new: &Credential,
    ) -> Result<(), SealError> {
        validate_label(label)?;
        let (read, rec) = self.read_existing(store)?;
        let keys = self.open_or_wrong(&rec, unlock)?.keys;
        if rec.entries.iter().any(|e| e.label == label) {
            return Err(SealError::DuplicateLabel {
                keyring: self.key.clone(),
                label: label.to_owned(),
            });
        }
        if rec.entries.len() >= usize::from(u8::MAX) {
            return Err(SealError::TooManyEntries {
                keyring: self.key.clone(),
            });
        }
        let spec = new.new_spec()?;
        let Some(kek) = new.kek(&spec)? else {
            return Err(self.wrong_key());
        };
        let mut next = rec.clone();
        next.entries
            .push(Entry::wrap_all(&self.key, label, spec, &kek, &keys)?);
        self.replace(store, read, &next)?;
        tracing::info!(keyring = %strata_store::escape_key(&self.key), label, "keyring entry added");
        Ok(())
    }

    /// Re-wraps the data key(s) of the entry `old` opens under `new` (same label, fresh
    /// salt and nonces): one atomic write guarded by the keyring bytes read. `old` then no
    /// longer opens the keyring; other entries are unchanged.
    pub fn rewrap<S: KvRead + KvWrite + ?Sized>(
        &self,
        store: &S,
        old: &Credential,
        new: &Credential,
    ) -> Result<(), SealError> {
        let (read, rec) = self.read_existing(store)?;
        let Opened { index, keys, .. } = self.open_or_wrong(&rec, old)?;
        let spec = new.new_spec()?;
        let Some(kek) = new.kek(&spec)? else {
            return Err(self.wrong_key());
        };
        let mut next = rec.clone();
        let label = rec.entries[index].label.clone();
        next.entries[index] = Entry::wrap_all(&self.key, &label, spec, &kek, &keys)?;
        self.replace(store, read, &next)?;
        tracing::info!(keyring = %strata_store::escape_key(&self.key), label, "keyring entry re-wrapped");
        Ok(())
    }

    /// Removes the entry `label`, authorized by `unlock` (any credential of the keyring).
    /// The last entry is never removed.
    pub fn remove_entry<S: KvRead + KvWrite + ?Sized>(
        &self,
        store: &S,
        unlock: &Credential,
        label: &str,
    ) -> Result<(), SealError> {
        let (read, rec) = self.read_existing(store)?;
        self.open_or_wrong(&rec, unlock)?;
        let Some(index) = rec.entries.iter().position(|e| e.label == label) else {
            return Err(SealError::NoSuchEntry {
                keyring: self.key.clone(),
                label: label.to_owned(),
            });
        };
        if rec.entries.len() == 1 {
            return Err(SealError::LastEntry {
                keyring: self.key.clone(),
                label: label.to_owned(),
            });
        }
        let mut next = rec.clone();
        next.entries.remove(index);
        self.replace(store, read, &next)?;
        tracing::info!(keyring = %strata_store::escape_key(&self.key), label, "keyring entry removed");
        Ok(())
    }

    /// The labels of the entries none of `credentials` opens (read-only). Starting a
    /// rotation ([`Keyring::begin_rotation`]) needs this to be empty; a caller can check
    /// it before opening a store for writing.
    pub fn entries_not_opened_by<S: KvRead + ?Sized>(
        &self,
        store: &S,
        credentials: &[&Credential],
    ) -> Result<Vec<String>, SealError> {
        let (_, rec) = self.read_existing(store)?;
        let mut missing = Vec::new();
        'entries: for entry in &rec.entries {
            for cred in credentials {
                if let Some(kek) = cred.kek(&entry.spec)? {
                    if entry.unwrap_all(&self.key, &kek)?.is_some() {
                        continue 'entries;
                    }
                }
            }
            missing.push(entry.label.clone());
        }
        Ok(missing)
    }

    /// Starts a data-key rotation: a fresh data key becomes active (new seals use it) and
    /// the old one is kept, both wrapped under every entry, so every record stays readable
    /// while the bulk pass re-seals them. Needs a credential for every entry (the new key
    /// must be wrapped under each KEK). One atomic write. Refused while a rotation is in
    /// progress: [`Keyring::unlock`] resumes it (the sealer holds both keys).
    pub fn begin_rotation<S: KvRead + KvWrite + ?Sized>(
        &self,
        store: &S,
        credentials: &[&Credential],
    ) -> Result<Sealer, SealError> {
        let (read, rec) = self.read_existing(store)?;
        if rec.retiring.is_some() {
            return Err(SealError::RotationState {
                keyring: self.key.clone(),
                state: "already has a data-key rotation in progress",
                remedy:
                    "unlock it and let the bulk pass finish re-sealing, then finish the rotation",
            });
        }
        // Every entry must open with some credential: find a KEK for each.
        let mut keks: Vec<Zeroizing<[u8; DATA_KEY_LEN]>> = Vec::with_capacity(rec.entries.len());
        let mut missing = Vec::new();
        let mut old_key = None;
        for entry in &rec.entries {
            let mut found = None;
            for cred in credentials {
                let Some(kek) = cred.kek(&entry.spec)? else {
                    continue;
                };
                if let Some(mut keys) = entry.unwrap_all(&self.key, &kek)? {
                    if old_key.is_none() {
                        old_key = keys.pop();
                    }
                    found = Some(kek);
                    break;
                }
            }
            match found {
                Some(kek) => keks.push(kek),
                None => missing.push(entry.label.clone()),
            }
        }
        let Some(old_key) = old_key else {
            return Err(self.wrong_key());
        };
        if !missing.is_empty() {
            return Err(SealError::RotationNeedsEveryEntry {
                keyring: self.key.clone(),
                missing,
            });
        }
        let new_id = rec
            .active
            .checked_add(1)
            .ok_or_else(|| SealError::RotationState {
                keyring: self.key.clone(),
                state: "has used every data key id",
                remedy: "re-create the keyring and copy the data",
            })?;
        let keys = vec![(new_id, cipher::new_data_key()?), old_key];
        let mut next = KeyringRecord {
            active: new_id,
            retiring: Some(rec.active),
            entries: Vec::with_capacity(rec.entries.len()),
        };
        for (entry, kek) in rec.entries.iter().zip(&keks) {
            next.entries.push(Entry::wrap_all(
                &self.key,
                &entry.label,
                entry.spec.clone(),
                kek,
                &keys,
            )?);
        }
        let bytes = next.encode();
        store
            .apply(
                Batch::new()
                    .require_eq(self.key.clone(), read)
                    .set(self.key.clone(), bytes.clone()),
            )
            .map_err(|e| self.map_conflict(e))?;
        tracing::info!(keyring = %strata_store::escape_key(&self.key), new_key = new_id, "data-key rotation started");
        let label = next.entries[0].label.clone();
        let kek = Zeroizing::new(*keks[0]);
        Ok(self.sealer(bytes, &next, &label, kek, keys))
    }

    /// Adds the end of a rotation to `batch`: the keyring without the retiring key, guarded
    /// by the bytes read now. For the bulk pass's final batch, once every record is sealed
    /// under the active key.
    pub fn stage_finish_rotation<S: KvRead + ?Sized>(
        &self,
        store: &S,
        batch: &mut Batch,
    ) -> Result<(), SealError> {
        let (read, rec) = self.read_existing(store)?;
        let next = rec.finish_rotation(&self.key)?;
        batch.extend(
            Batch::new()
                .require_eq(self.key.clone(), read)
                .set(self.key.clone(), next.encode()),
        );
        Ok(())
    }

    /// Ends a rotation: removes the retiring key from every entry (one atomic write).
    /// Records still sealed under it can no longer be opened, so call this only after
    /// every record was re-sealed.
    pub fn finish_rotation<S: KvRead + KvWrite + ?Sized>(
        &self,
        store: &S,
    ) -> Result<(), SealError> {
        let mut batch = Batch::new();
        self.stage_finish_rotation(store, &mut batch)?;
        store.apply(batch).map_err(|e| self.map_conflict(e))?;
        tracing::info!(keyring = %strata_store::escape_key(&self.key), "data-key rotation finished");
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::seal::{KdfParams, NONCE_LEN, WRAPPED_KEY_LEN};
    use strata_store::{MemoryStore, Store};

    #[test]
    fn created_keyring_has_the_documented_shape() {
        let store = Store::new(MemoryStore::new());
        let pass = Credential::passphrase("pw").with_kdf(KdfParams::insecure_fast());
        Keyring::database().create(&store, &pass, "main").unwrap();
        let bytes = store.get(DATABASE_KEYRING_KEY).unwrap().unwrap();
        assert_eq!(&bytes[..14], b"NXKR\x01\0\0\0\x01\0\0\0\0\x01");
        assert_eq!(&bytes[14..20], b"\x04main\x01");
        assert_eq!(&bytes[36..48], b"\0\0\0\x08\0\0\0\x01\0\0\0\x01");
        assert_eq!(&bytes[48..53], b"\x01\0\0\0\x01");
        assert_eq!(bytes.len(), 53 + NONCE_LEN + WRAPPED_KEY_LEN);
    }

    #[test]
    fn scope_keys() {
        assert_eq!(KeyScope::Database.store_key(), b"__nx/keys/database");
        assert_eq!(
            KeyScope::Collection("accounts".into()).store_key(),
            b"__nx/keys/collection/accounts"
        );
    }
}
