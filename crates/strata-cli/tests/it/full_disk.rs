//! No hang on a full disk (#23 item 5): `strata copy` into a target on a nearly full
//! filesystem (a small tmpfs) returns within a deadline with one `strata:` line, for a
//! sled and a redb target, trial after trial. Needs root (mount); without it the test
//! says so and passes nothing else.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use strata_store::{Batch, KvWrite};

const TRIALS: usize = 20;
const DEADLINE: Duration = Duration::from_secs(30);

/// A small tmpfs mounted for one test; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if out.status.success() {
            Ok(Tmpfs(at.to_path_buf()))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// About 2.4 MB of records in a redb store.
fn source(path: &Path) {
    let store = strata_redb::RedbStore::create_store(path).unwrap();
    for chunk in 0..6u32 {
        let mut batch = Batch::new();
        for i in 0..1000u32 {
            batch = batch.set(
                format!("t/{chunk}/{i:05}").into_bytes(),
                vec![(i % 251) as u8; 400],
            );
        }
        store.apply(batch).unwrap();
    }
    store.flush().unwrap();
}

/// Runs `strata copy` and waits for it at most [`DEADLINE`]: its exit code and stderr,
/// or a panic naming the trial (the child is killed first).
fn copy_within_deadline(from: &str, to: &str, what: &str) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["copy", "--from", from, "--to", to, "--max-records", "300"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut text);
        let _ = tx.send(text);
    });
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let text = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
            return (status.code(), text);
        }
        if started.elapsed() > DEADLINE {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{what}: `strata copy` into a full disk hung for {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn trials(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("source.redb");
    source(&from);
    let mnt = dir.path().join("mnt");
    let _fs = match Tmpfs::mount(&mnt, "24m") {
        Ok(fs) => fs,
        Err(why) => {
            println!("skipped: cannot mount a tmpfs here ({why})");
            return;
        }
    };
    let filler = mnt.join("filler");
    let from_s = from.to_str().unwrap();
    let mut full = 0;
    for trial in 0..TRIALS {
        // From 0.5 MiB free up (to 2.9 MiB for redb, 11.9 MiB for sled, which needs
        // more room for the same records): the disk fills while copying, while flushing,
        // while verifying or while closing — or the copy fits.
        let step = if backend == "sled" {
            600 << 10
        } else {
            128 << 10
        };
        let free = (512 << 10) + trial * step;
        std::fs::write(&filler, vec![0u8; (24 << 20) - free]).unwrap();
        let target = mnt.join(format!("t{trial}"));
        let to = format!("{backend}:{}", target.display());
        let what = format!("{backend} trial {trial}");
        let (code, err) = copy_within_deadline(from_s, &to, &what);
        if code != Some(0) {
            println!("{what}: {}", err.lines().last().unwrap_or_default());
            full += 1;
            assert_eq!(code, Some(1), "{what}: {err}");
            assert_eq!(
                err.lines().filter(|l| l.starts_with("strata: ")).count(),
                1,
                "{what}: {err}"
            );
            assert!(!err.contains("panicked"), "{what}: {err}");
        }
        let _ = std::fs::remove_dir_all(&target);
        let _ = std::fs::remove_file(&target);
    }
    println!("{backend}: {full} of {TRIALS} trials hit the full disk");
    assert!(full >= 5, "only {full} trials hit the full disk");
}

#[test]
fn copy_into_a_full_disk_returns_in_time_on_a_sled_target() {
    trials("sled");
}

#[test]
fn copy_into_a_full_disk_returns_in_time_on_a_redb_target() {
    trials("redb");
}
