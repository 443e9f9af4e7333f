//! Structured fuzzing of every on-disk decoder, on stable Rust with proptest.
//!
//! Each decoder gets random bytes and mutated valid records (bit flips, truncation,
//! insertion, deletion, splices). The properties: no panic, a typed error whose message
//! renders, and bounded time per call. Valid records must decode and round-trip, so the
//! generators themselves are checked.
//!
//! Case counts are small by default so `cargo test` stays quick; set
//! `STRATA_FUZZ_CASES=100000` for a long run. Inputs that once broke a decoder live in
//! `tests/fuzz/corpus.txt` (`<decoder> <hex>` per line) and are replayed on every run.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{json, Value};
use strata::layout;
use strata::layout::envelope::{self, Envelope};
use strata::layout::header::SchemaHeader;
use strata::migrate::MigrationCheckpoint;
use strata::numax::{decode as numax_decode, wire};
use strata::ops::sweep::SweepMarker;
use strata::policy::{client_key, Baseline, ClientRecord, FenceDoc, FenceState, PendingCutover};

/// Default proptest cases per property; `STRATA_FUZZ_CASES` overrides.
const DEFAULT_CASES: u32 = 128;

/// One decoder call may take at most this long (generous: CI machines are shared).
const MAX_CALL: Duration = Duration::from_secs(2);

fn config() -> ProptestConfig {
    let cases = std::env::var("STRATA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Every decoder by name: `Ok(())` when the bytes decode, the error message otherwise.
type DecodeFn = fn(&[u8]) -> Result<(), String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    let msg = e.to_string();
    assert!(!msg.is_empty(), "an error with an empty message");
    msg
}

const DECODERS: &[(&str, DecodeFn)] = &[
    ("header", |b| SchemaHeader::decode(b).map(drop).map_err(err)),
    ("checkpoint", |b| {
        MigrationCheckpoint::decode(b).map(drop).map_err(err)
    }),
    ("envelope", |b| envelope::decode(b).map(drop).map_err(err)),
    ("document", |b| {
        layout::catalog::table_def("c", 1024)
            .decode(&layout::keys::doc_key("c", "a"), b)
            .map_err(err)
    }),
    ("marker", |b| {
        SweepMarker::decode("c", b).map(drop).map_err(err)
    }),
    ("fence", |b| FenceDoc::decode(b).map(drop).map_err(err)),
    ("client", |b| {
        ClientRecord::decode(&client_key("00112233aabbccdd"), b)
            .map(drop)
            .map_err(err)
    }),
    ("catalog", |b| {
        layout::catalog::decode_catalog_record("c", b)
            .map(drop)
            .map_err(err)
    }),
    ("catalog-seq", |b| {
        layout::catalog::decode_seq(b).map(drop).map_err(err)
    }),
    ("baseline", |b| {
        Baseline::decode("c", b).map(drop).map_err(err)
    }),
    ("op", |b| wire::decode_op(b).map(drop).map_err(err)),
    ("op-log", |b| wire::decode_op_log(b).map(drop).map_err(err)),
    ("op-log-record", |b| {
        wire::decode_op_log_record("00000000000000000001", b)
            .map(drop)
            .map_err(err)
    }),
    ("rga-state", |b| {
        wire::decode_rga_state(b).map(drop).map_err(err)
    }),
    ("numax", |b| {
        // Every Numax table (CRDT states, materialized values, seen-ops, op-log).
        let mut outcome = Ok(());
        for id in 1..=15u16 {
            if let Err(e) = numax_decode::decode_record(id, b"k", b) {
                outcome = Err(err(e));
            }
        }
        outcome
    }),
];

fn decoder(name: &str) -> DecodeFn {
    DECODERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap_or_else(|| panic!("no decoder `{name}`"))
}

/// Runs one decoder with the time bound; a panic fails the property by itself.
fn run(name: &str, bytes: &[u8]) -> Result<(), String> {
    let start = Instant::now();
    let out = decoder(name)(bytes);
    let took = start.elapsed();
    assert!(
        took < MAX_CALL,
        "decoder `{name}` took {took:?} on {} bytes",
        bytes.len()
    );
    out
}

// ---------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------

fn small_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z0-9 ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn valid_op() -> impl Strategy<Value = wire::Op> {
    ("[a-z0-9]{1,8}", "[a-z]{1,6}", "[a-z]{1,6}", any::<u64>()).prop_map(
        |(id, origin, key, increment)| {
            wire::Op::new(
                id,
                origin,
                wire::OpKind::GCounterIncrement { key, increment },
            )
        },
    )
}

/// `(decoder name, valid record bytes)`.
fn valid_record() -> impl Strategy<Value = (&'static str, Vec<u8>)> {
    prop_oneof![
        (any::<u16>(), any::<u16>())
            .prop_map(|(v, id)| ("header", SchemaHeader::new(v, id).encode().to_vec())),
        (
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
            prop::collection::vec(any::<u8>(), 0..24)
        )
            .prop_map(|(table_id, from, to, cursor)| (
                "checkpoint",
                MigrationCheckpoint {
                    table_id,
                    from,
                    to,
                    cursor
                }
                .encode()
            )),
        (1..i32::MAX, any::<u64>(), small_json()).prop_map(|(pv, lv, doc)| {
            let doc = json!({ "doc": doc });
            (
                "document",
                envelope::encode(Envelope::new(pv, lv), &serde_json::to_vec(&doc).unwrap()),
            )
        }),
        (0..100i32, any::<u64>(), prop::option::of("[0-9a-f]{0,16}")).prop_map(
            |(completed, lease, cursor)| {
                let m = SweepMarker {
                    format: 1,
                    completed,
                    in_progress: Some(completed + 1),
                    runner: Some("r".into()),
                    lease_expires_ms: lease,
                    cursor_hex: cursor.filter(|c| c.len() % 2 == 0),
                    ..SweepMarker::default()
                };
                ("marker", m.encode())
            }
        ),
        (any::<u64>(), any::<u64>(), "[a-z]{1,8}").prop_map(|(generation, lease, c)| {
            let f = FenceDoc {
                coordinator: Some("00112233aabbccdd".into()),
                generation,
                lease_until_ms: lease,
                pending: vec![PendingCutover {
                    collection: c,
                    target_hash: "ab".repeat(32),
                }],
                state: FenceState::Draining,
                ..FenceDoc::default()
            };
            ("fence", f.encode())
        }),
        (any::<u64>(), any::<u32>(), prop::option::of(any::<u64>())).prop_map(
            |(ms, pid, acked)| {
                let r = ClientRecord {
                    acked_generation: acked,
                    client: "00112233aabbccdd".into(),
                    format: strata::policy::CLIENT_FORMAT,
                    heartbeat_ms: ms,
                    opened_generation: 0,
                    pid,
                    started_ms: ms / 2,
                };
                ("client", r.encode())
            }
        ),
        (1024..=u16::MAX).prop_map(|id| (
            "catalog",
            layout::catalog::encode_catalog_record(id).to_vec()
        )),
        any::<u16>().prop_map(|n| ("catalog-seq", n.to_be_bytes().to_vec())),
        small_json().prop_map(|s| {
            let schema = json!({ "type": "object", "properties": { "x": s } });
            ("baseline", Baseline::new(&schema, Some(1)).encode())
        }),
        valid_op().prop_map(|op| ("op", wire::encode_op(&op).unwrap())),
        (any::<u64>(), valid_op())
            .prop_map(|(seq, op)| ("op-log", wire::encode_op_log(seq, &op).unwrap())),
        prop::collection::vec(
            ("[a-z]{1,4}", prop::collection::vec(any::<u8>(), 0..6)),
            0..4
        )
        .prop_map(|entries| {
            let mut state = wire::RgaState::default();
            let mut parent: Option<String> = None;
            for (id, value) in entries {
                state.elements.insert(
                    id.clone(),
                    wire::RgaElement {
                        id: id.clone(),
                        parent: parent.clone(),
                        value,
                    },
                );
                parent = Some(id);
            }
            ("rga-state", wire::encode_rga_state(&state).unwrap())
        }),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Splice(usize, usize, usize),
    Set(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0..8u8).prop_map(|(i, bit)| Mutation::Flip(i, bit)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1..8usize).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<usize>(), any::<usize>(), 1..16usize)
            .prop_map(|(from, to, n)| Mutation::Splice(from, to, n)),
        (
            any::<usize>(),
            prop_oneof![
                Just(0u8),
                Just(0xff),
                Just(b'"'),
                Just(b'['),
                Just(b'{'),
                Just(b'-'),
                Just(b'9')
            ]
        )
            .prop_map(|(i, b)| Mutation::Set(i, b)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
    match m {
        Mutation::Flip(i, bit) if !bytes.is_empty() => {
            let i = at(*i, bytes.len());
            bytes[i] ^= 1 << bit;
        }
        Mutation::Truncate(i) => {
            let len = at(*i, bytes.len() + 1);
            bytes.truncate(len);
        }
        Mutation::Insert(i, b) => {
            let i = at(*i, bytes.len() + 1);
            bytes.splice(i..i, b.iter().copied());
        }
        Mutation::Delete(i, n) if !bytes.is_empty() => {
            let i = at(*i, bytes.len());
            let end = (i + n).min(bytes.len());
            bytes.drain(i..end);
        }
        Mutation::Splice(from, to, n) if !bytes.is_empty() => {
            let from = at(*from, bytes.len());
            let end = (from + n).min(bytes.len());
            let chunk = bytes[from..end].to_vec();
            let to = at(*to, bytes.len() + 1);
            bytes.splice(to..to, chunk);
        }
        Mutation::Set(i, b) if !bytes.is_empty() => {
            let i = at(*i, bytes.len());
            bytes[i] = *b;
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..96)) {
        for (name, _) in DECODERS {
            let _ = run(name, &bytes);
        }
    }

    #[test]
    fn random_bytes_with_valid_magic_never_panic(
        magic in prop_oneof![
            Just(&b"NXDB"[..]), Just(&b"NXMG"[..]), Just(&b"NXDV\x01"[..]), Just(&b"NXCL\x01"[..]),
            Just(&b"{\"format\":1,"[..]), Just(&b"\x00\x00\x00\x00\x00\x00\x00\x01{"[..]),
        ],
        rest in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = magic.to_vec();
        bytes.extend(rest);
        for (name, _) in DECODERS {
            let _ = run(name, &bytes);
        }
    }

    #[test]
    fn valid_records_decode((name, bytes) in valid_record()) {
        prop_assert_eq!(run(name, &bytes), Ok(()), "valid `{}` record refused", name);
    }

    #[test]
    fn mutated_valid_records_never_panic(
        (name, bytes) in valid_record(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let mut bytes = bytes;
        for m in &mutations {
            apply(&mut bytes, m);
        }
        // Any decoder may see any record (a wrong key, a damaged catalog).
        let _ = run(name, &bytes);
        for (other, _) in DECODERS {
            let _ = run(other, &bytes);
        }
    }
}

/// Decodes that round-trip exactly, so a decoder cannot pass by accepting garbage.
#[test]
fn round_trips() {
    let h = SchemaHeader::new(3, 1024);
    assert_eq!(SchemaHeader::decode(&h.encode()).unwrap(), h);
    let c = MigrationCheckpoint {
        table_id: 1024,
        from: 1,
        to: 2,
        cursor: b"__nx/doc/c/k".to_vec(),
    };
    assert_eq!(MigrationCheckpoint::decode(&c.encode()).unwrap(), c);
    let e = envelope::encode(Envelope::new(2, 9), br#"{"a":1}"#);
    let (env, json) = envelope::decode(&e).unwrap();
    assert_eq!(env, Envelope::new(2, 9));
    assert_eq!(json, br#"{"a":1}"#);
    let f = FenceDoc::default();
    assert_eq!(FenceDoc::decode(&f.encode()).unwrap(), f);
    assert_eq!(
        layout::catalog::decode_catalog_record("c", &layout::catalog::encode_catalog_record(4000))
            .unwrap(),
        4000
    );
}

/// Replays the committed corpus: inputs that once broke (or nearly broke) a decoder.
#[test]
fn corpus_replays() {
    let corpus = include_str!("../fuzz/corpus.txt");
    let mut n = 0;
    for (lineno, line) in corpus.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, data) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("corpus line {}: `<decoder> <hex>`", lineno + 1));
        let bytes = corpus_bytes(data.trim());
        let names: Vec<&str> = if name == "*" {
            DECODERS.iter().map(|(n, _)| *n).collect()
        } else {
            vec![name]
        };
        for name in names {
            let _ = run(name, &bytes);
            n += 1;
        }
    }
    assert!(n >= 10, "the corpus has only {n} entries");
}

/// `hex:…`, or `deep:<n>:<open>` (n copies of `open` after an envelope header, then
/// nothing: too deep to parse), or `text:` followed by literal text.
fn corpus_bytes(data: &str) -> Vec<u8> {
    if let Some(text) = data.strip_prefix("text:") {
        return text.as_bytes().to_vec();
    }
    if let Some(spec) = data.strip_prefix("deep:") {
        let (n, open) = spec.split_once(':').unwrap();
        let n: usize = n.parse().unwrap();
        let mut out = envelope::encode(Envelope::new(1, 1), b"");
        out.extend(open.repeat(n).into_bytes());
        return out;
    }
    hex_decode(data.strip_prefix("hex:").unwrap_or(data))
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Issue bullet "bad input accepted silently": a document whose JSON is not an object
/// or is nested 100,000 levels deep is refused by the decoder `verify` runs.
#[test]
fn document_decoder_refuses_non_objects_and_deep_nesting() {
    let doc = |json: &[u8]| envelope::encode(Envelope::new(1, 1), json);
    let e = run("document", &doc(b"[1,2]")).unwrap_err();
    assert!(e.contains("not an object"), "{e}");
    let e = run("document", &doc(b"  1")).unwrap_err();
    assert!(e.contains("not an object"), "{e}");
    for open in ["[", "{\"a\":"] {
        let mut deep = b"{\"a\":".to_vec();
        deep.extend(open.repeat(100_000).into_bytes());
        let e = run("document", &doc(&deep)).unwrap_err();
        assert!(e.contains("deeper than 128"), "{e}");
    }
    // Brackets inside strings do not count; 127 levels inside the object are fine.
    let mut ok = b"{\"s\":\"[[[[{{{{\\\"\",\"a\":".to_vec();
    ok.extend("[".repeat(127).into_bytes());
    ok.extend("]".repeat(127).into_bytes());
    ok.push(b'}');
    assert_eq!(run("document", &doc(&ok)), Ok(()));
    assert_eq!(run("document", &doc(br#"{"a":[1,2]}"#)), Ok(()));
}

/// Issue bullet: a client record with a mismatched or path-like id is refused.
#[test]
fn client_records_with_foreign_or_path_ids_are_refused() {
    let rec = |id: &str| ClientRecord {
        acked_generation: None,
        client: id.into(),
        format: strata::policy::CLIENT_FORMAT,
        heartbeat_ms: 1,
        opened_generation: 0,
        pid: 1,
        started_ms: 0,
    };
    // The `client` decoder reads at `__nx/clients/00112233aabbccdd`.
    assert_eq!(run("client", &rec("00112233aabbccdd").encode()), Ok(()));
    assert!(run("client", &rec("00112233aabbccde").encode()).is_err());
    let bad = rec("../../etc");
    assert!(ClientRecord::decode(&client_key("../../etc"), &bad.encode()).is_err());
}
