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
        let mut cluster = PrivateCluster {
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
                Ok(()) => return Ok(cluster),
                Err(e) => last = format!("{e}; server log: {}", cluster.log_tail()),
            }
        }
        Err(last)
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
