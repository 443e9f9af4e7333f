//! Opening the datastore named by `--db`.
//!
//! `--db` is a path (auto-detected: a redb file or a sled directory; anything else is
//! refused and left untouched), or explicit: `redb:PATH`, `sled:PATH`, `postgres://…`.
//! Where a command creates a store (`copy --to`), a plain missing path becomes a new redb
//! file: redb is the default for new stores, sled is kept for existing Numax datastores.

use std::path::{Path, PathBuf};
use strata_store::{Store, StoreError};

/// The backend and location `--db` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A redb file.
    Redb(PathBuf),
    /// A sled datastore directory.
    Sled(PathBuf),
    /// A PostgreSQL URL (with an optional `strata_table` parameter).
    Postgres(String),
}

impl Target {
    /// Short backend name.
    pub fn backend(&self) -> &'static str {
        match self {
            Target::Redb(_) => "redb",
            Target::Sled(_) => "sled",
            Target::Postgres(_) => "postgres",
        }
    }
}

/// What a path holds, found without writing anything.
enum Detected {
    Redb,
    Sled,
    Missing,
}

/// What an empty file at a store's path may be, and what to do then: nothing in it says
/// it ever held a store, so it is refused as no store (exit 1), not judged damaged.
const EMPTY_FILE: &str = "if it should hold one, a copy or restore to it did not finish: restore it from a complete copy";

/// Detects the kind of store at a plain path; refuses anything that is not a store.
fn detect(path: &Path, flag: &str) -> Result<Detected, StoreError> {
    let Ok(meta) = std::fs::metadata(path) else {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(StoreError::CannotOpen {
                path: path.to_path_buf(),
                reason: format!(
                    "it is a symlink to a missing file; point {flag} at the real location"
                ),
            });
        }
        return Ok(Detected::Missing);
    };
    if meta.is_file() {
        if strata_redb::is_redb_file(path) {
            return Ok(Detected::Redb);
        }
        if meta.len() == 0 {
            return Err(StoreError::CannotOpen {
                path: path.to_path_buf(),
                reason: format!("it is an empty file, so it is not a strata store ({EMPTY_FILE}); it was left untouched (point {flag} at a store)"),
            });
        }
        return Err(StoreError::CannotOpen {
            path: path.to_path_buf(),
            reason: format!("it is neither a redb file nor a sled directory, so it is not a strata store; it was left untouched (point {flag} at a store, or say which with redb:PATH / sled:PATH)"),
        });
    }
    if meta.is_dir() {
        if strata_sled::is_sled_dir(path) {
            return Ok(Detected::Sled);
        }
        let empty = std::fs::read_dir(path)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if strata_sled::has_foreign_conf(path) {
            return Err(StoreError::CannotOpen {
                path: path.to_path_buf(),
                reason: format!("it holds a `conf` that is not sled's configuration, so it is not a sled datastore and not a strata store; it was left untouched (point {flag} at a redb file or a sled directory)"),
            });
        }
        if std::fs::symlink_metadata(path.join("conf")).is_ok() {
            // A sled `conf` that fails the checks: let sled's checks say what is wrong.
            return strata_sled::SledStore::open_existing(path).map(|_| Detected::Sled);
        }
        let what = if empty {
            "it is an empty directory, so it is"
        } else if std::fs::symlink_metadata(path.join("db")).is_ok() {
            "it holds a `db` that is not a sled datastore (no sled `conf` beside it; it was left untouched), so it is"
        } else {
            "it is a directory that holds no sled datastore, so it is"
        };
        return Err(StoreError::CannotOpen {
            path: path.to_path_buf(),
            reason: format!("{what} not a strata store; point {flag} at a redb file or a sled directory (nothing was created)"),
        });
    }
    Err(StoreError::CannotOpen {
        path: path.to_path_buf(),
        reason: "it is not a regular file or directory, so it is not a strata store".into(),
    })
}

/// Refuses an explicit `redb:PATH` / `sled:PATH` whose existing `path` is plainly not a
/// store of that backend, saying what is there (a missing path, and a file or directory
/// that looks like one, are left to the backend's own checks). With `create` (a store
/// that may be created), an empty directory for sled is allowed.
fn check_explicit(path: &Path, want: Detected, create: bool, flag: &str) -> Result<(), StoreError> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let refuse = |what: &str| {
        Err(StoreError::CannotOpen {
            path: path.to_path_buf(),
            reason: format!("{what}, so it is not a strata store; it was left untouched (point {flag} at a store, or say which with redb:PATH / sled:PATH)"),
        })
    };
    // A store of the other backend is a store: say so, and how to name it.
    let other_backend = |what: &str, scheme: &str| {
        Err(StoreError::CannotOpen {
            path: path.to_path_buf(),
            reason: format!("{what}; it was left untouched (name it {scheme}:PATH, or give {flag} the plain path, which is auto-detected)"),
        })
    };
    match want {
        Detected::Redb if meta.is_dir() => {
            if strata_sled::is_sled_dir(path) {
                other_backend("it is a sled datastore directory, not a redb file", "sled")
            } else {
                refuse("it is a directory, not a redb file")
            }
        }
        Detected::Redb if meta.is_file() && !strata_redb::is_redb_file(path) => {
            match (meta.len(), create) {
                (0, true) => Ok(()),
                (0, false) => refuse(&format!(
                    "it is an empty file, not a redb file ({EMPTY_FILE})"
                )),
                _ => refuse("it is not a redb file (no redb header)"),
            }
        }
        Detected::Sled if meta.is_file() => {
            if strata_redb::is_redb_file(path) {
                other_backend("it is a redb file, not a sled datastore directory", "redb")
            } else {
                refuse("it is a file, not a sled datastore directory")
            }
        }
        Detected::Sled if meta.is_dir() && strata_sled::has_foreign_conf(path) => refuse(
            "it holds a `conf` that is not sled's configuration, so it is not a sled datastore",
        ),
        Detected::Sled
            if meta.is_dir()
                && std::fs::symlink_metadata(path.join("conf")).is_err()
                && std::fs::symlink_metadata(path.join("db")).is_err() =>
        {
            let empty = std::fs::read_dir(path)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            match (empty, create) {
                (true, true) => Ok(()),
                (true, false) => refuse("it is an empty directory, not a sled datastore"),
                (false, _) => refuse("it is a directory that holds no sled datastore"),
            }
        }
        _ => Ok(()),
    }
}

/// Parses `--db`: an explicit scheme, or a plain path that must already hold a store
/// (`create`: a missing plain path is a new redb store instead of an error).
pub fn target(db: &Path, create: bool) -> Result<Target, StoreError> {
    target_named(db, create, "--db")
}

/// [`target`] of a store named by the option `flag` (`--from`, `--to`, `--against`): a
/// refusal says which option to point elsewhere.
pub fn target_named(db: &Path, create: bool, flag: &str) -> Result<Target, StoreError> {
    if let Some(s) = db.to_str() {
        if is_postgres_url(s) {
            return Ok(Target::Postgres(s.to_string()));
        }
        if let Some(p) = s.strip_prefix("redb:") {
            let path = PathBuf::from(p);
            check_explicit(&path, Detected::Redb, create, flag)?;
            return Ok(Target::Redb(path));
        }
        if let Some(p) = s.strip_prefix("sled:") {
            let path = PathBuf::from(p);
            check_explicit(&path, Detected::Sled, create, flag)?;
            return Ok(Target::Sled(path));
        }
    }
    match detect(db, flag)? {
        Detected::Redb => Ok(Target::Redb(db.to_path_buf())),
        Detected::Sled => Ok(Target::Sled(db.to_path_buf())),
        Detected::Missing if create => Ok(Target::Redb(db.to_path_buf())),
        Detected::Missing => Err(StoreError::not_found(db)),
    }
}

/// Opens an existing datastore; a missing one is an error and is not created.
///
/// `--db postgres://…` (or `postgresql://…`, optionally with `?strata_table=NAME`) opens
/// the PostgreSQL store in that table (default `strata_kv`) when the CLI is built with the
/// `postgres` feature; a missing table is reported like a missing path. A redb file that
/// is not writable (read-only media, another user's file) opens read-only.
pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
    open_target(&target(path, false)?, false)
}

/// Opens an existing datastore for a read-only command (`status`, `verify`, `inspect`,
/// ...): like [`open_existing`], but nothing is written to it. A redb file is opened
/// read-only, so its bytes and its mtime stay as they were (redb opened for writing
/// rewrites its header); a redb file that needs crash recovery, which a read-only open
/// cannot do, is opened writable (the recovery is redb's own; no record changes). sled
/// has no read-only mode (it writes its log and a new snapshot on every open): a private
/// copy of the datastore is read instead ([`strata_sled::SledOptions::open_read_only`]),
/// so the directory stays byte and listing identical. PostgreSQL does not need one.
pub fn open_for_reading(path: &Path) -> Result<Store, StoreError> {
    open_target_for_reading(&target(path, false)?)
}

/// [`open_for_reading`] of the existing store `target` names (the source of `copy`).
pub fn open_target_for_reading(target: &Target) -> Result<Store, StoreError> {
    match target {
        Target::Redb(path) => match strata_redb::RedbStore::open_read_only(path) {
            Err(StoreError::CannotOpen { .. }) => {
                strata_redb::RedbStore::open_existing(path).map(Store::new)
            }
            opened => opened.map(Store::new),
        },
        Target::Sled(path) => strata_sled::SledStore::open_read_only(path).map(Store::new),
        other => open_target(other, false),
    }
}

/// Whose reads a read-only command may take on PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// The primary's (the store the URL opens): `status`, and every command whose
    /// reads decide a write.
    Primary,
    /// The read replica's when the URL names one (`strata_replica=HOST:PORT`): reads that
    /// tolerate staleness (`collections`, `verify`, `inspect`, `schema plan`). Nothing
    /// read there can decide a write: the store it opens refuses every write.
    StaleTolerant,
}

/// Which servers answered a read-only command on PostgreSQL: shown in its text output
/// (one line, [`Hosts::line`]) and in its `--json` document (`hosts`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Hosts {
    /// `primary` or `replica`: where this command's reads were answered.
    pub read_from: &'static str,
    /// The primary's `HOST:PORT` (of a multi-host URL, the host that accepted the
    /// session; behind a pooler, the server behind it).
    pub primary: String,
    /// True when the server the URL's hosts led to is a hot standby (the URL names a
    /// standby without `target_session_attrs=read-write`): read-only, possibly behind.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub standby: bool,
    /// The read replica's `HOST:PORT` when the URL names one and it answered.
    pub replica: Option<String>,
    /// Why the replica the URL names was not read (it did not answer): the reads went to
    /// the primary instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_error: Option<String>,
    /// `status` only: the primary's commit receipt (`TIMELINE:LSN`): every commit
    /// acknowledged before it is covered; after a failover to an asynchronous standby,
    /// `strata verify --receipt` says whether they are all on the new primary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

impl Hosts {
    /// The one line a text report ends with.
    pub fn line(&self) -> String {
        match (self.read_from, &self.replica, &self.replica_error) {
            ("replica", Some(replica), _) => format!(
                "read from the postgres replica {replica} (stale-tolerant: it may lag the primary {} by the replication lag)",
                self.primary
            ),
            (_, _, Some(error)) => format!(
                "answered by the postgres primary {} (the read replica did not answer: {error})",
                self.primary
            ),
            (_, Some(replica), None) => format!(
                "answered by the postgres primary {} (the read replica {replica} answered too; this command reads the primary)",
                self.primary
            ),
            _ if self.standby => format!(
                "answered by the postgres hot standby {} (the URL leads to a standby: read-only, possibly behind its primary; add `target_session_attrs=read-write` to reach the primary)",
                self.primary
            ),
            _ => format!("answered by the postgres primary {}", self.primary),
        }
    }
}

/// What `verify --receipt` found, for its text line and its `--json` `receipt` member.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReceiptReport {
    /// The receipt checked (`TIMELINE:LSN`).
    pub receipt: String,
    /// `kept`, `may_be_lost` or `not_in_history`.
    pub verdict: &'static str,
    /// What was found and what to do (one line).
    pub detail: String,
}

/// Checks a commit receipt (`TIMELINE:LSN`, from `status --json` `hosts.receipt`) on the
/// primary `path` names: whether every commit acknowledged before it is there.
#[cfg(feature = "postgres")]
pub fn check_receipt(path: &Path, receipt: &str) -> Result<ReceiptReport, crate::exit::Failure> {
    let parsed: strata_postgres::Receipt = receipt
        .parse()
        .map_err(|e| crate::exit::Failure::with_code(crate::exit::USAGE, e))?;
    let Target::Postgres(url) = target(path, false)? else {
        return Err(crate::exit::Failure::with_code(
            crate::exit::USAGE,
            "`--receipt` is a position in a PostgreSQL server's WAL history: it needs a postgres `--db`",
        ));
    };
    let options = strata_postgres::PgOptions::new().create_table(false);
    let store = strata_postgres::PgStore::connect_with(&url, options)?;
    let check = store.check_receipt(parsed)?;
    let verdict = match &check {
        strata_postgres::ReceiptCheck::Kept { .. } => "kept",
        strata_postgres::ReceiptCheck::MayBeLost { .. } => "may_be_lost",
        _ => "not_in_history",
    };
    Ok(ReceiptReport {
        receipt: parsed.to_string(),
        verdict,
        detail: check.describe(parsed),
    })
}

/// Without the PostgreSQL backend there is no receipt to check.
#[cfg(not(feature = "postgres"))]
pub fn check_receipt(_path: &Path, _receipt: &str) -> Result<ReceiptReport, crate::exit::Failure> {
    Err(crate::exit::Failure::with_code(
        crate::exit::USAGE,
        "`--receipt` needs the PostgreSQL backend, but this strata was built without it; rebuild strata-cli with `--features postgres`",
    ))
}

/// Opens an existing datastore for a read-only command, as [`open_for_reading`]; on
/// PostgreSQL also says which servers answer, and with [`Reads::StaleTolerant`] reads
/// the replica the URL names (`strata_replica`), falling back to the primary, with a
/// warning and [`Hosts::replica_error`], when the replica does not answer.
pub fn open_reading(path: &Path, reads: Reads) -> Result<(Store, Option<Hosts>), StoreError> {
    match target(path, false)? {
        Target::Postgres(url) => open_postgres_reading(&url, reads),
        other => Ok((open_target_for_reading(&other)?, None)),
    }
}

#[cfg(feature = "postgres")]
fn open_postgres_reading(url: &str, reads: Reads) -> Result<(Store, Option<Hosts>), StoreError> {
    let options = strata_postgres::PgOptions::new().create_table(false);
    let primary = strata_postgres::PgStore::connect_with(url, options)?;
    let mut hosts = Hosts {
        read_from: "primary",
        primary: primary.answering_server()?,
        standby: primary.is_standby()?,
        replica: None,
        replica_error: None,
        receipt: None,
    };
    if reads == Reads::Primary && !hosts.standby {
        hosts.receipt = match primary.commit_receipt() {
            Ok(r) => Some(r.to_string()),
            Err(e) => {
                tracing::debug!(error = %crate::exit::message(&e), "no commit receipt");
                None
            }
        };
    }
    let Some(replica) = primary.replica_store() else {
        return Ok((Store::new(primary), Some(hosts)));
    };
    match replica.answering_server() {
        Ok(at) => hosts.replica = Some(at),
        Err(e) => {
            let error = strata_store::one_line(&crate::exit::message(&e));
            tracing::warn!(replica = %replica.host(), %error, "the read replica did not answer; reading the primary");
            hosts.replica_error = Some(error);
        }
    }
    if reads == Reads::StaleTolerant && hosts.replica.is_some() {
        hosts.read_from = "replica";
        return Ok((Store::new(replica), Some(hosts)));
    }
    Ok((Store::new(primary), Some(hosts)))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres_reading(url: &str, _reads: Reads) -> Result<(Store, Option<Hosts>), StoreError> {
    open_postgres(url, false).map(|s| (s, None))
}

/// Opens the store `target` names; `create` creates a missing one (never for postgres
/// tables, which are created by the backend when `create` is set).
pub fn open_target(target: &Target, create: bool) -> Result<Store, StoreError> {
    match target {
        Target::Postgres(url) => open_postgres(url, create),
        Target::Redb(path) if create => strata_redb::RedbStore::create(path).map(Store::new),
        Target::Redb(path) => strata_redb::RedbStore::open_existing(path).map(Store::new),
        Target::Sled(path) if create => strata_sled::SledStore::open(path).map(Store::new),
        Target::Sled(path) => strata_sled::SledStore::open_existing(path).map(Store::new),
    }
}

/// True for a PostgreSQL connection string in either of libpq's forms: a `postgres://` or
/// `postgresql://` URL, or `key=value` conninfo pairs (`host=db user=app dbname=app`)
/// whose first key is a libpq connection keyword.
#[cfg(feature = "postgres")]
fn is_postgres_url(s: &str) -> bool {
    strata_postgres::is_connection_string(s)
}

/// True for a PostgreSQL connection string (checked without the backend, so a build
/// without it can say what is missing instead of taking it for a path).
#[cfg(not(feature = "postgres"))]
fn is_postgres_url(s: &str) -> bool {
    if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        return true;
    }
    let t = s.trim_start();
    t.split_once('=').is_some_and(|(key, _)| {
        matches!(
            key.trim_end(),
            "host"
                | "hostaddr"
                | "port"
                | "dbname"
                | "user"
                | "password"
                | "passfile"
                | "service"
                | "sslmode"
                | "connect_timeout"
                | "application_name"
        ) || key.starts_with("strata_")
    })
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str, create: bool) -> Result<Store, StoreError> {
    let options = strata_postgres::PgOptions::new().create_table(create);
    strata_postgres::PgStore::connect_with(url, options).map(Store::new)
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_url: &str, _create: bool) -> Result<Store, StoreError> {
    Err(StoreError::InvalidArgument(
        "`--db postgres://…` needs the PostgreSQL backend, but this strata was built without it; rebuild strata-cli with `--features postgres`".into(),
    ))
}

/// `--db` as it may be shown: a PostgreSQL connection string's password (in a URL's
/// userinfo, even with an unescaped `@`, as `?password=`, or as conninfo `password=`) is
/// replaced by `***`; control characters are escaped ([`strata_store::one_line`]), so it
/// can be echoed in a message or a `--json` document without forging a line.
pub fn describe(path: &Path) -> String {
    let shown = path.to_string_lossy().into_owned();
    if !is_postgres_url(&shown) {
        return strata_store::one_line(&shown);
    }
    strata_store::one_line(&redact(shown))
}

#[cfg(feature = "postgres")]
fn redact(shown: String) -> String {
    strata_postgres::redact_url(&shown)
}

#[cfg(not(feature = "postgres"))]
fn redact(shown: String) -> String {
    let Some((scheme, rest)) = shown.split_once("://") else {
        // key=value pairs: nothing of them is shown without the backend's parser.
        return "(a postgres key=value connection string)".to_string();
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
    for table in strata::layout::read_catalog(store)?.tables() {
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
    fn explicit_schemes_and_new_stores_default_to_redb() {
        assert_eq!(
            target(Path::new("redb:/x/s.redb"), false).unwrap(),
            Target::Redb("/x/s.redb".into())
        );
        assert_eq!(
            target(Path::new("sled:/x/numax"), false).unwrap(),
            Target::Sled("/x/numax".into())
        );
        assert_eq!(
            target(Path::new("postgres://u@h/db"), false).unwrap(),
            Target::Postgres("postgres://u@h/db".into())
        );
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new-store");
        assert_eq!(target(&new, true).unwrap(), Target::Redb(new.clone()));
        assert!(matches!(
            target(&new, false).unwrap_err(),
            StoreError::NotFound { .. }
        ));
        assert!(!new.exists());
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn key_value_connection_strings_are_postgres_and_their_passwords_are_hidden() {
        for s in [
            "host=127.0.0.1 user=app password=Sekr1t dbname=app",
            "host=127.0.0.1 user=app password='Sekr1t' dbname=app",
            "dbname=app password = 'Sek r1t\\'s' host=db",
            "  user=app host=db password=Sekr1t",
        ] {
            assert_eq!(
                target(Path::new(s), false).unwrap(),
                Target::Postgres(s.to_string()),
                "{s}"
            );
            let shown = describe(Path::new(s));
            assert!(
                !shown.contains("Sekr1t") && !shown.contains("Sek r1t"),
                "{shown}"
            );
            assert!(shown.contains("password=***"), "{shown}");
        }
        // A path with `=` in it whose first key is no libpq keyword stays a path.
        assert!(!is_postgres_url("./backup=old"));
        assert!(!is_postgres_url("data/host=x"));
        assert!(!is_postgres_url("my dir=x"));
    }

    #[test]
    fn described_paths_are_escaped_and_kept_whole() {
        let shown = describe(Path::new("./a\nstrata: forged\x1b[31m"));
        assert_eq!(shown, "./a\\nstrata: forged\\x1b[31m");
        let shown = describe(Path::new("./a\nb\x1b[2J"));
        assert!(!shown.contains('\n') && !shown.contains('\x1b'), "{shown}");
        // `--db` in a `--json` document is the value given (escaped), not shortened.
        let long = format!("./{}", "x".repeat(5000));
        assert_eq!(describe(Path::new(&long)), long);
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
