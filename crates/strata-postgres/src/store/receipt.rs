//! Commit receipts: what a client keeps so that, after a failover to an **asynchronous**
//! standby, it can find out whether writes it had seen acknowledged were lost.
//!
//! With asynchronous replication the primary acknowledges a commit once its own WAL has
//! it; the standby may not. Promoted, the standby starts a new timeline at the end of the
//! WAL it had (the *switch point*): every commit of the old primary after it is gone,
//! acknowledged or not. Nothing on the promoted server says which commits those were —
//! it never saw them. What the promoted server does know is its timeline history (which
//! timeline it left, and where); what a client can know is how far the old primary's WAL
//! was when its writes had been acknowledged. A [`Receipt`] is that: the timeline and WAL
//! write position of the primary, taken after the writes it covers
//! ([`PgStore::commit_receipt`]); it is at or past the commit record of every commit
//! acknowledged (to anyone) before it was taken. [`PgStore::check_receipt`] on the
//! (promoted) primary then decides:
//!
//! * the receipt's position is at or before where this server's history left the
//!   receipt's timeline (or on its current timeline, at or before its current position):
//!   every commit acknowledged before the receipt is here ([`ReceiptCheck::Kept`]);
//! * it is past the switch point: the WAL between the two is not here, so commits
//!   acknowledged before the receipt *may* be lost ([`ReceiptCheck::MayBeLost`]) — which
//!   ones, the server cannot say (the range may hold only other sessions' commits, or
//!   none of strata's);
//! * it is ahead of this server on its own timeline, or from a timeline not in its
//!   history: this server is not where those writes went (another cluster, a restored
//!   backup, a stale replica) ([`ReceiptCheck::NotInHistory`]).
//!
//! Reading the timeline history (`pg_read_file` of `pg_wal/<timeline>.history`) needs a
//! superuser or the `pg_read_server_files` role; without it the check is an error that
//! says so.

use crate::error::PgError;
use crate::PgStore;
use strata_store::Result;
use tokio_postgres::types::Type;

/// A position in a PostgreSQL cluster's WAL history: a timeline and a WAL position
/// (LSN). Written `TIMELINE:LSN`, e.g. `1:0/3000148` (the LSN as PostgreSQL prints it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Receipt {
    /// The timeline (1 for a cluster never promoted; each promotion adds one).
    pub timeline: u32,
    /// The WAL position (`pg_lsn` as a number).
    pub lsn: u64,
}

/// Formats an LSN as PostgreSQL does (`0/3000148`).
fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xffff_ffff)
}

/// Parses an LSN as PostgreSQL prints it (`0/3000148`).
fn parse_lsn(s: &str) -> Option<u64> {
    let (hi, lo) = s.split_once('/')?;
    let hi = u32::from_str_radix(hi, 16).ok()?;
    let lo = u32::from_str_radix(lo, 16).ok()?;
    Some((u64::from(hi) << 32) | u64::from(lo))
}

impl std::fmt::Display for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.timeline, lsn_text(self.lsn))
    }
}

impl std::str::FromStr for Receipt {
    type Err = PgError;

    fn from_str(s: &str) -> std::result::Result<Self, PgError> {
        let invalid = || PgError::InvalidReceipt {
            text: strata_store::one_line(s),
        };
        let (timeline, lsn) = s.trim().split_once(':').ok_or_else(invalid)?;
        Ok(Receipt {
            timeline: timeline.parse().map_err(|_| invalid())?,
            lsn: parse_lsn(lsn).ok_or_else(invalid)?,
        })
    }
}

/// What [`PgStore::check_receipt`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptCheck {
    /// Every commit acknowledged before the receipt was taken is on this server.
    Kept {
        /// This server's position now.
        current: Receipt,
    },
    /// This server's history left the receipt's timeline at `switched_at`, before the
    /// receipt's position: commits acknowledged before the receipt whose commit records
    /// lie between the two are not here (asynchronous replication, then a failover).
    MayBeLost {
        /// This server's position now.
        current: Receipt,
        /// Where this server's history left the receipt's timeline.
        switched_at: u64,
    },
    /// The receipt is not in this server's history (ahead of it on its timeline, or
    /// from a timeline it never had): the writes it covers went to another server.
    NotInHistory {
        /// This server's position now.
        current: Receipt,
    },
}

impl ReceiptCheck {
    /// True for [`ReceiptCheck::Kept`].
    pub fn is_kept(&self) -> bool {
        matches!(self, ReceiptCheck::Kept { .. })
    }

    /// One line saying what was found and what to do, for `receipt`.
    pub fn describe(&self, receipt: Receipt) -> String {
        match self {
            ReceiptCheck::Kept { current } => format!(
                "receipt {receipt}: every commit acknowledged before it is on this server (now at {current})"
            ),
            ReceiptCheck::MayBeLost {
                current,
                switched_at,
            } => format!(
                "receipt {receipt}: this server left timeline {} at {} (a failover to a standby that lacked the WAL after it; now at {current}), so commits acknowledged before the receipt whose WAL lies between {} and {} may be lost; check the writes made before the receipt and redo the missing ones (a migration, sweep, rotation or copy resumes from the checkpoint this server has: rerun it)",
                receipt.timeline,
                lsn_text(*switched_at),
                lsn_text(*switched_at),
                lsn_text(receipt.lsn)
            ),
            ReceiptCheck::NotInHistory { current } => format!(
                "receipt {receipt}: not in this server's history (now at {current}): the writes it covers went to another server (another cluster, a restored backup or a stale replica); point --db at the server that has them"
            ),
        }
    }
}

impl PgStore {
    /// The receipt for every commit acknowledged so far (by this handle or any other):
    /// the primary's current timeline and WAL write position. Keep it (a log line, the
    /// application's own records) and give it to [`PgStore::check_receipt`] — or `strata
    /// verify --receipt` — after a failover. See the module docs for what it proves.
    ///
    /// Errors: the server is a standby (no WAL position of its own), or the connection.
    pub fn commit_receipt(&self) -> Result<Receipt> {
        let found = self.with_conn("commit receipt", async |conn| {
            let rows = conn
                .client
                .query_typed(
                    "SELECT pg_walfile_name(pg_current_wal_lsn()), pg_current_wal_lsn()::text",
                    &[],
                )
                .await?;
            match rows.first() {
                Some(r) => Ok(Some((
                    r.try_get::<_, String>(0)?,
                    r.try_get::<_, String>(1)?,
                ))),
                None => Ok(None),
            }
        })?;
        self.receipt_of(found)
    }

    fn receipt_of(&self, found: Option<(String, String)>) -> Result<Receipt> {
        let unexpected = || PgError::Unexpected {
            op: "commit receipt",
            table: self.table().to_string(),
            key: "(pg_current_wal_lsn)".into(),
        };
        let (file, lsn) = found.ok_or_else(unexpected)?;
        let timeline = file
            .get(..8)
            .and_then(|t| u32::from_str_radix(t, 16).ok())
            .ok_or_else(unexpected)?;
        let lsn = parse_lsn(&lsn).ok_or_else(unexpected)?;
        Ok(Receipt { timeline, lsn })
    }

    /// Checks `receipt` (from [`PgStore::commit_receipt`], on this cluster's primary of
    /// the time) against this server's WAL history: whether every commit acknowledged
    /// before it is here (see the module docs).
    ///
    /// Errors: this server's timeline history cannot be read (it needs a superuser or the
    /// `pg_read_server_files` role: [`PgError::ReceiptUnchecked`]), or the connection.
    pub fn check_receipt(&self, receipt: Receipt) -> Result<ReceiptCheck> {
        let current = self.commit_receipt()?;
        if receipt.timeline == current.timeline {
            return Ok(match receipt.lsn <= current.lsn {
                true => ReceiptCheck::Kept { current },
                false => ReceiptCheck::NotInHistory { current },
            });
        }
        if receipt.timeline > current.timeline {
            return Ok(ReceiptCheck::NotInHistory { current });
        }
        let file = format!("pg_wal/{:08X}.history", current.timeline);
        let history: std::result::Result<String, String> =
            self.with_conn("timeline history", async |conn| {
                match conn
                    .client
                    .query_typed("SELECT pg_read_file($1)", &[(&file, Type::TEXT)])
                    .await
                {
                    Ok(rows) => Ok(match rows.first() {
                        Some(r) => Ok(r.try_get::<_, String>(0)?),
                        None => Err(String::from("no rows")),
                    }),
                    // Permission denied and the like: said in one line, not a failure of
                    // the connection.
                    Err(e) if e.as_db_error().is_some() => Ok(Err(e
                        .as_db_error()
                        .map(|d| d.message().to_string())
                        .unwrap_or_default())),
                    Err(e) => Err(e.into()),
                }
            })?;
        let history = history.map_err(|reason| PgError::ReceiptUnchecked {
            target: self.target().to_string(),
            file: file.clone(),
            reason,
        })?;
        // Lines `parent-timeline <TAB> switch-point <TAB> reason`; comments start with #.
        let switched_at = history.lines().find_map(|line| {
            let mut parts = line.split_whitespace();
            let tli: u32 = parts.next()?.parse().ok()?;
            let at = parse_lsn(parts.next()?)?;
            (tli == receipt.timeline).then_some(at)
        });
        Ok(match switched_at {
            None => ReceiptCheck::NotInHistory { current },
            Some(at) if receipt.lsn <= at => ReceiptCheck::Kept { current },
            Some(at) => ReceiptCheck::MayBeLost {
                current,
                switched_at: at,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_round_trip_and_bad_ones_are_refused() {
        let r: Receipt = "2:0/3000148".parse().unwrap();
        assert_eq!(
            r,
            Receipt {
                timeline: 2,
                lsn: 0x300_0148
            }
        );
        assert_eq!(r.to_string(), "2:0/3000148");
        let big = Receipt {
            timeline: 7,
            lsn: (0x1A << 32) | 0xFF,
        };
        assert_eq!(big.to_string().parse::<Receipt>().unwrap(), big);
        for bad in ["", "2", "0/3000148", "x:0/1", "2:0-1", "2:0/zz", "2:\n0/1"] {
            let err = bad.parse::<Receipt>().unwrap_err();
            assert!(err.to_string().contains("TIMELINE:LSN"), "{err}");
        }
    }
}
