//! Reads of [`PgStore`]: `get`, the page query behind `scan` and `scan_visit`, and the
//! prefix probe.

use super::{PgStore, FETCH_ROWS};
use crate::error::PgError;
use crate::keys::successor;
use crate::pool::{Conn, Failure};
use crate::sql;
use strata_store::{
    escape_key, Capabilities, KvRead, Offer, PageBuilder, Result, ScanLimits, ScanPage, StoreError,
    Visit, VisitEnd,
};
use tokio_postgres::types::{ToSql, Type};

impl PgStore {
    async fn scan_rows(
        &self,
        conn: &mut Conn,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
    ) -> std::result::Result<ScanPage, Failure> {
        let mut page = PageBuilder::new(limits);
        let query = PageQuery::new(prefix, after, limits);
        let Some(stmt) = query.statement(conn).cloned() else {
            // Through a transaction pooler: one unnamed statement for the whole page (a
            // portal would outlive the statement's transaction); rows beyond the byte
            // budget carry only their keys and lengths.
            let rows = conn
                .client
                .query_typed(query.text(&self.texts), &query.typed_params())
                .await?;
            self.offer_rows(&mut page, rows)?;
            return Ok(page.finish());
        };
        let stmt = &stmt;
        let params = query.params();
        if query.row_limit <= FETCH_ROWS as i64 {
            let rows = conn.client.query(stmt, &params).await?;
            self.offer_rows(&mut page, rows)?;
        } else {
            let tx = conn
                .client
                .build_transaction()
                .read_only(true)
                .start()
                .await?;
            let portal = tx.bind(stmt, &params).await?;
            loop {
                let rows = tx.query_portal(&portal, FETCH_ROWS as i32).await?;
                let full = rows.len() == FETCH_ROWS;
                if !self.offer_rows(&mut page, rows)? || !full {
                    break;
                }
            }
            tx.commit().await?;
        }
        Ok(page.finish())
    }

    /// [`KvRead::scan_visit`] over the rows of one page query: the records the page takes
    /// (decided as [`PageBuilder`] decides, before any is visited, so that the errors are
    /// the same as [`KvRead::scan`]'s) are handed over as slices of the received rows.
    fn visit_rows(
        &self,
        rows: &[tokio_postgres::Row],
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> std::result::Result<VisitEnd, Failure> {
        let (max_records, max_bytes) = (limits.max_records(), limits.max_bytes());
        let mut taken = 0;
        let mut used = 0usize;
        let mut more = false;
        for row in rows {
            let key: &[u8] = row.try_get(0)?;
            let len: i32 = row.try_get(1)?;
            let size = key
                .len()
                .saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
            if size > max_bytes {
                if taken > 0 {
                    more = true;
                    break;
                }
                return Err(Failure::from(StoreError::RecordTooLarge {
                    key: key.to_vec(),
                    size,
                    limit: max_bytes,
                }));
            }
            if taken >= max_records || used.saturating_add(size) > max_bytes {
                more = true;
                break;
            }
            used += size;
            taken += 1;
        }
        for (i, row) in rows.iter().take(taken).enumerate() {
            let key: &[u8] = row.try_get(0)?;
            let value: Option<&[u8]> = row.try_get(2)?;
            let Some(value) = value else {
                // The server withheld a value the page takes: the two disagree about the
                // limits, which must not happen.
                return Err(Failure::from(PgError::Unexpected {
                    op: "scan",
                    table: self.table.clone(),
                    key: escape_key(key),
                }));
            };
            if visit(key, value) == Visit::Stop {
                return Ok(VisitEnd {
                    records: i + 1,
                    more: true,
                });
            }
        }
        Ok(VisitEnd {
            records: taken,
            more,
        })
    }

    /// Feeds rows `(k, octet_length(v), v or NULL)` to the page builder; false once it
    /// said stop.
    fn offer_rows(
        &self,
        page: &mut PageBuilder,
        rows: Vec<tokio_postgres::Row>,
    ) -> std::result::Result<bool, Failure> {
        for row in rows {
            let key: Vec<u8> = row.try_get(0)?;
            let len: i32 = row.try_get(1)?;
            match page.offer(&key, usize::try_from(len).unwrap_or(usize::MAX))? {
                Offer::Stop => return Ok(false),
                Offer::Take => {
                    let value: Option<Vec<u8>> = row.try_get(2)?;
                    match value {
                        Some(v) => page.push(key, v),
                        // The server withheld a value the builder takes: the two
                        // disagree about the limits, which must not happen.
                        None => {
                            return Err(Failure::from(PgError::Unexpected {
                                op: "scan",
                                table: self.table.clone(),
                                key: escape_key(&key),
                            }))
                        }
                    }
                }
            }
        }
        Ok(true)
    }
}

/// The statement and parameters of one page query.
struct PageQuery<'a> {
    lower: &'a [u8],
    strict: bool,
    upper: Option<Vec<u8>>,
    max_bytes: i64,
    max_records: i64,
    /// One row past the record limit tells whether there is more.
    row_limit: i64,
}

impl<'a> PageQuery<'a> {
    fn new(prefix: &'a [u8], after: Option<&'a [u8]>, limits: ScanLimits) -> Self {
        let (lower, strict) = match after {
            Some(a) if a >= prefix => (a, true),
            _ => (prefix, false),
        };
        PageQuery {
            lower,
            strict,
            upper: successor(prefix),
            max_bytes: clamp(limits.max_bytes()),
            max_records: clamp(limits.max_records()),
            row_limit: clamp(limits.max_records().saturating_add(1)),
        }
    }

    /// The prepared statement (none through a transaction pooler).
    fn statement<'c>(&self, conn: &'c Conn) -> Option<&'c tokio_postgres::Statement> {
        let s = conn.stmts.as_ref()?;
        Some(&s.scan[usize::from(self.strict)][usize::from(self.upper.is_some())])
    }

    /// The statement's text (through a transaction pooler).
    fn text<'t>(&self, texts: &'t sql::Texts) -> &'t str {
        &texts.scan[usize::from(self.strict)][usize::from(self.upper.is_some())]
    }

    /// The parameters with their types, for an unnamed statement.
    fn typed_params(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![(&self.lower, Type::BYTEA)];
        if let Some(u) = &self.upper {
            params.push((u, Type::BYTEA));
        }
        params.extend([
            (&self.max_bytes as &(dyn ToSql + Sync), Type::INT8),
            (&self.max_records, Type::INT8),
            (&self.row_limit, Type::INT8),
        ]);
        params
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&self.lower];
        if let Some(u) = &self.upper {
            params.push(u);
        }
        params.extend([
            &self.max_bytes as &(dyn ToSql + Sync),
            &self.max_records,
            &self.row_limit,
        ]);
        params
    }
}

/// A `usize` limit as the `int8` the SQL compares with.
fn clamp(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl KvRead for PgStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_conn("get", async |conn| {
            let row = match &conn.stmts {
                Some(s) => conn.client.query_opt(&s.get, &[&key]).await?,
                None => conn
                    .client
                    .query_typed(&self.texts.get, &[(&key, Type::BYTEA)])
                    .await?
                    .into_iter()
                    .next(),
            };
            Ok(match row {
                Some(row) => Some(row.try_get(0)?),
                None => None,
            })
        })
    }

    /// Without copying a record: the page's rows are received whole (one query), and
    /// keys and values are handed over as slices of them. Pages larger than one query's
    /// rows are fetched as a page first (the server computes the running byte total, so an
    /// oversized record's value never crosses the wire).
    fn scan_visit(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limits: ScanLimits,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit,
    ) -> Result<VisitEnd> {
        let query = PageQuery::new(prefix, after, limits);
        if query.row_limit > FETCH_ROWS as i64 {
            let page = self.with_conn("scan", async |conn| {
                self.scan_rows(conn, prefix, after, limits).await
            })?;
            return Ok(page.visit(visit));
        }
        let rows = self.with_conn("scan", async |conn| {
            Ok(match query.statement(conn) {
                Some(stmt) => conn.client.query(stmt, &query.params()).await?,
                None => {
                    conn.client
                        .query_typed(query.text(&self.texts), &query.typed_params())
                        .await?
                }
            })
        })?;
        self.visit_rows(&rows, limits, visit)
            .map_err(|e| self.error(e, "scan"))
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            // Every read is a statement on the server.
            remote_reads: true,
            cross_process_lease: Some(self),
            write_epoch: None,
            // A write decides on expected values first, then again on those read.
            decides_once: false,
        }
    }
}

impl PgStore {
    /// True when at least one key starts with `prefix`: one indexed probe.
    pub fn prefix_exists_probe(&self, prefix: &[u8]) -> Result<bool> {
        self.with_conn("prefix_exists", async |conn| {
            let upper = successor(prefix);
            let rows = match (&conn.stmts, &upper) {
                (Some(s), Some(upper)) => {
                    conn.client.query(&s.exists[1], &[&prefix, upper]).await?
                }
                (Some(s), None) => conn.client.query(&s.exists[0], &[&prefix]).await?,
                (None, Some(upper)) => {
                    conn.client
                        .query_typed(
                            &self.texts.exists[1],
                            &[(&prefix, Type::BYTEA), (upper, Type::BYTEA)],
                        )
                        .await?
                }
                (None, None) => {
                    conn.client
                        .query_typed(&self.texts.exists[0], &[(&prefix, Type::BYTEA)])
                        .await?
                }
            };
            match rows.first() {
                Some(row) => Ok(row.try_get(0)?),
                None => Ok(false),
            }
        })
    }
}

impl PgStore {
    /// The values of `keys` (`None`: absent), read in ONE statement — one snapshot, one
    /// round trip — on the primary: what a write decides on after a refusal on values it
    /// expected (a write set may need thousands).
    pub(super) fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        if let [key] = keys {
            return Ok(vec![self.get(key)?]);
        }
        self.with_conn("get", async |conn| {
            let rows = conn
                .client
                .query_typed(&self.texts.read_many, &[(&keys, Type::BYTEA_ARRAY)])
                .await?;
            Ok(super::params::values_by_key(keys, rows)?)
        })
    }
}
