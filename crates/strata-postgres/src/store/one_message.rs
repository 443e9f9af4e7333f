//! The common batch in one protocol message: an ordinary writer's small batch on a
//! connection without the session functions (`function.rs`, the default path; this one is
//! its fallback when the session cannot create temporary functions, or when
//! [`crate::PgOptions::session_functions`] is off).
//!
//! The pipelined transaction of [`PgStore::try_apply`](super::PgStore) sends `BEGIN`, two
//! lock statements, the conditional write and `COMMIT` as five extended-protocol
//! statements, each closed by its own `Sync` and answered with its own `ReadyForQuery`.
//! Measured with `pg_stat_statements` and the backend's CPU time, the server spends about
//! as much on each such cycle (bind, portal, snapshot, transaction-state bookkeeping, a
//! flushed answer) as on the statement itself, so a put cost five cycles where a raw
//! `INSERT … ON CONFLICT` costs one.
//!
//! Here the same three statements — the store lease and table locks (shared), the key
//! locks, the conditional write (for a batch of one set, as a put is, a leaner form of
//! it: [`crate::sql::conditional_set`]) — are sent as ONE simple-protocol query string of
//! `EXECUTE`s of statements the session prepared once ([`crate::sql::prepare_sql`]): one message, one
//! answer, and an implicit transaction around the three (PostgreSQL runs a multi-statement
//! query string as one transaction, committed at its end, rolled back whole at the first
//! error). The guarantees are exactly the pipelined transaction's:
//!
//! * the locks are taken in the same order, by the same statements;
//! * every statement of the string takes its own snapshot (READ COMMITTED), so the
//!   conditional write, which runs after the locks are granted, sees every batch
//!   committed before them — as the write after `BEGIN` and the lock statements did;
//! * the commit is the server's default one (durable at commit);
//! * the plans are the generic plans of statements prepared once per session.
//!
//! The parameters travel as literals (hex `bytea`, decimal integers), which the server
//! parses for each `EXECUTE`: cheap for a document, not for a 4 MiB batch, so only
//! batches of at most [`MAX_BYTES`] bytes of keys and values take this path (and never
//! the lease holder's, whose fence check and asynchronous commit keep the pipelined
//! transaction).

use super::PgStore;
use crate::error::PgError;
use crate::pool::{Conn, Failure};
use std::fmt::Write as _;
use strata_store::{escape_key, Batch, Mutation, Precondition};
use tokio_postgres::SimpleQueryMessage;

/// Batches with more key and value bytes than this use the pipelined transaction.
pub(super) const MAX_BYTES: usize = 64 << 10;

/// Whether `batch` takes this path: no fence (not the lease holder), per-key locks (not
/// the table-wide lock) and at most [`MAX_BYTES`] of keys and values.
pub(super) fn fits(batch: &Batch) -> bool {
    let mut bytes = 0usize;
    for p in batch.preconditions() {
        bytes += p.key().len();
        if let Precondition::Equals { value, .. } = p {
            bytes += value.len();
        }
    }
    for m in batch.mutations() {
        bytes += m.key().len();
        if let Mutation::Set { value, .. } = m {
            bytes += value.len();
        }
    }
    bytes <= MAX_BYTES
}

impl PgStore {
    /// One attempt at a batch in one message (see the module). `key_locks` are the
    /// sorted lock ids and their exclusive flags.
    pub(super) async fn try_apply_one_message(
        &self,
        conn: &mut Conn,
        batch: &Batch,
        (ids, modes): (&[i32], &[bool]),
    ) -> Result<(), Failure> {
        let preconditions = batch.preconditions();
        let mut q = String::with_capacity(256 + 2 * batch_bytes(batch));
        // The comment names the store's table in `pg_stat_activity` (a checked
        // identifier: lowercase letters, digits and `_`).
        let _ = write!(
            q,
            "/* strata {} */ EXECUTE strata_lock_shared({}, {}); EXECUTE strata_lock_keys({}, '{{",
            self.table, self.locks.lease, self.locks.table, self.locks.class
        );
        for (i, id) in ids.iter().enumerate() {
            let _ = write!(q, "{}{id}", if i == 0 { "" } else { "," });
        }
        q.push_str("}', '{");
        for (i, x) in modes.iter().enumerate() {
            q.push_str(if i == 0 { "" } else { "," });
            q.push(if *x { 't' } else { 'f' });
        }
        // One set and nothing else (a put): the leaner statement.
        let single = match batch.mutations() {
            [Mutation::Set { key, value }] => Some((key, value)),
            _ => None,
        };
        q.push_str(if single.is_some() {
            "}'); EXECUTE strata_set("
        } else {
            "}'); EXECUTE strata_write("
        });
        bytea_array(&mut q, preconditions.iter().map(|p| Some(p.key())));
        q.push_str(", ");
        bytea_array(
            &mut q,
            preconditions.iter().map(|p| match p {
                Precondition::Equals { value, .. } => Some(value.as_slice()),
                Precondition::Absent { .. } => None,
            }),
        );
        if let Some((key, value)) = single {
            q.push_str(", ");
            bytea(&mut q, key);
            q.push_str(", ");
            bytea(&mut q, value);
            q.push(')');
            return self.answer(conn, &q, preconditions).await;
        }
        let sets = || {
            batch.mutations().iter().filter_map(|m| match m {
                Mutation::Set { key, value } => Some((key.as_slice(), value.as_slice())),
                Mutation::Delete { .. } => None,
            })
        };
        q.push_str(", ");
        bytea_array(&mut q, sets().map(|(k, _)| Some(k)));
        q.push_str(", ");
        bytea_array(&mut q, sets().map(|(_, v)| Some(v)));
        q.push_str(", ");
        bytea_array(
            &mut q,
            batch.mutations().iter().filter_map(|m| match m {
                Mutation::Delete { key } => Some(Some(key.as_slice())),
                Mutation::Set { .. } => None,
            }),
        );
        q.push(')');
        self.answer(conn, &q, preconditions).await
    }

    /// Sends the batch's query string `q` and reads its answer.
    async fn answer(
        &self,
        conn: &mut Conn,
        q: &str,
        preconditions: &[Precondition],
    ) -> Result<(), Failure> {
        let messages = conn.client.simple_query(q).await?;
        // The rows after the two lock statements' completions are the write's: its
        // failed preconditions (1-based position, current value), none when it wrote.
        let mut completed = 0;
        let mut failed = Vec::new();
        for m in &messages {
            match m {
                SimpleQueryMessage::CommandComplete(_) => completed += 1,
                SimpleQueryMessage::Row(row) if completed == 2 => {
                    let position: Option<usize> = row.get(0).and_then(|s| s.parse().ok());
                    let p = position.and_then(|i| preconditions.get(i.checked_sub(1)?));
                    let current = match row.get(1) {
                        None => None,
                        Some(text) => Some(decode_bytea(text).ok_or_else(|| {
                            Failure::from(PgError::Unexpected {
                                op: "apply",
                                table: self.table.clone(),
                                key: escape_key(p.map(|p| p.key()).unwrap_or_default()),
                            })
                        })?),
                    };
                    failed.push((position.unwrap_or(0), current));
                }
                _ => {}
            }
        }
        match failed.is_empty() {
            true => Ok(()),
            false => Err(Failure::Rejected(crate::pool::Rejected { failed })),
        }
    }
}

/// Key and value bytes of `batch`.
fn batch_bytes(batch: &Batch) -> usize {
    let p: usize = batch
        .preconditions()
        .iter()
        .map(|p| {
            p.key().len()
                + match p {
                    Precondition::Equals { value, .. } => value.len(),
                    Precondition::Absent { .. } => 0,
                }
        })
        .sum();
    let m: usize = batch
        .mutations()
        .iter()
        .map(|m| {
            m.key().len()
                + match m {
                    Mutation::Set { value, .. } => value.len(),
                    Mutation::Delete { .. } => 0,
                }
        })
        .sum();
    p + m
}

/// Appends `ARRAY['\x…'::bytea, NULL, …]::bytea[]` (see [`bytea`]).
fn bytea_array<'a>(q: &mut String, items: impl Iterator<Item = Option<&'a [u8]>>) {
    q.push_str("ARRAY[");
    for (i, item) in items.enumerate() {
        if i > 0 {
            q.push(',');
        }
        match item {
            None => q.push_str("NULL"),
            Some(bytes) => bytea(q, bytes),
        }
    }
    q.push_str("]::bytea[]");
}

/// Appends `'\x…'::bytea`: hex digits only, so nothing in the bytes can end the literal.
fn bytea(q: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    q.push_str("'\\x");
    // Hex digits into bytes first, then one (ASCII, so always valid) string append: a
    // `char` push per digit cost more than the rest of a put's client side.
    let mut hex = vec![0u8; 2 * bytes.len()];
    for (pair, &b) in hex.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 15)];
    }
    q.push_str(std::str::from_utf8(&hex).unwrap_or_default());
    q.push_str("'::bytea");
}

/// A `bytea` in the server's text form (`\x` and hex digits: `bytea_output = hex`, set
/// for the backend's sessions).
fn decode_bytea(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    hex.chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytea_literals_round_trip_and_hold_only_hex() {
        let mut q = String::new();
        let all: Vec<u8> = (0..=255).collect();
        bytea_array(&mut q, [Some(&all[..]), None, Some(&b""[..])].into_iter());
        assert!(q.starts_with("ARRAY['\\x0001"), "{q}");
        assert!(q.ends_with(",NULL,'\\x'::bytea]::bytea[]"), "{q}");
        let first = q.split('\'').nth(1).unwrap();
        assert_eq!(decode_bytea(first).unwrap(), all);
        assert!(decode_bytea("\\x0").is_none());
        assert!(decode_bytea("\\xzz").is_none());
        assert!(decode_bytea("ab").is_none());
        let mut empty = String::new();
        bytea_array(&mut empty, std::iter::empty());
        assert_eq!(empty, "ARRAY[]::bytea[]");
    }
}
