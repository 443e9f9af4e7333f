//! Damaged is damaged, healthy is healthy, for every command on a **redb** file that is not
//! what strata last left (the redb counterpart of `sled_damage`):
//!
//! * a file cut short (an interrupted copy or restore), whether it was closed cleanly or
//!   copied while its writer had it open (redb's header then asks for crash recovery,
//!   which only a writable open runs): every command exits 4 naming the file and saying
//!   to restore it from a complete copy, and no command changes one byte of it;
//! * an empty file and a file of garbage under a `.redb` name: refused as not a store
//!   (exit 1), nothing created or changed;
//! * a file another program wrote its own tables into, beside strata's or alone: never an
//!   alarm, and read-only commands leave it byte-identical;
//! * a bit flipped inside a page of records: what `verify` detects, counted.

use crate::support::{acc_documents, names_in, stderr, stdout, store_commands, strata, strata_db};
use serde_json::json;
use std::path::{Path, PathBuf};
use strata_store::Store;

const DOCS: u32 = 3000;

/// A redb store of `DOCS` documents in the collection `acc`, closed cleanly, and its bytes.
fn clean_store(path: &Path) -> Vec<u8> {
    {
        let store = strata_redb::RedbStore::create_store(path).unwrap();
        acc_documents(
            &store,
            DOCS,
            |i, id| json!({"id": id, "n": i, "pad": "x".repeat(150)}),
        );
    }
    std::fs::read(path).unwrap()
}

/// The bytes of a redb store of `DOCS` documents copied while its writer still has it
/// open (every batch committed durably): redb's header asks for crash recovery.
fn hot_copy(path: &Path) -> Vec<u8> {
    let store: Store = strata_redb::RedbStore::create_store(path).unwrap();
    acc_documents(
        &store,
        DOCS,
        |i, id| json!({"id": id, "n": i, "pad": "x".repeat(150)}),
    );
    let bytes = std::fs::read(path).unwrap();
    drop(store);
    bytes
}

/// Runs every command (and `copy --from`) on the file at `path`, holding `bytes`: each
/// must exit `code` with a stderr line that passes `says`, and none may change the file or
/// the directory's listing. Returns what went otherwise, one line each.
fn every_command(
    path: &Path,
    bytes: &[u8],
    code: i32,
    what: &str,
    says: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let dir = path.parent().unwrap();
    let before = names_in(dir);
    let target = dir.join("copy-target.redb");
    let copy: &[&str] = &[
        "copy",
        "--from",
        path.to_str().unwrap(),
        "--to",
        target.to_str().unwrap(),
    ];
    let mut wrong = Vec::new();
    for args in store_commands("acc", "acc")
        .iter()
        .map(Vec::as_slice)
        .chain([copy])
    {
        let what = format!("{what} {args:?}");
        let out = if args[0] == "copy" {
            strata(args)
        } else {
            strata_db(path, args)
        };
        let err = stderr(&out);
        if out.status.code() != Some(code) || !says(&err) {
            wrong.push(format!(
                "{what}: exit {:?}: {}{}",
                out.status.code(),
                stdout(&out).lines().next().unwrap_or(""),
                err.trim_end()
            ));
        }
        if args.contains(&"--json") {
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if doc["error"]["exit_code"] != code {
                wrong.push(format!("{what}: the JSON document says {doc}"));
            }
        }
        if std::fs::read(path).unwrap() != bytes {
            wrong.push(format!("{what}: the file was changed"));
            std::fs::write(path, bytes).unwrap();
        }
        if names_in(dir) != before {
            wrong.push(format!(
                "{what}: files created or removed: {:?}",
                names_in(dir)
            ));
            let _ = std::fs::remove_file(&target);
        }
    }
    wrong
}

/// A cut says the file is damaged, names it, and says to restore a complete copy.
fn says_cut(name: &str) -> impl Fn(&str) -> bool + '_ {
    move |err: &str| {
        err.contains("is damaged")
            && err.contains(name)
            && err.contains("cut short")
            && err.contains("a complete copy")
    }
}

/// Where each file is cut: inside redb's header, after its first page, at 10%, 50% and
/// 90% of its length (page-aligned), one page and one byte short of its end.
fn cuts(len: usize) -> Vec<(String, usize)> {
    let page = 4096;
    let aligned = |pct: usize| len * pct / 100 / page * page;
    vec![
        ("100 bytes".into(), 100),
        ("one page".into(), page),
        ("10%".into(), aligned(10)),
        ("50%".into(), aligned(50)),
        ("90%".into(), aligned(90)),
        ("a page short".into(), len - page),
        ("a byte short".into(), len - 1),
    ]
}

fn cut_files_are_damaged(hot: bool) {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original.redb");
    let full = if hot {
        hot_copy(&original)
    } else {
        clean_store(&original)
    };
    let mut wrong = Vec::new();
    for (what, at) in cuts(full.len()) {
        let sub = dir.path().join(format!("cut-{at}"));
        std::fs::create_dir(&sub).unwrap();
        let path: PathBuf = sub.join("cut.redb");
        let cut = full[..at].to_vec();
        std::fs::write(&path, &cut).unwrap();
        let name = path.display().to_string();
        let what = format!("{what} ({at} of {})", full.len());
        wrong.extend(every_command(&path, &cut, 4, &what, &says_cut(&name)));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Whole, the same file is healthy (a copy of an open file is what a crash leaves:
    // redb's recovery, run by the first command, changes no record).
    let whole = dir.path().join("whole.redb");
    std::fs::write(&whole, &full).unwrap();
    let out = strata_db(&whole, &["verify"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// A cut copy of an open file that redb itself already opened (another program, or a
/// build before this check): redb's recovery rewrote its header for the shorter length,
/// then failed reading the pages the cut removed. The header no longer shows the cut;
/// the reads past the end of the file do: damaged (exit 4), not an I/O failure (exit 1).
#[test]
fn a_cut_file_whose_header_redb_rewrote_is_still_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let full = hot_copy(&dir.path().join("original.redb"));
    let path = dir.path().join("cut").join("cut.redb");
    std::fs::create_dir(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &full[..full.len() / 2 / 4096 * 4096]).unwrap();
    let Err(e) = redb::Database::open(&path) else {
        panic!("redb opened a cut file");
    };
    println!("redb's own open: {e}");
    let rewritten = std::fs::read(&path).unwrap();
    let name = path.display().to_string();
    let wrong = every_command(&path, &rewritten, 4, "rewritten", &|err: &str| {
        err.contains("is damaged") && err.contains(&name) && err.contains("cut short")
    });
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_cut_redb_file_closed_cleanly_is_damaged_for_every_command_and_left_unchanged() {
    cut_files_are_damaged(false);
}

#[test]
fn a_cut_copy_of_an_open_redb_file_is_damaged_for_every_command_and_left_unchanged() {
    cut_files_are_damaged(true);
}

/// A `.redb` name proves nothing: an empty file, or one of other bytes, is not a strata
/// store (nothing in it says it ever was one): exit 1 saying what is there, for the plain
/// path and `redb:PATH` alike, nothing created or changed. Bytes that start with redb's
/// magic number claim to be a redb file: damaged (exit 4) when the rest is not one.
#[test]
fn an_empty_or_garbage_redb_file_is_refused_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let garbage: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7919 % 251) as u8).collect();
    let mut magic_then_garbage = strata_redb::MAGIC.to_vec();
    magic_then_garbage.extend_from_slice(&garbage);
    let mut wrong = Vec::new();
    for (what, bytes, code, says) in [
        (
            "empty",
            Vec::new(),
            1,
            &["empty file", "not a strata store"][..],
        ),
        ("garbage", garbage, 1, &["not a strata store"][..]),
        (
            "magic then garbage",
            magic_then_garbage,
            4,
            &["is damaged"][..],
        ),
    ] {
        let sub = dir.path().join(what.replace(' ', "-"));
        std::fs::create_dir(&sub).unwrap();
        let path = sub.join("data.redb");
        std::fs::write(&path, &bytes).unwrap();
        let name = path.display().to_string();
        let says = |err: &str| err.contains(&name) && says.iter().all(|s| err.contains(s));
        wrong.extend(every_command(&path, &bytes, code, what, &says));
        let explicit = format!("redb:{}", path.display());
        for args in [&["status"][..], &["migrate"]] {
            let out = strata_db(&explicit, args);
            if out.status.code() != Some(code) || !says(&stderr(&out)) {
                wrong.push(format!(
                    "{what} redb: {args:?}: exit {:?}: {}",
                    out.status.code(),
                    stderr(&out).trim_end()
                ));
            }
            assert!(
                std::fs::read(&path).unwrap() == bytes,
                "{what} redb: {args:?}"
            );
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The read-only commands that judge a whole store (`every_command` runs the writing ones
/// and those naming a collection too).
const READ_ONLY: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["verify"],
    &["verify", "--json"],
    &["collections"],
    &["collections", "--json"],
    &["fence"],
    &["keys", "status"],
    &["repair"],
    &["migrate", "--dry-run"],
];

/// Adds another program's tables to the redb file at `path` (closed): a table of its own
/// and a multimap, with records, through redb itself.
fn foreign_tables(path: &Path) {
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn
            .open_table(redb::TableDefinition::<&str, &[u8]>::new("other_app"))
            .unwrap();
        for i in 0..500u32 {
            t.insert(format!("row-{i:05}").as_str(), vec![0xAB; 300].as_slice())
                .unwrap();
        }
        let mut m = txn
            .open_multimap_table(redb::MultimapTableDefinition::<u64, u64>::new(
                "other_index",
            ))
            .unwrap();
        m.insert(1, 2).unwrap();
    }
    txn.commit().unwrap();
}

/// Runs the read-only commands (and `more`) on `path`: each must exit `code` and leave the
/// file byte-identical. Returns what went otherwise.
fn read_only_commands(path: &Path, more: &[&[&str]], code: i32, what: &str) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap();
    let mut wrong = Vec::new();
    for args in READ_ONLY.iter().chain(more) {
        let out = strata_db(path, args);
        if out.status.code() != Some(code) {
            wrong.push(format!(
                "{what} {args:?}: exit {:?}: {}{}",
                out.status.code(),
                stdout(&out),
                stderr(&out).trim_end()
            ));
        }
        if std::fs::read(path).unwrap() != bytes {
            wrong.push(format!("{what} {args:?}: the file was changed"));
            std::fs::write(path, &bytes).unwrap();
        }
    }
    wrong
}

/// Another program's tables beside strata's are not strata's to judge: every read-only
/// command gives strata's verdict on strata's data (ok) and leaves the file as it is; the
/// writing ones work and keep the other program's records.
#[test]
fn another_programs_tables_beside_strata_are_never_an_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.redb");
    {
        let store = strata_redb::RedbStore::create_store(&path).unwrap();
        acc_documents(&store, 50, |i, id| json!({"id": id, "n": i}));
    }
    foreign_tables(&path);
    let mut wrong = read_only_commands(&path, &[&["inspect", "acc"]], 0, "beside");
    let out = strata_db(&path, &["collections", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = doc["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["collection"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["acc"], "{doc}");
    for args in [
        &["migrate"][..],
        &["repair", "--apply"],
        &["fence", "abort"],
        &["verify"],
    ] {
        let out = strata_db(&path, args);
        if out.status.code() != Some(0) {
            wrong.push(format!("beside {args:?}: {}", stderr(&out).trim_end()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let db = redb::ReadOnlyDatabase::open(&path).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let t = txn
        .open_table(redb::TableDefinition::<&str, &[u8]>::new("other_app"))
        .unwrap();
    assert_eq!(redb::ReadableTableMetadata::len(&t).unwrap(), 500);
}

/// A redb file strata never wrote (only another program's tables): no alarm — strata's
/// verdict is about strata's data, and there is none (an empty store: exit 0, no
/// collections) — and no read-only command changes it. (`migrate`, a writing command, opens
/// it writable, which writes strata's empty tables and layout marker beside the other
/// program's: its records are kept.)
#[test]
fn a_redb_file_of_another_program_only_is_no_alarm_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("theirs.redb");
    drop(redb::Database::create(&path).unwrap());
    foreign_tables(&path);
    let mut wrong = read_only_commands(
        &path,
        &[&["repair", "--apply"], &["fence", "abort"]],
        0,
        "theirs",
    );
    let out = strata_db(&path, &["collections"]);
    assert!(stdout(&out).contains("no collections"), "{}", stdout(&out));
    let out = strata_db(&path, &["migrate"]);
    if out.status.code() != Some(0) {
        wrong.push(format!("theirs migrate: {}", stderr(&out).trim_end()));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let db = redb::ReadOnlyDatabase::open(&path).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let t = txn
        .open_table(redb::TableDefinition::<&str, &[u8]>::new("other_app"))
        .unwrap();
    assert_eq!(redb::ReadableTableMetadata::len(&t).unwrap(), 500);
}

/// The offsets of the middle of each `"pad":"xxx…"` run in `bytes`, one per 4 KiB page,
/// in file order: a byte inside a document's JSON, which a flipped bit leaves valid JSON
/// (`x` becomes `y`), so only redb's page checksums can tell.
fn pad_middles(bytes: &[u8]) -> Vec<usize> {
    let needle = b"\"pad\":\"xxxxxxxxxx";
    let mut pages = std::collections::BTreeMap::new();
    for at in 0..bytes.len().saturating_sub(needle.len()) {
        if &bytes[at..at + needle.len()] == needle {
            pages.entry(at / 4096).or_insert(at + 6 + 75);
        }
    }
    pages.into_values().collect()
}

/// One bit flipped inside a document's JSON, in pages of records across the file (a
/// compacted file: every page holding records is live). `verify` decodes every record,
/// which a flip that keeps the JSON valid passes; redb keeps a checksum of every page in
/// its parent, which `verify` checks (docs/format.md, "What a redb file's checksums
/// prove"): each flip is damage, exit 4, and no command changes the file.
#[test]
fn a_bit_flipped_in_a_page_of_records_is_damage_for_verify() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original.redb");
    clean_store(&original);
    {
        let mut db = redb::Database::open(&original).unwrap();
        while db.compact().unwrap() {}
    }
    let full = std::fs::read(&original).unwrap();
    let middles = pad_middles(&full);
    assert!(middles.len() > 20, "{} pages of records", middles.len());
    let picks: Vec<usize> = (0..6)
        .map(|i| middles[i * (middles.len() - 1) / 5])
        .collect();
    let mut detected = 0;
    let mut wrong = Vec::new();
    for (n, at) in picks.iter().enumerate() {
        let mut bytes = full.clone();
        bytes[*at] ^= 0x01;
        let path = dir.path().join(format!("flip-{n}.redb"));
        std::fs::write(&path, &bytes).unwrap();
        let out = strata_db(&path, &["verify"]);
        println!(
            "flip at {at} (page {}): verify exit {:?}: {}{}",
            at / 4096,
            out.status.code(),
            stdout(&out).lines().last().unwrap_or(""),
            stderr(&out).trim_end()
        );
        if out.status.code() == Some(4) && stderr(&out).contains("is damaged") {
            detected += 1;
        } else {
            wrong.push(format!("flip at {at}: verify exit {:?}", out.status.code()));
        }
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "flip at {at}: verify changed the file"
        );
    }
    println!("{detected} of {} flips detected", picks.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every record of the redb file at `path`, read as strata reads it.
fn records(path: &Path) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    let store = Store::new(strata_redb::RedbStore::open_read_only(path).unwrap());
    crate::support::snapshot(&store)
}

/// One bit flipped in every eighth page holding a document's JSON, in a file as strata
/// leaves it (not compacted: pages an earlier commit used and redb freed still hold stale
/// copies of records). Each flip is damage for `verify` (exit 4), or it fell in a free page,
/// which no read uses: every record reads back as written. Counted, both.
#[test]
fn a_bit_flipped_anywhere_in_records_is_damage_or_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original.redb");
    let full = clean_store(&original);
    let written = records(&original);
    let (mut detected, mut harmless, mut wrong) = (0, 0, Vec::new());
    for at in pad_middles(&full).into_iter().step_by(8) {
        let mut bytes = full.clone();
        bytes[at] ^= 0x01;
        let path = dir.path().join(format!("flip-{at}.redb"));
        std::fs::write(&path, &bytes).unwrap();
        let out = strata_db(&path, &["verify"]);
        match out.status.code() {
            Some(4) if stderr(&out).contains("is damaged") => detected += 1,
            Some(0) if records(&path) == written => harmless += 1,
            code => wrong.push(format!(
                "flip at {at}: verify exit {code:?}: {}",
                stderr(&out)
            )),
        }
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "flip at {at}: verify changed the file"
        );
        std::fs::remove_file(&path).unwrap();
    }
    println!("{detected} flips damage, {harmless} in free pages (no record changed)");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(detected > 0, "no flip fell in a live page");
}

/// The limit, counted: a copy of a file its writer still had open asks for redb's crash
/// recovery, which drops a last commit whose pages miss their checksums — what a commit
/// torn by a crash looks like, so a flip in a page only that commit uses cannot be told
/// from a crash: the commit before is what every command then reads (redb's own recovery,
/// run by the first command; docs/format.md, "What a redb file's checksums prove"). No
/// flipped record is ever read back: each flip is damage, harmless, or its commit dropped.
#[test]
fn a_bit_flipped_in_a_copy_of_an_open_file_is_damage_harmless_or_its_commit_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original.redb");
    let full = hot_copy(&original);
    let whole = dir.path().join("whole.redb");
    std::fs::write(&whole, &full).unwrap();
    assert_eq!(strata_db(&whole, &["verify"]).status.code(), Some(0));
    let written = records(&whole);
    let (mut detected, mut harmless, mut dropped, mut wrong) = (0, 0, 0, Vec::new());
    for at in pad_middles(&full).into_iter().step_by(8) {
        let mut bytes = full.clone();
        bytes[at] ^= 0x01;
        let path = dir.path().join(format!("flip-{at}.redb"));
        std::fs::write(&path, &bytes).unwrap();
        let out = strata_db(&path, &["verify"]);
        match out.status.code() {
            Some(4) if stderr(&out).contains("is damaged") => detected += 1,
            Some(0) => {
                let read = records(&path);
                if read == written {
                    harmless += 1;
                } else if read.iter().all(|(k, v)| written.get(k) == Some(v)) {
                    dropped += 1;
                } else {
                    wrong.push(format!("flip at {at}: a changed record read back"));
                }
            }
            code => wrong.push(format!(
                "flip at {at}: verify exit {code:?}: {}",
                stderr(&out)
            )),
        }
        std::fs::remove_file(&path).unwrap();
    }
    println!("{detected} flips damage, {harmless} harmless, {dropped} dropped the last commit (as a crash would)");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Without room for the private copy the page check needs (here: a temporary directory
/// that does not exist), `verify` still certifies the records and says, in text and in
/// `--json`, that the pages' checksums were not checked — it neither fails nor claims
/// them checked — and the file is left as it was.
#[test]
fn verify_says_when_it_could_not_check_the_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let bytes = clean_store(&path);
    let missing = dir.path().join("no-such-tmp");
    let run = |json: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_strata"));
        cmd.args(["--db", path.to_str().unwrap(), "verify"]);
        if json {
            cmd.arg("--json");
        }
        cmd.env("TMPDIR", &missing).output().unwrap()
    };
    let out = run(false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("redb page checksums were not checked")
            && text.contains("TMPDIR")
            && text.contains(&format!("{DOCS} records")),
        "{text}"
    );
    let out = run(true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verdict"], "ok", "{doc}");
    assert!(
        doc["pages_not_checked"]
            .as_str()
            .unwrap()
            .contains("s.redb"),
        "{doc}"
    );
    // With room, the pages are checked and the document says nothing of it.
    let out = strata_db(&path, &["verify", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc.get("pages_not_checked").is_none(), "{doc}");
    assert!(
        std::fs::read(&path).unwrap() == bytes,
        "verify changed the file"
    );
}
