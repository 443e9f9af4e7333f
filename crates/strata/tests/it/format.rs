//! Frozen format-1 fixtures: one stored value of every record kind the engine writes,
//! plus a corrupt copy of each (`tests/fixtures/format1/`, hex text, one value per file).
//!
//! Each fixture must decode to the value built here AND the current encoder must produce
//! exactly its bytes: a format change fails this test until it ships a new format
//! version, a new fixture directory and the docs (see docs/format.md, "Format version
//! history"). Each corrupt copy must be refused by its decoder with an error.
//!
//! The files were written once by running this test with `STRATA_BLESS_FIXTURES=1`
//! (which writes only missing files; it never overwrites a frozen one).

use serde_json::json;
use std::path::PathBuf;
use strata::layout;
use strata::layout::envelope::{self, Envelope};
use strata::layout::header::SchemaHeader;
use strata::migrate::MigrationCheckpoint;
use strata::ops::cutover::CutoverCheckpoint;
use strata::ops::sweep::{SweepCounters, SweepMarker};
use strata::pass::CheckpointCodec;
use strata::policy::{Baseline, ClientRecord, FenceDoc, FenceState, PendingCutover};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format1")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The frozen bytes of `name` (blessing writes `current` when the file is missing).
fn frozen(name: &str, current: &[u8]) -> Vec<u8> {
    let path = dir().join(format!("{name}.hex"));
    if !path.exists() && std::env::var_os("STRATA_BLESS_FIXTURES").is_some() {
        std::fs::write(&path, format!("{}\n", hex(current))).unwrap();
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {} missing: {e}", path.display()));
    unhex(&text)
}

/// Checks one record kind: the fixture equals today's encoding of `value`, decodes back
/// to it, and the corrupt copy is refused.
fn check<T: PartialEq + std::fmt::Debug, E: std::fmt::Display>(
    kind: &str,
    value: &T,
    encode: impl Fn(&T) -> Vec<u8>,
    decode: impl Fn(&[u8]) -> Result<T, E>,
    corrupt: &[u8],
) {
    let bytes = frozen(kind, &encode(value));
    assert_eq!(
        hex(&encode(value)),
        hex(&bytes),
        "{kind}: the encoder no longer writes format 1"
    );
    match decode(&bytes) {
        Ok(v) => assert_eq!(&v, value, "{kind}: decoded value differs"),
        Err(e) => panic!("{kind}: frozen fixture does not decode: {e}"),
    }
    let bad = frozen(&format!("{kind}.corrupt"), corrupt);
    if let Ok(v) = decode(&bad) {
        panic!("{kind}: corrupt fixture decoded as {v:?}");
    }
}

#[test]
fn every_record_kind_reads_its_frozen_format_1_fixture() {
    check(
        "schema_header",
        &SchemaHeader::new(1, 1024),
        |h| h.encode().to_vec(),
        SchemaHeader::decode,
        b"NXDX\x00\x01\x04\x00",
    );
    check(
        "migration_checkpoint",
        &MigrationCheckpoint {
            table_id: 14,
            from: 0,
            to: 1,
            cursor: b"__nx/t/a".to_vec(),
        },
        MigrationCheckpoint::encode,
        MigrationCheckpoint::decode,
        b"NXMG\x00\x01\x00\x0e\x00\x00\x00\x01\x00\x00\x00\x09__nx/t/a",
    );
    check(
        "catalog_record",
        &1024u16,
        |id| layout::catalog::encode_catalog_record(*id).to_vec(),
        |b| layout::catalog::decode_catalog_record("accounts", b),
        b"\x04",
    );
    check(
        "catalog_seq",
        &1025u16,
        |id| id.to_be_bytes().to_vec(),
        layout::catalog::decode_seq,
        b"\x04\x01\x00",
    );
    check(
        "document_envelope",
        &(
            Envelope::new(2, 7),
            br#"{"id":"a1","balance_cents":500}"#.to_vec(),
        ),
        |(env, json)| envelope::encode(*env, json),
        |b| envelope::decode(b).map(|(env, json)| (env, json.to_vec())),
        b"\x00\x00",
    );
    check(
        "retired_record",
        &3i32,
        |below| strata::layout::retired::encode(*below).to_vec(),
        |b| strata::layout::retired::decode("accounts", b),
        b"NXRV\x02\x00\x00\x00\x03",
    );
    check(
        "sweep_marker",
        &SweepMarker {
            format: 1,
            completed: 2,
            in_progress: Some(3),
            runner: Some("runner-1".into()),
            lease_expires_ms: 1_700_000_060_000,
            cursor_hex: Some(hex(b"__nx/doc/acc/r00009")),
            counters: SweepCounters {
                scanned: 10,
                rewritten: 8,
                conflicted: 1,
                skipped_ahead: 1,
                failed: 0,
            },
            token: None,
        },
        SweepMarker::encode,
        |b| SweepMarker::decode("acc", b),
        br#"{"format":1,"completed":"two"}"#,
    );
    check(
        "fence",
        &FenceDoc {
            coordinator: Some("00000000000000ff".into()),
            generation: 3,
            lease_until_ms: 1_700_000_030_000,
            pending: vec![PendingCutover {
                collection: "invoices".into(),
                target_hash: "ab12".into(),
            }],
            state: FenceState::Migrating,
            ..FenceDoc::default()
        },
        FenceDoc::encode,
        FenceDoc::decode,
        br#"{"coordinator":null,"format":2,"generation":0,"lease_until_ms":0,"pending":[],"state":"normal"}"#,
    );
    check(
        "client",
        &ClientRecord {
            acked_generation: Some(4),
            client: "00000000000000ff".into(),
            format: 1,
            heartbeat_ms: 1_700_000_002_000,
            opened_generation: 3,
            pid: 4242,
            started_ms: 1_700_000_000_000,
        },
        ClientRecord::encode,
        |b| ClientRecord::decode(b"__nx/clients/00000000000000ff", b),
        br#"{"client":"00000000000000ff","format":1}"#,
    );
    let schema = json!({
        "type": "object",
        "properties": {"id": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["id", "amount"]
    });
    check(
        "jsonschema_baseline",
        &Baseline::new(&schema, Some(2)),
        Baseline::encode,
        |b| Baseline::decode("invoices", b),
        br#"{"format":1,"hash":"00","payload_version":2,"schema":{"type":"object"}}"#,
    );
    let codec = CutoverCheckpoint::new("invoices", "ab12");
    check(
        "cutover_checkpoint",
        &(false, b"__nx/doc/invoices/i007".to_vec()),
        |(done, cursor)| {
            assert!(!done);
            codec.encode(cursor)
        },
        |b| codec.parse(b),
        b"NXCU\x01\x07\x04ab12",
    );
}
