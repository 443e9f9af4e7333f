//! The child-process harness every crash scenario uses: the child's environment, spawning
//! this binary again as a child, its ready line, the kill-point generator and the
//! iteration count.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

/// The child's role (`STRATA_CRASH_ROLE=<role>`): set, the binary runs as that child.
pub const ROLE_ENV: &str = "STRATA_CRASH_ROLE";
/// The store directory the child works on.
pub const DIR_ENV: &str = "STRATA_CRASH_DIR";

/// A small xorshift generator for kill points.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from `STRATA_CRASH_SEED` when set (to replay a failure), else from the
    /// time; print [`Rng::seed`] so a failure can be replayed.
    pub fn from_env_or_time() -> Rng {
        let seed = std::env::var("STRATA_CRASH_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        Rng(seed | 1)
    }

    /// The current state (the seed before the first [`Rng::next`]).
    pub fn seed(&self) -> u64 {
        self.0
    }

    /// The next pseudo-random number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A `usize` from the environment variable `name`, else `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This test binary again, as the child `role` on the store at `dir`, stdout piped.
pub fn spawn(role: &str, dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash::child",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(ROLE_ENV, role)
        .env(DIR_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Reads the child's first line, which must be `role=<role> ready`, and returns its
/// stdout for the lines that follow.
pub fn wait_ready(child: &mut Child, role: &str) -> BufReader<ChildStdout> {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // The test harness's own output (`running 1 test`, then `test crash::child ... ` on the
    // line the child's first line continues) comes first.
    while out.read_line(&mut line).unwrap() > 0 && !line.contains("role=") {
        line.clear();
    }
    let ready = line.find("role=").map_or("", |at| &line[at..]);
    assert_eq!(
        ready.trim(),
        format!("role={role} ready"),
        "the child runs the wrong role"
    );
    out
}

/// Runs the child `role` and SIGKILLs it after `reports` lines of its stdout, unless it
/// printed a line starting with `end` (or closed stdout) first. Returns true when it
/// finished before the kill (the kill then hit nothing).
pub fn kill_after(role: &str, dir: &Path, reports: u64, end: &str) -> bool {
    let mut child = spawn(role, dir);
    let mut out = wait_ready(&mut child, role);
    let mut finished = false;
    let mut line = String::new();
    for _ in 0..reports {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 || line.starts_with(end) {
            finished = true;
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    finished
}

/// Runs the child `role` to its end: its last line (the one starting with `end`), after
/// asserting that it exited successfully.
pub fn run_to_end(role: &str, dir: &Path, end: &str) -> String {
    let mut child = spawn(role, dir);
    let mut out = wait_ready(&mut child, role);
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 || line.starts_with(end) {
            break;
        }
    }
    assert!(
        child.wait().unwrap().success(),
        "the final {role} run failed"
    );
    line
}
