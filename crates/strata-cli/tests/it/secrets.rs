//! A PostgreSQL password never shows: every form it can be given in (URL userinfo, plain
//! and percent-encoded; `?password=`; conninfo `password=`, unquoted and quoted;
//! `PGPASSWORD`; the password file; the service file) × every command that takes a store
//! (`--db`, `copy --from`/`--to`, `schema diff --against`), scanning stdout, stderr, the
//! `--json` document and `STRATA_LOG=trace` logs — against the real server in
//! `STRATA_PG_URL`, and against a port where nothing listens (connection failures).
//!
//! The test server trusts local connections, so every password is accepted and ignored;
//! that a password from the environment or a file is *used* is shown by the unit tests of
//! `strata_postgres`'s libpq resolution.
//!
//! Built without `STRATA_PG_URL` the tests are ignored ("needs STRATA_PG_URL").
#![cfg(feature = "postgres")]

use crate::support::legacy_records;
use crate::support::pg::{owner, pg_url, scratch_table};
use std::path::Path;
use std::process::{Command, Output};

/// The password, and every way it could leak encoded.
const PASSWORD: &str = "Sekr1t";
const NEEDLES: &[&str] = &[
    "Sekr1t",
    "Sekr%31t",
    "ekr1t",
    "U2Vrcj",       // base64
    "53656b723174", // hex
    "83, 101, 107", // a byte array's Debug
    "[83,101,107",  // a JSON byte array
];

/// `(user, host, port, dbname)` of `STRATA_PG_URL` (`postgresql://USER@HOST:PORT/DB`).
fn server() -> (String, String, String, String) {
    let url = pg_url();
    let rest = url
        .strip_prefix("postgresql://")
        .or_else(|| url.strip_prefix("postgres://"))
        .expect("STRATA_PG_URL is a postgres URL");
    let rest = rest.split('?').next().unwrap();
    let (user, rest) = rest.split_once('@').expect("STRATA_PG_URL names its user");
    let user = user.split(':').next().unwrap().to_string();
    let (hostport, db) = rest
        .split_once('/')
        .expect("STRATA_PG_URL names its database");
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "5432"));
    (user, host.to_string(), port.to_string(), db.to_string())
}

/// One way of giving the password: a `--db` string for a port, a database and a table
/// (another port or database makes the connection fail) and the environment it needs.
/// `(port, database, table) -> --db string`.
type DbFor = Box<dyn Fn(&str, &str, &str) -> String>;

struct Form {
    name: &'static str,
    db: DbFor,
    env: Vec<(&'static str, String)>,
}

fn forms(dir: &Path) -> Vec<Form> {
    let (user, host, _, db) = server();
    let passfile = dir.join("pgpass");
    std::fs::write(&passfile, format!("*:*:*:*:{PASSWORD}\n")).unwrap();
    let service_file = dir.join("pg_service.conf");
    std::fs::write(
        &service_file,
        format!("[strata_secrets]\nhost={host}\nuser={user}\ndbname={db}\npassword={PASSWORD}\n"),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&service_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let url = {
        let h = host.clone();
        move |auth: &str, port: &str, d: &str, table: &str, extra: &str| {
            format!(
                "postgresql://{auth}@{h}:{port}/{d}?strata_table={table}{extra}&connect_timeout=5"
            )
        }
    };
    let kv = {
        let (u, h) = (user.clone(), host.clone());
        move |password: &str, port: &str, d: &str, table: &str| {
            format!("host={h} port={port} user={u} {password} dbname={d} strata_table={table} connect_timeout=5")
        }
    };
    let u = user;
    let (u1, u2, u3, u4) = (u.clone(), u.clone(), u.clone(), u);
    let (url1, url2, url3, url4) = (url.clone(), url.clone(), url.clone(), url);
    let (kv1, kv2, kv3) = (kv.clone(), kv.clone(), kv);
    vec![
        Form {
            name: "URL userinfo",
            db: Box::new(move |p, d, t| url1(&format!("{u1}:{PASSWORD}"), p, d, t, "")),
            env: vec![],
        },
        Form {
            name: "URL userinfo, percent-encoded",
            db: Box::new(move |p, d, t| url2(&format!("{u2}:Sekr%31t"), p, d, t, "")),
            env: vec![],
        },
        Form {
            name: "URL ?password=",
            db: Box::new(move |p, d, t| url3(&u3, p, d, t, &format!("&password={PASSWORD}"))),
            env: vec![],
        },
        Form {
            name: "conninfo, unquoted",
            db: Box::new(move |p, d, t| kv1(&format!("password={PASSWORD}"), p, d, t)),
            env: vec![],
        },
        Form {
            name: "conninfo, quoted",
            db: Box::new(move |p, d, t| kv2(&format!("password = '{PASSWORD} x\\'y'"), p, d, t)),
            env: vec![],
        },
        Form {
            name: "PGPASSWORD",
            db: Box::new(move |p, d, t| kv3("", p, d, t)),
            env: vec![("PGPASSWORD", PASSWORD.to_string())],
        },
        Form {
            name: "passfile",
            db: Box::new(move |p, d, t| url4(&u4, p, d, t, "")),
            env: vec![("PGPASSFILE", passfile.display().to_string())],
        },
        Form {
            name: "service file",
            db: Box::new(move |p, d, t| {
                format!(
                    "service=strata_secrets port={p} dbname={d} strata_table={t} connect_timeout=5"
                )
            }),
            env: vec![("PGSERVICEFILE", service_file.display().to_string())],
        },
    ]
}

/// Runs `strata args` with the form's environment and `STRATA_LOG=trace`.
fn run(form: &Form, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
    cmd.args(args).env("STRATA_LOG", "trace");
    for var in ["PGPASSWORD", "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE"] {
        cmd.env_remove(var);
    }
    for (k, v) in &form.env {
        cmd.env(k, v);
    }
    cmd.env("NEWPASS", "new passphrase for keys add")
        .env("OLDPASS", "old passphrase");
    cmd.output().unwrap()
}

/// Fails when any output of `out` shows the password in any encoding.
fn assert_hidden(form: &Form, args: &[&str], out: &Output) {
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in NEEDLES {
        assert!(
            !text.contains(needle),
            "{}: `strata {}` showed the password ({needle}):\n{text}",
            form.name,
            args.join(" ")
        );
    }
}

/// True when the command reached the server: it did not fail to connect.
fn connected(out: &Output) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    !err.contains("cannot connect") && !err.contains("did not answer")
}

/// Every command that takes a store, with `db` in each place a store is named.
/// `copy_to` is the redb file copied to and back from.
fn commands(db: &str, copy_to: &Path, schema: &Path) -> Vec<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let copy_to = copy_to.display().to_string();
    let schema = schema.display().to_string();
    vec![
        s(&["--db", db, "status", "--json"]),
        s(&["--db", db, "status"]),
        s(&["--db", db, "collections", "--json"]),
        s(&["--db", db, "inspect", "op-log", "--json"]),
        s(&["--db", db, "inspect", "nope"]),
        s(&["--db", db, "verify", "--json"]),
        s(&["--db", db, "verify"]),
        s(&["--db", db, "migrate", "--dry-run", "--json"]),
        s(&["--db", db, "schema", "show", "accounts", "--json"]),
        s(&["--db", db, "schema", "log", "accounts"]),
        s(&[
            "schema",
            "diff",
            &schema,
            "--against",
            db,
            "accounts",
            "--json",
        ]),
        s(&["--db", db, "fence", "--json"]),
        s(&["--db", db, "fence", "abort"]),
        s(&["--db", db, "repair", "--json"]),
        s(&["--db", db, "keys", "status", "--json"]),
        s(&[
            "--db",
            db,
            "keys",
            "add",
            "extra",
            "--new-passphrase-env",
            "NEWPASS",
            "--passphrase-env",
            "OLDPASS",
        ]),
        s(&["copy", "--from", db, "--to", &copy_to, "--json"]),
        s(&["copy", "--from", &copy_to, "--to", db, "--json"]),
        s(&["--db", db, "migrate", "--json"]),
    ]
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn no_form_of_the_password_shows_in_any_output_of_any_command() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("accounts.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"id":{"type":"string"}}}"#,
    )
    .unwrap();
    let (_, _, port, dbname) = server();
    for (n, form) in forms(dir.path()).into_iter().enumerate() {
        let table = scratch_table("strata_secrets");
        let store = owner(&table);
        legacy_records(&store, 50);
        // A second table, for copies into PostgreSQL (created by the copy, dropped here).
        let copy_table = scratch_table("strata_secrets_copy");
        let db = (form.db)(&port, &dbname, &table);
        let copy_to = dir.path().join(format!("copy-{n}.redb"));
        let mut reached = 0;
        for (i, args) in commands(&db, &copy_to, &schema).into_iter().enumerate() {
            let args: Vec<String> = args
                .into_iter()
                .map(|a| {
                    if i == 17 && a == db {
                        (form.db)(&port, &dbname, &copy_table)
                    } else {
                        a
                    }
                })
                .collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = run(&form, &args);
            assert_hidden(&form, &args, &out);
            if connected(&out) {
                reached += 1;
            }
            // Under --json, stdout is one JSON document whatever happened.
            if args.contains(&"--json") {
                serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap_or_else(|e| {
                    panic!(
                        "{}: `strata {}` printed no JSON ({e}): {}",
                        form.name,
                        args.join(" "),
                        String::from_utf8_lossy(&out.stderr)
                    )
                });
            }
        }
        // Every command of every form reached the server (the form was understood).
        assert_eq!(reached, 19, "{}: some commands did not connect", form.name);
        let status = run(&form, &["--db", &db, "status", "--json"]);
        let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
        assert_eq!(status.status.code(), Some(0), "{}: {doc}", form.name);
        drop(owner(&copy_table));
        drop(store);
    }
}

#[test]
#[cfg_attr(not(strata_pg), ignore = "needs STRATA_PG_URL")]
fn connection_failures_never_show_the_password_either() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("accounts.json");
    std::fs::write(&schema, r#"{"type":"object"}"#).unwrap();
    // An existing (empty) store to copy from.
    let source = dir.path().join("source.redb");
    drop(strata_redb::RedbStore::create(&source).unwrap());
    let (_, _, port, dbname) = server();
    for form in forms(dir.path()) {
        // Nothing listens on port 1; a database that does not exist is a server error.
        let refused = (form.db)("1", &dbname, "strata_kv");
        let no_such_db = (form.db)(&port, "strata_no_such_database", "strata_kv");
        for db in [&refused, &no_such_db] {
            for args in commands(db, &source, &schema) {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let out = run(&form, &args);
                assert_hidden(&form, &args, &out);
                assert_ne!(out.status.code(), Some(0), "{}: {args:?}", form.name);
                let err = String::from_utf8_lossy(&out.stderr);
                let line = err
                    .lines()
                    .find(|l| l.starts_with("strata: "))
                    .unwrap_or_else(|| panic!("{}: {args:?}: no error line: {err}", form.name));
                assert!(
                    line.contains("postgres"),
                    "{}: {args:?}: not a postgres error: {line}",
                    form.name
                );
            }
        }
    }
}
