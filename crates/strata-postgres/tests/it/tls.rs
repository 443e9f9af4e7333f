//! TLS to PostgreSQL (`sslmode`, `sslrootcert`) against a private cluster with `ssl=on`, a
//! certificate made by the test (a throwaway CA signing a server certificate for
//! `localhost` only) and `hostssl`-only client authentication, so a plain TCP connection
//! is refused by the server. Skipped, visibly, where there are no server binaries (not
//! under `CI=true`).

use std::path::{Path, PathBuf};
use std::process::Command;
use strata_postgres::testing::PrivateCluster;
use strata_postgres::{PgOptions, PgStore};
use strata_store::{Batch, KvRead, KvWrite, StoreError};

/// A CA and the server certificate it signed, as PEM files in `dir`.
struct Certs {
    dir: PathBuf,
    ca: PathBuf,
    other_ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn make_certs() -> Certs {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("strata-pg-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();

    let ca = |name: &str| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert, rcgen::Issuer::new(params, key))
    };
    let (ca_cert, issuer) = ca("strata test CA");
    let (other_cert, _) = ca("some other CA");
    // The server certificate names `localhost` only: connecting to 127.0.0.1 with
    // verify-full must fail on the name, verify-ca must not care.
    let server_params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server_cert = server_params.signed_by(&server_key, &issuer).unwrap();

    let certs = Certs {
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other-ca.pem"),
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        dir,
    };
    std::fs::write(&certs.ca, ca_cert.pem()).unwrap();
    std::fs::write(&certs.other_ca, other_cert.pem()).unwrap();
    std::fs::write(&certs.server_cert, server_cert.pem()).unwrap();
    std::fs::write(&certs.server_key, server_key.serialize_pem()).unwrap();
    // The server refuses a key readable by others; run as root, the server is `postgres`.
    std::fs::set_permissions(&certs.server_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    if running_as_root() {
        let out = Command::new("chown")
            .arg("postgres")
            .arg(&certs.server_cert)
            .arg(&certs.server_key)
            .output()
            .unwrap();
        assert!(out.status.success(), "chown: {out:?}");
    }
    certs
}

/// Every `host` line of the cluster's `pg_hba.conf` becomes `hostssl`: plain TCP
/// connections are refused from now on (the Unix socket stays open for the checks).
fn require_ssl(cluster: &PrivateCluster) {
    let hba = cluster.data_dir().join("pg_hba.conf");
    let text = std::fs::read_to_string(&hba).unwrap();
    let text: String = text
        .lines()
        .map(|l| match l.strip_prefix("host ") {
            Some(rest) => format!("hostssl {rest}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    assert!(text.contains("hostssl"), "pg_hba.conf has host lines");
    std::fs::write(&hba, text).unwrap();
    cluster.restart().unwrap();
}

/// A superuser session over the cluster's Unix socket (not TCP, so not TLS).
fn socket_client(cluster: &PrivateCluster) -> postgres::Client {
    postgres::Client::connect(
        &format!(
            "host={} port={} user=postgres dbname=postgres",
            cluster.dir().display(),
            cluster.port()
        ),
        postgres::NoTls,
    )
    .unwrap()
}

/// How many TCP sessions the server sees encrypted and in plain text.
fn tcp_sessions(client: &mut postgres::Client) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl)
             FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.client_addr IS NOT NULL",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

fn connect(url: &str) -> Result<PgStore, StoreError> {
    PgStore::connect_with(url, PgOptions::new().table("tls_t"))
}

/// The whole error chain as one string.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(" | ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

fn round_trip(store: &PgStore, key: &[u8]) {
    store
        .apply(Batch::new().set(key.to_vec(), b"v".to_vec()))
        .unwrap();
    assert_eq!(store.get(key).unwrap(), Some(b"v".to_vec()));
}

#[test]
fn sslmodes_against_a_tls_only_server() {
    let certs = make_certs();
    let cert = certs.server_cert.display().to_string();
    let key = certs.server_key.display().to_string();
    let Some(cluster) = PrivateCluster::start_for_test(
        "sslmodes_against_a_tls_only_server",
        &[
            ("ssl", "on"),
            ("ssl_cert_file", &cert),
            ("ssl_key_file", &key),
        ],
    )
    .unwrap() else {
        return;
    };
    require_ssl(&cluster);
    let port = cluster.port();
    let at =
        |host: &str, query: &str| format!("postgresql://postgres@{host}:{port}/postgres?{query}");
    let root = |p: &Path| p.display().to_string();

    // Plain text is refused by the server: the tests below really go through TLS.
    let err = connect(&at("127.0.0.1", "sslmode=disable")).unwrap_err();
    assert!(chain(&err).contains("cannot connect"), "{}", chain(&err));

    // `require`: encrypted, certificate not checked (libpq's meaning).
    let store = connect(&at("127.0.0.1", "sslmode=require")).unwrap();
    round_trip(&store, b"require");
    let mut admin = socket_client(&cluster);
    let (encrypted, plain) = tcp_sessions(&mut admin);
    assert!(encrypted >= 1, "the store's sessions are encrypted");
    assert_eq!(plain, 0, "no plain TCP session");
    drop(store);

    // The default (`prefer`) takes TLS when the server offers it.
    let store = connect(&at("127.0.0.1", "")).unwrap();
    round_trip(&store, b"prefer");
    drop(store);

    // `verify-full`: the chain and the host name.
    let ca = root(&certs.ca);
    let store = connect(&at(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .unwrap();
    round_trip(&store, b"verify-full");
    drop(store);
    // The certificate names `localhost`, not 127.0.0.1.
    let err = connect(&at(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .unwrap_err();
    let text = chain(&err);
    assert!(text.contains("certificate"), "{text}");
    assert!(!text.contains("password"), "{text}");
    // `verify-ca`: the chain only, so 127.0.0.1 is fine.
    let store = connect(&at(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    ))
    .unwrap();
    round_trip(&store, b"verify-ca");
    drop(store);

    // A CA that did not sign the server's certificate is refused, whatever the mode that
    // checks it.
    let other = root(&certs.other_ca);
    for mode in ["verify-full", "verify-ca", "require"] {
        let err = connect(&at(
            "localhost",
            &format!("sslmode={mode}&sslrootcert={other}"),
        ))
        .unwrap_err();
        let text = chain(&err);
        assert!(text.contains("certificate"), "{mode}: {text}");
    }
}

#[test]
fn tls_parameters_are_checked_before_connecting() {
    // Port 1 on localhost: nothing listens; every case must fail on the parameters first.
    let base = "postgresql://postgres@127.0.0.1:1/postgres";
    let err = connect(&format!("{base}?sslmode=sometimes")).unwrap_err();
    let text = chain(&err);
    assert!(text.contains("sslmode=sometimes"), "{text}");
    assert!(text.contains("verify-full"), "{text}");

    let err = connect(&format!("{base}?sslmode=verify-full")).unwrap_err();
    let text = chain(&err);
    assert!(text.contains("sslrootcert=PATH"), "{text}");

    let missing = std::env::temp_dir().join("strata-no-such-ca.pem");
    let err = connect(&format!(
        "{base}?sslmode=verify-ca&sslrootcert={}",
        missing.display()
    ))
    .unwrap_err();
    let text = chain(&err);
    assert!(text.contains("strata-no-such-ca.pem"), "{text}");
    assert!(text.contains("cannot be read"), "{text}");

    let empty = std::env::temp_dir().join(format!("strata-empty-ca-{}.pem", std::process::id()));
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let err = connect(&format!(
        "{base}?sslmode=require&sslrootcert={}",
        empty.display()
    ))
    .unwrap_err();
    let _ = std::fs::remove_file(&empty);
    let text = chain(&err);
    assert!(text.contains("no certificate"), "{text}");
}
