//! How a replayed sweep is interrupted at a batch boundary: killed in a child process
//! (this test binary run again, told what to do by a [`ChildSpec`]), or stopped in-process
//! by a panic when there is no test to re-run; and the child's side of it.

use super::*;

impl<T: Serialize + DeserializeOwned + 'static> Replay<T> {
    /// Runs the sweep in a child process (this test again) and kills it at boundary `k`.
    pub(super) fn kill_child(
        &self,
        test: &str,
        run_index: usize,
        store: &Path,
        k: usize,
        runner: &str,
    ) -> Result<(), String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find the test binary: {e}"))?;
        let spec = ChildSpec {
            run_index,
            store: store.to_path_buf(),
            kill_at: k,
            runner: runner.to_string(),
        };
        let mut child = Command::new(exe)
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, spec.encode())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the child process: {e}"))?;
        // The child's lines are read on a thread, so a child that hangs before the
        // boundary is killed after a deadline instead of hanging the test.
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if let Some(n) = boundary_of(&line) {
                        if tx.send(n).is_err() {
                            break;
                        }
                    }
                }
            });
        }
        let deadline = std::time::Instant::now() + CHILD_DEADLINE;
        let mut reached = false;
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(n) if n == k => {
                    reached = true;
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        // SIGKILL, at the boundary (the child waits on its stdin there).
        let _ = child.kill();
        let _ = child.wait();
        if !reached {
            return Err(format!(
                "the child process ended before batch boundary {k} (run `{test}` alone to see why)"
            ));
        }
        Ok(())
    }

    /// The in-process stand-in of a kill: the sweep stops at boundary `k`.
    pub(super) fn stop_in_process(
        &self,
        store: &Path,
        k: usize,
        runner: &str,
    ) -> Result<(), String> {
        let store = open(store)?;
        let c = self.open(&store)?;
        let seen = Arc::new(AtomicUsize::new(0));
        let s = Arc::clone(&seen);
        let batch = self.batch();
        let options = SweepOptions::new()
            .runner_id(runner)
            .limits(PassLimits::new(batch, 64 << 20).unwrap_or_default())
            .abort_when(move || s.fetch_add(1, Ordering::SeqCst) + 1 >= k);
        match &self.sweeper {
            None => c.sweep(options).map(|_| ()).map_err(|e| e.to_string()),
            Some(sw) => {
                // A hand-written sweep cannot be stopped from outside: it is given a
                // boundary hook that panics at `k`, caught here.
                let hook: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                    let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
                    if n >= k {
                        std::panic::panic_any(StopHere);
                    }
                });
                let run = SweepRun {
                    options: Box::new(SweepOptions::new),
                    boundary: hook,
                    batch_rows: batch,
                };
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sw(&c, &run)));
                match result {
                    Ok(r) => r,
                    Err(p) if p.is::<StopHere>() => Ok(()),
                    Err(p) => std::panic::resume_unwind(p),
                }
            }
        }
    }

    /// The child's side of a kill replay: sweep, announce each boundary, wait at `kill_at`
    /// for the parent's SIGKILL. Never returns.
    pub(super) fn child(&self, spec: &ChildSpec) -> ! {
        let code = match self.child_sweep(spec) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("strata-testkit child: {e}");
                1
            }
        };
        std::process::exit(code)
    }

    pub(super) fn child_sweep(&self, spec: &ChildSpec) -> Result<(), String> {
        use std::io::Write;
        let store = open(&spec.store)?;
        let c = self.open(&store)?;
        let seen = Arc::new(AtomicUsize::new(0));
        let kill_at = spec.kill_at;
        let hook: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "\n{BOUNDARY_LINE}{n}");
            let _ = out.flush();
            if n == kill_at {
                // Wait for the SIGKILL (the parent never writes).
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
                std::process::exit(3);
            }
        });
        self.sweep(&c, &spec.runner, hook)
    }
}

/// The panic payload that stops a hand-written sweep in-process.
pub(super) struct StopHere;

/// The boundary number a child's output line announces (libtest may print the test's
/// name before it on the same line).
pub(super) fn boundary_of(line: &str) -> Option<usize> {
    let at = line.rfind(BOUNDARY_LINE)?;
    let digits: String = line[at + BOUNDARY_LINE.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// What the parent tells a child.
pub(super) struct ChildSpec {
    pub(super) run_index: usize,
    pub(super) store: PathBuf,
    pub(super) kill_at: usize,
    pub(super) runner: String,
}

impl ChildSpec {
    pub(super) fn encode(&self) -> String {
        serde_json::json!({
            "run": self.run_index,
            "store": self.store.display().to_string(),
            "kill_at": self.kill_at,
            "runner": self.runner,
        })
        .to_string()
    }

    pub(super) fn parse(s: &str) -> Option<Self> {
        let v: Value = serde_json::from_str(s).ok()?;
        Some(ChildSpec {
            run_index: usize::try_from(v.get("run")?.as_u64()?).ok()?,
            store: PathBuf::from(v.get("store")?.as_str()?),
            kill_at: usize::try_from(v.get("kill_at")?.as_u64()?).ok()?,
            runner: v.get("runner")?.as_str()?.to_string(),
        })
    }
}
