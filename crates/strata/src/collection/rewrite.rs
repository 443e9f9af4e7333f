//! The one row rewrite. Every path that rewrites a stored document — read-repair, the
//! eager sweep and the coordinated cutover — goes through [`RowRewriter`]:
//!
//! 1. decode the envelope (a corrupt one is [`CollectionError::Corrupted`]);
//! 2. the ahead guard: a row written by a newer build (payload version above this
//!    build's) is never rewritten — it is reported as [`RowRewrite::Ahead`] and stays
//!    byte-identical;
//! 3. upcast to the current version through the collection's chain (protected fields
//!    restored after each step, the version field stamped);
//!    A coordinated cutover's transform is the chain's last step (a cutover is a payload
//!    step), so a row already at the current version is never transformed again;
//! 4. a legacy in-place transform, when there is one (a user strategy that decides a
//!    cutover without declaring its transform as a step), on the current-version object;
//!    the protected fields are restored after it and the version field stamped again;
//! 5. encode at the current version, behind an envelope whose lock version is bumped when
//!    the rewrite is a write (a cutover) and kept otherwise (an upcast is the same
//!    document in a newer shape);
//! 6. refuse a result that a step or transform grew past
//!    [`MAX_DOCUMENT_BYTES`](super::MAX_DOCUMENT_BYTES) ([`CollectionError::DocumentTooLarge`]),
//!    as a write would.

use super::CollectionError;
use crate::payload::chain::{JsonObject, INITIAL_PAYLOAD_VERSION};
use crate::payload::envelope::{self, Envelope};
use crate::payload::upcaster::Upcaster;
use crate::policy::Transform;
use crate::record_error::RecordError;
use serde_json::Value;

/// What [`RowRewriter::rewrite_at`] decided for one stored row.
#[derive(Debug)]
pub(crate) enum RowRewrite {
    /// At the current version and nothing to apply: left as is.
    Keep,
    /// Written by a newer build: never rewritten.
    Ahead {
        /// The payload version stored.
        stored: i32,
    },
    /// The new stored value (envelope + JSON) at the current version.
    Rewrite(Vec<u8>),
}

/// The row rewrite of one collection (see the module docs).
pub(crate) struct RowRewriter<'a> {
    /// The collection (for errors).
    pub(crate) collection: &'a str,
    /// The chain and protected fields.
    pub(crate) upcaster: &'a Upcaster,
    /// A cutover's transform applied after the upcast at the same payload version: only
    /// for a strategy that does not declare its transform as the payload step (see
    /// [`crate::policy::SchemaUpdateStrategy::cutover_transform`]); a declared one is the
    /// chain's last step and rows reach it by the upcast.
    pub(crate) transform: Option<&'a Transform>,
    /// The rewrite is a write (a cutover): a row it changes gets its lock version bumped.
    /// Otherwise (read-repair, the sweep) the lock version is kept: an upcast is the same
    /// document in a newer shape.
    pub(crate) bump_lock: bool,
    /// Sealing: the data keys and the collection's table id. A sealed row is opened
    /// before step 1 and the result sealed again after step 5; with `strict` (a
    /// collection declared sealed) clear rows are refused and every output is sealed.
    pub(crate) seal: Option<RowSeal<'a>>,
}

/// The sealing side of a [`RowRewriter`].
#[derive(Clone, Copy)]
pub(crate) struct RowSeal<'a> {
    /// The unlocked data keys.
    pub(crate) sealer: &'a crate::seal::Sealer,
    /// The collection's table id (associated data).
    pub(crate) table_id: u16,
    /// True for a collection declared sealed.
    pub(crate) strict: bool,
}

impl RowRewriter<'_> {
    /// Rewrites one stored row: `full_key` is its store key (`__nx/doc/<collection>/<key>`,
    /// as a scan hands it over; sealing binds it), `key` the document key (for errors).
    /// `check` is handed the final JSON tree, by value, once it is encoded and before the
    /// result is returned (the sweep checks that it binds to the collection's type, so it
    /// never writes a row it could not read back — by value, as the read path binds an
    /// upcast tree: the strings move into the value instead of being copied); its error is
    /// [`CollectionError::Bind`] and nothing is returned to write.
    pub(crate) fn rewrite_at(
        &self,
        full_key: &[u8],
        key: &str,
        bytes: &[u8],
        check: impl FnOnce(Value) -> Result<(), serde_json::Error>,
    ) -> Result<RowRewrite, CollectionError> {
        debug_assert_eq!(full_key, super::layout::doc_key(self.collection, key));
        let stored_len = bytes.len();
        let (clear, sealed) = crate::seal::unseal_row(
            self.seal.map(|s| s.sealer),
            self.seal.is_some_and(|s| s.strict),
            full_key,
            self.seal.map_or(0, |s| s.table_id),
            bytes,
        )
        .map_err(|source| CollectionError::Seal {
            collection: self.collection.to_string(),
            source,
        })?;
        let bytes: &[u8] = &clear;
        let (env, json) = envelope::decode(bytes).map_err(|e| CollectionError::Corrupted {
            collection: self.collection.to_string(),
            key: key.to_string(),
            reason: RecordError::from_error(e),
        })?;
        if env.payload_version < INITIAL_PAYLOAD_VERSION {
            return Err(self.invalid_version(key, env.payload_version));
        }
        if self.upcaster.is_ahead(env.payload_version) {
            return Ok(RowRewrite::Ahead {
                stored: env.payload_version,
            });
        }
        if !self.upcaster.is_behind(env.payload_version) && self.transform.is_none() {
            return Ok(RowRewrite::Keep);
        }
        let mut obj: JsonObject =
            serde_json::from_slice(json).map_err(|e| CollectionError::Bind {
                collection: self.collection.to_string(),
                key: key.to_string(),
                stored: env.payload_version,
                version: env.payload_version,
                source: e,
            })?;
        let version = self.upcast(key, env.payload_version, &mut obj)?;
        let out = self.finish_as(Some(full_key), key, env, version, obj, check, sealed)?;
        // A rewrite never pushes a document past the limit writes obey (one stored
        // oversize by an older build or another tool may still be rewritten).
        let size = full_key.len().saturating_add(out.len());
        if size > super::MAX_DOCUMENT_BYTES
            && full_key.len().saturating_add(stored_len) <= super::MAX_DOCUMENT_BYTES
        {
            return Err(CollectionError::DocumentTooLarge {
                collection: self.collection.to_string(),
                key: key.to_string(),
                size,
                limit: super::MAX_DOCUMENT_BYTES,
            });
        }
        Ok(RowRewrite::Rewrite(out))
    }

    /// Runs the chain on `obj`, stored at `stored`; returns the version reached.
    pub(crate) fn upcast(
        &self,
        key: &str,
        stored: i32,
        obj: &mut JsonObject,
    ) -> Result<i32, CollectionError> {
        self.upcaster
            .upcast(obj, stored)
            .map_err(|f| CollectionError::upcast_failure(self.collection, key, stored, f))
    }

    /// Steps 4 and 5 for an object already upcast to `version` (read-repair enters
    /// here with the tree it bound).
    pub(crate) fn finish(
        &self,
        key: &str,
        env: Envelope,
        version: i32,
        obj: JsonObject,
        check: impl FnOnce(Value) -> Result<(), serde_json::Error>,
    ) -> Result<Vec<u8>, CollectionError> {
        self.finish_as(None, key, env, version, obj, check, false)
    }

    /// [`RowRewriter::finish`], sealing the output when the input was sealed or the
    /// collection is declared sealed.
    #[allow(clippy::too_many_arguments)]
    fn finish_as(
        &self,
        full_key: Option<&[u8]>,
        key: &str,
        env: Envelope,
        version: i32,
        obj: JsonObject,
        check: impl FnOnce(Value) -> Result<(), serde_json::Error>,
        was_sealed: bool,
    ) -> Result<Vec<u8>, CollectionError> {
        let clear = self.finish_clear(key, env, version, obj, check)?;
        match self.seal {
            Some(s) if s.strict || was_sealed => {
                let built;
                let full_key = match full_key {
                    Some(k) => k,
                    None => {
                        built = super::layout::doc_key(self.collection, key);
                        &built
                    }
                };
                crate::seal::seal_clear_row(s.sealer, full_key, s.table_id, &clear).map_err(
                    |source| CollectionError::Seal {
                        collection: self.collection.to_string(),
                        source,
                    },
                )
            }
            _ => Ok(clear),
        }
    }

    fn finish_clear(
        &self,
        key: &str,
        env: Envelope,
        version: i32,
        mut obj: JsonObject,
        check: impl FnOnce(Value) -> Result<(), serde_json::Error>,
    ) -> Result<Vec<u8>, CollectionError> {
        let mut lock = env.lock_version;
        if self.bump_lock {
            lock = lock.saturating_add(1);
        }
        if let Some(t) = self.transform {
            let snapshot = self.upcaster.snapshot(&obj);
            let out = t
                .apply(Value::Object(obj))
                .map_err(|reason| self.transform_failed(key, reason))?;
            let Value::Object(o) = out else {
                return Err(
                    self.transform_failed(key, "the transform did not return a JSON object".into())
                );
            };
            obj = o;
            self.upcaster.restore(&mut obj, &snapshot);
            self.upcaster.stamp(&mut obj, version);
        }
        let tree = Value::Object(obj);
        let mut out = Vec::with_capacity(envelope::ENVELOPE_HEADER_LEN + 256);
        out.extend_from_slice(&Envelope::new(version, lock).header_bytes());
        serde_json::to_writer(&mut out, &tree).map_err(|e| CollectionError::Encode {
            collection: self.collection.to_string(),
            key: key.to_string(),
            reason: e.to_string(),
        })?;
        // Checked after encoding: the check consumes the tree.
        check(tree).map_err(|e| CollectionError::Bind {
            collection: self.collection.to_string(),
            key: key.to_string(),
            stored: env.payload_version,
            version,
            source: e,
        })?;
        Ok(out)
    }

    fn invalid_version(&self, key: &str, found: i32) -> CollectionError {
        CollectionError::InvalidPayloadVersion {
            collection: self.collection.to_string(),
            key: key.to_string(),
            found,
        }
    }

    fn transform_failed(&self, key: &str, reason: String) -> CollectionError {
        CollectionError::Transform {
            collection: self.collection.to_string(),
            key: key.to_string(),
            reason,
        }
    }
}
