//! Connecting: URLs, table names, options, errors that name what to fix.

use crate::{owner, require_pg, scratch_table};
use std::error::Error as _;
use strata_postgres::{is_postgres_url, PgError, PgOptions, PgStore};
use strata_store::{Backend, Batch, KvRead, KvWrite, StoreError};

/// The [`PgError`] inside a backend error.
fn pg_error(err: &StoreError) -> &PgError {
    assert!(
        matches!(
            err,
            StoreError::Backend {
                backend: "postgres",
                ..
            }
        ),
        "not a postgres backend error: {err:?}"
    );
    err.source()
        .and_then(|s| s.downcast_ref::<PgError>())
        .expect("the source is a PgError")
}

#[test]
fn invalid_table_names_are_refused_before_connecting() {
    // No server is contacted: the port is closed, yet the error is about the name.
    for name in [
        "",
        "Strata",
        "1kv",
        "kv-store",
        "kv;drop",
        "a\"b",
        &"x".repeat(64),
    ] {
        let err =
            PgStore::connect_with("postgres://u@127.0.0.1:1/db", PgOptions::new().table(name))
                .unwrap_err();
        assert!(
            matches!(pg_error(&err), PgError::InvalidTable { name: n } if n == name),
            "{name}: {err:?}"
        );
        assert!(pg_error(&err).to_string().contains("lowercase"));
    }
}

#[test]
fn invalid_options_and_urls_are_refused() {
    let err = PgStore::connect_with(
        "postgres://u@127.0.0.1:1/db",
        PgOptions::new().max_connections(0),
    )
    .unwrap_err();
    assert!(matches!(pg_error(&err), PgError::InvalidOption { .. }));

    let err = PgStore::connect("postgres://u@127.0.0.1:notaport/db").unwrap_err();
    assert!(
        matches!(pg_error(&err), PgError::InvalidUrl { .. }),
        "{err:?}"
    );
    assert!(pg_error(&err)
        .to_string()
        .contains("postgres://USER@HOST:PORT/DATABASE"));

    // No host at all: refused before any connection, saying so.
    for url in ["postgres://", "postgresql:///db", "dbname=db user=u"] {
        let err = PgStore::connect(url).unwrap_err();
        assert!(
            matches!(pg_error(&err), PgError::InvalidUrl { .. }),
            "{url}: {err:?}"
        );
        assert!(
            pg_error(&err).to_string().contains("names no server host"),
            "{url}: {err}"
        );
    }

    // An option the driver does not know is named, with its value's key.
    let err = PgStore::connect("postgres://u@127.0.0.1:1/db?foo=bar").unwrap_err();
    assert!(
        matches!(pg_error(&err), PgError::InvalidUrl { .. }),
        "{err:?}"
    );
    assert!(pg_error(&err).to_string().contains("foo"), "{err}");

    let err =
        PgStore::connect("postgres://u@127.0.0.1:1/db?strata_table=a&strata_table=b").unwrap_err();
    assert!(
        matches!(pg_error(&err), PgError::InvalidUrl { .. }),
        "{err:?}"
    );
}

#[test]
fn an_unreachable_server_names_the_target_but_not_the_password() {
    let err = PgStore::connect("postgres://alice:s3cret@127.0.0.1:1/appdb?connect_timeout=5")
        .unwrap_err();
    let pg = pg_error(&err);
    assert!(matches!(pg, PgError::Connect { .. }), "{err:?}");
    assert!(pg.is_retryable());
    let message = pg.to_string();
    assert!(message.contains("127.0.0.1:1/appdb as alice"), "{message}");
    assert!(
        message.contains("check that the server is running"),
        "{message}"
    );
    assert!(!format!("{err:?}{message}").contains("s3cret"));
    assert!(pg.source().is_some(), "the driver error is the source");
}

#[test]
fn url_detection() {
    assert!(is_postgres_url("postgres://h/db"));
    assert!(is_postgres_url("postgresql://u@h:5432/db?strata_table=t"));
    assert!(!is_postgres_url("./strata-data"));
    assert!(!is_postgres_url("/var/lib/postgres://x"));
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_missing_table_is_not_found_when_creation_is_off() {
    let url = require_pg!();
    let table = scratch_table();
    let err = PgStore::connect_with(&url, PgOptions::new().table(&table).create_table(false))
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains(&table), "{err}");
    // Where it was looked for and what creates it; no "check the path".
    let text = err.to_string();
    assert!(text.contains("(searched schema"), "{text}");
    assert!(
        text.contains("first connection with table creation on"),
        "{text}"
    );
    assert!(!text.contains("check the path"), "{text}");
    // Still missing: looking did not create it.
    let err = PgStore::connect_with(&url, PgOptions::new().table(&table).create_table(false))
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }));
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn the_url_parameter_selects_the_table_and_data_outlives_the_handle() {
    let url = require_pg!();
    let table = scratch_table();
    let _owner = owner(&url, &table);
    let sep = if url.contains('?') { '&' } else { '?' };
    let with_table = format!("{url}{sep}strata_table={table}");
    {
        let store = PgStore::connect(&with_table).unwrap();
        assert_eq!(store.table(), table);
        assert_eq!(store.name(), "postgres");
        assert!(!store.target().contains("strata_table"));
        store
            .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
            .unwrap();
        store.flush().unwrap();
    }
    // A new handle (new connections) on the existing table, without creating it.
    let again =
        PgStore::connect_with(&url, PgOptions::new().table(&table).create_table(false)).unwrap();
    assert_eq!(again.get(b"k").unwrap(), Some(b"v".to_vec()));
    // `connect_store` honours the parameter too.
    let store = strata_postgres::connect_store(&with_table).unwrap();
    assert_eq!(store.backend_name(), "postgres");
    assert_eq!(store.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_dangerous_scratch_table_is_dropped_with_its_handle() {
    let url = require_pg!();
    let table = scratch_table();
    let store = owner(&url, &table);
    store
        .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
        .unwrap();
    drop(store);
    let err = PgStore::connect_with(&url, PgOptions::new().table(&table).create_table(false))
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_single_connection_pool_serves_concurrent_callers() {
    let url = require_pg!();
    let table = scratch_table();
    let store = std::sync::Arc::new(
        PgStore::connect_with(
            &url,
            PgOptions::new()
                .table(&table)
                .max_connections(1)
                .dangerous_drop_table_on_drop(),
        )
        .unwrap(),
    );
    let handles: Vec<_> = (0..4u8)
        .map(|i| {
            let store = std::sync::Arc::clone(&store);
            std::thread::spawn(move || {
                for j in 0..10u8 {
                    store
                        .apply(Batch::new().set(vec![b'p', i, j], vec![j]))
                        .unwrap();
                    assert_eq!(store.get(&[b'p', i, j]).unwrap(), Some(vec![j]));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let page = store
        .scan(
            b"p",
            None,
            strata_store::ScanLimits::new(1000, 1 << 20).unwrap(),
        )
        .unwrap();
    assert_eq!(page.records.len(), 40);
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn relations_of_the_wrong_shape_are_refused_at_connect_in_one_line() {
    let url = require_pg!();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let cases = [
        (
            "(k TEXT PRIMARY KEY, v TEXT NOT NULL)",
            "has columns (k text not null, v text not null)",
        ),
        // No primary key (then `k` is nullable): the key is what is missing.
        ("(k BYTEA, v BYTEA NOT NULL)", "has no primary key"),
        ("(k BYTEA NOT NULL, v BYTEA NOT NULL)", "has no primary key"),
        (
            "(k BYTEA PRIMARY KEY, v BYTEA)",
            "has columns (k bytea not null, v bytea)",
        ),
        (
            "(k BYTEA PRIMARY KEY, v BYTEA NOT NULL, extra INT)",
            "extra integer",
        ),
        (
            "(k BYTEA, v BYTEA NOT NULL, PRIMARY KEY (k, v))",
            "has primary key (k, v), not (k)",
        ),
        ("VIEW", "is a view, not a table"),
    ];
    for (shape, want) in cases {
        let table = scratch_table();
        let ddl = if shape == "VIEW" {
            format!("CREATE VIEW {table} AS SELECT '\\x00'::bytea AS k, '\\x00'::bytea AS v")
        } else {
            format!("CREATE TABLE {table} {shape}")
        };
        client.batch_execute(&ddl).unwrap();
        let result = PgStore::connect_with(&url, PgOptions::new().table(&table));
        let drop = if shape == "VIEW" { "VIEW" } else { "TABLE" };
        client
            .batch_execute(&format!("DROP {drop} {table}"))
            .unwrap();
        let err = result.unwrap_err();
        let pg = pg_error(&err);
        assert!(
            matches!(pg, PgError::TableShape { table: t, .. } if *t == table),
            "{shape}: {err:?}"
        );
        let message = pg.to_string();
        assert!(message.contains(&format!("`{table}`")), "{message}");
        assert!(message.contains(want), "{shape}: {message}");
        assert!(
            message.contains("(k bytea primary key, v bytea not null)"),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
    }
}

#[test]
fn passwords_never_show_in_errors_whatever_the_url_form() {
    // Nothing listens on port 1: every form fails to connect, and no message, debug
    // output or source in the chain shows the password (or a piece of it).
    for url in [
        "postgres://alice:s3cr%40t@127.0.0.1:1/appdb?connect_timeout=5",
        "postgres://alice:s3cr@t@127.0.0.1:1/appdb?connect_timeout=5",
        "postgres://alice@127.0.0.1:1/appdb?password=s3cr@t&connect_timeout=5",
        "postgres://alice:s3cr?t@127.0.0.1:1/appdb?connect_timeout=5",
        "host=127.0.0.1 port=1 user=alice password='s3cr@t' dbname=appdb connect_timeout=5",
    ] {
        let err = PgStore::connect(url).unwrap_err();
        let pg = pg_error(&err);
        assert!(matches!(pg, PgError::Connect { .. }), "{url}: {err:?}");
        let mut shown = format!("{err} {err:?}");
        let mut source = err.source();
        while let Some(s) = source {
            shown.push_str(&format!(" {s} {s:?}"));
            source = s.source();
        }
        assert!(
            shown.contains("127.0.0.1:1/appdb as alice"),
            "{url}: {shown}"
        );
        assert!(!shown.contains("s3cr"), "{url}: {shown}");
        let redacted = strata_postgres::redact_url(url);
        assert!(!redacted.contains("s3cr"), "{redacted}");
        assert!(redacted.contains("***"), "{redacted}");
    }
    // A malformed string is refused without echoing it either.
    let err = PgStore::connect("host=h user=alice password='s3cr'et dbname=d").unwrap_err();
    assert!(!format!("{err} {err:?} {}", pg_error(&err)).contains("s3cr"));
}
