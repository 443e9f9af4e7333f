//! Sealed documents: record bodies encrypted at rest with XChaCha20-Poly1305 under a
//! random 256-bit data key that is stored only wrapped.
//!
//! * [`Keyring`] — the data key(s) of a database (`__nx/keys/database`) or of one
//!   collection (`__nx/keys/collection/<name>`), wrapped by one or more entries: a
//!   passphrase through Argon2id (parameters stored beside the wrapped key, OWASP defaults
//!   in [`KdfParams::default`]) or raw key bytes supplied by the application (a KMS).
//!   Creating, adding an entry, re-wrapping under a new passphrase, removing an entry,
//!   starting and finishing a data-key rotation are each one atomic store write guarded by
//!   the keyring bytes read.
//! * [`Sealer`] — the unlocked keys: seals a body under the active key with a fresh random
//!   192-bit nonce, opens bodies under any key the keyring holds (old and new during a
//!   rotation). The associated data is the record's store key, its collection id and its
//!   clear envelope header, so a body copied to another key, collection or version fails
//!   with [`SealError::Authentication`].
//! * [`seal_document`] / [`open_document`] / [`peek`] — whole document values: the clear
//!   envelope header with envelope format [`SEALED_ENVELOPE_FORMAT`] (2), then the sealed
//!   JSON; the header is readable without the key.
//! * [`SealError`] — a wrong passphrase or key is [`SealError::WrongKey`], raised while
//!   unlocking, before any record is read; a tampered record is
//!   [`SealError::Authentication`] and fails that read only.
//!
//! **Keys are per database.** `Database::builder(..).key(..)` unlocks the database keyring
//! and every collection declared `CollectionOptions::sealed()` seals under its data key;
//! `rotate_data_key`, `verify_sealed` and the CLI work on that keyring. A per-collection
//! keyring ([`Keyring::collection`], store key `__nx/keys/collection/<name>`) has the same
//! format and operations (create, unlock, re-wrap, rotation start/finish) at this layer's
//! API, for an application that seals with a [`Sealer`] itself, but the collection and
//! database layers never use one: no collection is sealed under its own keyring (the
//! issue allows keys "per database (or per collection)"; one key per database is the
//! choice made).
//!
//! **Which collections are sealed** is persisted apart from the documents ([`mark`]):
//! `__nx/sealed/collection/<name>` when a collection is first opened
//! `CollectionOptions::sealed()`, `__nx/sealed/database` for a database opened
//! `DatabaseBuilder::sealed()` (every collection). A marked collection is sealed for every
//! handle: with the key it seals even without `sealed()`, without the key its sets are
//! refused — so no document lands in clear in it, also while it is still empty.
//!
//! Key material is zeroized on drop and never appears in `Debug`, `Display`, errors or
//! logs. Document ids (store keys) and envelope headers stay in clear. Byte layouts:
//! `docs/format.md`, "Sealed documents".

mod aead;
mod cipher;
mod credential;
mod document;
mod error;
mod header;
mod keyring;
mod live;
pub mod mark;
pub use mark::first_sealed_document;
mod record;

pub use cipher::{
    body_key_id, RecordContext, DATA_KEY_LEN, KEY_ID_LEN, NONCE_LEN, SEAL_OVERHEAD, TAG_LEN,
};
pub use credential::{
    Credential, KdfParams, MAX_KDF_M_COST_KIB, MAX_KDF_PARALLELISM, MAX_KDF_T_COST,
    MAX_KDF_WORK_KIB, SALT_LEN,
};
pub use document::{
    needs_reseal, open_document, peek, seal_document, sealed_header, SEALED_ENVELOPE_FORMAT,
};
pub(crate) use document::{seal_clear_row, unseal_in_place, unseal_row};
pub use error::SealError;
pub use keyring::{KeyScope, Keyring, Sealer, COLLECTION_KEYRING_PREFIX, DATABASE_KEYRING_KEY};
pub use live::LiveSealer;
pub use record::{
    validate_label, EntryInfo, KeyringRecord, KEYRING_FORMAT, KEYRING_MAGIC, MAX_LABEL_LEN,
    WRAPPED_KEY_LEN,
};
