//! A collection `get` on PostgreSQL is one statement in one round trip (issue 24: the get
//! target is ≤ 1.1× the raw prepared `SELECT`, which is exactly that). Counted on the wire
//! ([`strata_postgres::testing::WireCounter`], a relay in front of the server): any extra
//! statement, round trip or re-prepare per get — a guard or epoch check, a second read —
//! fails here, whatever the timing.

use super::{owner, require_pg, scratch_table};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use strata::{CollectionOptions, Database};
use strata_postgres::testing::{Sent, WireCounter};
use strata_postgres::{PgOptions, PgStore};
use strata_store::Store;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Doc {
    n: u64,
    name: String,
}

/// What `gets` collection gets (of present and absent ids) sent through a relay, on a store
/// opened with `url_params` appended to the relay's URL.
fn sent_by_gets(url: &str, url_params: &str, gets: u64) -> Sent {
    let table = scratch_table();
    let _owner = owner(url, &table);
    let wire = WireCounter::start(url).unwrap();
    let pg = Arc::new(
        PgStore::connect_with(
            &format!("{}{url_params}", wire.url()),
            PgOptions::new().table(&table),
        )
        .unwrap(),
    );
    let db = Database::builder(Store::from_arc(pg)).open().unwrap();
    let c = db
        .collection::<Doc>("docs", CollectionOptions::new())
        .unwrap();
    for n in 0..3 {
        let d = Doc {
            n,
            name: format!("d{n}"),
        };
        c.put(&format!("d{n}"), &d).unwrap();
    }
    let before = wire.sent();
    for i in 0..gets {
        let found = c.get(&format!("d{}", i % 4)).unwrap();
        // d0..d2 exist, d3 does not: both answers are one statement.
        assert_eq!(found.map(|d| d.n), (i % 4 < 3).then_some(i % 4));
    }
    wire.sent().since(before)
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_get_is_one_prepared_statement_in_one_round_trip() {
    let url = require_pg!();
    let gets = 20;
    let sent = sent_by_gets(&url, "", gets);
    assert_eq!(
        sent,
        Sent {
            parse: 0,
            bind: gets,
            describe: 0,
            execute: gets,
            query: 0,
            sync: gets,
            other: 0,
        },
        "{gets} gets: one Bind/Execute/Sync each on the connection's prepared statement"
    );
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn through_a_transaction_pooler_a_get_is_one_unnamed_statement_in_one_round_trip() {
    let url = require_pg!();
    let gets = 20;
    let sep = if url.contains('?') { '&' } else { '?' };
    let sent = sent_by_gets(&url, &format!("{sep}strata_pooler=transaction"), gets);
    assert_eq!(
        sent,
        Sent {
            parse: gets,
            bind: gets,
            describe: gets,
            execute: gets,
            query: 0,
            sync: gets,
            other: 0,
        },
        "{gets} gets: one Parse/Bind/Describe/Execute/Sync each (nothing prepared through a pooler)"
    );
}
