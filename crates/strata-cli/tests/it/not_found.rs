//! "Does not exist" says what is missing and what to do, per backend: a missing path is
//! a datastore path to check; a missing PostgreSQL table is named with the schemas
//! searched, and with what creates it (an application's first connection, or
//! `strata copy --to`), never "check the path". Nothing is created.

use crate::support::{stderr, strata_db};

#[test]
fn a_missing_path_says_check_the_path_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    for db in ["nope", "redb:nope.redb", "sled:nope-sled"] {
        let (scheme, name) = db.split_once(':').unwrap_or(("", db));
        let path = dir.path().join(name);
        let arg = if scheme.is_empty() {
            path.display().to_string()
        } else {
            format!("{scheme}:{}", path.display())
        };
        for args in [
            &["status"][..],
            &["verify"],
            &["migrate"],
            &["inspect", "op-log"],
        ] {
            let out = strata_db(&arg, args);
            assert_eq!(out.status.code(), Some(1), "{db} {args:?}: {out:?}");
            let err = stderr(&out);
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.contains(&format!("datastore `{}` does not exist", path.display())),
                "{db} {args:?}: {err}"
            );
            assert!(err.contains("check the path"), "{err}");
            assert!(!path.exists(), "{db} {args:?} created it");
        }
    }
}

#[cfg(feature = "postgres")]
#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn a_missing_postgres_table_is_named_with_its_schema_and_how_to_create_it() {
    use crate::support::pg::{pg_url, scratch_table, with_params};
    let table = scratch_table("lo_missing");
    let url = with_params(&pg_url(), &format!("strata_table={table}"));
    for args in [
        &["status"][..],
        &["verify"],
        &["migrate"],
        &["fence", "abort"],
    ] {
        let out = strata_db(&url, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("postgres table `{table}`")) && err.contains("does not exist"),
            "{args:?}: {err}"
        );
        assert!(err.contains("schema `public`"), "{args:?}: {err}");
        assert!(err.contains("strata copy"), "{args:?}: {err}");
        assert!(err.contains("first connection"), "{args:?}: {err}");
        assert!(!err.contains("check the path"), "{args:?}: {err}");
    }
    // Still missing: looking did not create it.
    let err = strata_postgres::PgStore::connect_with(
        &pg_url(),
        strata_postgres::PgOptions::new()
            .table(&table)
            .create_table(false),
    )
    .unwrap_err();
    assert!(
        matches!(err, strata_store::StoreError::NotFound { .. }),
        "{err:?}"
    );
}
