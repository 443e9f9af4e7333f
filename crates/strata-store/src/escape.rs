//! Printable rendering of binary keys for error messages and logs.

use std::fmt::Write;

/// Renders a key for humans: printable ASCII as is, everything else as `\xNN`.
///
/// ```
/// assert_eq!(strata_store::escape_key(b"__nx/a\x00\xff"), "__nx/a\\x00\\xff");
/// ```
pub fn escape_key(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(b as char);
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}
