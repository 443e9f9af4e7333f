//! `SledDurability::Immediate`: a write that returned survives a SIGKILL of its process
//! right after (a real child process), where sled's own background flush (the default)
//! can lose the writes of the last 500 ms.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use strata_sled::{SledDurability, SledOptions, SledStore};
use strata_store::{Batch, KvRead, KvWrite};

const ROLE_VAR: &str = "STRATA_SLED_DURABILITY_ROLE";
const PATH_VAR: &str = "STRATA_SLED_DURABILITY_PATH";
/// How many returned writes the parent sees before it kills the child.
const SEEN: u32 = 300;

fn key(i: u32) -> Vec<u8> {
    format!("w/{i:08}").into_bytes()
}

/// The child: writes one key per write with immediate durability, printing each
/// returned write's number, until it is killed. Does nothing unless started by
/// [`a_returned_write_survives_a_kill_with_immediate_durability`].
#[test]
#[ignore = "child process role of a_returned_write_survives_a_kill_with_immediate_durability"]
fn durable_writer_child() {
    let Ok(_) = std::env::var(ROLE_VAR) else {
        return;
    };
    let path = std::env::var_os(PATH_VAR).unwrap();
    let store = SledOptions::new()
        .durability(SledDurability::Immediate)
        .open(&path)
        .unwrap();
    for i in 0..1_000_000u32 {
        store
            .apply(Batch::new().set(key(i), vec![(i % 251) as u8; 100]))
            .unwrap();
        println!("wrote {i}");
    }
}

fn kill_after(path: &Path, seen: u32) -> u32 {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "durability::durable_writer_child",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(ROLE_VAR, "writer")
        .env(PATH_VAR, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut last = None;
    for line in BufReader::new(out).lines() {
        if let Some(n) = line.unwrap().strip_prefix("wrote ") {
            let n: u32 = n.parse().unwrap();
            last = Some(n);
            if n + 1 == seen {
                child.kill().unwrap();
                break;
            }
        }
    }
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child ended on its own: {status:?}");
    last.expect("the child reported no write")
}

#[test]
fn a_returned_write_survives_a_kill_with_immediate_durability() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let last = kill_after(&path, SEEN);
    assert_eq!(last + 1, SEEN);
    let store = SledStore::open_existing(&path).unwrap();
    for i in 0..=last {
        assert_eq!(
            store.get(&key(i)).unwrap().as_deref(),
            Some(&vec![(i % 251) as u8; 100][..]),
            "write {i} of {SEEN} returned, then the process was killed: lost"
        );
    }
}

#[test]
fn background_is_the_default_and_immediate_is_an_option() {
    assert_eq!(
        SledOptions::new().durability_mode(),
        SledDurability::Background
    );
    let options = SledOptions::new().durability(SledDurability::Immediate);
    assert_eq!(options.durability_mode(), SledDurability::Immediate);
    // A datastore opened with it writes and reads as any other.
    let dir = tempfile::tempdir().unwrap();
    let store = options.open(dir.path().join("db")).unwrap();
    store
        .apply(Batch::new().set(b"k".to_vec(), b"v".to_vec()))
        .unwrap();
    assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}
