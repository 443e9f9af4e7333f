//! `strata demo [DIR]`: the guided tour of strata's main job on the embedded default.
//!
//! 1. write a legacy (v0, header-less) Numax datastore through the sync store's layout;
//! 2. show `status` and the sync manager refusing it;
//! 3. migrate it (progress bar on a terminal);
//! 4. open the sync manager and apply a few hundred ops of every CRDT family;
//! 5. restart and print the hydrated state;
//! 6. payload evolution: a typed collection written by an old build, read upcast by a new
//!    one, swept eagerly, and the ahead guard refusing the old build's overwrite;
//! 7. shape policy: a persisted JSON Schema under `additive_only`, an additive change
//!    allowed, a non-additive one refused at write time, then a coordinated cutover.
//!
//! Chapters 1-5 use `DIR/sync`; chapters 6-7 use `DIR/docs`.
mod payload;
mod policy;

use crate::cmd::status;
use crate::exit::{CmdResult, Failure};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use strata::numax::wire::{Op, OpKind};
use strata_store::{KvWrite, Store};
use strata_sync::SyncManager;

/// The marker file that identifies a demo directory (so a re-run may reuse it).
const MARKER: &str = ".strata-demo";

/// Arguments of `strata demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to write the demo datastores. Must be empty, absent, or a previous demo.
    #[arg(default_value = "./strata-demo")]
    dir: PathBuf,
    /// Ops per CRDT family applied after the migration.
    #[arg(long, default_value = "100", value_parser = crate::size::parse_nonzero)]
    ops: usize,
    /// Legacy ops written before the migration (the migration certifies their records).
    #[arg(long, default_value = "5000", value_parser = crate::size::parse_nonzero)]
    legacy_ops: usize,
}

/// What the demo writes into DIR (a rerun removes exactly these).
const WRITTEN: [&str; 2] = [SYNC_DIR, DOCS_FILE];
/// The legacy Numax datastore of the demo (a sled directory).
const SYNC_DIR: &str = "sync";
/// The new store of the typed-collection chapters (a redb file).
const DOCS_FILE: &str = "docs.redb";

/// Prepares DIR: creates it, or removes what a previous demo wrote there (and nothing
/// else); refuses a file and a directory holding anything but a previous demo.
fn prepare(dir: &Path) -> Result<(), Failure> {
    let io = |what: &str, path: &Path, e: std::io::Error| {
        Failure::error(format!("cannot {what} `{}`: {e}", path.display()))
    };
    if let Ok(meta) = std::fs::metadata(dir) {
        if !meta.is_dir() {
            return Err(Failure::error(format!(
                "`{}` is not a directory; the demo writes its datastores into a directory: choose another DIR (the file was left untouched)",
                dir.display()
            )));
        }
        let is_demo = dir.join(MARKER).exists();
        let is_empty = std::fs::read_dir(dir)
            .map_err(|e| io("read the directory", dir, e))?
            .next()
            .is_none();
        if !is_demo && !is_empty {
            return Err(Failure::error(format!(
                "`{}` is not empty and is not a previous strata demo; choose another DIR",
                dir.display()
            )));
        }
        if is_demo {
            for name in WRITTEN {
                let path = dir.join(name);
                let removed = match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
                    Ok(_) => std::fs::remove_file(&path),
                    Err(_) => Ok(()),
                };
                removed.map_err(|e| io("remove the previous demo's", &path, e))?;
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| io("create the demo directory", dir, e))?;
    let marker = dir.join(MARKER);
    std::fs::write(&marker, b"strata demo directory; safe to delete\n")
        .map_err(|e| io("write", &marker, e))?;
    Ok(())
}

fn title(out: &mut impl Write, n: usize, text: &str) -> std::io::Result<()> {
    writeln!(out, "\n== {n}. {text}")
}

/// Runs the command.
pub fn run(args: Args) -> CmdResult {
    let started = Instant::now();
    prepare(&args.dir)?;
    let mut out = std::io::stdout().lock();
    let sync_path = args.dir.join(SYNC_DIR);
    writeln!(
        out,
        "strata demo in `{}` (datastore `{}`)",
        args.dir.display(),
        sync_path.display()
    )?;

    // 1. A legacy datastore.
    title(
        &mut out,
        1,
        "A Numax release without schema headers wrote this datastore",
    )?;
    {
        // Numax datastores are sled directories; strata keeps opening them with sled.
        let store = strata_sled::SledStore::open_store(&sync_path)?;
        let mut ops = strata_sync::legacy::fixture_ops();
        ops.extend(mixed_ops("legacy", "node-legacy", args.legacy_ops));
        let n = strata_sync::legacy::write_legacy_fixture(&store, &ops)?;
        store.flush()?;
        writeln!(
            out,
            "wrote {n} ops of every CRDT family through the v0 layout (no `__nx/schema/` keys), in a sled directory as Numax does"
        )?;
    }

    // 2. Refused.
    title(
        &mut out,
        2,
        "strata status: the store needs an explicit migration",
    )?;
    {
        let store = crate::db::open_existing(&sync_path)?;
        let tables = strata::validate::inspect(&store, &strata::numax::catalog())?;
        status::write_table(&mut out, &tables, &[])?;
        let (code, _) = crate::cmd::verdict::verdict(&tables);
        writeln!(out, "(`strata status` exits {code})")?;
        match SyncManager::open(store) {
            Err(e) => writeln!(out, "SyncManager::open refuses it: {e}")?,
            Ok(_) => {
                return Err(Failure::error(
                    "the sync manager opened a legacy store; this is a bug",
                ))
            }
        }
    }

    // 3. Migrate.
    title(
        &mut out,
        3,
        "strata migrate: certify every record, resumable and memory-bounded",
    )?;
    {
        let store = crate::db::open_existing(&sync_path)?;
        let report = crate::cmd::migrate::migrate_with_progress(
            &store,
            strata::pass::PassLimits::default(),
            false,
        )?;
        store.flush()?;
        let records: u64 = report.tables.iter().map(|t| t.records).sum();
        writeln!(
            out,
            "certified {records} records in {} tables; every payload byte unchanged",
            report.tables.len()
        )?;
        let tables = strata::validate::inspect(&store, &strata::numax::catalog())?;
        let (code, word) = crate::cmd::verdict::verdict(&tables);
        writeln!(out, "`strata status` now says: {word} (exit {code})")?;
    }

    // 4. Serve it.
    title(
        &mut out,
        4,
        "Open the sync manager and apply ops of every family",
    )?;
    let before;
    {
        let store = crate::db::open_existing(&sync_path)?;
        let sync = SyncManager::open(store)?;
        let ops = mixed_ops("live", "node-a", args.ops * 6);
        let t = Instant::now();
        let applied = sync.apply_batch(&ops)?;
        // Re-delivering the same ops is a no-op: they are in seen-ops.
        let again = sync.apply_batch(&ops[..10])?;
        sync.flush()?;
        writeln!(
            out,
            "applied {} ops in {:.1?}; re-delivered 10 of them: {} applied again",
            applied.len(),
            t.elapsed(),
            again
                .iter()
                .filter(|a| matches!(a, strata_sync::Applied::Applied { .. }))
                .count()
        )?;
        before = summary(&sync)?;
    }

    // 5. Restart.
    title(&mut out, 5, "Restart: hydrate from the datastore")?;
    {
        let store: Store = crate::db::open_existing(&sync_path)?;
        let sync = SyncManager::open(store)?;
        let after = summary(&sync)?;
        for line in &after {
            writeln!(out, "  {line}")?;
        }
        let report = sync.verify()?;
        writeln!(
            out,
            "hydrated state identical to before the restart: {}; op log, seen-ops and state consistent: {}",
            before == after,
            report.is_consistent()
        )?;
        if before != after || !report.is_consistent() {
            return Err(Failure::error("hydrated state differs; this is a bug"));
        }
    }

    // 6-7. Typed collections in a second, new datastore: redb, the default for new stores.
    let docs_path = args.dir.join(DOCS_FILE);
    {
        let store = strata_sync::open_path(&docs_path)?;
        payload::payload_chapter(&mut out, &store)?;
        policy::policy_chapter(&mut out, &store)?;
        store.flush()?;
    }

    writeln!(
        out,
        "\ndone in {:.1?}. Try: strata --db {} status; strata --db {docs} collections; strata --db {docs} inspect accounts; strata --db {docs} fence; strata --db {docs} schema show invoices",
        started.elapsed(),
        sync_path.display(),
        docs = docs_path.display(),
    )?;
    Ok(0)
}

/// A demo invariant that did not hold.
fn bug(what: impl std::fmt::Display) -> Failure {
    Failure::error(format!("{what}; this is a bug"))
}

/// Human summary of the demo keys of every family.
fn summary(sync: &SyncManager) -> Result<Vec<String>, strata_sync::SyncError> {
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    let row = |label: &str, value: String| format!("{label:<26} = {value}");
    let mut lines = vec![
        row("gcounter visits", format!("{:?}", sync.gcounter("visits")?)),
        row("pncounter stock", format!("{:?}", sync.pncounter("stock")?)),
        row(
            "register status",
            format!("{:?}", sync.register("status")?.map(text)),
        ),
    ];
    for k in ["legacy-counter", "live-counter"] {
        lines.push(row(
            &format!("gcounter {k}"),
            format!("{:?}", sync.gcounter(k)?),
        ));
    }
    lines.push(row(
        "pncounter live-balance",
        format!("{:?}", sync.pncounter("live-balance")?),
    ));
    lines.push(row(
        "register live-status",
        format!("{:?}", sync.register("live-status")?.map(text)),
    ));
    if let Some(m) = sync.map("live-settings")? {
        let fields: Vec<String> = m
            .into_iter()
            .map(|(k, v)| format!("{k}={}", text(v)))
            .collect();
        lines.push(row("map live-settings", fields.join(", ")));
    }
    if let Some(s) = sync.set("live-tags")? {
        lines.push(row("set live-tags", format!("{} elements", s.len())));
    }
    if let Some(seq) = sync.sequence("live-doc")? {
        let s: String = seq.into_iter().map(text).collect();
        lines.push(row(
            "sequence live-doc",
            format!(
                "{} elements: {:?}...",
                s.len(),
                s.chars().take(24).collect::<String>()
            ),
        ));
    }
    let (seen, log) = sync.next_sequences();
    lines.push(row("next seen-op / op-log seq", format!("{seen} / {log}")));
    Ok(lines)
}

/// `n` ops spread over the six families, deterministic, ids `<tag>-op-<i>`.
pub fn mixed_ops(tag: &str, node: &str, n: usize) -> Vec<Op> {
    let key = |k: &str| format!("{tag}-{k}");
    let mut ops = Vec::with_capacity(n);
    let mut last_rga: Option<String> = None;
    let mut added_tags: Vec<(String, String)> = Vec::new();
    for i in 0..n {
        let id = format!("{tag}-op-{i}");
        let kind = match i % 6 {
            0 => OpKind::GCounterIncrement {
                key: key("counter"),
                increment: 1 + (i as u64 % 5),
            },
            1 => {
                if i % 4 == 1 {
                    OpKind::PNCounterDecrement {
                        key: key("balance"),
                        decrement: 2,
                    }
                } else {
                    OpKind::PNCounterIncrement {
                        key: key("balance"),
                        increment: 3,
                    }
                }
            }
            2 => OpKind::LwwRegisterSet {
                key: key("status"),
                value: format!("state-{i}").into_bytes(),
                timestamp_ms: i as u64,
            },
            3 => {
                if i % 5 == 0 {
                    OpKind::LwwMapRemove {
                        key: key("settings"),
                        field: format!("f{}", i % 7),
                        timestamp_ms: i as u64,
                    }
                } else {
                    OpKind::LwwMapSet {
                        key: key("settings"),
                        field: format!("f{}", i % 7),
                        value: format!("v{i}").into_bytes(),
                        timestamp_ms: i as u64,
                    }
                }
            }
            4 => {
                let element = format!("e{}", i % 11);
                if i % 3 == 0 {
                    let observed: Vec<String> = added_tags
                        .iter()
                        .filter(|(e, _)| *e == element)
                        .map(|(_, t)| t.clone())
                        .collect();
                    OpKind::ORSetRemove {
                        key: key("tags"),
                        element,
                        observed_tags: observed,
                    }
                } else {
                    let tag_id = format!("{id}-tag");
                    added_tags.push((element.clone(), tag_id.clone()));
                    OpKind::ORSetAdd {
                        key: key("tags"),
                        element,
                        tag: tag_id,
                    }
                }
            }
            _ => {
                let elem = format!("{id}-el");
                let k = OpKind::RgaInsert {
                    key: key("doc"),
                    id: elem.clone(),
                    parent: last_rga.clone(),
                    value: vec![b'a' + (i % 26) as u8],
                };
                last_rga = Some(elem);
                k
            }
        };
        ops.push(Op::new(id, node, kind));
    }
    ops
}
