//! The one write path: put, insert, update and delete.

use super::{Collection, CollectionError, CollectionInner, Expect};
use crate::payload::envelope::{Envelope, ENVELOPE_HEADER_LEN};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::Cell;
use strata_store::{KeyDecision, KeyWrite, KvRead, KvWrite, Peek, StoreError};

/// How many times a write re-reads and retries after losing a compare-and-swap race.
const MAX_WRITE_ATTEMPTS: usize = 64;

thread_local! {
    /// The buffer size [`Collection::encode_json`] starts with (128 bytes to 64 KiB).
    static JSON_SIZE_HINT: Cell<usize> = const { Cell::new(128) };
}

impl<T: Serialize + DeserializeOwned> Collection<T> {
    /// Writes a document unconditionally (last writer wins); returns its new lock
    /// version. Refused when the stored document was written by a newer build.
    pub fn put(&self, key: &str, value: &T) -> Result<u64, CollectionError> {
        self.write(key, Some(value), Expect::Any)
            .map(|v| v.unwrap_or(0))
    }

    /// Creates a document that must not exist yet; returns its lock version (1).
    pub fn insert(&self, key: &str, value: &T) -> Result<u64, CollectionError> {
        self.write(key, Some(value), Expect::Absent)
            .map(|v| v.unwrap_or(0))
    }

    /// Replaces a document only if it still has `expected_lock`; otherwise fails with
    /// [`CollectionError::Conflict`] and writes nothing. Returns the new lock version.
    pub fn update(&self, key: &str, value: &T, expected_lock: u64) -> Result<u64, CollectionError> {
        self.write(key, Some(value), Expect::Lock(expected_lock))
            .map(|v| v.unwrap_or(0))
    }

    /// Deletes a document; returns whether it existed.
    pub fn delete(&self, key: &str) -> Result<bool, CollectionError> {
        self.write(key, None, Expect::Any).map(|v| v.is_some())
    }

    /// Deletes a document only if it still has `expected_lock`.
    pub fn delete_if(&self, key: &str, expected_lock: u64) -> Result<(), CollectionError> {
        self.write(key, None, Expect::Lock(expected_lock))
            .map(|_| ())
    }

    /// The typed part of the one write path: the key's check and the document's JSON;
    /// the rest is shared by every document type ([`CollectionInner::write_json`]).
    /// Returns the new lock version of a set, or (for a delete) the lock version the
    /// deleted document had (`None`: nothing to delete).
    fn write(
        &self,
        key: &str,
        value: Option<&T>,
        expect: Expect,
    ) -> Result<Option<u64>, CollectionError> {
        self.check_key(key)?;
        if value.is_some() && self.inner.sealed_without_key {
            return Err(self.inner.needs_key(&self.inner.key_of(key)));
        }
        if let (Expect::Lock(_), Some(_), Some(_)) = (expect, value, &self.inner.sealer) {
            self.authenticate_stored(key)?;
        }
        match value {
            Some(v) => {
                let json = self.encode_json(key, v)?;
                self.inner
                    .write_json(key, Some((json, &|| self.encode_json(key, v))), expect)
            }
            None => self.inner.write_json(key, None, expect),
        }
    }

    /// Before an update of a sealed collection: the stored row must authenticate. Its lock
    /// version is in the clear header, which is authenticated only together with the
    /// body, so a compare-and-swap on it must not take a tampered row's word (it fails like
    /// a read of that row, and changes nothing). The write itself still checks the lock
    /// version under the store's lock.
    #[cold]
    #[inline(never)]
    fn authenticate_stored(&self, key: &str) -> Result<(), CollectionError> {
        let full = self.inner.key_of(key);
        match self.inner.get_raw(&full)? {
            Some(stored) => self.unseal(&full, &stored).map(|_| ()),
            None => Ok(()),
        }
    }

    /// The JSON of `value` behind [`ENVELOPE_HEADER_LEN`] zero bytes (room for the
    /// envelope header).
    fn encode_json(&self, key: &str, value: &T) -> Result<Vec<u8>, CollectionError> {
        // Sized like the last document this thread encoded (plus an eighth), so a steady
        // stream of similar documents is encoded without growing the buffer.
        let mut json = Vec::with_capacity(JSON_SIZE_HINT.with(Cell::get));
        json.resize(ENVELOPE_HEADER_LEN, 0);
        serde_json::to_writer(&mut json, value)
            .map_err(|e| self.inner.encode_error(key, e.to_string()))?;
        JSON_SIZE_HINT.with(|h| h.set((json.len() + json.len() / 8).clamp(128, 64 << 10)));
        if json.get(ENVELOPE_HEADER_LEN) != Some(&b'{') {
            return Err(self
                .inner
                .encode_error(key, "the value does not serialize to a JSON object".into()));
        }
        Ok(json)
    }
}

/// Encodes a write's document again (a retry after a conflict: the first buffer went
/// into the refused write).
type Reencode<'a> = &'a dyn Fn() -> Result<Vec<u8>, CollectionError>;

// The write path after encoding: not generic, one copy for every document type.
impl CollectionInner {
    /// The one write path, after the document was encoded: `set` is its JSON (behind
    /// room for the envelope header) and how to encode it again; `None` deletes. See
    /// [`Collection::write`].
    fn write_json(
        &self,
        key: &str,
        set: Option<(Vec<u8>, Reencode<'_>)>,
        expect: Expect,
    ) -> Result<Option<u64>, CollectionError> {
        if set.is_some() {
            self.check_key_length(key)?;
        }
        if self.sealer.is_none() && !self.hints.enabled() && self.store.reads_under_write() {
            return self.write_decided(key, set, expect);
        }
        // The JSON is encoded behind room for the envelope header, so a clear document is
        // written without another copy (a retry after a conflict encodes it again).
        let (mut encoded, reencode) = match set {
            Some((json, reencode)) => (Some(json), Some(reencode)),
            None => (None, None),
        };
        let is_set = reencode.is_some();
        // The write takes this key (its only copy: `KeyWrite`); a retry after a conflict
        // gets it back from the conflict or builds it again.
        let mut full = self.key_of(key);
        let mut found = None;
        // A set that may create the document may try "absent" first when the store cannot
        // tell the current value without reading it (`Peek::Unread`): a conflict on the
        // document's key then leaves its value where the next attempt's read is cheap.
        let mut may_guess = is_set && matches!(expect, Expect::Any | Expect::Absent);
        // The bytes a set writes, remembered as this handle's hint once it committed.
        let mut written: Option<Vec<u8>> = None;
        for _ in 0..MAX_WRITE_ATTEMPTS {
            if full.is_empty() {
                full = self.key_of(key);
            }
            // Re-checked on every attempt: a conflict may mean the guard's state changed.
            let guarded = self.check_guards_seen()?;
            // One snapshot of the keys per attempt: the value is sealed with it and the
            // batch carries its keyring precondition.
            let sealer = self.sealer_now();
            let mut guessed = false;
            // A put of a document this handle wrote last takes the bytes it wrote as the
            // precondition instead of reading them (see `hint`: a stale hint only fails
            // the batch, which then reads).
            let hinted = match (is_set, expect) {
                (true, Expect::Any) => self.hints.get(&full),
                _ => None,
            };
            let old = if let Some(bytes) = hinted {
                // The document existed: no point guessing it absent after a conflict.
                may_guess = false;
                Some(bytes)
            } else if std::mem::take(&mut may_guess) {
                match self.store.peek(&full) {
                    Ok(Peek::Value(v)) => v,
                    Ok(Peek::Unread) => {
                        guessed = true;
                        None
                    }
                    Err(e) => return Err(self.store_error(e)),
                }
            } else {
                self.get_raw(&full)?
            };
            let old_env = self.check_stored(key, old.as_deref(), is_set, expect, &mut found)?;
            // One key written over what it holds now, plus the guards' preconditions (the
            // fence's, the write guards', a sealed collection's keyring): no batch.
            let (write, result) = match reencode {
                Some(reencode) => {
                    let (env, mut buf) = self.stamped(key, old_env, &mut encoded, reencode)?;
                    let lock = env.lock_version;
                    let bytes = match &sealer {
                        None => {
                            buf[..ENVELOPE_HEADER_LEN].copy_from_slice(&env.header_bytes());
                            buf
                        }
                        Some(s) => {
                            self.encode_value(&full, env, &buf[ENVELOPE_HEADER_LEN..], Some(s))?
                        }
                    };
                    self.check_size(key, &full, &bytes)?;
                    written = self.hints.enabled().then(|| bytes.clone());
                    // The guards' vector has room for the keyring's.
                    let mut guards = guarded;
                    if let Some(s) = &sealer {
                        guards.push(s.keyring_precondition());
                    }
                    let write = KeyWrite {
                        key: std::mem::take(&mut full),
                        expected: old,
                        new: Some(bytes),
                        guards,
                    };
                    (write, Some(lock))
                }
                None => {
                    let Some(old) = old else {
                        return Ok(None);
                    };
                    let write = KeyWrite {
                        key: std::mem::take(&mut full),
                        expected: Some(old),
                        new: None,
                        guards: guarded,
                    };
                    (write, Some(found.unwrap_or(0)))
                }
            };
            match self.store.compare_and_swap(write) {
                Ok(()) => {
                    if self.hints.enabled() {
                        match written.take() {
                            Some(bytes) => self.hints.remember(self.key_of(key), bytes),
                            None => self.hints.forget(&self.key_of(key)),
                        }
                    }
                    return Ok(result);
                }
                Err(StoreError::Conflict { key: k, .. })
                    if guessed
                        && k.strip_prefix(self.prefix.as_slice()) == Some(key.as_bytes()) =>
                {
                    // The guess was wrong (the document exists): the next attempt reads it
                    // (the fence and the keyring were not what failed).
                    full = k;
                    continue;
                }
                Err(e) if e.is_conflict() => {
                    // The hint (if one was used) may be what is stale: read next time.
                    if self.hints.enabled() {
                        self.hints.forget(&self.key_of(key));
                    }
                    // The fence or the keyring (a rotation began or finished) may be
                    // what changed: read them again.
                    self.policy.forget_fence();
                    self.refresh_sealer()?;
                    continue;
                }
                Err(e) => return Err(self.store_error(e)),
            }
        }
        Err(self.conflict(key, expect, found))
    }

    /// [`Self::write_json`] of a clear collection without hints on a store that reads
    /// under its write ([`strata_store::Store::write_key_with`]): the same checks, made
    /// by the backend's decision on the current value it holds under the lock it writes
    /// with — no separate read, no copy of the stored document.
    fn write_decided(
        &self,
        key: &str,
        set: Option<(Vec<u8>, Reencode<'_>)>,
        expect: Expect,
    ) -> Result<Option<u64>, CollectionError> {
        let (mut encoded, reencode) = match set {
            Some((json, reencode)) => (Some(json), Some(reencode)),
            None => (None, None),
        };
        let mut found = None;
        for _ in 0..MAX_WRITE_ATTEMPTS {
            // Re-checked on every attempt: a conflict may mean the guard's state changed.
            let guards = self.check_guards_seen()?;
            let full = self.key_of(key);
            let full_len = full.len();
            let mut outcome = Ok(None);
            let mut decide = |old: Option<&[u8]>| {
                let decided = self.decide(
                    key,
                    full_len,
                    expect,
                    old,
                    &mut encoded,
                    reencode,
                    &mut found,
                );
                match decided {
                    Ok((decision, result)) => {
                        outcome = Ok(result);
                        decision
                    }
                    Err(e) => {
                        outcome = Err(e);
                        KeyDecision::Nothing
                    }
                }
            };
            match self.store.write_key_with(full, guards, &mut decide) {
                Ok(()) => return outcome,
                Err(e) if e.is_conflict() => {
                    // The fence (or another guard) changed: read it again.
                    self.policy.forget_fence();
                }
                Err(e) => return Err(self.store_error(e)),
            }
        }
        Err(self.conflict(key, expect, found))
    }

    /// The decision of [`Self::write_decided`] on the document's current bytes `old`:
    /// the checks of [`Self::write_json`] (a sealed document is not overwritten in
    /// clear, the expected lock, the ahead guard, the size) and the bytes to write, with
    /// the lock version the write returns.
    #[allow(clippy::too_many_arguments)]
    fn decide(
        &self,
        key: &str,
        full_len: usize,
        expect: Expect,
        old: Option<&[u8]>,
        encoded: &mut Option<Vec<u8>>,
        reencode: Option<Reencode<'_>>,
        found: &mut Option<u64>,
    ) -> Result<(KeyDecision, Option<u64>), CollectionError> {
        let old_env = self.check_stored(key, old, reencode.is_some(), expect, found)?;
        let Some(reencode) = reencode else {
            return Ok(match old {
                None => (KeyDecision::Nothing, None),
                Some(_) => (KeyDecision::Delete, Some(found.unwrap_or(0))),
            });
        };
        let (env, mut buf) = self.stamped(key, old_env, encoded, reencode)?;
        let lock = env.lock_version;
        buf[..ENVELOPE_HEADER_LEN].copy_from_slice(&env.header_bytes());
        let size = full_len.saturating_add(buf.len());
        if size > super::MAX_DOCUMENT_BYTES {
            return Err(self.too_large(key, size));
        }
        Ok((KeyDecision::Set(buf), Some(lock)))
    }

    /// The checks of a write against the document's stored bytes `old`, shared by both
    /// write paths: a set never overwrites a sealed document in clear from a handle
    /// without the key, and the expected lock (`expect`) must hold. Sets `found` to the
    /// stored lock version and returns the stored envelope header.
    #[inline]
    fn check_stored(
        &self,
        key: &str,
        old: Option<&[u8]>,
        is_set: bool,
        expect: Expect,
        found: &mut Option<u64>,
    ) -> Result<Option<Envelope>, CollectionError> {
        let old_env = match old {
            Some(b) if is_set => {
                if self.sealer.is_none() && crate::seal::peek(b).is_some_and(|(_, s)| s) {
                    // A clear handle never overwrites a sealed document in clear.
                    return Err(self.needs_key(&self.key_of(key)));
                }
                Some(self.header_of(key, b)?)
            }
            Some(b) => crate::seal::peek(b).map(|(e, _)| e),
            None => None,
        };
        *found = old_env.map(|e| e.lock_version);
        let conflict = match expect {
            Expect::Any => false,
            Expect::Absent => old.is_some(),
            Expect::Lock(n) => *found != Some(n),
        };
        if conflict {
            return Err(self.conflict(key, expect, *found));
        }
        Ok(old_env)
    }

    /// The envelope a set writes over the stored one (`old_env`: refused when it is ahead
    /// of this build, its lock version plus one) and the encoded document to put it in
    /// (the first encoding, or a new one on a retry).
    #[inline]
    fn stamped(
        &self,
        key: &str,
        old_env: Option<Envelope>,
        encoded: &mut Option<Vec<u8>>,
        reencode: Reencode<'_>,
    ) -> Result<(Envelope, Vec<u8>), CollectionError> {
        if let Some(e) = old_env {
            if self.upcaster.is_ahead(e.payload_version) {
                return Err(self.ahead(key, e.payload_version));
            }
        }
        let lock = old_env.map_or(1, |e| e.lock_version.saturating_add(1));
        let env = Envelope::new(self.current_version(), lock);
        let buf = match encoded.take() {
            Some(buf) => buf,
            None => reencode()?,
        };
        Ok((env, buf))
    }

    // The refusals, out of the write path's line (its code stays dense in the cache).

    #[cold]
    #[inline(never)]
    fn conflict(&self, key: &str, expected: Expect, found: Option<u64>) -> CollectionError {
        CollectionError::Conflict {
            collection: self.name.clone(),
            key: key.to_string(),
            expected,
            found,
        }
    }

    #[cold]
    #[inline(never)]
    fn ahead(&self, key: &str, stored: i32) -> CollectionError {
        self.warn_ahead(key, stored);
        CollectionError::AheadOfBuild {
            collection: self.name.clone(),
            key: key.to_string(),
            stored,
            current: self.current_version(),
        }
    }

    #[cold]
    #[inline(never)]
    fn needs_key(&self, full: &[u8]) -> CollectionError {
        CollectionError::Seal {
            collection: self.name.clone(),
            source: crate::seal::SealError::NeedsKey { key: full.to_vec() },
        }
    }
}
