//! A private, throwaway PostgreSQL cluster for tests that must do to a server what they
//! cannot do to a shared one: restart it, stop it, start it with other settings (`ssl=on`).
//!
//! Only compiled with the `testing` feature (tests enable it through their
//! dev-dependency). [`PrivateCluster::start_for_test`] runs `initdb` in a fresh directory
//! under the system temp dir, starts the server on a free local port (listening on
//! `127.0.0.1` and a socket in that directory only) and stops it and removes the directory
//! when dropped. The server binaries are taken from `STRATA_PG_BIN` when set, else from the
//! newest `/usr/lib/postgresql/<version>/bin`. Run as root, the server runs as the
//! `postgres` user (`initdb` refuses root).
//!
//! When there are no server binaries the test is skipped *visibly*: `start_for_test`
//! prints `skipped: <test>: <reason>` and returns `Ok(None)` — except under `CI=true`,
//! where a cluster that cannot be started is an error (CI must run these tests).
//!
//! ```no_run
//! # fn main() -> Result<(), String> {
//! let Some(cluster) = strata_postgres::testing::PrivateCluster::start_for_test(
//!     "my_test",
//!     &[("ssl", "off")],
//! )?
//! else {
//!     return Ok(()); // skipped, and it said so
//! };
//! let url = cluster.url(); // postgresql://postgres@127.0.0.1:<port>/postgres
//! cluster.restart()?;
//! # let _ = url; Ok(()) }
//! ```

mod wire;
pub use wire::{Sent, WireCounter};

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A table name no other test (in this or a concurrent test process) uses:
/// `<prefix>_<pid>_<n>_<nanos>`, for tests that share one server.
pub fn scratch_table(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The advisory-lock ids the write protocol of `table` uses, `(store lease, table,
/// key-lock class)` — for tests that act as another writer holding the protocol's locks
/// in a transaction they keep open (`pg_advisory_xact_lock_shared(lease)`,
/// `pg_advisory_xact_lock(table)`, `pg_advisory_xact_lock(class, key_lock(key))`).
pub fn protocol_locks(table: &str) -> (i64, i64, i32) {
    let ids = crate::keys::LockIds::new(table);
    (ids.lease, ids.table, ids.class)
}

/// The per-key advisory-lock id of `key` (in the class [`protocol_locks`] names).
pub fn key_lock(key: &[u8]) -> i32 {
    crate::keys::LockIds::new("")
        .key_locks(std::iter::once(key))
        .first()
        .copied()
        .unwrap_or_default()
}

/// A running private cluster; dropping it stops the server (immediate mode) and removes
/// its directory.
#[derive(Debug)]
pub struct PrivateCluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

/// The directory of the PostgreSQL server binaries: `STRATA_PG_BIN`, else the newest
/// `/usr/lib/postgresql/<version>/bin` holding `pg_ctl`.
pub fn server_binaries() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("STRATA_PG_BIN").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return dir.join("pg_ctl").is_file().then_some(dir);
    }
    let mut found: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version: Vec<u32> = e
                .file_name()
                .to_str()?
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<_>>()?;
            let bin = e.path().join("bin");
            bin.join("pg_ctl").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn describe(what: &str, out: std::io::Result<Output>) -> Result<(), String> {
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{what} failed ({}): {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout).trim(),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("{what} could not run: {e}")),
    }
}

/// A local port nobody listens on right now (the server may still lose a race for it:
/// [`PrivateCluster::start`] retries with another one).
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free local port: {e}"))
}

impl PrivateCluster {
    /// Starts a cluster for the test `test`, or says why it is skipped: `Ok(None)` (after
    /// printing `skipped: <test>: <reason>`) when there are no server binaries or no
    /// `postgres` user to run them as root; under `CI=true` that is an `Err` instead. A
    /// failing `initdb` or server start is always an `Err`.
    ///
    /// `settings` are server settings (`-c name=value`), for example `("ssl", "on")`.
    pub fn start_for_test(test: &str, settings: &[(&str, &str)]) -> Result<Option<Self>, String> {
        match Self::unavailable() {
            None => Self::start(settings).map(Some),
            Some(reason) if std::env::var("CI").is_ok_and(|v| v == "true") => Err(format!(
                "{test}: {reason}; CI=true needs a PostgreSQL server for this test"
            )),
            Some(reason) => {
                eprintln!("skipped: {test}: {reason}");
                Ok(None)
            }
        }
    }

    /// Why no private cluster can be started here, if so.
    pub fn unavailable() -> Option<String> {
        if server_binaries().is_none() {
            return Some(
                "no PostgreSQL server binaries (/usr/lib/postgresql/<version>/bin or STRATA_PG_BIN)"
                    .into(),
            );
        }
        if running_as_root()
            && !Command::new("id")
                .arg("postgres")
                .output()
                .is_ok_and(|o| o.status.success())
        {
            return Some("running as root and there is no `postgres` user to run the server as (initdb refuses root)".into());
        }
        None
    }

    /// Runs `initdb` and starts the server with `settings` on a free local port.
    pub fn start(settings: &[(&str, &str)]) -> Result<Self, String> {
        let mut cluster = Self::empty()?;
        let data = cluster.data_dir();
        describe(
            "initdb",
            cluster
                .command("initdb")
                .arg("-D")
                .arg(&data)
                .args(["-A", "trust", "-U", "postgres", "--no-sync"])
                .output(),
        )?;
        cluster.launch(settings)?;
        Ok(cluster)
    }

    /// An empty cluster directory (owned by `postgres` when this process is root).
    fn empty() -> Result<Self, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let bin = server_binaries().ok_or("no PostgreSQL server binaries")?;
        let as_postgres = running_as_root();
        let dir = std::env::temp_dir().join(format!(
            "strata-pg-cluster-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("`{}`: {e}", dir.display()))?;
        let cluster = PrivateCluster {
            bin,
            dir,
            port: 0,
            as_postgres,
        };
        if as_postgres {
            describe(
                "chown",
                Command::new("chown")
                    .arg("postgres")
                    .arg(&cluster.dir)
                    .output(),
            )?;
        }
        Ok(cluster)
    }

    /// A streaming-replication standby of `primary`: `pg_basebackup -R` (which writes
    /// `primary_conninfo` and `standby.signal`), then the server started with `settings`
    /// on a free local port. The primary must allow replication connections from
    /// `127.0.0.1` (initdb's default `pg_hba.conf` does, with `-A trust`).
    pub fn start_standby_of(
        primary: &PrivateCluster,
        settings: &[(&str, &str)],
    ) -> Result<Self, String> {
        let mut standby = Self::empty()?;
        describe(
            "pg_basebackup",
            standby
                .command("pg_basebackup")
                .arg("-D")
                .arg(standby.data_dir())
                .args([
                    "-h",
                    "127.0.0.1",
                    "-U",
                    "postgres",
                    "-R",
                    "-X",
                    "stream",
                    "--no-sync",
                ])
                .arg("-p")
                .arg(primary.port.to_string())
                .output(),
        )?;
        standby.launch(settings)?;
        Ok(standby)
    }

    /// Starts the server of an initialized data directory with `settings` on a free port.
    fn launch(&mut self, settings: &[(&str, &str)]) -> Result<(), String> {
        let cluster = self;
        let data = cluster.data_dir();
        let mut options = format!("-k {} -h 127.0.0.1", cluster.dir.display());
        for (name, value) in settings {
            options.push_str(&format!(" -c {name}={value}"));
        }
        let mut last = String::new();
        for _ in 0..5 {
            cluster.port = free_port()?;
            let started = describe(
                "pg_ctl start",
                cluster
                    .command("pg_ctl")
                    .arg("-D")
                    .arg(&data)
                    .arg("-l")
                    .arg(cluster.log_file())
                    .args(["-w", "-t", "60", "-o"])
                    .arg(format!("{options} -p {}", cluster.port))
                    .arg("start")
                    .output(),
            );
            match started {
                Ok(()) => return Ok(()),
                Err(e) => last = format!("{e}; server log: {}", cluster.log_tail()),
            }
        }
        Err(last)
    }

    /// `pg_ctl stop -m immediate`: the server dies as in a crash (no shutdown checkpoint,
    /// every connection cut), as a failed primary does.
    pub fn stop_immediate(&self) -> Result<(), String> {
        describe(
            "pg_ctl stop",
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .args(["-w", "-m", "immediate", "stop"])
                .output(),
        )
    }

    /// `pg_ctl promote -w`: a standby becomes a primary (accepts writes) when this returns.
    pub fn promote(&self) -> Result<(), String> {
        describe(
            "pg_ctl promote",
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .args(["-w", "-t", "60", "promote"])
                .output(),
        )
    }

    /// Runs `sql` with `psql` (as user `postgres`, database `postgres`) and returns its
    /// unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let out = self
            .command("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-Atqc",
                sql,
            ])
            .arg("-p")
            .arg(self.port.to_string())
            .output()
            .map_err(|e| format!("psql could not run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "psql `{sql}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// A `bin/<program>` command, run as `postgres` when this process is root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// The connection URL (user `postgres`, database `postgres`, trust authentication).
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The server log file.
    pub fn log_file(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_file()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// `pg_ctl restart -m fast`: every connection is cut, the server is back when this
    /// returns.
    pub fn restart(&self) -> Result<(), String> {
        describe(
            "pg_ctl restart",
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .arg("-l")
                .arg(self.log_file())
                .args(["-w", "-t", "60", "-m", "fast", "restart"])
                .output(),
        )
    }

    /// The directory everything lives in (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-w", "-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Under `CI=true` what CI installs must be there: an error instead of a skip.
fn skip_or_fail(test: &str, reason: String) -> Result<Option<std::convert::Infallible>, String> {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        return Err(format!("{test}: {reason}; CI=true needs it for this test"));
    }
    eprintln!("skipped: {test}: {reason}");
    Ok(None)
}

/// A primary with a synchronous streaming-replication standby, both private clusters on
/// loopback (`scripts/pg-ha.sh` does the same by hand): the standby is made with
/// `pg_basebackup -R`, and the primary runs with `synchronous_standby_names = '*'`, so a
/// commit is acknowledged only once the standby has flushed it. [`HaPair::fail_over`]
/// kills the primary (immediate stop) and promotes the standby.
#[derive(Debug)]
pub struct HaPair {
    /// The primary (stopped after [`HaPair::fail_over`]).
    pub primary: PrivateCluster,
    /// The synchronous standby (the primary after [`HaPair::fail_over`]).
    pub standby: PrivateCluster,
}

impl HaPair {
    /// Starts the pair for test `test`, or skips it visibly as
    /// [`PrivateCluster::start_for_test`] does (an error under `CI=true`).
    pub fn start_for_test(test: &str) -> Result<Option<Self>, String> {
        if let Some(reason) = PrivateCluster::unavailable() {
            return skip_or_fail(test, reason).map(|_| None);
        }
        let primary = PrivateCluster::start(&[
            ("synchronous_standby_names", "'*'"),
            ("wal_level", "replica"),
            ("max_wal_senders", "4"),
        ])?;
        let standby = PrivateCluster::start_standby_of(&primary, &[("hot_standby", "on")])?;
        let pair = HaPair { primary, standby };
        pair.wait_for_sync()?;
        Ok(Some(pair))
    }

    /// Waits (up to 60 s) until the primary reports its standby as synchronous.
    fn wait_for_sync(&self) -> Result<(), String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let state = self
                .primary
                .psql("SELECT string_agg(sync_state, ',') FROM pg_stat_replication")?;
            if state == "sync" {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(format!(
                    "the standby did not become synchronous within 60 s (sync_state `{state}`)"
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// A multi-host URL naming both servers, connecting to whichever accepts writes:
    /// `postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write`.
    pub fn url(&self) -> String {
        format!(
            "postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.primary.port(),
            self.standby.port()
        )
    }

    /// Kills the primary (immediate stop, as a crash) and promotes the standby; when this
    /// returns the former standby accepts writes.
    pub fn fail_over(&self) -> Result<(), String> {
        self.primary.stop_immediate()?;
        self.standby.promote()
    }
}

/// The `pgbouncer` binary: `STRATA_PGBOUNCER` when set, else `/usr/sbin/pgbouncer` (the
/// Debian package) or `pgbouncer` on the `PATH`.
pub fn pgbouncer_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STRATA_PGBOUNCER").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let sbin = PathBuf::from("/usr/sbin/pgbouncer");
    if sbin.is_file() {
        return Some(sbin);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("pgbouncer"))
            .find(|p| p.is_file())
    })
}

/// Stops the daemon `pid` and removes `dir` once this process has gone, however it ends
/// (a pooler kept in a `static` is never dropped): a detached `sh` polls this process
/// every half second.
fn watchdog(pid: u32, dir: &Path) {
    let me = std::process::id();
    let dir = dir.display().to_string().replace('\'', "");
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; kill {pid} 2>/dev/null; sleep 1; rm -rf '{dir}'"
        ))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// A private PgBouncer on loopback in front of one server (stopped and removed on drop),
/// with trust authentication for user `postgres` and every database passed through.
#[derive(Debug)]
pub struct Pgbouncer {
    dir: PathBuf,
    port: u16,
    pid: Option<u32>,
}

impl Pgbouncer {
    /// Starts a PgBouncer in `pool_mode` (`session`, `transaction` or `statement`) in front
    /// of the server at `127.0.0.1:upstream_port`, or skips the test visibly when there is
    /// no `pgbouncer` binary (`apt-get install pgbouncer`) — an error under `CI=true`.
    pub fn start_for_test(
        test: &str,
        upstream_port: u16,
        pool_mode: &str,
    ) -> Result<Option<Self>, String> {
        Self::start_sized_for_test(test, upstream_port, pool_mode, 40)
    }

    /// [`Pgbouncer::start_for_test`] with at most `pool_size` server connections per
    /// database and user (`default_pool_size`): with fewer than the clients, the clients'
    /// transactions take turns on the same server sessions.
    pub fn start_sized_for_test(
        test: &str,
        upstream_port: u16,
        pool_mode: &str,
        pool_size: usize,
    ) -> Result<Option<Self>, String> {
        let Some(bin) = pgbouncer_binary() else {
            return skip_or_fail(
                test,
                "no pgbouncer binary (apt-get install pgbouncer, or STRATA_PGBOUNCER)".into(),
            )
            .map(|_| None);
        };
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let as_postgres = running_as_root();
        let dir = std::env::temp_dir().join(format!(
            "strata-pgbouncer-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("`{}`: {e}", dir.display()))?;
        let mut bouncer = Pgbouncer {
            dir,
            port: 0,
            pid: None,
        };
        let userlist = bouncer.dir.join("userlist.txt");
        std::fs::write(&userlist, "\"postgres\" \"\"\n").map_err(|e| e.to_string())?;
        let mut last = String::new();
        for _ in 0..5 {
            bouncer.port = free_port()?;
            let ini = bouncer.dir.join("pgbouncer.ini");
            let pidfile = bouncer.dir.join("pgbouncer.pid");
            let text = format!(
                "[databases]\n* = host=127.0.0.1 port={upstream_port}\n\n[pgbouncer]\n\
                 listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {userlist}\npool_mode = {pool_mode}\n\
                 max_client_conn = 500\ndefault_pool_size = {pool_size}\n\
                 ignore_startup_parameters = extra_float_digits,options\n\
                 logfile = {log}\npidfile = {pid}\nadmin_users = postgres\n",
                port = bouncer.port,
                userlist = userlist.display(),
                log = bouncer.dir.join("pgbouncer.log").display(),
                pid = pidfile.display(),
            );
            std::fs::write(&ini, text).map_err(|e| e.to_string())?;
            if as_postgres {
                describe(
                    "chown",
                    Command::new("chown")
                        .args(["-R", "postgres"])
                        .arg(&bouncer.dir)
                        .output(),
                )?;
            }
            let mut cmd = if as_postgres {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(&bin);
                c
            } else {
                Command::new(&bin)
            };
            let started = describe("pgbouncer -d", cmd.arg("-d").arg(&ini).output());
            if let Err(e) = started {
                last = e;
                continue;
            }
            // Daemonized: it is ready once it listens (and has written its pid).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while std::time::Instant::now() < deadline {
                let pid = std::fs::read_to_string(&pidfile)
                    .ok()
                    .and_then(|p| p.trim().parse::<u32>().ok());
                if let Some(pid) = pid {
                    bouncer.pid = Some(pid);
                    if std::net::TcpStream::connect(("127.0.0.1", bouncer.port)).is_ok() {
                        watchdog(pid, &bouncer.dir);
                        return Ok(Some(bouncer));
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            last = format!(
                "pgbouncer did not listen on port {} within 20 s: {}",
                bouncer.port,
                std::fs::read_to_string(bouncer.dir.join("pgbouncer.log")).unwrap_or_default()
            );
            bouncer.stop();
        }
        Err(last)
    }

    /// The URL of database `postgres` as user `postgres` through the pooler.
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The pooler's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn stop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = Command::new("kill").arg(pid.to_string()).output();
            // Wait (briefly) for it to let go of its port.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while std::path::Path::new(&format!("/proc/{pid}")).exists()
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

impl Drop for Pgbouncer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The port of a `postgres[ql]://USER@127.0.0.1:PORT/…` (or `localhost`) URL — the
/// server a test puts a private pooler in front of; `None` for any other form.
pub fn loopback_port(url: &str) -> Option<u16> {
    let rest = url
        .strip_prefix("postgresql://")
        .or_else(|| url.strip_prefix("postgres://"))?;
    let rest = &rest[rest.rfind('@').map_or(0, |i| i + 1)..];
    let hostport = rest.split(['/', '?']).next()?;
    let (host, port) = hostport.rsplit_once(':')?;
    matches!(host, "127.0.0.1" | "localhost")
        .then(|| port.parse().ok())
        .flatten()
}
