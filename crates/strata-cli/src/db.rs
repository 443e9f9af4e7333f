//! Opening the datastore named by `--db`.

use std::path::Path;
use strata_store::{Store, StoreError};

/// Opens an existing datastore; a missing one is an error and is not created.
///
/// `--db postgres://…` (or `postgresql://…`, optionally with `?strata_table=NAME`) opens
/// the PostgreSQL store in that table (default `strata_kv`) when the CLI is built with the
/// `postgres` feature; a missing table is reported like a missing directory. Anything
/// else is a sled directory.
pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
    if let Some(url) = path.to_str().filter(|s| is_postgres_url(s)) {
        return open_postgres(url);
    }
    strata_sled::SledStore::open_existing(path).map(Store::new)
}

/// True for a `postgres://` or `postgresql://` URL (checked without the backend, so a
/// build without it can say what is missing).
fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str) -> Result<Store, StoreError> {
    let options = strata_postgres::PgOptions::new().create_table(false);
    strata_postgres::PgStore::connect_with(url, options).map(Store::new)
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_url: &str) -> Result<Store, StoreError> {
    Err(StoreError::InvalidArgument(
        "`--db postgres://…` needs the PostgreSQL backend, but this strata was built without it; rebuild strata-cli with `--features postgres`".into(),
    ))
}

/// `--db` as it may be shown: a PostgreSQL URL's password (in the userinfo, even with an
/// unescaped `@`, or as `?password=`) is replaced by `***`.
pub fn describe(path: &Path) -> String {
    let shown = path.display().to_string();
    if !is_postgres_url(&shown) {
        return shown;
    }
    redact(shown)
}

#[cfg(feature = "postgres")]
fn redact(shown: String) -> String {
    strata_postgres::redact_url(&shown)
}

#[cfg(not(feature = "postgres"))]
fn redact(shown: String) -> String {
    let Some((scheme, rest)) = shown.split_once("://") else {
        return shown;
    };
    // userinfo ends at the last `@` before the first `/` of the path.
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => {
                format!("{scheme}://{user}:***@{host}{}", &rest[authority_end..])
            }
            None => shown,
        },
        None => shown,
    }
}

/// The catalog of managed tables of a store: the 14 Numax sync tables when the store uses
/// them (a header, a checkpoint or data; see [`strata::numax::in_use`]) plus every
/// collection recorded in the store under `__nx/catalog/`.
pub fn catalog(store: &Store) -> Result<strata::Catalog, Box<dyn std::error::Error + Send + Sync>> {
    let mut catalog = strata::numax::catalog_in_use(store)?;
    for table in strata::database::read_catalog(store)?.tables() {
        catalog.add(table.clone())?;
    }
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_hides_passwords() {
        assert_eq!(
            describe(Path::new(
                "postgres://alice:s3cret@db:5432/app?strata_table=t"
            )),
            "postgres://alice:***@db:5432/app?strata_table=t"
        );
        assert_eq!(
            describe(Path::new("postgresql://alice@db/app")),
            "postgresql://alice@db/app"
        );
        assert_eq!(describe(Path::new("./strata-data")), "./strata-data");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn describe_hides_query_and_at_sign_passwords() {
        for url in [
            "postgres://alice:p@ss@db/app",
            "postgres://alice@db/app?password=p@ss&strata_table=t",
        ] {
            let shown = describe(Path::new(url));
            assert!(!shown.contains("p@ss") && !shown.contains("ss@"), "{shown}");
            assert!(shown.contains("***"), "{shown}");
        }
    }

    #[test]
    fn postgres_urls_are_told_apart_from_paths() {
        assert!(is_postgres_url("postgres://u@h/db"));
        assert!(is_postgres_url("postgresql://u@h:5432/db?strata_table=t"));
        assert!(!is_postgres_url("./strata-data"));
        assert!(!is_postgres_url("data/postgres://x"));
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn an_unreachable_postgres_url_is_a_postgres_error_not_a_missing_directory() {
        let err =
            open_existing(Path::new("postgres://u@127.0.0.1:1/db?connect_timeout=5")).unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Backend {
                    backend: "postgres",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[cfg(feature = "postgres")]
    #[test]
    #[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
    fn an_existing_postgres_table_opens_and_a_missing_one_is_not_created() {
        let url = std::env::var("STRATA_PG_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
            .or_else(|| option_env!("STRATA_PG_URL").map(str::to_string))
            .unwrap();
        let table = format!("strata_cli_db_{}", std::process::id());
        let sep = if url.contains('?') { '&' } else { '?' };
        let with_table = format!("{url}{sep}strata_table={table}");
        let err = open_existing(Path::new(&with_table)).unwrap_err();
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
        assert!(err.to_string().contains(&table), "{err}");

        let owner = strata_postgres::PgStore::connect_with(
            &url,
            strata_postgres::PgOptions::new()
                .table(&table)
                .dangerous_drop_table_on_drop(),
        )
        .unwrap();
        use strata_store::{Batch, KvRead, KvWrite};
        owner
            .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
            .unwrap();
        let store = open_existing(Path::new(&with_table)).unwrap();
        assert_eq!(store.backend_name(), "postgres");
        assert_eq!(store.get(b"k").unwrap(), Some(b"v".to_vec()));
    }

    #[cfg(not(feature = "postgres"))]
    #[test]
    fn a_postgres_url_without_the_feature_says_how_to_rebuild() {
        let err = open_existing(Path::new("postgres://u@127.0.0.1:1/db")).unwrap_err();
        assert!(err.to_string().contains("--features postgres"), "{err}");
    }
}
