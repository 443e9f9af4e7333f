//! The seal layer's one error type.
//!
//! No variant ever carries key material, a passphrase or plaintext: only store keys,
//! keyring labels and numbers.

use strata_store::{escape_key, StoreError};

/// Errors of sealing, opening and keyring management.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// No wrapping entry of the keyring opens with the credential given. Raised while
    /// unlocking, before any record is read; nothing was written.
    #[error("wrong key for {scope}: no wrapping entry of keyring `{}` opens with the given passphrase or key; nothing was read or written; check the passphrase or key", escape_key(.keyring))]
    WrongKey {
        /// What the keyring protects (`database`, `collection `name``).
        scope: String,
        /// The keyring's store key.
        keyring: Vec<u8>,
    },
    /// A sealed record did not authenticate: its ciphertext was altered, truncated, or
    /// moved from another key, collection or envelope version. Only this read fails;
    /// nothing was changed.
    #[error("record `{}` failed authentication: its sealed body was altered, truncated or moved from another key, collection or version; nothing was changed; restore the record from a backup or delete it", escape_key(.key))]
    Authentication {
        /// The record's store key.
        key: Vec<u8>,
    },
    /// A sealed record names a data key the keyring does not hold: it was tampered with,
    /// or sealed under a key a finished rotation removed. Counts as an authentication
    /// failure ([`SealError::is_authentication`]); only this read fails.
    #[error("record `{}` failed authentication: it names data key {key_id}, which keyring `{}` does not hold (tampered, or sealed under a key a finished rotation removed); nothing was changed; restore the record from a backup or delete it", escape_key(.key), escape_key(.keyring))]
    UnknownDataKey {
        /// The record's store key.
        key: Vec<u8>,
        /// The data key id found in the record.
        key_id: u32,
        /// The keyring's store key.
        keyring: Vec<u8>,
    },
    /// A record of a sealed collection is not a sealed envelope (format 2).
    #[error("record `{}` is not sealed (expected envelope format 2); seal the collection's records with the bulk pass, or restore the record from a backup", escape_key(.key))]
    NotSealed {
        /// The record's store key.
        key: Vec<u8>,
    },
    /// A sealed record was met without the key.
    #[error("record `{}` is sealed; open the database with its key (`Database::builder(..).key(..)`) and declare the collection sealed", escape_key(.key))]
    NeedsKey {
        /// The record's store key.
        key: Vec<u8>,
    },
    /// No keyring exists at the scope's key.
    #[error("no keyring at `{}`: {scope} is not sealed; create the keyring first (`Keyring::create`)", escape_key(.keyring))]
    NoKeyring {
        /// What the keyring would protect.
        scope: String,
        /// The keyring's store key.
        keyring: Vec<u8>,
    },
    /// No keyring exists, but sealed records do: the keyring that sealed them was deleted
    /// or lost. A new keyring would hold another data key, so none is created.
    #[error("no keyring at `{}`, but record `{}` is sealed: the keyring that sealed it was deleted or lost, and a new one could not open its records; nothing was written; restore the keyring record `{}` from a backup", escape_key(.keyring), escape_key(.record), escape_key(.keyring))]
    KeyringMissing {
        /// The keyring's store key.
        keyring: Vec<u8>,
        /// The first sealed record found.
        record: Vec<u8>,
    },
    /// A keyring already exists where one was to be created.
    #[error("keyring `{}` already exists: {scope} is already sealed; unlock it instead of creating it", escape_key(.keyring))]
    KeyringExists {
        /// What the keyring protects.
        scope: String,
        /// The keyring's store key.
        keyring: Vec<u8>,
    },
    /// The keyring record cannot be decoded.
    #[error("keyring `{}` is corrupted: {reason}; restore it from a backup (without it the sealed records cannot be opened)", escape_key(.keyring))]
    CorruptedKeyring {
        /// The keyring's store key.
        keyring: Vec<u8>,
        /// What is wrong with it.
        reason: String,
    },
    /// The keyring changed between the read and the write of a keyring operation.
    #[error("keyring `{}` was changed by another writer during this operation; nothing was written; re-read and retry", escape_key(.keyring))]
    KeyringChanged {
        /// The keyring's store key.
        keyring: Vec<u8>,
    },
    /// A wrapping-entry label is empty, too long or uses characters outside
    /// `A-Z a-z 0-9 _ - .`.
    #[error("invalid keyring entry label `{}`: use 1-64 characters of `A-Z a-z 0-9 _ - .`", strata_store::shown_text(.label))]
    InvalidLabel {
        /// The label given.
        label: String,
    },
    /// A wrapping entry with this label already exists.
    #[error("keyring `{}` already has an entry labelled `{label}`; choose another label or remove that entry first", escape_key(.keyring))]
    DuplicateLabel {
        /// The keyring's store key.
        keyring: Vec<u8>,
        /// The duplicated label.
        label: String,
    },
    /// No wrapping entry has this label.
    #[error("keyring `{}` has no entry labelled `{label}`; list the entries to see their labels", escape_key(.keyring))]
    NoSuchEntry {
        /// The keyring's store key.
        keyring: Vec<u8>,
        /// The label asked for.
        label: String,
    },
    /// The last wrapping entry cannot be removed: the data key would be lost.
    #[error("refusing to remove `{label}`, the last entry of keyring `{}`: the data key would become unrecoverable; add another entry first", escape_key(.keyring))]
    LastEntry {
        /// The keyring's store key.
        keyring: Vec<u8>,
        /// The entry's label.
        label: String,
    },
    /// The keyring already holds 255 wrapping entries.
    #[error("keyring `{}` already holds 255 entries; remove one first", escape_key(.keyring))]
    TooManyEntries {
        /// The keyring's store key.
        keyring: Vec<u8>,
    },
    /// A data-key rotation must re-wrap the new key under every entry, so it needs a
    /// credential for each.
    #[error("a data-key rotation of keyring `{}` needs a credential for every entry; none given opens {}; pass them too or remove those entries first", escape_key(.keyring), .missing.join(", "))]
    RotationNeedsEveryEntry {
        /// The keyring's store key.
        keyring: Vec<u8>,
        /// Labels of the entries no credential opened.
        missing: Vec<String>,
    },
    /// The operation needs a keyring without a rotation in progress (or with one).
    #[error("keyring `{}` {state}; {remedy}", escape_key(.keyring))]
    RotationState {
        /// The keyring's store key.
        keyring: Vec<u8>,
        /// The state found.
        state: &'static str,
        /// What to do.
        remedy: &'static str,
    },
    /// Invalid key-derivation parameters, or a raw key of the wrong length.
    #[error("invalid key material parameters: {reason}")]
    InvalidParameters {
        /// What is wrong.
        reason: String,
    },
    /// The operating system's random number generator failed.
    #[error("the operating system's random number generator failed ({reason}); nothing was written; retry, and check the system's entropy source")]
    Random {
        /// The generator's own message.
        reason: String,
    },
    /// A rotation checkpoint (`__nx/rotate/<collection>`) cannot be decoded.
    #[error("rotation checkpoint `{}` is corrupted: {reason}; delete it and rerun the rotation (it re-scans that collection)", escape_key(.key))]
    CorruptedCheckpoint {
        /// The checkpoint's store key.
        key: Vec<u8>,
        /// What is wrong with it.
        reason: String,
    },
    /// Another rotation runner advanced the same checkpoint: two rotations ran at once.
    #[error("another data-key rotation runner advanced checkpoint `{}` during this run; nothing of this batch was written; let the other runner finish, or rerun once it stopped", escape_key(.checkpoint))]
    RotationContended {
        /// The checkpoint's store key.
        checkpoint: Vec<u8>,
    },
    /// The re-sealing pass of a collection failed; the rotation resumes from its
    /// checkpoint when rerun.
    #[error("data-key rotation of collection `{collection}` failed; both keys are kept and it resumes from its checkpoint when rerun")]
    Rotation {
        /// The collection.
        collection: String,
        /// The pass error.
        #[source]
        source: Box<crate::pass::PassError>,
    },
    /// Sealed records of a collection could not be opened during the rotation, so the
    /// old key is kept (removing it would make them unreadable for good).
    #[error("data-key rotation cannot finish: {failed} sealed record(s) of collection(s) `{collection}` failed to open (the log names them); the old key was kept; restore those records from a backup or delete them, then rerun the rotation")]
    RotationIncomplete {
        /// The collection, or every collection with such records (joined by `` `, ` ``).
        collection: String,
        /// How many records failed.
        failed: u64,
    },
    /// A store error.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SealError {
    /// True for the wrong-passphrase/key error (raised before any record is read).
    pub fn is_wrong_key(&self) -> bool {
        matches!(self, SealError::WrongKey { .. })
    }

    /// True for a record that failed authentication (tampered, corrupt, moved, or naming a
    /// data key the keyring does not hold).
    pub fn is_authentication(&self) -> bool {
        matches!(
            self,
            SealError::Authentication { .. } | SealError::UnknownDataKey { .. }
        )
    }
}
