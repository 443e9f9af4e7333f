//! Checks made before a path is handed to sled, which never refuses anything: it creates
//! `conf`/`db` in any directory, overwrites a `db` that is not a sled log, follows
//! symlinks, and "recovers" a truncated log by cutting it down to what it can read.
//!
//! * **Signature**: an existing `conf` must be sled's configuration text
//!   (`segment_size: …` / `use_compression: …` / `version: …` plus a 4-byte checksum) and
//!   both `conf` and `db` must be regular files, not symlinks, with `db` present when
//!   `conf` is (and the other way round). Anything else is [`StoreError::Damaged`] and is
//!   never opened, so nothing is overwritten.
//! * **Seal**: a clean close writes `strata.seal` (the length of `db` after the final
//!   flush); the next open refuses a `db` shorter than that (a truncated copy or restore)
//!   instead of letting sled cut it down to nothing, then removes the seal (a crash while
//!   open leaves no seal, so a later open does not compare against a stale length). So a
//!   truncation after a crash and before the next clean close is not caught here; the seal
//!   is deliberately not refreshed while open, because sled's crash recovery may cut the
//!   log below a length recorded while open (docs/format.md, "sled length seal").
//! * **Leftover snapshot**: `snap.*.generating` is a snapshot sled was writing when it
//!   stopped (disk full, a kill during an open); sled would read it as the newest snapshot
//!   and fail with "Read corrupted data" forever. sled renames a snapshot only once it is
//!   complete and removes the older ones only after that, so a `.generating` file is never
//!   the last good snapshot: it is removed (under the datastore's lock; on a read-only
//!   open, from the private copy only), as sled's next snapshot would.
//! * **Writable**: sled writes on every open; on read-only media or without write
//!   permission it is refused in one line, before sled can fail half-way.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;
use strata_store::{Result, StoreError};

/// The seal file written on a clean close.
pub(crate) const SEAL: &str = "strata.seal";

const SEAL_HEADER: &str = "strata sled seal v1";

/// What [`inspect`] found at a datastore path.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nothing there, or a directory with neither `conf` nor `db`: sled may create one.
    Nothing,
    /// A sled datastore directory that passed every check.
    Sled,
}

fn damaged(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn io(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::CannotOpen {
        path: path.to_path_buf(),
        reason: format!("{e}; check the path and its permissions"),
    }
}

/// True when `dir` looks like a sled datastore: a `conf` regular file holding sled's
/// configuration text and a `db` regular file (neither a symlink). Reads only `conf`.
pub fn is_sled_dir(dir: &Path) -> bool {
    matches!(inspect(dir), Ok(Found::Sled))
}

/// True when `dir` holds a `conf` regular file that is not sled's configuration text (a
/// directory of another program, not a sled datastore). Reads only `conf`.
pub fn has_foreign_conf(dir: &Path) -> bool {
    let conf = dir.join("conf");
    let regular = fs::symlink_metadata(&conf).is_ok_and(|m| m.is_file());
    let mut text = Vec::new();
    regular
        && fs::File::open(&conf)
            .and_then(|f| f.take(4096).read_to_end(&mut text))
            .is_ok()
        && !is_sled_conf(&text)
}

/// Checks the signature at `dir` without writing anything.
pub(crate) fn inspect(dir: &Path) -> Result<Found> {
    let meta = match fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Nothing),
        Err(e) => return Err(io(dir, e)),
        Ok(m) => m,
    };
    if !meta.is_dir() {
        return Err(damaged(
            dir,
            "it is a file, not a sled datastore directory (sled would write its files beside it)",
        ));
    }
    let conf = dir.join("conf");
    let db = dir.join("db");
    let conf_meta = fs::symlink_metadata(&conf).ok();
    let db_meta = fs::symlink_metadata(&db).ok();
    match (&conf_meta, &db_meta) {
        (None, None) => return Ok(Found::Nothing),
        (Some(_), None) => {
            return Err(damaged(
                &db,
                "the datastore has a `conf` but no `db` log (was it copied only in part?)",
            ))
        }
        (None, Some(_)) => {
            return Err(damaged(
                &conf,
                "there is a `db` file but no sled `conf` beside it, so it is not a sled datastore (or its `conf` was lost); it was left untouched",
            ))
        }
        (Some(_), Some(_)) => {}
    }
    for (file, m) in [(&conf, &conf_meta), (&db, &db_meta)] {
        if let Some(m) = m {
            if m.file_type().is_symlink() {
                return Err(damaged(
                    file,
                    "it is a symlink; sled would write through it into whatever it points at, so it is refused (use the path of the real directory)",
                ));
            }
            if !m.is_file() {
                return Err(damaged(file, "it is not a regular file"));
            }
        }
    }
    let mut text = Vec::new();
    fs::File::open(&conf)
        .and_then(|f| f.take(4096).read_to_end(&mut text))
        .map_err(|e| io(&conf, e))?;
    if !is_sled_conf(&text) {
        return Err(damaged(
            &conf,
            "it is not a sled configuration file, so this is not a sled datastore; it was left untouched",
        ));
    }
    Ok(Found::Sled)
}

/// sled 0.34's `conf`: three `key: value` lines then a 4-byte checksum.
fn is_sled_conf(bytes: &[u8]) -> bool {
    if bytes.len() <= 4 {
        return false;
    }
    let Ok(text) = std::str::from_utf8(&bytes[..bytes.len() - 4]) else {
        return false;
    };
    let mut keys = text
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(k, _)| k));
    keys.next() == Some("segment_size")
        && keys.next() == Some("use_compression")
        && keys.next() == Some("version")
}

/// True when `dir` holds a seal (a clean close by strata since the last open).
pub(crate) fn has_seal(dir: &Path) -> bool {
    read_seal(dir).is_some()
}

/// What a clean close recorded in the seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seal {
    /// The length of `db` after the final flush.
    pub(crate) db_len: u64,
    /// The smallest and largest key then (`Some(None)`: the datastore was empty; `None`:
    /// a seal written before the bounds were recorded, nothing to compare).
    pub(crate) bounds: Option<Option<(Vec<u8>, Vec<u8>)>>,
    /// The newest complete snapshot `snap.<LSN>` at the close (`Some(None)`: none yet;
    /// `None`: a seal written before snapshots were recorded, nothing to compare).
    pub(crate) snapshot: Option<Option<i64>>,
    /// True when strata wrote nothing between the open before and this close (`None`:
    /// not recorded).
    pub(crate) idle: Option<bool>,
    /// The seal file's text, to put back when the open fails (see [`restore_seal`]).
    text: String,
}

/// The seal of `dir`, when a clean close recorded one and it still describes the
/// datastore: a seal is stale once another program opened the datastore with sled after
/// the close (strata removes its seal whenever it opens a datastore, and every sled open
/// that finds more log than its newest snapshot writes a newer `snap.<LSN>`). Numax, or
/// any program linking sled, keeps writing a store strata closed; its writes are
/// legitimate, so a stale seal is not compared (the datastore is checked as any unsealed
/// one is).
fn read_seal(dir: &Path) -> Option<Seal> {
    let seal = parse_seal(dir)?;
    if let Some(then) = seal.snapshot {
        let now = crate::log::recovered_lsn(dir).ok().flatten();
        if now > then {
            tracing::debug!(dir = %dir.display(), ?then, ?now, "the seal is stale: another program opened the datastore with sled after strata's last clean close");
            return None;
        }
    }
    Some(seal)
}

/// The seal file of `dir` as written, stale or not.
fn parse_seal(dir: &Path) -> Option<Seal> {
    let text = fs::read_to_string(dir.join(SEAL)).ok()?;
    let mut lines = text.lines();
    if lines.next() != Some(SEAL_HEADER) {
        return None;
    }
    let db_len = lines
        .next()?
        .strip_prefix("db_len: ")
        .and_then(|n| n.trim().parse().ok())?;
    let bounds = match lines.next() {
        Some("keys: none") => Some(None),
        Some(line) => line.strip_prefix("keys: ").and_then(|range| {
            let (first, last) = range.split_once(' ')?;
            Some(Some((
                hex::decode(first.trim()).ok()?,
                hex::decode(last.trim()).ok()?,
            )))
        }),
        None => None,
    };
    let snapshot = match lines.next() {
        Some("snap: none") => Some(None),
        Some(line) => line
            .strip_prefix("snap: ")
            .and_then(|hex| i64::from_str_radix(hex.trim(), 16).ok())
            .map(Some),
        None => None,
    };
    let idle = match lines.next() {
        Some("writes: none") => Some(true),
        Some("writes: some") => Some(false),
        _ => None,
    };
    Some(Seal {
        db_len,
        bounds,
        snapshot,
        idle,
        text,
    })
}

/// The seal's text: `db`'s length `db_len`, the key `bounds`, the newest snapshot and
/// whether strata wrote since its open (`idle`: it did not).
fn seal_text(
    db_len: u64,
    bounds: Option<(&[u8], &[u8])>,
    snapshot: Option<i64>,
    idle: bool,
) -> String {
    let keys = match bounds {
        Some((first, last)) => format!("keys: {} {}", hex::encode(first), hex::encode(last)),
        None => "keys: none".to_string(),
    };
    let snap = match snapshot {
        Some(lsn) => format!("snap: {lsn:016X}"),
        None => "snap: none".to_string(),
    };
    let writes = if idle { "none" } else { "some" };
    format!("{SEAL_HEADER}\ndb_len: {db_len}\n{keys}\n{snap}\nwrites: {writes}\n")
}

/// Records `db`'s current length and the datastore's smallest and largest key (`bounds`)
/// in the seal, with the newest snapshot and whether strata wrote nothing since it opened
/// the datastore (`idle`), which tell a later open whether another program opened it in
/// between (called after the final flush of a clean close). Failures are logged: the seal
/// only adds a check.
pub(crate) fn write_seal(dir: &Path, bounds: Option<(&[u8], &[u8])>, idle: bool) {
    let result = fs::metadata(dir.join("db")).and_then(|m| {
        let snapshot = crate::log::recovered_lsn(dir)?;
        put_seal(dir, &seal_text(m.len(), bounds, snapshot, idle))
    });
    if let Err(e) = result {
        tracing::warn!(dir = %dir.display(), error = %e, "could not write the sled seal");
    }
}

fn put_seal(dir: &Path, text: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!("{SEAL}.tmp"));
    fs::write(&tmp, text)?;
    fs::rename(&tmp, dir.join(SEAL))
}

/// Puts a consumed seal back after an open that failed, so that every later open makes
/// the same checks against the last clean close (a damaged log stays reported as damaged
/// instead of opening, the second time, as whatever sled cut it down to).
///
/// The failed open was strata's own: a snapshot sled wrote during it (of the log it cut
/// down) is recorded in the restored seal, so that it does not make the seal look stale.
pub(crate) fn restore_seal(dir: &Path, seal: &Seal) {
    let text = match (seal.snapshot, crate::log::recovered_lsn(dir), &seal.bounds) {
        (Some(then), Ok(now), Some(bounds)) if now > then => {
            let bounds = bounds.as_ref().map(|(f, l)| (f.as_slice(), l.as_slice()));
            seal_text(seal.db_len, bounds, now, seal.idle.unwrap_or(false))
        }
        _ => seal.text.clone(),
    };
    if let Err(e) = put_seal(dir, &text) {
        tracing::warn!(dir = %dir.display(), error = %e, "could not restore the sled seal");
    }
}

/// After sled opened a datastore: the keys it recovered must span what they spanned at
/// the last clean close. sled treats a damaged log entry as the torn end of the log and
/// recovers what precedes it, so a log overwritten in place opens with records missing —
/// often none at all. [`StoreError::Damaged`] when the bounds differ.
///
/// Unless the log grew after the close: when strata wrote nothing in the session it
/// closed, a snapshot sled has just written past the one of the close proves log appended
/// after it — another program opened the datastore with sled (without writing a newer
/// snapshot: it found no log past it) and wrote. (When strata did write, another
/// program's open wrote a newer snapshot, and [`read_seal`] found the seal stale.)
pub(crate) fn check_recovered(dir: &Path, seal: &Seal, now: Option<(&[u8], &[u8])>) -> Result<()> {
    let Some(then) = &seal.bounds else {
        return Ok(());
    };
    if let (Some(true), Some(closed)) = (seal.idle, seal.snapshot) {
        let recovered = crate::log::recovered_lsn(dir).ok().flatten();
        if recovered > closed {
            tracing::debug!(dir = %dir.display(), ?closed, ?recovered, "the log grew after strata's last clean close (another program wrote it): the seal's keys are not compared");
            return Ok(());
        }
    }
    let then = then.as_ref().map(|(f, l)| (f.as_slice(), l.as_slice()));
    if then == now {
        return Ok(());
    }
    let span = |b: Option<(&[u8], &[u8])>| match b {
        Some((f, l)) => format!(
            "keys `{}` to `{}`",
            strata_store::escape_key(f),
            strata_store::escape_key(l)
        ),
        None => "no records".to_string(),
    };
    Err(damaged(
        &dir.join("db"),
        format!(
            "the sled log held {} at the last clean close, but sled recovered {} from it: the log was overwritten or corrupted in place, and sled, which cannot open a log without writing to it, kept only what it could read",
            span(then),
            span(now)
        ),
    ))
}

/// The checks of an existing datastore before sled opens it (see the module doc). Holds
/// the `db` lock while it removes an empty snapshot leftover. Writes nothing else.
pub(crate) fn prepare_existing(dir: &Path, lock_wait: Duration) -> Result<Option<Seal>> {
    let db = dir.join("db");
    // sled writes on every open: refuse media it cannot write, before it fails half-way.
    let file = match fs::OpenOptions::new().read(true).write(true).open(&db) {
        Ok(f) => f,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            return Err(StoreError::CannotOpen {
                path: dir.to_path_buf(),
                reason: format!("sled cannot open a datastore without write access, even to read it ({e}); copy the directory to writable storage, or convert it with `strata copy` from a writable copy"),
            });
        }
        Err(e) => return Err(io(&db, e)),
    };
    lock(&file, dir, lock_wait)?;
    let len = file.metadata().map_err(|e| io(&db, e))?.len();
    let seal = read_seal(dir);
    if let Some(sealed) = seal.as_ref().map(|s| s.db_len) {
        if len < sealed {
            return Err(damaged(
                &db,
                format!("the sled log is {len} bytes but was {sealed} bytes when the datastore was last closed: it was truncated (an interrupted copy or restore?)"),
            ));
        }
    }
    // sled writes a snapshot to `snap.<lsn>.generating`, syncs it and renames it; only
    // then does it remove the older snapshots. So a `.generating` file is never the last
    // good snapshot (the previous one is still there, or the log is replayed from its
    // start), and sled itself removes it after its next snapshot — but it reads it first,
    // as the newest, and fails. It is removed here, as sled would.
    for leftover in generating_snapshots(dir)? {
        let size = fs::metadata(&leftover).map(|m| m.len()).unwrap_or(0);
        tracing::warn!(file = %leftover.display(), size, "removing a sled snapshot left unfinished by an interrupted open (never the last good snapshot)");
        fs::remove_file(&leftover).map_err(|e| io(&leftover, e))?;
    }
    // The seal is consumed: a crash from here on must not be compared with it later.
    match fs::remove_file(dir.join(SEAL)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&dir.join(SEAL), e)),
    }
    drop(file); // releases the lock; sled takes it again.
    Ok(seal)
}

/// Takes the lock sled takes on the datastore's `db` (`file`, open for reading or
/// writing), retrying for up to `lock_wait`: another process using the datastore is not
/// disturbed ([`StoreError::InUse`] naming `dir` when it keeps it). Released when `file`
/// is closed.
pub(crate) fn lock(file: &fs::File, dir: &Path, lock_wait: Duration) -> Result<()> {
    let mut slept = Duration::ZERO;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) if slept < lock_wait => {
                let step = Duration::from_millis(10).min(lock_wait - slept);
                std::thread::sleep(step);
                slept += step;
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(StoreError::InUse {
                    path: dir.to_path_buf(),
                })
            }
            Err(fs::TryLockError::Error(e)) => return Err(io(&dir.join("db"), e)),
        }
    }
}

fn generating_snapshots(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = fs::read_dir(dir).map_err(|e| io(dir, e))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io(dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn conf_signature() {
        assert!(is_sled_conf(
            b"segment_size: 524288\nuse_compression: false\nversion: 0.34\n\x01\x02\x03\x04"
        ));
        assert!(!is_sled_conf(b"segment_size: 524288\n"));
        assert!(!is_sled_conf(b"SQLite format 3\0............"));
        assert!(!is_sled_conf(b""));
    }

    #[test]
    fn seal_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_seal(dir.path()), None);
        fs::write(dir.path().join("db"), vec![0u8; 1234]).unwrap();
        write_seal(dir.path(), Some((b"a\x00", b"zz")), false);
        let seal = read_seal(dir.path()).unwrap();
        assert_eq!(seal.db_len, 1234);
        assert_eq!(seal.bounds, Some(Some((b"a\x00".to_vec(), b"zz".to_vec()))));
        write_seal(dir.path(), None, false);
        assert_eq!(read_seal(dir.path()).unwrap().bounds, Some(None));
        // A seal of an earlier build (length only) has no bounds to compare.
        fs::write(dir.path().join(SEAL), format!("{SEAL_HEADER}\ndb_len: 7\n")).unwrap();
        let old = read_seal(dir.path()).unwrap();
        assert_eq!((old.db_len, old.bounds.clone()), (7, None));
        assert!(check_recovered(dir.path(), &old, None).is_ok());
    }

    #[test]
    fn a_seal_is_stale_once_another_sled_open_wrote_a_newer_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("db"), vec![0u8; 10]).unwrap();
        fs::write(dir.path().join("snap.0000000000000100"), b"x").unwrap();
        write_seal(dir.path(), Some((b"a", b"m")), false);
        let seal = read_seal(dir.path()).unwrap();
        assert_eq!((seal.snapshot, seal.idle), (Some(Some(0x100)), Some(false)));
        // sled's own leftover of an unfinished snapshot is not a newer snapshot.
        fs::write(dir.path().join("snap.0000000000000200.generating"), b"x").unwrap();
        assert!(read_seal(dir.path()).is_some());
        // Another program's sled open found log past the snapshot and wrote a newer one.
        fs::write(dir.path().join("snap.0000000000000200"), b"x").unwrap();
        assert_eq!(read_seal(dir.path()), None);
        assert!(parse_seal(dir.path()).is_some());
        // A seal of an earlier build (no snapshot recorded) is never stale.
        fs::write(
            dir.path().join(SEAL),
            format!("{SEAL_HEADER}\ndb_len: 7\nkeys: none\n"),
        )
        .unwrap();
        let old = read_seal(dir.path()).unwrap();
        assert_eq!((old.snapshot, old.idle), (None, None));
    }

    #[test]
    fn after_an_idle_session_log_past_the_sealed_snapshot_is_another_writers() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("db"), vec![0u8; 10]).unwrap();
        fs::write(dir.path().join("snap.0000000000000100"), b"x").unwrap();
        write_seal(dir.path(), Some((b"a", b"m")), true);
        let seal = read_seal(dir.path()).unwrap();
        let other = Some((&b"a"[..], &b"z"[..]));
        // No log past the close: the keys must match.
        assert!(check_recovered(dir.path(), &seal, other).is_err());
        // sled recovered log past the close: another program wrote after it.
        fs::write(dir.path().join("snap.0000000000000180"), b"x").unwrap();
        assert!(check_recovered(dir.path(), &seal, other).is_ok());
        // A session that wrote: log past its first snapshot is its own, keys compared.
        write_seal(dir.path(), Some((b"a", b"m")), false);
        let busy = parse_seal(dir.path()).unwrap();
        fs::write(dir.path().join("snap.0000000000000200"), b"x").unwrap();
        assert!(check_recovered(dir.path(), &busy, other).is_err());
    }

    #[test]
    fn recovered_bounds_must_match_the_seal() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("db"), vec![0u8; 10]).unwrap();
        write_seal(dir.path(), Some((b"a", b"m")), false);
        let seal = read_seal(dir.path()).unwrap();
        assert!(check_recovered(dir.path(), &seal, Some((b"a", b"m"))).is_ok());
        for now in [
            None,
            Some((&b"a"[..], &b"k"[..])),
            Some((&b"b"[..], &b"m"[..])),
        ] {
            match check_recovered(dir.path(), &seal, now) {
                Err(StoreError::Damaged { reason, .. }) => {
                    assert!(
                        reason.contains("overwritten or corrupted in place"),
                        "{reason}"
                    );
                }
                other => panic!("expected Damaged for {now:?}, got {other:?}"),
            }
        }
        // Restoring a consumed seal puts back exactly what was there.
        fs::remove_file(dir.path().join(SEAL)).unwrap();
        restore_seal(dir.path(), &seal);
        assert_eq!(read_seal(dir.path()), Some(seal));
    }
}
