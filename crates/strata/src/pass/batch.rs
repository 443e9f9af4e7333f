//! One batch of a pass: what it accumulates (rows, their mutations and costs, the keys they
//! touch), how a scanned record is admitted into it under the mutation rules and the byte
//! budget, and its atomic commit (mutations, checkpoint, hooks; with per-row conditions, a
//! conflicting batch narrowed and retried).

use super::*;

impl<'a> Pass<'a> {
    /// Processes one scanned record and adds it to the batch: `Ok(None)`. When the batch
    /// must be committed first, returns `Ok(Some(cost))` with the record's mutations left
    /// in `scratch` (nothing added yet).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn take<P: Processor>(
        &self,
        key: &[u8],
        value: &[u8],
        processor: &mut P,
        scratch: &mut Vec<Mutation>,
        acc: &mut Acc,
        st: &mut RunState,
        ck_key: &[u8],
    ) -> Result<Option<(usize, RowOutcome)>, PassError> {
        scratch.clear();
        let view = RecordRef {
            table: &self.table,
            key,
            value,
        };
        if let Err(e) = processor.process(&view, scratch) {
            return Err(PassError::InvalidRecord {
                table: self.table.clone(),
                key: key.to_vec(),
                reason: e,
                checkpoint: st.durable_cursor.clone(),
            });
        }
        let row = processor.outcome().unwrap_or_else(|| {
            if scratch.iter().any(|m| m.key() == key) {
                RowOutcome::Rewritten
            } else {
                RowOutcome::Unchanged
            }
        });
        let mut cost = key.len() + value.len();
        for (i, m) in scratch.iter().enumerate() {
            let rule = self.rule_violation(m.key(), key, ck_key).or_else(|| {
                scratch[..i]
                    .iter()
                    .any(|o| o.key() == m.key())
                    .then_some(MutationRule::Duplicate)
            });
            if let Some(rule) = rule {
                return Err(self.forbidden(st, key, m.key(), rule));
            }
            // A verbatim copy writes the bytes it read: counted once.
            if !(self.verbatim && m.key() == key) {
                cost = cost.saturating_add(m.size());
            }
        }
        if cost > self.limits.max_bytes() && !self.read_only {
            return Err(PassError::BatchTooLarge {
                table: self.table.clone(),
                key: key.to_vec(),
                size: cost,
                limit: self.limits.max_bytes(),
                checkpoint: st.durable_cursor.clone(),
            });
        }
        if acc.records > 0
            && (acc.records >= self.limits.max_records()
                || acc.bytes.saturating_add(cost) > self.limits.max_bytes())
        {
            return Ok(Some((cost, row)));
        }
        self.admit(key, Some(value), value.len(), cost, row, scratch, acc, st)?;
        Ok(None)
    }

    /// Adds a processed record (its mutations are in `scratch`) to the batch.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn admit(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        value_len: usize,
        cost: usize,
        row: RowOutcome,
        scratch: &mut Vec<Mutation>,
        acc: &mut Acc,
        st: &mut RunState,
    ) -> Result<(), PassError> {
        // A row's own key needs no entry in `acc.keys`: rows come in strictly ascending
        // key order (each once), and a mutation of any other key under the prefix is
        // refused (`MutationRule::SiblingKey`), so no other mutation can write it.
        for m in scratch.iter() {
            if m.key() != key && acc.keys.contains(m.key()) {
                return Err(self.forbidden(st, key, m.key(), MutationRule::Duplicate));
            }
        }
        if acc.records == 0 {
            // The batch's first row: the epoch observed before the page it was read in
            // (later pages of the batch observed the same epoch or a later one).
            acc.epoch = acc.page_epoch;
        }
        if let Some((_, tally)) = st.tally.as_mut() {
            // The value this row is left with once the batch commits.
            match scratch.iter().find(|m| m.key() == key) {
                Some(Mutation::Set { value, .. }) => tally.add(key, value),
                Some(Mutation::Delete { .. }) => {}
                None => match value {
                    Some(v) => tally.add(key, v),
                    None => st.tally = None,
                },
            }
        }
        // With per-row conditions every mutation is kept for a narrowed retry, in the
        // pass's reused buffer (see `kept`).
        let keep = self.row_conditions && !self.dry_run;
        let first = acc.kept.mutation_count();
        let own = keep && scratch.iter().any(|m| m.key() == key);
        for m in scratch.drain(..) {
            if m.key() != key {
                acc.keys.insert(m.key().to_vec());
            }
            if keep {
                acc.kept.push_mutation(&m);
            }
            acc.mutations.push(m);
        }
        if own {
            if let Some(old) = value {
                acc.kept.push_row(key, old, first);
            }
        }
        acc.records += 1;
        acc.bytes += cost;
        acc.counters.count(row);
        st.records += 1;
        st.bytes += (key.len() + value_len) as u64;
        // Reuse the cursor buffer within a batch (the commit takes it).
        match &mut acc.last_key {
            Some(last) => {
                last.clear();
                last.extend_from_slice(key);
            }
            None => acc.last_key = Some(key.to_vec()),
        }
        Ok(())
    }

    pub(super) fn poll_abort(&mut self, st: &RunState) -> Result<(), PassError> {
        if let Some(abort) = self.abort.as_mut() {
            if abort() {
                tracing::warn!(table = %self.table, "pass aborted at a batch boundary");
                return Err(PassError::Aborted {
                    table: self.table.clone(),
                    checkpoint: st.durable_cursor.clone(),
                });
            }
        }
        Ok(())
    }

    pub(super) fn rule_violation(
        &self,
        target: &[u8],
        source: &[u8],
        ck_key: &[u8],
    ) -> Option<MutationRule> {
        if self.verbatim {
            // Into another store: the record itself, whatever it is, and nothing else.
            return (target != source).then_some(MutationRule::SiblingKey);
        }
        if target.starts_with(SCHEMA_PREFIX)
            || target.starts_with(MIGRATION_PREFIX)
            || target == ck_key
        {
            Some(MutationRule::EngineMetadata)
        } else if target.starts_with(&self.prefix) && target != source {
            Some(MutationRule::SiblingKey)
        } else {
            None
        }
    }

    pub(super) fn forbidden(
        &self,
        st: &RunState,
        key: &[u8],
        target: &[u8],
        rule: MutationRule,
    ) -> PassError {
        PassError::ForbiddenMutation {
            table: self.table.clone(),
            key: key.to_vec(),
            target: target.to_vec(),
            rule,
            checkpoint: st.durable_cursor.clone(),
        }
    }

    pub(super) fn store_err(&self, st: &RunState, source: StoreError) -> PassError {
        PassError::Store {
            table: self.table.clone(),
            checkpoint: st.durable_cursor.clone(),
            source,
        }
    }

    /// Commits the accumulated batch (plus checkpoint, plus hooks) and resets `acc`.
    /// With per-row conditions, a batch that conflicts because rows changed is narrowed
    /// and retried (see [`Pass::row_conditions`]).
    pub(super) fn commit<S>(
        &mut self,
        store: &S,
        acc: &mut Acc,
        st: &mut RunState,
        done: bool,
    ) -> Result<(), PassError>
    where
        S: KvRead + KvWrite + ?Sized,
    {
        let new_cursor = acc.last_key.take().or_else(|| st.cursor.clone());
        let ck_key = self.checkpoint.key().to_vec();
        // The next batch is likely as large: its vectors are allocated once, with room for
        // what the checkpoint and the hooks add, instead of growing row by row.
        let n = acc.mutations.len();
        let mutations = std::mem::replace(
            &mut acc.mutations,
            Vec::with_capacity(n.saturating_add(BATCH_SLACK)),
        );
        let mut counters = std::mem::take(&mut acc.counters);
        let info_records = acc.records;
        let info_bytes = acc.bytes;
        acc.records = 0;
        acc.bytes = 0;
        acc.keys.clear();
        // Taken for this commit and handed back cleared (its capacity reused).
        let mut kept = std::mem::take(&mut acc.kept);
        let conditioned = self.row_conditions && !self.dry_run && kept.has_rows();
        // Only the first attempt: a narrowed retry re-read its rows without an epoch.
        let mut observed = acc.epoch.take();
        // The first attempt moves the batch's mutations into the store's batch; a narrowed
        // retry rebuilds them from `kept`.
        let mut first = Some(mutations);
        let (n_mutations, new_value) = loop {
            let mutations = match first.take() {
                Some(m) => m,
                None => kept.mutations(BATCH_SLACK),
            };
            let n_mutations = mutations.len() as u64;
            let mut batch = if conditioned {
                let mut batch = Batch::from_parts(mutations, kept.preconditions(BATCH_SLACK));
                // Each row's bytes were read after the page's epoch was observed: a
                // backend whose epoch has not moved since need not read them again. The
                // checkpoint and hook preconditions pushed below are always checked.
                if let Some(epoch) = observed.take() {
                    batch.observed_at(epoch);
                }
                batch
            } else {
                Batch::from_parts(mutations, Vec::new())
            };
            // A verbatim copy into another store writes the records as they are (a key
            // over the limit that an older build stored is kept; see
            // `Batch::copying_records`).
            if self.verbatim {
                batch = batch.copying_records();
            }
            let new_value = if done {
                self.checkpoint.finished_counted(&counters)
            } else {
                Some(
                    self.checkpoint
                        .encode_counted(new_cursor.as_deref().unwrap_or_default(), &counters),
                )
            };
            if let Some(v) = &new_value {
                let size = ck_key.len().saturating_add(v.len());
                if size > DEFAULT_MAX_BYTES {
                    return Err(PassError::CheckpointTooLarge {
                        table: self.table.clone(),
                        key: ck_key,
                        size,
                        limit: DEFAULT_MAX_BYTES,
                        checkpoint: st.durable_cursor.clone(),
                    });
                }
            }
            if self.dry_run {
                break (n_mutations, new_value);
            }
            if self.guard_checkpoint {
                batch.push_precondition(match &st.durable_value {
                    Some(v) => strata_store::Precondition::Equals {
                        key: ck_key.clone(),
                        value: v.clone(),
                    },
                    None => strata_store::Precondition::Absent {
                        key: ck_key.clone(),
                    },
                });
            }
            match &new_value {
                Some(v) => batch.push(Mutation::Set {
                    key: ck_key.clone(),
                    value: v.clone(),
                }),
                None => batch.push(Mutation::Delete {
                    key: ck_key.clone(),
                }),
            }
            let hook_err = |source: HookError| PassError::Hook {
                table: self.table.clone(),
                checkpoint: st.durable_cursor.clone(),
                source,
            };
            if done {
                if let Some(f) = self.on_complete.as_mut() {
                    f(&mut batch).map_err(hook_err)?;
                }
                // After the completion hook (which may arm the scope): nothing but this
                // pass's own batches wrote since the pass began reading.
                st.proven = st.tally.as_ref().and_then(|(start, tally)| {
                    let now = store.capabilities().write_epoch()?;
                    (now.writes_since(*start) == Some(st.batches)).then_some(*tally)
                });
            }
            if let Some(f) = self.on_batch.as_mut() {
                let info = BatchInfo {
                    table: &self.table,
                    records: info_records,
                    bytes: info_bytes,
                    cursor: new_cursor.as_deref(),
                    done,
                    tally: st.proven.as_ref(),
                };
                f(&mut batch, &info).map_err(|source| PassError::Hook {
                    table: self.table.clone(),
                    checkpoint: st.durable_cursor.clone(),
                    source,
                })?;
            }
            if !conditioned {
                match store.apply(batch) {
                    Ok(()) => break (n_mutations, new_value),
                    Err(source) => return Err(self.store_err(st, source)),
                }
            }
            let source = match store.apply(batch) {
                Ok(()) => break (n_mutations, new_value),
                Err(source) => source,
            };
            if !source.is_conflict() {
                return Err(self.store_err(st, source));
            }
            // Which rows changed since they were read?
            let mut changed = Vec::new();
            for (i, (key, old)) in kept.rows().enumerate() {
                let now = store.get(key).map_err(|e| self.store_err(st, e))?;
                if now.as_deref() != Some(old) {
                    changed.push(i);
                }
            }
            if changed.is_empty() {
                return Err(self.store_err(st, source));
            }
            tracing::debug!(table = %self.table, rows = changed.len(), "concurrent writes changed rows of a batch; committing the others");
            let dropped = kept.drop_rows(&changed);
            let n = dropped.len() as u64;
            counters.rewritten = counters.rewritten.saturating_sub(n);
            counters.conflicted += n;
            // The dropped rows hold what another writer left: not what was tallied.
            st.tally = None;
            if let Some(f) = self.on_narrow.as_mut() {
                f(&dropped);
            }
        };
        kept.clear();
        acc.kept = kept;
        if !self.dry_run {
            st.durable_value = new_value;
            st.durable_cursor = new_cursor.clone();
        }
        st.cursor = new_cursor.clone();
        st.batches += 1;
        st.mutations += n_mutations;
        st.counters.add(&counters);
        tracing::debug!(table = %self.table, records = info_records, bytes = info_bytes, done, "pass batch committed");
        if let Some(f) = self.progress.as_mut() {
            f(&Progress {
                table: &self.table,
                records: st.records,
                bytes: st.bytes,
                batches: st.batches,
                elapsed: st.started.elapsed(),
                cursor: new_cursor.as_deref(),
                done,
                counters: st.counters,
            });
        }
        Ok(())
    }
}

pub(super) struct RunState {
    /// Per-row counters of the committed batches.
    pub(super) counters: RowCounters,
    /// With [`Pass::tally_scope`]: the write epoch observed before the first read and
    /// the tally of the rows admitted so far (`None` once it cannot be exact).
    pub(super) tally: Option<(
        strata_store::epoch::WriteEpoch,
        strata_store::manifest::Tally,
    )>,
    /// The tally proven exact at the final batch.
    pub(super) proven: Option<strata_store::manifest::Tally>,
    /// What the checkpoint key holds in the store (the precondition of the next batch).
    pub(super) durable_value: Option<Vec<u8>>,
    /// The cursor of the last committed batch.
    pub(super) durable_cursor: Option<Vec<u8>>,
    /// The cursor after the last processed batch (equals `durable_cursor` unless dry).
    pub(super) cursor: Option<Vec<u8>>,
    pub(super) records: u64,
    pub(super) bytes: u64,
    pub(super) mutations: u64,
    pub(super) batches: u64,
    pub(super) started: Instant,
}

/// How the visit of one page ended, besides the scan's own result.
pub(super) enum PageOutcome {
    /// Every visited record was added to the batch.
    Scanned,
    /// The last visited record was processed but the batch must be committed first.
    Overflow {
        key: Vec<u8>,
        /// The value read (kept only for per-row conditions).
        value: Option<Vec<u8>>,
        value_len: usize,
        cost: usize,
        row: RowOutcome,
    },
    /// Processing a record failed.
    Failed(PassError),
}

#[derive(Default)]
pub(super) struct Acc {
    /// The write epoch observed before the page being read (per-row conditions only).
    pub(super) page_epoch: Option<strata_store::epoch::WriteEpoch>,
    /// The epoch observed before the batch's first row was read.
    pub(super) epoch: Option<strata_store::epoch::WriteEpoch>,
    pub(super) mutations: Vec<Mutation>,
    /// With per-row conditions: the retry copy of the batch (reused batch after batch).
    pub(super) kept: super::kept::Kept,
    pub(super) counters: RowCounters,
    pub(super) keys: HashSet<Vec<u8>>,
    pub(super) records: usize,
    pub(super) bytes: usize,
    pub(super) last_key: Option<Vec<u8>>,
}
