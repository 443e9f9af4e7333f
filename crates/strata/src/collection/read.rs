//! The read path: every method returning documents decodes, upcasts and binds here.

use super::{Collection, CollectionError, Document, Iter};
use crate::payload::chain::JsonObject;
use crate::payload::envelope::{self, Envelope};
use crate::record_error::RecordError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::ops::Bound;
use strata_store::{Batch, KvWrite};

/// What decoding one stored row produced, before binding (shared with the sweep).
pub(crate) enum Decoded {
    /// At or above the current version: bind from the JSON bytes directly.
    Direct(Envelope),
    /// Behind: the upcast tree, its version and the re-encoded value.
    Upcast {
        env: Envelope,
        obj: JsonObject,
        version: i32,
    },
}

impl<T: Serialize + DeserializeOwned> Collection<T> {
    /// Classifies and (when stale) upcasts a stored row.
    pub(crate) fn decode_stored(
        &self,
        key: &str,
        bytes: &[u8],
    ) -> Result<Decoded, CollectionError> {
        let (env, json) =
            envelope::decode(bytes).map_err(|e| self.corrupted(key, RecordError::from_error(e)))?;
        if env.payload_version < crate::payload::INITIAL_PAYLOAD_VERSION {
            return Err(CollectionError::InvalidPayloadVersion {
                collection: self.inner.name.clone(),
                key: key.to_string(),
                found: env.payload_version,
            });
        }
        if let Some(refused) = self.inner.upcaster.check_retired(env.payload_version) {
            return Err(CollectionError::upcast_failure(
                &self.inner.name,
                key,
                env.payload_version,
                refused,
            ));
        }
        if !self.inner.upcaster.is_behind(env.payload_version) {
            return Ok(Decoded::Direct(env));
        }
        let (obj, version) = self.upcast_json(key, env.payload_version, json)?;
        Ok(Decoded::Upcast { env, obj, version })
    }

    /// Binds an upcast tree to `T`.
    pub(crate) fn bind_tree(
        &self,
        key: &str,
        stored: i32,
        version: i32,
        obj: JsonObject,
    ) -> Result<T, CollectionError> {
        serde_json::from_value(serde_json::Value::Object(obj)).map_err(|e| CollectionError::Bind {
            collection: self.inner.name.clone(),
            key: key.to_string(),
            stored,
            version,
            source: e,
        })
    }

    /// The read path: every method returning documents goes through here. Returns the
    /// bound value, the stored envelope and whether steps ran.
    fn read_row(
        &self,
        key: &str,
        full_key: &[u8],
        stored: &[u8],
    ) -> Result<(T, Envelope, bool), CollectionError> {
        let clear = self.unseal(full_key, stored)?;
        self.read_clear(key, full_key, Some(stored), &clear)
    }

    /// [`Self::read_row`] of a row the store handed over: a sealed current row is
    /// decrypted in place in that buffer (see [`Collection::unseal_current_in_place`]).
    fn read_row_owned(
        &self,
        key: &str,
        full_key: &[u8],
        mut stored: Vec<u8>,
    ) -> Result<(T, Envelope, bool), CollectionError> {
        if self.unseal_current_in_place(full_key, &mut stored)? {
            // Current: never read-repaired, the stored (sealed) bytes are not needed.
            return self.read_clear(key, full_key, None, &stored);
        }
        self.read_row(key, full_key, &stored)
    }

    /// Decodes, upcasts and binds the clear form `bytes` of a row; `stored` (the bytes
    /// as stored) is what read-repair compares against (`None`: no repair).
    fn read_clear(
        &self,
        key: &str,
        full_key: &[u8],
        stored: Option<&[u8]>,
        bytes: &[u8],
    ) -> Result<(T, Envelope, bool), CollectionError> {
        match self.decode_stored(key, bytes)? {
            Decoded::Direct(env) => {
                // At or above the current version: bind straight from the bytes.
                let json = &bytes[envelope::ENVELOPE_HEADER_LEN..];
                let value = serde_json::from_slice::<T>(json).map_err(|e| {
                    if self.inner.upcaster.is_ahead(env.payload_version) {
                        CollectionError::NewerBuild {
                            collection: self.inner.name.clone(),
                            key: key.to_string(),
                            stored: env.payload_version,
                            current: self.current_version(),
                            source: e,
                        }
                    } else {
                        CollectionError::Bind {
                            collection: self.inner.name.clone(),
                            key: key.to_string(),
                            stored: env.payload_version,
                            version: env.payload_version,
                            source: e,
                        }
                    }
                })?;
                Ok((value, env, false))
            }
            Decoded::Upcast { env, obj, version } => {
                if !self.inner.read_repair {
                    let value = self.bind_tree(key, env.payload_version, version, obj)?;
                    return Ok((value, env, true));
                }
                let tree = serde_json::Value::Object(obj);
                let value = T::deserialize(&tree).map_err(|e| CollectionError::Bind {
                    collection: self.inner.name.clone(),
                    key: key.to_string(),
                    stored: env.payload_version,
                    version,
                    source: e,
                })?;
                if let (serde_json::Value::Object(obj), Some(stored)) = (tree, stored) {
                    // The tree already binds: the rewrite only encodes it.
                    let sealer = self.sealer_now();
                    match self.rewriter(None, sealer.as_ref()).finish(
                        key,
                        env,
                        version,
                        obj,
                        |_| Ok(()),
                    ) {
                        Ok(new) => self.repair(key, full_key, stored, new, sealer.as_ref()),
                        Err(e) => {
                            tracing::debug!(collection = %self.inner.name, error = %e, "read-repair skipped");
                        }
                    }
                }
                Ok((value, env, true))
            }
        }
    }

    pub(super) fn read_document(
        &self,
        key: String,
        full_key: &[u8],
        bytes: Vec<u8>,
    ) -> Result<Document<T>, CollectionError> {
        let (value, env, upcast) = self.read_row_owned(&key, full_key, bytes)?;
        Ok(Document {
            key,
            value,
            lock_version: env.lock_version,
            stored_version: env.payload_version,
            upcast,
        })
    }

    /// Read-repair: compare-and-swap the upcast form over exactly the bytes that were
    /// read. Never fails the read.
    ///
    /// Never inside a deploy window (the batch requires the window record absent), even
    /// for the build the window moves to: it is required, not a shortcut. The repair
    /// writes the row at this build's version, and a window exists because a build at
    /// its operational version N is still live: a row repaired to N+1 is ahead of that
    /// build, which could then neither read it (its type does not bind N+1's shape) nor
    /// write it (the ahead guard refuses), and a rollback would no longer be free. Rows
    /// stay at N until `complete` (whose sweep, or the repairs after it, move them); the
    /// window's writes go through the downcasts instead. A build *at* N could repair
    /// rows below N up to N safely; it does not either (one rule, and `complete`'s sweep
    /// or later repairs reach those rows anyway).
    fn repair(
        &self,
        key: &str,
        full_key: &[u8],
        old: &[u8],
        new: Vec<u8>,
        sealer: Option<&crate::seal::Sealer>,
    ) {
        if let Err(e) = self.check_size(key, full_key, &new) {
            tracing::debug!(collection = %self.inner.name, error = %e, "read-repair skipped");
            return;
        }
        let guarded = match self.check_guards() {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(collection = %self.inner.name, error = %e, "read-repair skipped: write guard refused");
                return;
            }
        };
        let mut batch = Batch::new()
            .require_eq(full_key.to_vec(), old.to_vec())
            .set(full_key.to_vec(), new);
        for p in guarded {
            batch.push_precondition(p);
        }
        if let Some(s) = sealer {
            batch.push_precondition(s.keyring_precondition());
        }
        // Never during a deploy window: rows stay at the operational version.
        if let Some(w) = &self.inner.window_key {
            batch.push_precondition(strata_store::Precondition::Absent { key: w.clone() });
        }
        match self.inner.store.apply(batch) {
            Ok(()) => {}
            Err(e) if e.is_conflict() => {
                tracing::debug!(collection = %self.inner.name, key = %strata_store::escape_key(key.as_bytes()), "read-repair lost a race (or a deploy window is open); left as stored");
            }
            Err(e) => {
                tracing::warn!(collection = %self.inner.name, key = %strata_store::escape_key(key.as_bytes()), error = %e, "read-repair failed; the document stays at its stored version");
            }
        }
    }

    /// Reads one document's value.
    pub fn get(&self, key: &str) -> Result<Option<T>, CollectionError> {
        self.check_key(key)?;
        let full = self.key_of(key);
        match self.get_raw(&full)? {
            Some(bytes) => self
                .read_row_owned(key, &full, bytes)
                .map(|(v, _, _)| Some(v)),
            None => Ok(None),
        }
    }

    /// Reads one document with its lock and stored payload version.
    pub fn get_document(&self, key: &str) -> Result<Option<Document<T>>, CollectionError> {
        self.check_key(key)?;
        let full = self.key_of(key);
        match self.get_raw(&full)? {
            Some(bytes) => self.read_document(key.to_string(), &full, bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Reads several documents; each read succeeds or fails on its own.
    pub fn get_many<'k, I>(&self, keys: I) -> Vec<Result<Option<Document<T>>, CollectionError>>
    where
        I: IntoIterator<Item = &'k str>,
    {
        keys.into_iter().map(|k| self.get_document(k)).collect()
    }

    /// Iterates every document in key order.
    pub fn iter(&self) -> Iter<'_, T> {
        self.range(Bound::Unbounded, Bound::Unbounded)
    }

    /// Iterates the documents whose key lies within the bounds, in key order.
    pub fn range(&self, start: Bound<&str>, end: Bound<&str>) -> Iter<'_, T> {
        let prefix = self.inner.prefix.clone();
        let (after, first) = match start {
            Bound::Unbounded => (None, None),
            Bound::Excluded(s) => (Some(self.key_of(s)), None),
            Bound::Included(s) => (Some(self.key_of(s)), Some(self.key_of(s))),
        };
        let end = match end {
            Bound::Unbounded => Bound::Unbounded,
            Bound::Included(e) => Bound::Included(self.key_of(e)),
            Bound::Excluded(e) => Bound::Excluded(self.key_of(e)),
        };
        Iter::new(self, &prefix, after, first, end)
    }

    /// Iterates the documents whose key starts with `key_prefix`, in key order.
    pub fn scan_prefix(&self, key_prefix: &str) -> Iter<'_, T> {
        Iter::new(self, &self.key_of(key_prefix), None, None, Bound::Unbounded)
    }
    pub(super) fn suffix_of(&self, full_key: &[u8]) -> Result<String, CollectionError> {
        let suffix = full_key
            .strip_prefix(self.inner.prefix.as_slice())
            .unwrap_or(full_key);
        String::from_utf8(suffix.to_vec()).map_err(|e| {
            self.corrupted(
                &strata_store::escape_key(suffix),
                RecordError::with_cause("the document key is not UTF-8", e),
            )
        })
    }
}
