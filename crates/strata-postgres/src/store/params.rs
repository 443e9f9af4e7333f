//! The parameters of a batch as the write statements take them (key and value arrays),
//! and the error a failed precondition becomes: shared by the write paths (the pipelined
//! transaction, the one-message path, the session functions).

use crate::pool::{Failure, Rejected};
use strata_store::{Batch, Mutation, Precondition, StoreError};
use tokio_postgres::types::{ToSql, Type};

/// Borrowed keys or values: one array parameter of the conditional write.
type ByteaArray<'a> = Vec<&'a [u8]>;

/// The preconditions of a batch as the conditional write's first two parameters: the
/// keys, and the value each requires (`NULL`: absent).
pub(super) fn precondition_params(
    preconditions: &[Precondition],
) -> (Vec<&[u8]>, Vec<Option<&[u8]>>) {
    let keys = preconditions.iter().map(|p| p.key()).collect();
    let values = preconditions
        .iter()
        .map(|p| match p {
            Precondition::Equals { value, .. } => Some(value.as_slice()),
            Precondition::Absent { .. } => None,
        })
        .collect();
    (keys, values)
}

/// The mutations of a batch as the conditional write's last three parameters: the keys
/// and values to set, the keys to delete.
pub(super) fn mutation_params(
    mutations: &[Mutation],
) -> (ByteaArray<'_>, ByteaArray<'_>, ByteaArray<'_>) {
    let (mut set_keys, mut set_values, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
    for m in mutations {
        match m {
            Mutation::Set { key, value } => {
                set_keys.push(key.as_slice());
                set_values.push(value.as_slice());
            }
            Mutation::Delete { key } => deletes.push(key.as_slice()),
        }
    }
    (set_keys, set_values, deletes)
}

/// The failure of a batch whose conditional write reported a failed precondition: its
/// 1-based `position` among `preconditions` and the key's `current` value. The error is
/// the precondition's own (it names the key and what it found), or a conflict on the key.
pub(super) fn failed_precondition(
    preconditions: &[Precondition],
    position: Option<i64>,
    current: Option<&[u8]>,
) -> Failure {
    let p = position
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| preconditions.get(i.checked_sub(1)?));
    if let Some(p) = p {
        if let Err(e) = p.check(current) {
            return Failure::from(e);
        }
    }
    Failure::from(StoreError::Conflict {
        key: p.map(|p| p.key().to_vec()).unwrap_or_default(),
        reason: strata_store::ConflictReason::Changed,
    })
}

/// The answer of a conditional write as a rejection: its rows are the failed
/// preconditions (1-based position, current value); none when it wrote.
pub(super) fn rejection(rows: &[tokio_postgres::Row]) -> Result<(), Failure> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut failed = Vec::with_capacity(rows.len());
    for row in rows {
        let position: i64 = row.try_get(0)?;
        let current: Option<Vec<u8>> = row.try_get(1)?;
        failed.push((usize::try_from(position).unwrap_or(0), current));
    }
    Err(Failure::Rejected(Rejected { failed }))
}

/// The error of a rejected batch: its first failed precondition's own (see
/// [`failed_precondition`]).
pub(super) fn rejected_error(preconditions: &[Precondition], rejected: &Rejected) -> StoreError {
    let first = rejected.failed.first();
    let position = first.and_then(|(i, _)| i64::try_from(*i).ok());
    let current = first.and_then(|(_, c)| c.as_deref());
    match failed_precondition(preconditions, position, current) {
        Failure::Store(e) => e,
        _ => StoreError::Conflict {
            key: Vec::new(),
            reason: strata_store::ConflictReason::Changed,
        },
    }
}

/// Adds to `batch` one precondition per key read: it still holds the value the decision
/// was made on (`None`: still absent), after the batch's own preconditions.
pub(super) fn require_values_read(batch: &mut Batch, reads: &[&[u8]], values: &[Option<Vec<u8>>]) {
    for (key, value) in reads.iter().zip(values) {
        batch.push_precondition(match value {
            Some(v) => Precondition::Equals {
                key: key.to_vec(),
                value: v.clone(),
            },
            None => Precondition::Absent { key: key.to_vec() },
        });
    }
}

/// A batch's five conditional-write parameters (see [`precondition_params`],
/// [`mutation_params`]), kept while a statement's future borrows them.
pub(super) struct WriteParams<'a> {
    pre_keys: Vec<&'a [u8]>,
    pre_values: Vec<Option<&'a [u8]>>,
    set_keys: ByteaArray<'a>,
    set_values: ByteaArray<'a>,
    deletes: ByteaArray<'a>,
}

impl<'a> WriteParams<'a> {
    /// The parameters of `batch`.
    pub(super) fn of(batch: &'a Batch) -> Self {
        let (pre_keys, pre_values) = precondition_params(batch.preconditions());
        let (set_keys, set_values, deletes) = mutation_params(batch.mutations());
        WriteParams {
            pre_keys,
            pre_values,
            set_keys,
            set_values,
            deletes,
        }
    }

    /// With their types, for the conditional write as an unnamed statement.
    pub(super) fn typed(&self) -> [(&(dyn ToSql + Sync), Type); 5] {
        [
            (&self.pre_keys, Type::BYTEA_ARRAY),
            (&self.pre_values, Type::BYTEA_ARRAY),
            (&self.set_keys, Type::BYTEA_ARRAY),
            (&self.set_values, Type::BYTEA_ARRAY),
            (&self.deletes, Type::BYTEA_ARRAY),
        ]
    }
}

/// The values of `keys` (`None`: absent) from the `(k, v)` rows of one read of them
/// ([`crate::sql::Texts::read_many`]), matched by a map (a write set may read thousands).
pub(super) fn values_by_key(
    keys: &[&[u8]],
    rows: Vec<tokio_postgres::Row>,
) -> Result<Vec<Option<Vec<u8>>>, tokio_postgres::Error> {
    let mut at: std::collections::HashMap<&[u8], Vec<usize>> =
        std::collections::HashMap::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        at.entry(*key).or_default().push(i);
    }
    let mut values = vec![None; keys.len()];
    for row in rows {
        let (k, v): (Vec<u8>, Vec<u8>) = (row.try_get(0)?, row.try_get(1)?);
        for &i in at.get(k.as_slice()).map(Vec::as_slice).unwrap_or_default() {
            if let Some(value) = values.get_mut(i) {
                *value = Some(v.clone());
            }
        }
    }
    Ok(values)
}
