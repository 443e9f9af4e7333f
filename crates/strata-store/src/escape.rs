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

/// The most characters of a key or user-supplied value a message shows; a longer one is
/// shortened to its start and its length.
pub const SHOWN_MAX: usize = 96;

/// A key as a message shows it: [`escape_key`] of its first bytes, and when it is longer
/// than [`SHOWN_MAX`] bytes, `…` and its length (a 5 MB key is not 5 MB of stderr).
///
/// ```
/// assert_eq!(strata_store::shown_key(b"t/a\n"), "t/a\\x0a");
/// let long = vec![b'k'; 5000];
/// assert!(strata_store::shown_key(&long).ends_with("… (5000 bytes)"));
/// ```
pub fn shown_key(key: &[u8]) -> String {
    if key.len() <= SHOWN_MAX {
        return escape_key(key);
    }
    format!("{}… ({} bytes)", escape_key(&key[..SHOWN_MAX]), key.len())
}

/// User-supplied text (a path, a label, a collection name, a connection string) as a
/// message echoes it: control characters (newlines, escape sequences, …) and the
/// backslash as escapes (`\n`, `\x1b`, `\u{202e}`, `\\`), so it can neither forge a line
/// nor drive the terminal, and when longer than [`SHOWN_MAX`] characters its start, `…`
/// and its length in bytes.
///
/// ```
/// assert_eq!(strata_store::shown_text("a\nstrata: b\x1b[31m"), "a\\nstrata: b\\x1b[31m");
/// assert!(strata_store::shown_text(&"x".repeat(500)).ends_with("… (500 bytes)"));
/// ```
pub fn shown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(SHOWN_MAX * 4));
    for (n, c) in text.chars().enumerate() {
        if n == SHOWN_MAX {
            let _ = write!(out, "… ({} bytes)", text.len());
            return out;
        }
        push_escaped_char(&mut out, c);
    }
    out
}

/// Escapes every control character of a whole message (it stays one line and cannot
/// drive the terminal); everything else, including long text, as it is.
pub fn one_line(message: &str) -> String {
    if !message.chars().any(needs_escape) {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len() + 8);
    for c in message.chars() {
        if needs_escape(c) {
            push_escaped_char(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Control characters and the invisible ones that reorder or hide text.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

fn push_escaped_char(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\\' => out.push_str("\\\\"),
        c if (c as u32) < 0x80 && needs_escape(c) => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if needs_escape(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// Lowercase hex of `bytes` (cursors and prefixes kept in JSON records).
///
/// ```
/// assert_eq!(strata_store::to_hex(b"\x00\xffa"), "00ff61");
/// ```
pub fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The bytes of a hex string ([`to_hex`]'s inverse; either case), `None` when it is not
/// hex.
///
/// ```
/// assert_eq!(strata_store::from_hex("00FF61"), Some(b"\x00\xffa".to_vec()));
/// assert_eq!(strata_store::from_hex("abc"), None);
/// ```
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}
