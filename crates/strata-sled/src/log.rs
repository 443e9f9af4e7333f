//! Reading sled 0.34's log `db` without sled: the segment headers, to tell whether a
//! datastore holds more log than sled recovers from it.
//!
//! sled's log is a sequence of segments of `segment_size` bytes (`conf`), each starting
//! with a 20-byte header: CRC-32 (IEEE) of the next 16 bytes XOR `0xFFFF_FFFF` (u32 LE),
//! the segment's base log sequence number (LSN) XOR `0x7FFF_FFFF_FFFF_FFFF` (u64 LE), and
//! the highest stable LSN when it was written (same encoding). A segment's place in the
//! file says nothing about its place in the log: sled reuses freed segments, so the log
//! is ordered by LSN. On open, sled replays the log from its snapshot and stops at the
//! first gap or torn message; it then overwrites every segment beyond that point and
//! writes a snapshot `snap.<recovered LSN, 16 hex digits>`. A `db` cut short (an
//! interrupted copy or restore) loses segments in the middle of the log, so sled recovers
//! only what precedes the first one lost and destroys the rest — segments that are still
//! in the file, with LSNs past the recovered point. [`beyond_recovered`] finds them.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Length of a segment header.
const SEG_HEADER_LEN: usize = 20;
const LSN_MASK: i64 = 0x7FFF_FFFF_FFFF_FFFF;

/// One segment header that passed its checksum: where it is, its base LSN and the
/// highest stable LSN when sled wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    /// Offset in `db`.
    pub(crate) offset: u64,
    /// Its base log sequence number (sled's `Lsn` is an `i64`).
    pub(crate) lsn: i64,
    /// Every log position up to this was completely written when sled wrote the header
    /// (-1: none yet).
    pub(crate) stable: i64,
}

/// CRC-32 (IEEE, reflected, as `crc32fast`) of `bytes`.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// Decodes one segment header: its base LSN and stable LSN when the checksum holds.
fn decode_header(buf: &[u8; SEG_HEADER_LEN]) -> Option<(i64, i64)> {
    let mut word = [0u8; 4];
    word.copy_from_slice(&buf[0..4]);
    let stored = u32::from_le_bytes(word) ^ 0xFFFF_FFFF;
    if crc32(&buf[4..20]) != stored {
        return None;
    }
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&buf[4..12]);
    let lsn = i64::from_le_bytes(lsn) ^ LSN_MASK;
    let mut stable = [0u8; 8];
    stable.copy_from_slice(&buf[12..20]);
    let stable = i64::from_le_bytes(stable) ^ LSN_MASK;
    (lsn != i64::MAX && lsn >= 0).then_some((lsn, stable))
}

/// sled's `segment_size` from the text of `conf` (`segment_size: N` on its first line).
pub(crate) fn segment_size(conf_text: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(conf_text);
    text.lines()
        .find_map(|l| l.strip_prefix("segment_size: "))
        .and_then(|n| n.trim().parse().ok())
        .filter(|&n: &u64| n >= SEG_HEADER_LEN as u64)
}

/// Every segment header of the log at `db` (a file of sled's with segments of
/// `segment_size` bytes) whose checksum holds and whose LSN is aligned to a segment.
pub(crate) fn segments(db: &Path, segment_size: u64) -> std::io::Result<Vec<Segment>> {
    let mut file = fs::File::open(db)?;
    let len = file.metadata()?.len();
    let mut out = Vec::new();
    let mut offset = 0u64;
    while offset + SEG_HEADER_LEN as u64 <= len {
        let mut buf = [0u8; SEG_HEADER_LEN];
        file.seek(SeekFrom::Start(offset))?;
        file.read_exact(&mut buf)?;
        if let Some((lsn, stable)) = decode_header(&buf) {
            if lsn.unsigned_abs().is_multiple_of(segment_size) {
                out.push(Segment {
                    offset,
                    lsn,
                    stable,
                });
            }
        }
        offset += segment_size;
    }
    Ok(out)
}

/// The LSN sled recovered a datastore's log to, as its newest complete snapshot
/// `snap.<LSN hex>` in `dir` names it (`None`: no snapshot).
pub(crate) fn recovered_lsn(dir: &Path) -> std::io::Result<Option<i64>> {
    let mut best = None;
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(hex) = name.strip_prefix("snap.") {
            if let Ok(lsn) = i64::from_str_radix(hex, 16) {
                best = best.max(Some(lsn));
            }
        }
    }
    Ok(best)
}

/// The segments of `before` (the log's headers before sled opened it) written when the
/// log was already completely written past `recovered`, the LSN sled recovered it to:
/// proof that log which was once stable is no longer readable (a crash only tears log
/// that was never stable, so it never leaves such a header).
pub(crate) fn beyond_recovered(before: &[Segment], recovered: i64) -> Vec<Segment> {
    before
        .iter()
        .copied()
        .filter(|s| s.stable > recovered)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn header(lsn: i64, stable: i64) -> [u8; SEG_HEADER_LEN] {
        let mut buf = [0u8; SEG_HEADER_LEN];
        buf[4..12].copy_from_slice(&(lsn ^ LSN_MASK).to_le_bytes());
        buf[12..20].copy_from_slice(&(stable ^ LSN_MASK).to_le_bytes());
        let crc = crc32(&buf[4..20]) ^ 0xFFFF_FFFF;
        buf[0..4].copy_from_slice(&crc.to_le_bytes());
        buf
    }

    #[test]
    fn crc32_is_ieee() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn headers_decode_and_a_flipped_bit_does_not() {
        let h = header(3 * 512, 1024);
        assert_eq!(decode_header(&h), Some((1536, 1024)));
        let mut bad = h;
        bad[7] ^= 1;
        assert_eq!(decode_header(&bad), None);
        assert_eq!(decode_header(&[0u8; SEG_HEADER_LEN]), None);
        // The first segment of a log: nothing stable yet (-1).
        assert_eq!(decode_header(&header(0, -1)), Some((0, -1)));
    }

    #[test]
    fn segments_are_read_at_every_segment_offset() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let mut bytes = vec![0u8; 512 * 3 + 100];
        bytes[0..20].copy_from_slice(&header(1024, 1000));
        bytes[512..532].copy_from_slice(&header(0, 0));
        bytes[1024..1044].copy_from_slice(&header(777, 0)); // not aligned: ignored
        bytes[1536..1556].copy_from_slice(&header(512, 500));
        fs::write(&db, &bytes).unwrap();
        let found = segments(&db, 512).unwrap();
        let seg = |offset, lsn, stable| Segment {
            offset,
            lsn,
            stable,
        };
        assert_eq!(
            found,
            vec![seg(0, 1024, 1000), seg(512, 0, 0), seg(1536, 512, 500)]
        );
        assert_eq!(beyond_recovered(&found, 600), vec![seg(0, 1024, 1000)]);
        assert!(beyond_recovered(&found, 1000).is_empty());
    }

    #[test]
    fn conf_and_snapshot_names() {
        assert_eq!(
            segment_size(
                b"segment_size: 524288\nuse_compression: false\nversion: 0.34\n\x01\x02\x03\x04"
            ),
            Some(524_288)
        );
        assert_eq!(segment_size(b"nothing"), None);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recovered_lsn(dir.path()).unwrap(), None);
        for name in [
            "snap.0000000000000400",
            "snap.0000000000000900.generating",
            "snap.00000000000001FF",
            "db",
        ] {
            fs::write(dir.path().join(name), b"x").unwrap();
        }
        assert_eq!(recovered_lsn(dir.path()).unwrap(), Some(0x400));
    }
}
