//! `strata fence [--json]` (the fence: state, generation, pending cutovers, coordinator,
//! clients with their last heartbeat and acknowledgement) and `strata fence abort`. On a
//! store that is the target of an unfinished `strata copy`, `strata fence` shows what is
//! there, then flags it as part of its source (exit 7, `"verdict": "unfinished_copy"` in
//! `--json`).

use crate::db;
use crate::exit::{CmdResult, Failure, OK};
use std::io::Write;
use std::path::Path;
use strata::clock::{Clock, SystemClock};
use strata::policy::{list_clients, Fence, FenceDoc, FenceState, PolicyError};

/// Arguments of `strata fence`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Option<FenceCommand>,
    /// Print the fence (and, without a subcommand, the clients) as one JSON document.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum FenceCommand {
    /// Reset a stuck fence to `normal` without bumping the generation (pending cutovers
    /// stay pending and resume from their checkpoints on the next run).
    Abort {
        /// Rewrite an unreadable fence record as a normal fence at this generation.
        #[arg(long, value_name = "N")]
        reset_corrupt: Option<u64>,
    },
}

/// `fence abort` on a store opened for writing: the fence as reset, whether there was
/// anything to reset, and whether an unreadable record was rewritten (`reset_corrupt`).
fn reset(db_path: &Path, reset_corrupt: Option<u64>) -> Result<(FenceDoc, bool, bool), Failure> {
    let store = db::open_existing(db_path)?;
    // Whether there was anything to reset (an unreadable fence is handled below).
    let was_stuck = Fence::read(&store)
        .map(|f| f.state != FenceState::Normal || f.coordinator.is_some())
        .unwrap_or(true);
    let mut rewritten = false;
    let fence = match Fence::abort(&store) {
        Ok(f) => f,
        Err(PolicyError::Corrupted { .. }) if reset_corrupt.is_some() => {
            rewritten = true;
            Fence::dangerous_reset(&store, reset_corrupt.unwrap_or(0))?
        }
        Err(e @ PolicyError::Corrupted { .. }) => return Err(corrupt_fence(e)),
        Err(e) => return Err(e.into()),
    };
    strata_store::KvWrite::flush(&store)?;
    Ok((fence, was_stuck, rewritten))
}

fn corrupt_fence(e: PolicyError) -> Failure {
    Failure::error(format!(
        "{e} (pass `--reset-corrupt <generation>` to rewrite it as a normal fence at that generation)"
    ))
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    let mut out = std::io::stdout().lock();
    if let Some(FenceCommand::Abort { reset_corrupt }) = args.command {
        // Decided on a read-only open: a normal fence needs no write, and the store is
        // opened for writing (which a redb file or a sled directory shows) only to reset.
        let reading = db::open_for_reading(db_path)?;
        // Only part of a copy's source (the fence may be a stale copy of the source's):
        // never reset.
        crate::cmd::unfinished::refuse_partial_copy(
            &reading,
            &db::describe(db_path),
            "strata fence abort",
        )?;
        let normal = match Fence::read(&reading) {
            Ok(f) if f.state == FenceState::Normal && f.coordinator.is_none() => Some(f),
            Ok(_) => None,
            Err(PolicyError::Corrupted { .. }) if reset_corrupt.is_some() => None,
            Err(e @ PolicyError::Corrupted { .. }) => return Err(corrupt_fence(e)),
            Err(e) => return Err(e.into()),
        };
        drop(reading);
        let (fence, was_stuck, rewritten) = match normal {
            Some(fence) => (fence, false, false),
            None => reset(db_path, reset_corrupt)?,
        };
        if args.json {
            let doc = serde_json::json!({
                "db": db::describe(db_path),
                "reset": was_stuck,
                "rewritten": rewritten,
                "state": fence.state,
                "generation": fence.generation,
                "coordinator": fence.coordinator,
                "lease_until_ms": fence.lease_until_ms,
                "pending": fence.pending,
            });
            crate::json::emit(&mut out, &doc)?;
            return Ok(OK);
        }
        let what = if was_stuck {
            "fence reset"
        } else {
            "fence already normal, nothing to reset"
        };
        write!(
            out,
            "{what}: state {}, generation {}, {} cutover(s) still pending",
            fence.state,
            fence.generation,
            fence.pending.len()
        )?;
        if rewritten {
            writeln!(
                out,
                " (the unreadable record was rewritten; cutovers it listed are forgotten: reopen their collections to register them again)"
            )?;
        } else if fence.pending.is_empty() {
            writeln!(out)?;
        } else {
            let names: Vec<&str> = fence
                .pending
                .iter()
                .map(|p| p.collection.as_str())
                .collect();
            writeln!(
                out,
                " ({}: writes stay fenced until the application's `cutover` command finishes them)",
                names.join(", ")
            )?;
        }
        return Ok(OK);
    }
    let store = db::open_for_reading(db_path)?;
    // Only part of a copy's source (its fence and clients may not have been copied yet):
    // what is shown is flagged (exit 7).
    let copy = crate::cmd::unfinished::copy(&store, &db::describe(db_path))?;
    let fence = Fence::read(&store)?;
    let clients = list_clients(&store)?;
    let now = SystemClock.now_ms();
    // Open deploy windows (two builds live at once), with the builds recorded for each.
    let mut windows = Vec::new();
    for (collection, operational) in
        strata::ops::window::open_windows(&store).map_err(Failure::error)?
    {
        let st = strata::ops::window::status(
            &store,
            &collection,
            now,
            strata::policy::DEFAULT_STALE_AFTER_MS,
        )
        .map_err(Failure::error)?;
        let builds: Vec<serde_json::Value> = st
            .builds
            .iter()
            .map(|b| serde_json::json!({"client": b.client, "version": b.version, "pid": b.pid, "live": b.live}))
            .collect();
        windows.push(serde_json::json!({"collection": collection, "operational": operational, "builds": builds}));
    }
    if args.json {
        let mut doc = serde_json::json!({
            "db": db::describe(db_path),
            "state": fence.state,
            "generation": fence.generation,
            "coordinator": fence.coordinator,
            "lease_until_ms": fence.lease_until_ms,
            "pending": fence.pending,
            "clients": clients,
            "windows": windows,
            "now_ms": now,
        });
        let code = crate::cmd::unfinished::flag_partial_copy_json(&mut doc, copy.as_ref())?;
        crate::json::emit(&mut out, &doc)?;
        return Ok(code);
    }
    writeln!(out, "state        {}", fence.state)?;
    writeln!(out, "generation   {}", fence.generation)?;
    match &fence.coordinator {
        Some(c) => writeln!(
            out,
            "coordinator  {c} (lease {})",
            if fence.lease_until_ms >= now {
                format!("expires in {} ms", fence.lease_until_ms - now)
            } else {
                format!("expired {} ms ago", now - fence.lease_until_ms)
            }
        )?,
        None => writeln!(out, "coordinator  -")?,
    }
    if fence.pending.is_empty() {
        writeln!(out, "pending      -")?;
    } else {
        for p in &fence.pending {
            writeln!(
                out,
                "pending      {} -> schema {}",
                p.collection, p.target_hash
            )?;
        }
    }
    if windows.is_empty() {
        writeln!(out, "windows      -")?;
    }
    for w in &windows {
        let live: Vec<String> = w["builds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["live"] == true)
            .map(|b| format!("v{}", b["version"]))
            .collect();
        writeln!(
            out,
            "window       {} at v{} (live builds: {})",
            w["collection"].as_str().unwrap_or_default(),
            w["operational"],
            if live.is_empty() {
                "-".to_string()
            } else {
                live.join(", ")
            }
        )?;
    }
    writeln!(out, "clients      {}", clients.len())?;
    for c in &clients {
        writeln!(
            out,
            "  {}  pid {:<7} opened at gen {:<4} last heartbeat {} ms ago  acked {}",
            c.client,
            c.pid,
            c.opened_generation,
            now.saturating_sub(c.heartbeat_ms),
            c.acked_generation
                .map_or("-".to_string(), |g| format!("gen {g}"))
        )?;
    }
    Ok(crate::cmd::unfinished::flag_partial_copy(
        &mut out,
        copy.as_ref(),
    )?)
}
