//! The keyring: a database's (or a collection's) data keys, stored only wrapped.
//!
//! A keyring is one store record (`__nx/keys/database`, or
//! `__nx/keys/collection/<name>` for a per-collection key). It holds the id of the active
//! data key, the id of the key being retired by a rotation (if any), and one or more
//! **wrapping entries**. Each entry names how its key-encryption key (KEK) is obtained —
//! Argon2id over a passphrase (salt and parameters stored in the entry) or raw key bytes
//! the application supplies (e.g. from a KMS) — and holds every data key sealed under that
//! KEK with XChaCha20-Poly1305. The byte layout is in `docs/format.md` ("Sealed
//! documents").
//!
//! Every change is one atomic store write guarded by the keyring bytes read, so two
//! concurrent keyring operations cannot both win, and a failure writes nothing.

use super::cipher::{self, Sealer, DATA_KEY_LEN, NONCE_LEN, TAG_LEN};
use super::SealError;
use argon2::{Algorithm, Argon2, Params, Version};
use std::fmt;
use strata_store::{Batch, KvRead, KvWrite, StoreError};
use zeroize::Zeroizing;

/// Magic bytes at the start of a keyring record.
pub const KEYRING_MAGIC: [u8; 4] = *b"NXKR";
/// The keyring format this build writes and reads.
pub const KEYRING_FORMAT: u8 = 1;
/// Store key of the database keyring.
pub const DATABASE_KEYRING_KEY: &[u8] = b"__nx/keys/database";
/// Prefix of per-collection keyrings (followed by the collection name).
pub const COLLECTION_KEYRING_PREFIX: &[u8] = b"__nx/keys/collection/";
/// Length of an Argon2id salt in a passphrase entry.
pub const SALT_LEN: usize = 16;
/// Length of a wrapped data key: 32 ciphertext bytes + 16 tag bytes.
pub const WRAPPED_KEY_LEN: usize = DATA_KEY_LEN + TAG_LEN;
/// Longest wrapping-entry label.
pub const MAX_LABEL_LEN: usize = 64;

const KIND_PASSPHRASE: u8 = 1;
const KIND_RAW: u8 = 2;
const WRAP_AAD_MAGIC: &[u8; 4] = b"NXKW";
/// Upper bound on the Argon2 memory cost accepted from a stored keyring (4 GiB), so a
/// corrupted record cannot ask for an absurd allocation.
const MAX_STORED_M_COST_KIB: u32 = 4 * 1024 * 1024;
/// Upper bound on the Argon2 time cost accepted from a stored keyring.
const MAX_STORED_T_COST: u32 = 1024;
/// Upper bound on the Argon2 parallelism accepted from a stored keyring.
const MAX_STORED_PARALLELISM: u32 = 64;

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

/// Argon2id parameters for deriving a key-encryption key from a passphrase. Stored in the
/// passphrase's wrapping entry, so unlocking always uses the parameters it was created
/// with.
///
/// The default is the OWASP recommendation for Argon2id (19 MiB of memory, 2 passes, 1
/// lane): about 20-50 ms per unlock on a current machine. Raise `m_cost_kib` for stronger
/// protection of weak passphrases; tests may use [`KdfParams::insecure_fast`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KdfParams {
    /// Memory cost in KiB (≥ 8 × `parallelism`).
    pub m_cost_kib: u32,
    /// Number of passes (≥ 1).
    pub t_cost: u32,
    /// Lanes (≥ 1).
    pub parallelism: u32,
}

impl Default for KdfParams {
    fn default() -> Self {
        KdfParams {
            m_cost_kib: 19 * 1024,
            t_cost: 2,
            parallelism: 1,
        }
    }
}

impl KdfParams {
    /// The cheapest parameters Argon2 accepts (8 KiB, 1 pass). For tests only: they
    /// offer no protection against guessing a passphrase.
    pub fn insecure_fast() -> Self {
        KdfParams {
            m_cost_kib: 8,
            t_cost: 1,
            parallelism: 1,
        }
    }

    fn argon2(&self) -> Result<Argon2<'static>, SealError> {
        if self.m_cost_kib > MAX_STORED_M_COST_KIB
            || self.t_cost > MAX_STORED_T_COST
            || self.parallelism > MAX_STORED_PARALLELISM
        {
            return Err(SealError::InvalidParameters {
                reason: format!(
                    "Argon2id parameters {}/{}/{} exceed the limits (memory ≤ {MAX_STORED_M_COST_KIB} KiB, passes ≤ {MAX_STORED_T_COST}, lanes ≤ {MAX_STORED_PARALLELISM})",
                    self.m_cost_kib, self.t_cost, self.parallelism
                ),
            });
        }
        let params = Params::new(
            self.m_cost_kib,
            self.t_cost,
            self.parallelism,
            Some(DATA_KEY_LEN),
        )
        .map_err(|e| SealError::InvalidParameters {
            reason: format!(
                "Argon2id parameters {}/{}/{}: {e}",
                self.m_cost_kib, self.t_cost, self.parallelism
            ),
        })?;
        Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CredentialKind {
    Passphrase,
    Raw,
}

/// A secret that opens a keyring: a passphrase, or raw 256-bit key bytes supplied by the
/// application. Zeroized on drop; `Debug` shows only its kind.
pub struct Credential {
    kind: CredentialKind,
    secret: Zeroizing<Vec<u8>>,
    kdf: KdfParams,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            CredentialKind::Passphrase => "passphrase",
            CredentialKind::Raw => "raw key",
        };
        f.debug_struct("Credential")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// A passphrase. When it creates an entry, the KEK is derived with the default
    /// [`KdfParams`] unless [`Credential::with_kdf`] says otherwise.
    pub fn passphrase(passphrase: impl Into<String>) -> Self {
        Credential {
            kind: CredentialKind::Passphrase,
            secret: Zeroizing::new(passphrase.into().into_bytes()),
            kdf: KdfParams::default(),
        }
    }

    /// Raw key bytes from the application (exactly 32 bytes, used directly as the KEK).
    pub fn raw_key(key: &[u8]) -> Result<Self, SealError> {
        if key.len() != DATA_KEY_LEN {
            return Err(SealError::InvalidParameters {
                reason: format!(
                    "a raw key is {DATA_KEY_LEN} bytes, got {}; pass 256 bits of key material",
                    key.len()
                ),
            });
        }
        Ok(Credential {
            kind: CredentialKind::Raw,
            secret: Zeroizing::new(key.to_vec()),
            kdf: KdfParams::default(),
        })
    }

    /// The Argon2id parameters used when this passphrase creates a new entry (ignored
    /// for raw keys and when unlocking: entries keep their own).
    pub fn with_kdf(mut self, kdf: KdfParams) -> Self {
        self.kdf = kdf;
        self
    }

    /// A fresh KEK specification for a new entry wrapped by this credential.
    fn new_spec(&self) -> Result<KekSpec, SealError> {
        Ok(match self.kind {
            CredentialKind::Passphrase => {
                self.kdf.argon2()?;
                KekSpec::Passphrase {
                    salt: cipher::random::<SALT_LEN>()?,
                    params: self.kdf,
                }
            }
            CredentialKind::Raw => KekSpec::Raw,
        })
    }

    /// The KEK this credential gives for `spec`, or `None` when the kinds differ.
    fn kek(&self, spec: &KekSpec) -> Result<Option<Zeroizing<[u8; DATA_KEY_LEN]>>, SealError> {
        let mut kek = Zeroizing::new([0u8; DATA_KEY_LEN]);
        match (spec, self.kind) {
            (KekSpec::Passphrase { salt, params }, CredentialKind::Passphrase) => {
                params
                    .argon2()?
                    .hash_password_into(&self.secret, salt, kek.as_mut_slice())
                    .map_err(|e| SealError::InvalidParameters {
                        reason: format!("Argon2id failed: {e}"),
                    })?;
            }
            (KekSpec::Raw, CredentialKind::Raw) => kek.copy_from_slice(&self.secret),
            _ => return Ok(None),
        }
        Ok(Some(kek))
    }
}

/// How a wrapping entry's key-encryption key is obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KekSpec {
    Passphrase {
        salt: [u8; SALT_LEN],
        params: KdfParams,
    },
    Raw,
}

impl KekSpec {
    fn kind(&self) -> u8 {
        match self {
            KekSpec::Passphrase { .. } => KIND_PASSPHRASE,
            KekSpec::Raw => KIND_RAW,
        }
    }

    fn encode_params(&self, out: &mut Vec<u8>) {
        if let KekSpec::Passphrase { salt, params } = self {
            out.extend_from_slice(salt);
            out.extend_from_slice(&params.m_cost_kib.to_be_bytes());
            out.extend_from_slice(&params.t_cost.to_be_bytes());
            out.extend_from_slice(&params.parallelism.to_be_bytes());
        }
    }
}

/// One data key sealed under an entry's KEK.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wrap {
    key_id: u32,
    /// `nonce | ciphertext | tag` (24 + 32 + 16 bytes).
    sealed: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    label: String,
    spec: KekSpec,
    wraps: Vec<Wrap>,
}

impl Entry {
    fn wrap_aad(&self, keyring: &[u8], key_id: u32) -> Vec<u8> {
        let mut aad = Vec::with_capacity(48 + keyring.len() + self.label.len());
        aad.extend_from_slice(WRAP_AAD_MAGIC);
        aad.push(KEYRING_FORMAT);
        // Keyring keys are short: the store key of a scope (bounded by collection names).
        aad.extend_from_slice(&(keyring.len() as u64).to_be_bytes());
        aad.extend_from_slice(keyring);
        aad.extend_from_slice(&(self.label.len() as u64).to_be_bytes());
        aad.extend_from_slice(self.label.as_bytes());
        aad.push(self.spec.kind());
        self.spec.encode_params(&mut aad);
        aad.extend_from_slice(&key_id.to_be_bytes());
        aad
    }

    /// A new entry wrapping every key of `keys` under `kek`.
    fn wrap_all(
        keyring: &[u8],
        label: &str,
        spec: KekSpec,
        kek: &[u8; DATA_KEY_LEN],
        keys: &[(u32, Zeroizing<[u8; DATA_KEY_LEN]>)],
    ) -> Result<Entry, SealError> {
        let mut entry = Entry {
            label: label.to_owned(),
            spec,
            wraps: Vec::with_capacity(keys.len()),
        };
        let c = cipher::cipher(kek);
        for (id, key) in keys {
            let mut sealed = Vec::with_capacity(NONCE_LEN + WRAPPED_KEY_LEN);
            cipher::seal_raw(
                &c,
                &entry.wrap_aad(keyring, *id),
                key.as_slice(),
                &mut sealed,
            )?;
            entry.wraps.push(Wrap {
                key_id: *id,
                sealed,
            });
        }
        Ok(entry)
    }

    /// Opens every wrap with `kek`: `Ok(None)` when the KEK is not this entry's (its
    /// first wrap does not open), an error when only some wraps open (tampered).
    #[allow(clippy::type_complexity)]
    fn unwrap_all(
        &self,
        keyring: &[u8],
        kek: &[u8; DATA_KEY_LEN],
    ) -> Result<Option<Vec<(u32, Zeroizing<[u8; DATA_KEY_LEN]>)>>, SealError> {
        let c = cipher::cipher(kek);
        let mut keys = Vec::with_capacity(self.wraps.len());
        for (i, w) in self.wraps.iter().enumerate() {
            let Some(plain) = cipher::open_raw(&c, &self.wrap_aad(keyring, w.key_id), &w.sealed)
            else {
                if i == 0 {
                    return Ok(None);
                }
                return Err(SealError::CorruptedKeyring {
                    keyring: keyring.to_vec(),
                    reason: format!(
                        "entry `{}` opens data key {} but not data key {}",
                        self.label, self.wraps[0].key_id, w.key_id
                    ),
                });
            };
            let plain = Zeroizing::new(plain);
            let mut key = Zeroizing::new([0u8; DATA_KEY_LEN]);
            if plain.len() != DATA_KEY_LEN {
                return Err(SealError::CorruptedKeyring {
                    keyring: keyring.to_vec(),
                    reason: format!("entry `{}` wraps a key of the wrong length", self.label),
                });
            }
            key.copy_from_slice(&plain);
            keys.push((w.key_id, key));
        }
        Ok(Some(keys))
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

/// What [`KeyringRecord::entries`] tells about one wrapping entry (no secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// The entry's label.
    pub label: String,
    /// `passphrase` (Argon2id) or `raw key`.
    pub kind: &'static str,
    /// The Argon2id parameters of a passphrase entry.
    pub kdf: Option<KdfParams>,
    /// Ids of the data keys it wraps.
    pub key_ids: Vec<u32>,
}

/// A decoded keyring record. Holds only wrapped keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyringRecord {
    active: u32,
    retiring: Option<u32>,
    entries: Vec<Entry>,
}

fn corrupted(keyring: &[u8], reason: impl Into<String>) -> SealError {
    SealError::CorruptedKeyring {
        keyring: keyring.to_vec(),
        reason: reason.into(),
    }
}

fn validate_label(label: &str) -> Result<(), SealError> {
    let ok = !label.is_empty()
        && label.len() <= MAX_LABEL_LEN
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(SealError::InvalidLabel {
            label: label.to_owned(),
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    keyring: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], SealError> {
        if self.bytes.len() < n {
            return Err(corrupted(self.keyring, format!("truncated in {what}")));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    fn u8(&mut self, what: &str) -> Result<u8, SealError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32, SealError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

impl KeyringRecord {
    /// The id of the data key new seals use.
    pub fn active_key_id(&self) -> u32 {
        self.active
    }

    /// The id of the data key a rotation in progress is retiring (`None`: no rotation).
    pub fn retiring_key_id(&self) -> Option<u32> {
        self.retiring
    }

    /// The wrapping entries (labels, kinds, parameters; never key material).
    pub fn entries(&self) -> Vec<EntryInfo> {
        self.entries
            .iter()
            .map(|e| EntryInfo {
                label: e.label.clone(),
                kind: match e.spec {
                    KekSpec::Passphrase { .. } => "passphrase",
                    KekSpec::Raw => "raw key",
                },
                kdf: match &e.spec {
                    KekSpec::Passphrase { params, .. } => Some(*params),
                    KekSpec::Raw => None,
                },
                key_ids: e.wraps.iter().map(|w| w.key_id).collect(),
            })
            .collect()
    }

    fn key_ids(&self) -> Vec<u32> {
        let mut ids = vec![self.active];
        ids.extend(self.retiring);
        ids
    }

    /// The record's bytes (layout in `docs/format.md`, "Sealed documents").
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(14 + self.entries.len() * 120);
        out.extend_from_slice(&KEYRING_MAGIC);
        out.push(KEYRING_FORMAT);
        out.extend_from_slice(&self.active.to_be_bytes());
        out.extend_from_slice(&self.retiring.unwrap_or(0).to_be_bytes());
        // Entry and wrap counts and label lengths are bounded on every constructing path
        // (≤ 255 entries, ≤ 2 wraps, labels ≤ 64 bytes).
        out.push(u8::try_from(self.entries.len()).unwrap_or(u8::MAX));
        for e in &self.entries {
            out.push(u8::try_from(e.label.len()).unwrap_or(u8::MAX));
            out.extend_from_slice(e.label.as_bytes());
            out.push(e.spec.kind());
            e.spec.encode_params(&mut out);
            out.push(u8::try_from(e.wraps.len()).unwrap_or(u8::MAX));
            for w in &e.wraps {
                out.extend_from_slice(&w.key_id.to_be_bytes());
                out.extend_from_slice(&w.sealed);
            }
        }
        out
    }

    /// Decodes and checks a keyring record read at `keyring` (the store key, for errors).
    pub fn decode(keyring: &[u8], bytes: &[u8]) -> Result<KeyringRecord, SealError> {
        let mut r = Reader { bytes, keyring };
        if r.take(4, "magic")? != KEYRING_MAGIC {
            return Err(corrupted(keyring, "it does not start with `NXKR`"));
        }
        let format = r.u8("format")?;
        if format != KEYRING_FORMAT {
            return Err(corrupted(
                keyring,
                format!("format {format} is not supported (this build reads format 1)"),
            ));
        }
        let active = r.u32("active key id")?;
        let retiring = match r.u32("retiring key id")? {
            0 => None,
            id => Some(id),
        };
        if active == 0 || retiring == Some(active) {
            return Err(corrupted(keyring, "invalid data key ids"));
        }
        let count = r.u8("entry count")?;
        if count == 0 {
            return Err(corrupted(keyring, "it has no wrapping entry"));
        }
        let mut rec = KeyringRecord {
            active,
            retiring,
            entries: Vec::with_capacity(usize::from(count)),
        };
        let expected = rec.key_ids();
        for _ in 0..count {
            let len = r.u8("label length")?;
            let label = std::str::from_utf8(r.take(usize::from(len), "label")?)
                .map_err(|_| corrupted(keyring, "an entry label is not UTF-8"))?
                .to_owned();
            validate_label(&label)
                .map_err(|_| corrupted(keyring, format!("invalid entry label `{label}`")))?;
            if rec.entries.iter().any(|e| e.label == label) {
                return Err(corrupted(keyring, format!("entry `{label}` appears twice")));
            }
            let spec = match r.u8("entry kind")? {
                KIND_PASSPHRASE => {
                    let mut salt = [0u8; SALT_LEN];
                    salt.copy_from_slice(r.take(SALT_LEN, "salt")?);
                    KekSpec::Passphrase {
                        salt,
                        params: KdfParams {
                            m_cost_kib: r.u32("memory cost")?,
                            t_cost: r.u32("time cost")?,
                            parallelism: r.u32("parallelism")?,
                        },
                    }
                }
                KIND_RAW => KekSpec::Raw,
                other => {
                    return Err(corrupted(
                        keyring,
                        format!("entry `{label}` has unknown kind {other}"),
                    ))
                }
            };
            let wraps = r.u8("wrap count")?;
            let mut entry = Entry {
                label,
                spec,
                wraps: Vec::with_capacity(usize::from(wraps)),
            };
            for _ in 0..wraps {
                let key_id = r.u32("wrapped key id")?;
                let sealed = r.take(NONCE_LEN + WRAPPED_KEY_LEN, "wrapped key")?.to_vec();
                entry.wraps.push(Wrap { key_id, sealed });
            }
            let ids: Vec<u32> = entry.wraps.iter().map(|w| w.key_id).collect();
            if ids != expected {
                return Err(corrupted(
                    keyring,
                    format!(
                        "entry `{}` wraps data keys {ids:?}, expected {expected:?}",
                        entry.label
                    ),
                ));
            }
            rec.entries.push(entry);
        }
        if !r.bytes.is_empty() {
            return Err(corrupted(
                keyring,
                format!("{} trailing bytes", r.bytes.len()),
            ));
        }
        Ok(rec)
    }

    /// The record with the retiring key removed (the end of a rotation).
    pub fn finish_rotation(&self, keyring: &[u8]) -> Result<KeyringRecord, SealError> {
        let Some(retiring) = self.retiring else {
            return Err(SealError::RotationState {
                keyring: keyring.to_vec(),
                state: "has no data-key rotation in progress",
                remedy: "there is nothing to finish",
            });
        };
        let mut next = self.clone();
        next.retiring = None;
        for e in &mut next.entries {
            e.wraps.retain(|w| w.key_id != retiring);
        }
        Ok(next)
    }
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyring {
    scope: KeyScope,
    key: Vec<u8>,
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

    /// The keyring of one collection (`__nx/keys/collection/<name>`).
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
        self.read(store)?.ok_or_else(|| SealError::NoKeyring {
            scope: self.scope.to_string(),
            keyring: self.key.clone(),
        })
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
    /// named `label`. Refused when a keyring exists (nothing is overwritten).
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
        let keys = vec![(1u32, cipher::new_data_key()?)];
        let spec = cred.new_spec()?;
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
    use strata_store::{MemoryStore, Store};

    fn sample() -> KeyringRecord {
        KeyringRecord {
            active: 2,
            retiring: Some(1),
            entries: vec![
                Entry {
                    label: "alice".into(),
                    spec: KekSpec::Passphrase {
                        salt: [0x11; SALT_LEN],
                        params: KdfParams {
                            m_cost_kib: 19456,
                            t_cost: 2,
                            parallelism: 1,
                        },
                    },
                    wraps: vec![
                        Wrap {
                            key_id: 2,
                            sealed: vec![0xA2; 72],
                        },
                        Wrap {
                            key_id: 1,
                            sealed: vec![0xA1; 72],
                        },
                    ],
                },
                Entry {
                    label: "kms".into(),
                    spec: KekSpec::Raw,
                    wraps: vec![
                        Wrap {
                            key_id: 2,
                            sealed: vec![0xB2; 72],
                        },
                        Wrap {
                            key_id: 1,
                            sealed: vec![0xB1; 72],
                        },
                    ],
                },
            ],
        }
    }

    /// The byte layout documented in docs/format.md ("Sealed documents" → keyring).
    #[test]
    fn keyring_exact_bytes() {
        let mut want = Vec::new();
        want.extend_from_slice(b"NXKR"); // magic
        want.push(1); // format
        want.extend_from_slice(&[0, 0, 0, 2]); // active key id
        want.extend_from_slice(&[0, 0, 0, 1]); // retiring key id
        want.push(2); // entry count
        want.push(5); // label length
        want.extend_from_slice(b"alice");
        want.push(1); // kind: passphrase
        want.extend_from_slice(&[0x11; 16]); // salt
        want.extend_from_slice(&[0x00, 0x00, 0x4c, 0x00]); // m_cost 19456 KiB
        want.extend_from_slice(&[0, 0, 0, 2]); // t_cost
        want.extend_from_slice(&[0, 0, 0, 1]); // parallelism
        want.push(2); // wrap count
        want.extend_from_slice(&[0, 0, 0, 2]);
        want.extend_from_slice(&[0xA2; 72]);
        want.extend_from_slice(&[0, 0, 0, 1]);
        want.extend_from_slice(&[0xA1; 72]);
        want.push(3);
        want.extend_from_slice(b"kms");
        want.push(2); // kind: raw key, no parameters
        want.push(2);
        want.extend_from_slice(&[0, 0, 0, 2]);
        want.extend_from_slice(&[0xB2; 72]);
        want.extend_from_slice(&[0, 0, 0, 1]);
        want.extend_from_slice(&[0xB1; 72]);
        let rec = sample();
        assert_eq!(rec.encode(), want);
        assert_eq!(
            want.len(),
            14 + (1 + 5 + 1 + 28 + 1 + 152) + (1 + 3 + 1 + 1 + 152)
        );
        assert_eq!(KeyringRecord::decode(b"k", &want).unwrap(), rec);
    }

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
    fn decode_refuses_malformed_records() {
        let good = sample().encode();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("magic", [b"NXKX".as_slice(), &good[4..]].concat()),
            ("format", [&good[..4], &[2u8][..], &good[5..]].concat()),
            ("trailing", [good.as_slice(), &[0u8][..]].concat()),
            ("truncated", good[..good.len() - 1].to_vec()),
            (
                "zero active",
                [&good[..5], &[0u8, 0, 0, 0][..], &good[9..]].concat(),
            ),
            ("no entries", [&good[..13], &[0u8][..]].concat()),
            ("unknown kind", {
                let mut b = good.clone();
                b[20] = 9;
                b
            }),
            ("missing retiring wrap", {
                let mut r = sample();
                r.entries[1].wraps.pop();
                r.encode()
            }),
            ("duplicate label", {
                let mut r = sample();
                r.entries[1].label = "alice".into();
                r.encode()
            }),
            ("bad label", {
                let mut r = sample();
                r.entries[1].label = "k/s".into();
                r.encode()
            }),
        ];
        for (what, bytes) in cases {
            let err = KeyringRecord::decode(b"__nx/keys/database", &bytes).unwrap_err();
            assert!(
                matches!(err, SealError::CorruptedKeyring { .. }),
                "{what}: {err}"
            );
            assert!(err.to_string().contains("`__nx/keys/database`"), "{what}");
        }
    }

    #[test]
    fn finish_rotation_drops_the_retiring_wraps() {
        let next = sample().finish_rotation(b"k").unwrap();
        assert_eq!(next.retiring_key_id(), None);
        assert_eq!(next.active_key_id(), 2);
        for e in next.entries() {
            assert_eq!(e.key_ids, vec![2]);
        }
        assert!(matches!(
            next.finish_rotation(b"k"),
            Err(SealError::RotationState { .. })
        ));
        assert_eq!(KeyringRecord::decode(b"k", &next.encode()).unwrap(), next);
    }

    #[test]
    fn scope_keys() {
        assert_eq!(KeyScope::Database.store_key(), b"__nx/keys/database");
        assert_eq!(
            KeyScope::Collection("accounts".into()).store_key(),
            b"__nx/keys/collection/accounts"
        );
    }

    #[test]
    fn default_kdf_parameters_are_the_owasp_ones() {
        assert_eq!(
            KdfParams::default(),
            KdfParams {
                m_cost_kib: 19456,
                t_cost: 2,
                parallelism: 1
            }
        );
        assert!(KdfParams::default().argon2().is_ok());
        let absurd = KdfParams {
            m_cost_kib: u32::MAX,
            t_cost: 1,
            parallelism: 1,
        };
        assert!(matches!(
            absurd.argon2(),
            Err(SealError::InvalidParameters { .. })
        ));
    }
}
