//! What libpq adds to a connection string before it connects, for the parameters strata
//! reads from outside the string: the **service file** (`service=NAME` or `PGSERVICE`),
//! the password from **`PGPASSWORD`** and the **password file** (`passfile=PATH`,
//! `PGPASSFILE`, default `~/.pgpass`), in libpq's order of precedence:
//!
//! 1. the connection string itself (URL userinfo, `?password=`, conninfo `password=`);
//! 2. the service's section in the service file (`PGSERVICEFILE`, default
//!    `~/.pg_service.conf`, then `PGSYSCONFDIR/pg_service.conf`), for every parameter the
//!    string does not give;
//! 3. `PGPASSWORD`;
//! 4. the first matching line `host:port:database:user:password` of the password file —
//!    ignored, with a warning, unless it is a regular file without group or world
//!    permissions (`chmod 0600`), as libpq does.
//!
//! A password found here is kept out of every message like one given in the string.

use crate::conninfo::Parsed;
use crate::error::PgError;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most bytes read of a password or service file (a longer one is refused).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Where the environment comes from: the process's, or a test's.
pub(crate) trait Env {
    /// The environment variable `name`, when set and not empty.
    fn var(&self, name: &str) -> Option<String>;
    /// The user's home directory.
    fn home(&self) -> Option<PathBuf> {
        self.var("HOME").map(PathBuf::from)
    }
}

/// The process environment.
pub(crate) struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

fn invalid(reason: String) -> PgError {
    PgError::InvalidUrl { reason }
}

/// Completes `parsed` as libpq would (see the module docs). `service` and `passfile` are
/// taken out of the driver parameters (the driver does not know them).
pub(crate) fn complete(parsed: &mut Parsed, env: &dyn Env) -> Result<(), PgError> {
    let service = parsed
        .take_param("service")
        .filter(|s| !s.is_empty())
        .or_else(|| env.var("PGSERVICE"));
    if let Some(name) = service {
        for (k, v) in service_params(&name, env)? {
            if k == "password" {
                if parsed.password.is_none() {
                    parsed.password = Some(v.into_bytes());
                }
            } else if k == "service" {
                return Err(invalid(format!(
                    "service `{name}` in the service file names another service; nested service definitions are not supported"
                )));
            } else if k.starts_with("strata_") {
                if !parsed.strata.iter().any(|(have, _)| *have == k) {
                    parsed.strata.push((k, v));
                }
            } else if !parsed.params.iter().any(|(have, _)| *have == k) {
                parsed.params.push((k, v));
            }
        }
    }
    let passfile = parsed.take_param("passfile").filter(|p| !p.is_empty());
    if parsed.password.is_some() {
        return Ok(());
    }
    if let Some(pw) = env.var("PGPASSWORD") {
        parsed.password = Some(pw.into_bytes());
        return Ok(());
    }
    let passfile = passfile
        .map(PathBuf::from)
        .or_else(|| env.var("PGPASSFILE").map(PathBuf::from))
        .or_else(|| env.home().map(|h| h.join(".pgpass")));
    if let Some(path) = passfile {
        parsed.password = password_from_file(&path, &Lookup::of(parsed, env))?;
    }
    Ok(())
}

/// Reads at most [`MAX_FILE_BYTES`] of the regular file `path` (`None`: it does not
/// exist). `what` names the file in errors.
fn read_bounded(path: &Path, what: &str) -> Result<Option<(String, std::fs::Metadata)>, PgError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(invalid(format!(
                "cannot read the {what} `{}`: {e}; fix its permissions or point elsewhere",
                path.display()
            )))
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| invalid(format!("cannot read the {what} `{}`: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(invalid(format!(
            "the {what} `{}` is not a regular file; point it at a file",
            path.display()
        )));
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| {
            invalid(format!(
                "cannot read the {what} `{}`: {e} (it must be UTF-8 text)",
                path.display()
            ))
        })?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(invalid(format!(
            "the {what} `{}` is larger than {MAX_FILE_BYTES} bytes; it cannot be a {what}",
            path.display()
        )));
    }
    Ok(Some((text, meta)))
}

/// The parameters of service `name`: the user's service file first, then the system's.
fn service_params(name: &str, env: &dyn Env) -> Result<Vec<(String, String)>, PgError> {
    let user_file = env
        .var("PGSERVICEFILE")
        .map(PathBuf::from)
        .or_else(|| env.home().map(|h| h.join(".pg_service.conf")));
    let system_file = env
        .var("PGSYSCONFDIR")
        .map(|d| PathBuf::from(d).join("pg_service.conf"));
    let mut searched = Vec::new();
    for path in user_file.into_iter().chain(system_file) {
        if let Some((text, _)) = read_bounded(&path, "service file")? {
            if let Some(params) = service_section(&text, name, &path)? {
                return Ok(params);
            }
        }
        searched.push(format!("`{}`", path.display()));
    }
    Err(invalid(format!(
        "definition of service `{}` not found (searched {}); add a `[{0}]` section to the service file or set `PGSERVICEFILE`",
        crate::conninfo::shown_value(name),
        if searched.is_empty() {
            "no service file: neither PGSERVICEFILE nor HOME is set".to_string()
        } else {
            searched.join(", ")
        }
    )))
}

/// The `key=value` lines of section `[name]` of a service file, if it has one.
fn service_section(
    text: &str,
    name: &str,
    path: &Path,
) -> Result<Option<Vec<(String, String)>>, PgError> {
    let mut found: Option<Vec<(String, String)>> = None;
    let mut inside = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            if found.is_some() {
                break;
            }
            inside = section.strip_suffix(']') == Some(name);
            if inside {
                found = Some(Vec::new());
            }
            continue;
        }
        if !inside {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            // The line may hold a password: its number, not its text.
            return Err(invalid(format!(
                "syntax error in service file `{}`, line {}: expected `key=value`",
                path.display(),
                n + 1
            )));
        };
        if let Some(params) = found.as_mut() {
            params.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok(found)
}

/// What a password-file line is matched against.
#[derive(Debug)]
struct Lookup {
    host: String,
    port: String,
    dbname: String,
    user: String,
}

impl Lookup {
    fn of(parsed: &Parsed, env: &dyn Env) -> Self {
        let get = |k: &str| {
            parsed
                .params
                .iter()
                .rev()
                .find(|(have, _)| have == k)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        let first = |v: String| v.split(',').next().unwrap_or_default().to_string();
        let host = get("host").map(first).unwrap_or_default();
        // A socket in a default directory is "localhost", as for libpq.
        let host = if host.is_empty()
            || matches!(
                host.as_str(),
                "/tmp" | "/var/run/postgresql" | "/run/postgresql"
            ) {
            "localhost".to_string()
        } else {
            host
        };
        let port = get("port")
            .map(first)
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "5432".to_string());
        let user = get("user")
            .or_else(|| env.var("USER"))
            .or_else(|| env.var("LOGNAME"))
            .unwrap_or_default();
        let dbname = get("dbname").unwrap_or_else(|| user.clone());
        Lookup {
            host,
            port,
            dbname,
            user,
        }
    }
}

/// The password of the first line of the password file at `path` that matches `want`;
/// `None` when the file does not exist, matches nothing, or has group or world
/// permissions (then ignored with a warning, as libpq does).
fn password_from_file(path: &Path, want: &Lookup) -> Result<Option<Vec<u8>>, PgError> {
    let Some((text, meta)) = read_bounded(path, "password file")? else {
        return Ok(None);
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(
                "password file `{}` has group or world access (mode {:o}); it is ignored: permissions should be u=rw (0600) or less",
                path.display(),
                mode & 0o777
            );
            return Ok(None);
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_passfile_line(line);
        let [host, port, db, user, password] = fields.as_slice() else {
            continue;
        };
        let matches = |field: &str, value: &str| field == "*" || field == value;
        if matches(host, &want.host)
            && matches(port, &want.port)
            && matches(db, &want.dbname)
            && matches(user, &want.user)
        {
            return Ok(Some(password.clone().into_bytes()));
        }
    }
    Ok(None)
}

/// The `:`-separated fields of a password-file line (`\:` and `\\` escape). The last
/// field takes the rest of the line (a password may hold `:` when escaped).
fn split_passfile_line(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    if let Some(f) = fields.last_mut() {
                        f.push(n);
                    }
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::conninfo::parse;
    use std::collections::HashMap;

    struct FakeEnv(HashMap<&'static str, String>);

    impl Env for FakeEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).cloned().filter(|v| !v.is_empty())
        }
    }

    fn env(pairs: &[(&'static str, &str)]) -> FakeEnv {
        FakeEnv(pairs.iter().map(|(k, v)| (*k, v.to_string())).collect())
    }

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        #[cfg(not(unix))]
        let _ = mode;
        path
    }

    fn resolved(s: &str, e: &FakeEnv) -> Parsed {
        let mut p = parse(s).unwrap();
        complete(&mut p, e).unwrap();
        p
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "strata-libpq-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_string_beats_pgpassword_which_beats_the_passfile() {
        let dir = tempdir();
        let pass = write(&dir, "pgpass", "*:*:*:*:fromfile\n", 0o600);
        let pass = pass.display().to_string();
        let both = env(&[("PGPASSWORD", "fromenv"), ("PGPASSFILE", &pass)]);
        let p = resolved("postgres://app:inline@h/app", &both);
        assert_eq!(p.password.as_deref(), Some(&b"inline"[..]));
        let p = resolved("host=h user=app dbname=app", &both);
        assert_eq!(p.password.as_deref(), Some(&b"fromenv"[..]));
        let p = resolved("host=h user=app dbname=app", &env(&[("PGPASSFILE", &pass)]));
        assert_eq!(p.password.as_deref(), Some(&b"fromfile"[..]));
        // `passfile=` in the string names the file and is not passed to the driver.
        let p = resolved(&format!("host=h user=app passfile={pass}"), &env(&[]));
        assert_eq!(p.password.as_deref(), Some(&b"fromfile"[..]));
        assert!(!p.conninfo().contains("passfile"));
        // The default: ~/.pgpass.
        write(&dir, ".pgpass", "h:5432:app:app:fromhome\n", 0o600);
        let home = dir.display().to_string();
        let p = resolved("postgres://app@h/app", &env(&[("HOME", &home)]));
        assert_eq!(p.password.as_deref(), Some(&b"fromhome"[..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn passfile_lines_match_host_port_database_and_user_with_escapes_and_wildcards() {
        let dir = tempdir();
        let text = "# comment\n\
                    other:5432:app:app:wrong\n\
                    h:5433:app:app:port5433\n\
                    h:*:app:app:any\\:port\\\\x\n\
                    *:*:*:*:fallback\n";
        let pass = write(&dir, "pgpass", text, 0o600).display().to_string();
        let e = env(&[("PGPASSFILE", &pass), ("USER", "osuser")]);
        let get = |s: &str| {
            resolved(s, &e)
                .password
                .map(|p| String::from_utf8(p).unwrap())
        };
        assert_eq!(
            get("postgres://app@h:5433/app").as_deref(),
            Some("port5433")
        );
        assert_eq!(get("postgres://app@h/app").as_deref(), Some("any:port\\x"));
        assert_eq!(get("postgres://bob@h/app").as_deref(), Some("fallback"));
        // No user: the OS user; no database: the user's name.
        let strict = write(&dir, "strict", "localhost:5432:osuser:osuser:os\n", 0o600);
        let strict = strict.display().to_string();
        let e = env(&[("PGPASSFILE", &strict), ("USER", "osuser")]);
        assert_eq!(
            resolved("host=/var/run/postgresql", &e).password.as_deref(),
            Some(&b"os"[..])
        );
        assert_eq!(resolved("host=elsewhere", &e).password, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_passfile_readable_by_group_or_world_is_ignored_and_a_fifo_is_refused() {
        let dir = tempdir();
        let pass = write(&dir, "pgpass", "*:*:*:*:leaky\n", 0o640);
        let e = env(&[("PGPASSFILE", &pass.display().to_string())]);
        assert_eq!(resolved("host=h user=u", &e).password, None);
        let dir_as_file = env(&[("PGPASSFILE", &dir.display().to_string())]);
        let mut p = parse("host=h user=u").unwrap();
        let err = complete(&mut p, &dir_as_file).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_service_gives_what_the_string_does_not() {
        let dir = tempdir();
        let text = "[other]\nhost=nope\n\n[app]\n# the app's\nhost = db.internal\nport=6543\nuser=app\npassword=fromservice\ndbname=appdb\nstrata_table=orders\n";
        let file = write(&dir, "services", text, 0o644).display().to_string();
        let e = env(&[("PGSERVICEFILE", &file), ("PGPASSWORD", "fromenv")]);
        let p = resolved("service=app dbname=mine", &e);
        let get = |k: &str| {
            p.params
                .iter()
                .find(|(have, _)| have == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("host"), Some("db.internal"));
        assert_eq!(get("port"), Some("6543"));
        assert_eq!(get("dbname"), Some("mine"));
        assert_eq!(get("service"), None);
        assert_eq!(p.password.as_deref(), Some(&b"fromservice"[..]));
        assert_eq!(p.strata, vec![("strata_table".into(), "orders".into())]);
        assert!(!p.conninfo().contains("fromservice"));
        // PGSERVICE names it too; the string's password still wins.
        let e = env(&[("PGSERVICEFILE", &file), ("PGSERVICE", "app")]);
        let p = resolved("postgres://app:inline@/x", &e);
        assert_eq!(p.password.as_deref(), Some(&b"inline"[..]));
        // A missing service is an error naming the files searched.
        let mut p = parse("service=missing").unwrap();
        let err = complete(&mut p, &env(&[("PGSERVICEFILE", &file)])).unwrap_err();
        assert!(err.to_string().contains("`missing` not found"), "{err}");
        assert!(err.to_string().contains("services"), "{err}");
        // A syntax error names the line, never its text.
        let bad = write(&dir, "bad", "[app]\npassword Sekr1t\n", 0o600);
        let mut p = parse("service=app").unwrap();
        let err = complete(
            &mut p,
            &env(&[("PGSERVICEFILE", &bad.display().to_string())]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(!err.to_string().contains("Sekr1t"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
