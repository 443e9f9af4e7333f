//! The one write path: put, insert, update and delete.

use super::{Collection, CollectionError, CollectionInner, Expect};
use crate::payload::envelope::{Envelope, ENVELOPE_HEADER_LEN};
use crate::record_error::RecordError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::Cell;
use strata_store::{KvRead, KvWrite};

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
        match value {
            Some(v) => {
                let json = self.encode_json(key, v)?;
                self.inner
                    .write_json(key, Some((json, &|| self.encode_json(key, v))), expect)
            }
            None => self.inner.write_json(key, None, expect),
        }
    }

    /// The JSON of `value` behind [`ENVELOPE_HEADER_LEN`] zero bytes (room for the
    /// envelope header).
    pub(crate) fn encode_json(&self, key: &str, value: &T) -> Result<Vec<u8>, CollectionError> {
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
pub(crate) type Reencode<'a> = &'a dyn Fn() -> Result<Vec<u8>, CollectionError>;

/// Why a decision wrote nothing (besides a refusal that is the caller's error).
pub(crate) enum Refusal {
    /// The write is refused with this error.
    Error(CollectionError),
    /// The stored document is sealed under a data key this handle's snapshot lacks (a
    /// rotation started elsewhere): refresh the keys and decide again.
    RefreshKeys,
    /// The backend asked for a second decision after the first one took what the write
    /// owns (a write set's JSON, moved, not copied, on a backend that says it decides
    /// once): the write cannot be decided again.
    DecideAgain,
    /// The stored document was written by a newer build at this version, which this
    /// handle does not know to be additive: read the schema history again
    /// ([`CollectionInner::learn_newer`]) and decide again, or refuse the write as ahead.
    LearnNewer(i32),
}

impl From<CollectionError> for Refusal {
    fn from(e: CollectionError) -> Self {
        Refusal::Error(e)
    }
}

/// One document's part of a write: what the decision needs besides the stored bytes.
pub(crate) struct DocWrite<'a> {
    /// The key inside the collection.
    pub(crate) key: &'a str,
    /// Its full store key.
    pub(crate) full: &'a [u8],
    /// The expected state (any, absent, a lock version).
    pub(crate) expect: Expect,
    /// The first encoding of a set's JSON (behind room for the envelope header), taken
    /// by the first decision; `None` with `reencode` for a later one.
    pub(crate) encoded: Option<Vec<u8>>,
    /// How to encode the set's JSON again (`None`: a delete).
    pub(crate) reencode: Option<Reencode<'a>>,
    /// The stored lock version the last decision found.
    pub(crate) found: Option<u64>,
    /// `full`, owned: taken by the first decision for its mutation (`None`: each
    /// decision copies `full`).
    pub(crate) owned_key: Option<Vec<u8>>,
}

/// Document keys up to this long are read from a copy on the stack by a write on a backend
/// that decides once (the write's own key moves into its mutation).
const KEY_ON_STACK: usize = 128;

// The write path after encoding: not generic, one copy for every document type.
impl CollectionInner {
    /// The one write path, after the document was encoded: `set` is its JSON (behind
    /// room for the envelope header) and how to encode it again; `None` deletes. See
    /// [`Collection::write`].
    ///
    /// One call of the store's write primitive: the document is read inside the
    /// backend's write transaction or lock, and the decision — a sealed document is not
    /// overwritten in clear, a sealed one updated must authenticate, the expected lock,
    /// the ahead guard, the size, the new envelope, sealing — is made on it there; the
    /// fence's and the write guards' verdicts (made on the fence record this handle last
    /// read) hold when it commits — checked by the decision on the records read in the
    /// same transaction where the backend decides once, the batch's preconditions
    /// elsewhere — and so does the keyring snapshot the document is sealed with (a
    /// precondition). A guard that changed re-reads them and decides again.
    fn write_json(
        &self,
        key: &str,
        set: Option<(Vec<u8>, Reencode<'_>)>,
        expect: Expect,
    ) -> Result<Option<u64>, CollectionError> {
        if set.is_some() {
            self.check_key_length(key)?;
        }
        let (encoded, reencode) = match set {
            Some((json, reencode)) => (Some(json), Some(reencode)),
            None => (None, None),
        };
        // A backend that decides once (redb, memory: the values it hands the decision are
        // current until it commits) reads the guards' records with the document and the
        // decision checks them, by reference. The others (sled's compare-and-swap,
        // PostgreSQL's expected values) may decide on values that change before the
        // commit: each decision copies the guards into its batch as preconditions.
        let guards_read = self.store.capabilities().decides_once;
        // The document's key: there, the reads borrow a copy on the stack and the first
        // decision takes the key itself for its mutation (no second allocation).
        let owned = self.key_of(key);
        let mut stack = [0u8; KEY_ON_STACK];
        let mut owned_key = None;
        let full: &[u8] = match stack.get_mut(..owned.len()) {
            Some(copy) if guards_read => {
                copy.copy_from_slice(&owned);
                owned_key = Some(owned);
                copy
            }
            _ => &owned,
        };
        let mut doc = DocWrite {
            key,
            full,
            owned_key,
            expect,
            encoded,
            reencode,
            found: None,
        };
        let doc_reads = if self.window_key.is_some() { 2 } else { 1 };
        for _ in 0..MAX_WRITE_ATTEMPTS {
            // Re-checked on every attempt: a conflict may mean the guard's state changed.
            let guards = self.check_guards_seen()?;
            // One snapshot of the keys per attempt: the value is sealed with it and the
            // batch carries its keyring precondition.
            let sealer = self.sealer_now();
            let mut outcome: Result<Option<u64>, Refusal> = Ok(None);
            let mut guard_changed = false;
            // The document, the deploy-window record, the guards' records (on the stack
            // for the few of an ordinary write).
            let mut few: [&[u8]; 4] = [full; 4];
            let mut n = 1;
            if let Some(w) = &self.window_key {
                few[1] = w;
                n = 2;
            }
            let many: Vec<&[u8]>;
            let reads: &[&[u8]] = if !guards_read {
                &few[..n]
            } else if n + guards.len() <= few.len() {
                for key in guards.keys() {
                    few[n] = key;
                    n += 1;
                }
                &few[..n]
            } else {
                many = few[..n].iter().copied().chain(guards.keys()).collect();
                &many
            };
            let written = self.store.read_modify_write(reads, &mut |values| {
                // Room for the guards carried as preconditions (elsewhere) and a sealed
                // write's keyring precondition.
                let carried = if guards_read { 0 } else { guards.len() };
                let preconditions = Vec::with_capacity(carried + usize::from(sealer.is_some()));
                let mut batch =
                    strata_store::Batch::from_parts(Vec::with_capacity(1), preconditions);
                if !guards.check_or_carry(
                    guards_read,
                    values.get(doc_reads..).unwrap_or_default(),
                    &mut batch,
                ) {
                    guard_changed = true;
                    return None;
                }
                let window = values.get(1).copied().flatten().filter(|_| doc_reads == 2);
                outcome = self.decide(&mut doc, values[0], window, sealer.as_ref(), &mut batch);
                match &outcome {
                    Ok(_) if !batch.mutations().is_empty() => Some(batch),
                    _ => None,
                }
            });
            match written {
                Ok(_) if guard_changed => {
                    // The fence (or a write guard's record) changed since this handle
                    // read it: read it again.
                    self.policy.forget_fence();
                }
                Ok(_) => match outcome {
                    Ok(result) => return Ok(result),
                    Err(Refusal::Error(e)) => return Err(e),
                    Err(Refusal::RefreshKeys) => {
                        self.refresh_sealer()?;
                    }
                    // (Only a write set decides so.)
                    Err(Refusal::DecideAgain) => {}
                    Err(Refusal::LearnNewer(v)) => {
                        if !self.learn_newer(v)? {
                            return Err(self.ahead(key, v));
                        }
                    }
                },
                Err(e) if e.is_conflict() => {
                    // The fence or the keyring (a rotation began or finished) may be
                    // what changed: read them again.
                    self.policy.forget_fence();
                    self.refresh_sealer()?;
                }
                Err(e) => return Err(self.store_error(e)),
            }
        }
        Err(self.conflict(key, expect, doc.found))
    }

    /// The decision of one document's write on its stored bytes `old`: every check a
    /// write makes (a sealed document is not overwritten in clear; a sealed one updated
    /// must authenticate; the expected lock; the ahead guard; the size) and, when they
    /// pass, the document's mutation (and a sealed write's keyring precondition) pushed
    /// onto `batch`. Returns the lock version the write returns: the new one of a set,
    /// the deleted document's for a delete (`None`: nothing to delete, nothing pushed).
    /// Pure: it never calls into the store (it runs inside the store's write).
    ///
    /// `window`: the collection's deploy-window record as read in the same transaction
    /// (see [`crate::layout::window`]): a build above its operational version writes
    /// there through its downcasts; a build at it carries over the fields a newer build
    /// kept with the row.
    pub(crate) fn decide(
        &self,
        doc: &mut DocWrite<'_>,
        old: Option<&[u8]>,
        window: Option<&[u8]>,
        sealer: Option<&crate::seal::Sealer>,
        batch: &mut strata_store::Batch,
    ) -> Result<Option<u64>, Refusal> {
        let key = doc.key;
        let is_set = doc.reencode.is_some();
        if let (Expect::Lock(_), true, Some(s), Some(stored)) = (doc.expect, is_set, sealer, old) {
            // An update of a sealed collection: the stored row must authenticate. Its
            // lock version is in the clear header, which is authenticated only together
            // with the body, so the compare on it must not take a tampered row's word (it
            // fails like a read of that row, and changes nothing).
            match crate::seal::unseal_row(Some(s), true, doc.full, self.table_id, stored) {
                Ok(_) => {}
                Err(crate::seal::SealError::UnknownDataKey { .. }) => {
                    return Err(Refusal::RefreshKeys)
                }
                Err(source) => {
                    return Err(Refusal::Error(CollectionError::Seal {
                        collection: self.name.clone(),
                        source,
                    }))
                }
            }
        }
        let old_env = self.check_stored(key, old, is_set, doc.expect, &mut doc.found)?;
        let Some(reencode) = doc.reencode else {
            return Ok(match old {
                None => None,
                Some(_) => {
                    batch.push(strata_store::Mutation::Delete {
                        key: doc.owned_key.take().unwrap_or_else(|| doc.full.to_vec()),
                    });
                    Some(doc.found.unwrap_or(0))
                }
            });
        };
        let mut write_at = match window {
            None => self.current_version(),
            Some(w) => self.write_version(w)?,
        };
        // A row a newer build wrote, whose change the schema history proves additive:
        // written at its version, keeping the properties this build does not know.
        let ahead = old_env
            .map(|e| e.payload_version)
            .filter(|v| self.upcaster.is_ahead(*v));
        if let Some(v) = ahead.and_then(|v| self.unknown_newer(v)) {
            return Err(Refusal::LearnNewer(v));
        }
        let newer_map = ahead.map(|_| self.newer_fields());
        let newer = ahead.and_then(|v| {
            newer_map
                .as_deref()
                .and_then(|m| m.get(&v))
                .map(|names| (v, names.as_slice()))
        });
        if let Some((v, _)) = newer {
            write_at = v;
        }
        let (env, mut buf) = self.stamped(
            key,
            old_env,
            write_at,
            newer.is_some(),
            &mut doc.encoded,
            reencode,
        )?;
        if let (Some((_, names)), Some(o)) = (newer, old) {
            buf = self.carry_newer(key, doc.full, o, sealer, buf, names)?;
        } else if write_at < self.current_version() {
            let stored = old.map(|o| (doc.full, o, sealer));
            buf = self.downcast_json(key, buf, write_at, stored)?;
        } else if let (Some(_), Some(stored), Some(o)) = (window, old_env, old) {
            if stored.payload_version == write_at {
                buf = self.carry_kept(doc.full, o, sealer, buf)?;
            }
        }
        let lock = env.lock_version;
        let bytes = match sealer {
            None => {
                buf[..ENVELOPE_HEADER_LEN].copy_from_slice(&env.header_bytes());
                buf
            }
            Some(s) => {
                batch.push_precondition(s.keyring_precondition());
                self.encode_value(doc.full, env, &buf[ENVELOPE_HEADER_LEN..], Some(s))?
            }
        };
        self.check_size(key, doc.full, &bytes)?;
        batch.push(strata_store::Mutation::Set {
            key: doc.owned_key.take().unwrap_or_else(|| doc.full.to_vec()),
            value: bytes,
        });
        Ok(Some(lock))
    }

    /// The checks of a write against the document's stored bytes `old`: a set never overwrites a sealed document in clear from a handle
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
        write_at: i32,
        newer_proven: bool,
        encoded: &mut Option<Vec<u8>>,
        reencode: Reencode<'_>,
    ) -> Result<(Envelope, Vec<u8>), CollectionError> {
        if let Some(e) = old_env {
            if !newer_proven && self.upcaster.is_ahead(e.payload_version) {
                return Err(self.ahead(key, e.payload_version));
            }
        }
        let lock = old_env.map_or(1, |e| e.lock_version.saturating_add(1));
        let env = Envelope::new(write_at, lock);
        let buf = match encoded.take() {
            Some(buf) => buf,
            None => reencode()?,
        };
        Ok((env, buf))
    }

    /// The version a write lands at under the deploy-window record `window`: its
    /// operational version when this build is above it and its downcasts reach it, else
    /// this build's current version (a build at or below the operational version writes
    /// at its own; one without the downcasts cannot take part in the window).
    fn write_version(&self, window: &[u8]) -> Result<i32, CollectionError> {
        let current = self.current_version();
        let operational = crate::payload::window::decode_window(&self.name, window)
            .map_err(|e| super::layout::corrupted_window(&self.name, e))?;
        if operational >= current {
            return Ok(current);
        }
        if operational < self.upcaster.lowest_writable() {
            self.warn_window(operational);
            return Ok(current);
        }
        Ok(operational)
    }

    /// The JSON in `buf` (behind room for the envelope header) downcast from the current
    /// version to `write_at`, with the fields the downcast cannot express kept under
    /// [`KEPT_FIELD`](crate::payload::KEPT_FIELD).
    ///
    /// `stored` is the row it replaces (full key, stored bytes, the keys to open it):
    /// what a build newer than this one kept there (a layer this build's document cannot
    /// hold: its type knows nothing of it) is carried over with its own version, as a
    /// build at the operational version carries every kept field
    /// ([`Upcaster::keep`](crate::payload::Upcaster::keep)).
    #[cold]
    #[inline(never)]
    fn downcast_json(
        &self,
        key: &str,
        buf: Vec<u8>,
        write_at: i32,
        stored: Option<(&[u8], &[u8], Option<&crate::seal::Sealer>)>,
    ) -> Result<Vec<u8>, CollectionError> {
        let mut obj: crate::payload::JsonObject =
            serde_json::from_slice(&buf[ENVELOPE_HEADER_LEN..])
                .map_err(|e| self.encode_error(key, e.to_string()))?;
        if !obj.contains_key(crate::payload::KEPT_FIELD) {
            let newer = stored
                .and_then(|(full, old, sealer)| self.stored_kept(full, old, sealer))
                .and_then(|kept| self.upcaster.foreign_layer(kept));
            if let Some(newer) = newer {
                obj.insert(crate::payload::KEPT_FIELD.to_string(), newer);
            }
        }
        let kept = self.upcaster.downcast(&mut obj, write_at).map_err(|f| {
            CollectionError::upcast_failure(&self.name, key, self.current_version(), f)
        })?;
        self.upcaster.keep(&mut obj, kept);
        let mut out = Vec::with_capacity(buf.len() + 16);
        out.resize(ENVELOPE_HEADER_LEN, 0);
        serde_json::to_writer(&mut out, &obj).map_err(|e| self.encode_error(key, e.to_string()))?;
        Ok(out)
    }

    /// `buf` (this build's JSON behind room for the header) with the fields a newer build
    /// kept in the stored row `old` carried over, when the stored row has some and `buf`
    /// does not: a build at the window's operational version never drops them.
    fn carry_kept(
        &self,
        full: &[u8],
        old: &[u8],
        sealer: Option<&crate::seal::Sealer>,
        buf: Vec<u8>,
    ) -> Result<Vec<u8>, CollectionError> {
        const NEEDLE: &[u8] = b"\"__strata_kept\"";
        // The bytes are only a quick "no": the name may also be a value or a nested key.
        let has = |b: &[u8]| b.windows(NEEDLE.len()).any(|w| w == NEEDLE);
        let mine = buf.get(ENVELOPE_HEADER_LEN..).unwrap_or_default();
        if has(mine) && has_kept_member(mine) {
            return Ok(buf);
        }
        let Some(kept) = self.stored_kept(full, old, sealer) else {
            return Ok(buf);
        };
        let Ok(kept) = serde_json::to_vec(&kept) else {
            return Ok(buf);
        };
        // Splice `,"__strata_kept":{…}` before the object's closing brace.
        let mut out = buf;
        let Some(close) = out.iter().rposition(|b| *b == b'}') else {
            return Ok(out);
        };
        let empty = out[ENVELOPE_HEADER_LEN..close]
            .iter()
            .all(|b| b.is_ascii_whitespace() || *b == b'{');
        let mut tail = Vec::with_capacity(NEEDLE.len() + kept.len() + 3);
        if !empty {
            tail.push(b',');
        }
        tail.extend_from_slice(NEEDLE);
        tail.push(b':');
        tail.extend_from_slice(&kept);
        out.splice(close..close, tail);
        Ok(out)
    }

    /// The kept member ([`crate::payload::KEPT_FIELD`]) of the stored row `old` (`None`:
    /// it has none, or this handle cannot open it: the write's own checks decide about
    /// such a row).
    fn stored_kept(
        &self,
        full: &[u8],
        old: &[u8],
        sealer: Option<&crate::seal::Sealer>,
    ) -> Option<serde_json::Value> {
        const NEEDLE: &[u8] = b"\"__strata_kept\"";
        let (clear, _) = crate::seal::unseal_row(sealer, false, full, self.table_id, old).ok()?;
        let json = clear.get(ENVELOPE_HEADER_LEN..).unwrap_or_default();
        // The bytes are only a quick "no": the name may also be a value or a nested key.
        if !json.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
            return None;
        }
        let mut stored = serde_json::from_slice::<crate::payload::JsonObject>(json).ok()?;
        stored.remove(crate::payload::KEPT_FIELD)
    }

    /// `buf` (this build's JSON behind room for the header) with the properties `names`
    /// (added by the newer build that wrote the stored row `old`) copied from the stored
    /// row where this build's document does not have them.
    #[cold]
    #[inline(never)]
    fn carry_newer(
        &self,
        key: &str,
        full: &[u8],
        old: &[u8],
        sealer: Option<&crate::seal::Sealer>,
        buf: Vec<u8>,
        names: &[String],
    ) -> Result<Vec<u8>, CollectionError> {
        let (clear, _) =
            crate::seal::unseal_row(sealer, false, full, self.table_id, old).map_err(|source| {
                CollectionError::Seal {
                    collection: self.name.clone(),
                    source,
                }
            })?;
        let json = clear.get(ENVELOPE_HEADER_LEN..).unwrap_or_default();
        let mut stored: crate::payload::JsonObject = serde_json::from_slice(json).map_err(|e| {
            self.corrupted(
                key,
                RecordError::with_cause(
                    format!("the stored document is not a JSON object: {e}"),
                    e,
                ),
            )
        })?;
        let mut obj: crate::payload::JsonObject =
            serde_json::from_slice(&buf[ENVELOPE_HEADER_LEN..])
                .map_err(|e| self.encode_error(key, e.to_string()))?;
        for name in names {
            if obj.contains_key(name) {
                continue;
            }
            if let Some(v) = stored.remove(name) {
                obj.insert(name.clone(), v);
            }
        }
        let mut out = Vec::with_capacity(buf.len() + 64);
        out.resize(ENVELOPE_HEADER_LEN, 0);
        serde_json::to_writer(&mut out, &obj).map_err(|e| self.encode_error(key, e.to_string()))?;
        Ok(out)
    }

    #[cold]
    #[inline(never)]
    fn warn_window(&self, operational: i32) {
        tracing::warn!(collection = %self.name, operational, current = self.current_version(), "a deploy window is open at a version this build's downcasts do not reach; it writes at its own version (declare the downcasts to take part in the window)");
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
    pub(crate) fn ahead(&self, key: &str, stored: i32) -> CollectionError {
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
    pub(crate) fn needs_key(&self, full: &[u8]) -> CollectionError {
        CollectionError::Seal {
            collection: self.name.clone(),
            source: crate::seal::SealError::NeedsKey { key: full.to_vec() },
        }
    }
}

/// Whether the JSON object `json` has the kept member ([`crate::payload::KEPT_FIELD`])
/// at its top level (the members' values are skipped, not built).
fn has_kept_member(json: &[u8]) -> bool {
    serde_json::from_slice::<std::collections::HashMap<String, serde::de::IgnoredAny>>(json)
        .is_ok_and(|members| members.contains_key(crate::payload::KEPT_FIELD))
}
