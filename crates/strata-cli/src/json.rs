//! The one emitter of the `--json` documents. Every document the command line prints under
//! `--json` — each command's result and the error document — is written by [`emit`] (or
//! one line, by [`line()`]), which puts the document format first: `{"format": 1, …}`. No
//! document type carries the field itself, so no command can forget or change it.

use serde::Serialize;
use std::io::Write;

/// The format of every `--json` document (the `"format"` field). A consumer checks it
/// before reading anything else; a change that is not backward compatible raises it.
pub const FORMAT: u32 = 1;

/// A document as printed: the format, then the fields of the body.
#[derive(Serialize)]
struct Document<'a, T: ?Sized + Serialize> {
    format: u32,
    #[serde(flatten)]
    body: &'a T,
}

/// `body` (a JSON object: a struct with named fields, or a map) with `"format"` first, on
/// one line (the error document).
pub fn line<T: ?Sized + Serialize>(body: &T) -> String {
    serde_json::to_string(&Document {
        format: FORMAT,
        body,
    })
    .unwrap_or_else(|e| {
        // Only a body that is not an object fails; say so in a document all the same.
        serde_json::json!({"format": FORMAT, "error": {"message": e.to_string()}}).to_string()
    })
}

/// Writes `body` (a JSON object) with `"format"` first, pretty-printed, and a newline.
pub fn emit<W: ?Sized + Write, T: ?Sized + Serialize>(
    out: &mut W,
    body: &T,
) -> std::io::Result<()> {
    serde_json::to_writer_pretty(
        &mut *out,
        &Document {
            format: FORMAT,
            body,
        },
    )?;
    writeln!(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Body {
        db: &'static str,
        ok: bool,
    }

    #[test]
    fn every_document_starts_with_its_format() {
        let mut out = Vec::new();
        emit(&mut out, &Body { db: "x", ok: true }).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("}\n"), "{text}");
        let first = text.lines().nth(1).unwrap().trim();
        assert_eq!(first, "\"format\": 1,");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v, serde_json::json!({"format": 1, "db": "x", "ok": true}));
        let one = line(&serde_json::json!({"error": {"exit_code": 2}}));
        assert_eq!(one, r#"{"format":1,"error":{"exit_code":2}}"#);
    }
}
