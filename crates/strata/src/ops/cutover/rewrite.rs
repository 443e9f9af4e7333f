//! The rewrite of one pending collection on the bulk pass.

use super::checkpoint::{cutover_key, CutoverCheckpoint};
use super::{
    lease_lost, AheadRows, CollectionCutover, CutoverOptions, CutoverProgress, PendingRewrite,
    MAX_LISTED_AHEAD,
};
use crate::collection::layout::doc_prefix;
use crate::collection::rewrite::{RowRewrite, RowRewriter};
use crate::collection::CollectionError;
use crate::keys::FENCE_KEY;
use crate::pass::{HookError, Pass, PassError, RecordError, RecordRef};
use crate::policy::{Fence, FenceState, PolicyError, SchemaGate};
use strata_store::{Batch, KvRead, Mutation, Precondition};

const PASS_RETRIES: u32 = 16;

impl SchemaGate {
    /// Rewrites one collection on the bulk pass, resuming from its checkpoint.
    pub(super) fn rewrite_collection(
        &self,
        collection: &str,
        rewrite: &PendingRewrite,
        options: &mut CutoverOptions<'_>,
        certified: &mut super::Certified,
    ) -> Result<CollectionCutover, PolicyError> {
        let limits = options.limits;
        let codec = CutoverCheckpoint::new(collection, &rewrite.target.hash);
        let ck_key = cutover_key(collection);
        let prefix = doc_prefix(collection);
        let table_id = match &options.sealer {
            None => 0,
            Some(_) => match self
                .store()
                .get(&crate::collection::layout::catalog_key(collection))
                .map_err(|e| PolicyError::store(collection.as_bytes(), e))?
            {
                Some(b) => {
                    crate::collection::layout::decode_catalog_record(collection, &b).unwrap_or(0)
                }
                None => 0,
            },
        };
        let rewriter = RowRewriter {
            collection,
            upcaster: &rewrite.upcaster,
            // The declared transform is the chain's last step (rows reach it by the
            // upcast, once); a strategy that declares none reshapes rows in place.
            transform: (!rewrite.in_chain).then_some(&rewrite.transform),
            bump_lock: true,
            seal: options
                .sealer
                .as_ref()
                .map(|sealer| crate::collection::rewrite::RowSeal {
                    sealer,
                    table_id,
                    strict: false,
                }),
        };
        let transform_from = rewrite.upcaster.chain().current_version().checked_sub(1);
        let mut records = 0;
        let mut resumed_from = None;
        // Rows written by a newer build: left byte-identical, reported (counted once
        // although a batch retried after a conflict meets its rows again).
        let mut ahead = AheadRows::default();
        for attempt in 0..PASS_RETRIES {
            if let Some(v) = self
                .store()
                .get(&ck_key)
                .map_err(|e| PolicyError::store(&ck_key, e))?
            {
                if let Ok((true, _)) = codec.parse(&v) {
                    return Ok(CollectionCutover::new(
                        collection,
                        records,
                        resumed_from,
                        ahead,
                    ));
                }
            }
            let lease = self.config().lease();
            let store = self.store();
            // Rows are sealed with this snapshot of the keys: a rotation that began
            // meanwhile fails the batch (rerun the cutover with the refreshed keys).
            let keyring = options.sealer.as_ref().map(|s| s.keyring_precondition());
            let hook =
                |batch: &mut Batch, _: &crate::pass::BatchInfo<'_>| -> Result<(), HookError> {
                    if let Some(k) = &keyring {
                        batch.push_precondition(k.clone());
                    }
                    let (cur, raw) = Fence::read_raw(store).map_err(HookError::check)?;
                    if !self.owns(&cur) || cur.state != FenceState::Migrating {
                        return Err(HookError::LeaseLost {
                            holder: cur.coordinator.clone(),
                        });
                    }
                    let mut next = cur.clone();
                    next.lease_until_ms = self.clock().now_ms().saturating_add(lease);
                    match raw {
                        Some(raw) => batch.push_precondition(Precondition::Equals {
                            key: FENCE_KEY.to_vec(),
                            value: raw,
                        }),
                        None => batch.push_precondition(Precondition::Absent {
                            key: FENCE_KEY.to_vec(),
                        }),
                    }
                    batch.push(Mutation::Set {
                        key: FENCE_KEY.to_vec(),
                        value: next.encode(),
                    });
                    Ok(())
                };
            let ahead_rows = &mut ahead;
            let processor = |r: &RecordRef<'_>,
                             out: &mut Vec<Mutation>|
             -> Result<(), RecordError> {
                let suffix = r.key.get(prefix.len()..).unwrap_or_default();
                let Ok(id) = std::str::from_utf8(suffix) else {
                    return Err(RecordError::new("the document key is not UTF-8"));
                };
                match rewriter.rewrite_at(r.key, id, r.value, |_| Ok(())) {
                    Ok(RowRewrite::Rewrite(value)) => out.push(r.replace(value)),
                    Ok(RowRewrite::Keep) => {}
                    Ok(RowRewrite::Ahead { stored }) => {
                        if ahead_rows.insert(id) && ahead_rows.count <= MAX_LISTED_AHEAD as u64 {
                            tracing::warn!(collection, key = %strata_store::escape_key(suffix), stored, "cutover: row written by a newer build left unchanged");
                        }
                    }
                    Err(CollectionError::Transform { reason, .. }) => {
                        return Err(RecordError::new(reason))
                    }
                    // The cutover's own step failed: the transform's reason, as before.
                    Err(CollectionError::Upcast { from, source, .. })
                        if rewrite.in_chain && Some(from) == transform_from =>
                    {
                        return Err(RecordError::new(source.message()))
                    }
                    Err(e) => return Err(RecordError::from_error(e)),
                }
                Ok(())
            };
            let progress = options.progress.as_mut();
            let abort = options.abort.as_mut();
            let mut pass = Pass::new(collection, doc_prefix(collection), &codec)
                .limits(limits)
                // The collection as the rewrite leaves it: the final batch's manifest is
                // recorded from this tally when nothing else wrote meanwhile.
                .tally_scope(true)
                .on_batch(hook);
            if let Some(a) = abort {
                pass = pass.abort_when(a);
            }
            if let Some(f) = progress {
                pass = pass.on_progress(move |p: &crate::pass::Progress<'_>| {
                    f(&CutoverProgress {
                        collection,
                        records: p.records,
                        batches: p.batches,
                        done: p.done,
                    })
                });
            }
            // Observed before the pass's first read (see `Pass::tally_scope`).
            let start = store.capabilities().write_epoch();
            let result = pass.run(store, processor);
            match result {
                Ok(report) => {
                    if let (Some(tally), Some(start)) = (report.tally, start) {
                        // Armed first, then proven again up to now: the rewrite's own
                        // batches are the only writes since it began reading; from here
                        // until `complete` commits, the armed scope catches any write.
                        let scope = store.arm_manifest_scope(&prefix);
                        let writes = store
                            .capabilities()
                            .write_epoch()
                            .and_then(|now| now.writes_since(start));
                        if writes == Some(report.batches) {
                            certified.insert(collection.to_string(), (tally, scope));
                        }
                    }
                    records += report.records;
                    if attempt == 0 {
                        resumed_from = report.resumed_from;
                    }
                    return Ok(CollectionCutover::new(
                        collection,
                        records,
                        resumed_from,
                        ahead,
                    ));
                }
                Err(PassError::Hook {
                    source,
                    table,
                    checkpoint,
                }) => {
                    return Err(match source {
                        HookError::LeaseLost { holder } => PolicyError::LeaseLost {
                            coordinator: holder.unwrap_or_default(),
                        },
                        source => match source.into_cause::<PolicyError>() {
                            Ok(e) => e,
                            // Kept as the source, not flattened into a string.
                            Err(source) => PolicyError::Pass {
                                collection: collection.to_string(),
                                source: Box::new(PassError::Hook {
                                    table,
                                    checkpoint,
                                    source,
                                }),
                            },
                        },
                    });
                }
                Err(PassError::Aborted { .. }) => {
                    return Err(PolicyError::Aborted {
                        state: FenceState::Migrating,
                    })
                }
                Err(PassError::InvalidRecord { key, reason, .. }) => {
                    return Err(PolicyError::Transform {
                        collection: collection.to_string(),
                        key,
                        reason,
                    })
                }
                Err(PassError::Store { source, .. }) if source.is_conflict() => {
                    // The fence changed between the hook's read and the commit (a pending
                    // registration, a heartbeat-free update): retry from the checkpoint
                    // while this handle still owns the lease.
                    let cur = Fence::read(self.store())?;
                    if !self.owns(&cur) || cur.state != FenceState::Migrating {
                        return Err(lease_lost(&cur));
                    }
                    tracing::debug!(
                        collection,
                        "fence changed under the cutover batch; resuming"
                    );
                    continue;
                }
                Err(source) => {
                    return Err(PolicyError::Pass {
                        collection: collection.to_string(),
                        source: Box::new(source),
                    })
                }
            }
        }
        Err(PolicyError::Contended {
            key: FENCE_KEY.to_vec(),
            attempts: PASS_RETRIES,
        })
    }
}
