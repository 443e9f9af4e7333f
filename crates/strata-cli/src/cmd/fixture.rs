//! `strata fixture capture --collection C [--sample N] [--redact PATH]… [--out FILE]`:
//! writes a portable fixture of one collection (read-only), for `strata-testkit` to replay
//! an evolution against before it ships (see `strata::ops::fixture`).

use crate::db;
use crate::exit::{CmdResult, Failure, OK};
use std::io::Write;
use std::path::{Path, PathBuf};
use strata::ops::fixture::{capture, CaptureOptions, RedactPath};

/// Arguments of `strata fixture`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: FixtureCommand,
}

#[derive(Debug, clap::Subcommand)]
enum FixtureCommand {
    /// Capture one collection's rows (with their payload versions), schema history, sweep
    /// marker and container header into a JSON Lines file (read-only).
    Capture(CaptureArgs),
}

#[derive(Debug, clap::Args)]
struct CaptureArgs {
    /// The collection.
    #[arg(long)]
    collection: String,
    /// At most N rows, spread over the stored payload versions (every version present
    /// keeps rows).
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
    /// Replace the values at this JSON path by placeholders of the same type
    /// (`customer.email`, `lines[].sku`). Repeatable.
    #[arg(long, value_name = "PATH")]
    redact: Vec<String>,
    /// The file to write (default: standard output). An existing file is refused.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print a JSON summary (with `--out`).
    #[arg(long)]
    json: bool,
    /// The key of a sealed collection (its bodies are stored decrypted and redacted).
    #[command(flatten)]
    key: crate::cmd::keys::KeyArgs,
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    let FixtureCommand::Capture(args) = args.command;
    let mut options = CaptureOptions::new();
    for p in &args.redact {
        options = options.redact(RedactPath::parse(p).map_err(Failure::error)?);
    }
    if let Some(n) = args.sample {
        options = options.sample(n);
    }
    if args.json && args.out.is_none() {
        return Err(Failure::with_code(
            crate::exit::USAGE,
            "`--json` prints a summary of the file written: give `--out FILE` (without it the fixture itself goes to standard output)",
        ));
    }
    if let Some(out) = &args.out {
        if out.exists() {
            return Err(Failure::error(format!(
                "`{}` already exists; choose a new file for the fixture (nothing was written)",
                out.display()
            )));
        }
        // Checked before the store is read: a capture is not run to be thrown away.
        let dir = out_dir(out);
        if !dir.is_dir() {
            return Err(Failure::error(format!(
                "the directory `{}` of `--out {}` does not exist or is not a directory; create it or choose another path (nothing was written)",
                dir.display(),
                out.display()
            )));
        }
    }
    let store = db::open_for_reading(db_path)?;
    let sealer = args.key.unlock(&store)?;
    let fixture =
        capture(&store, &args.collection, &options.sealer(sealer)).map_err(Failure::error)?;
    match &args.out {
        None => {
            fixture
                .write_to(std::io::stdout().lock())
                .map_err(Failure::error)?;
        }
        Some(path) => {
            // Written beside the target and renamed into place: a failed capture leaves no
            // half file.
            let dir = out_dir(path);
            let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| {
                // The error's kind only: its text names the temporary file, not the
                // user's.
                Failure::error(format!(
                    "cannot create the fixture in `{}`: {}; check that the directory is writable (nothing was written)",
                    dir.display(),
                    e.kind()
                ))
            })?;
            fixture
                .write_to(std::io::BufWriter::new(tmp.as_file_mut()))
                .map_err(Failure::error)?;
            tmp.persist_noclobber(path).map_err(|e| {
                Failure::error(format!("cannot write `{}`: {}", path.display(), e.error))
            })?;
            let mut out = std::io::stdout().lock();
            if args.json {
                let doc = serde_json::json!({
                    "db": db::describe(db_path),
                    "collection": fixture.header.collection,
                    "file": path.display().to_string(),
                    "rows": fixture.header.rows,
                    "total_rows": fixture.header.total_rows,
                    "versions": fixture.header.versions,
                    "redacted": fixture.header.redacted,
                    "sealed": fixture.header.sealed,
                });
                crate::json::emit(&mut out, &doc)?;
            } else {
                writeln!(
                    out,
                    "{}: {} of {} row(s) captured to {}{}",
                    fixture.header.collection,
                    fixture.header.rows,
                    fixture.header.total_rows,
                    path.display(),
                    if fixture.header.redacted.is_empty() {
                        String::new()
                    } else {
                        format!(" (redacted: {})", fixture.header.redacted.join(", "))
                    }
                )?;
            }
        }
    }
    Ok(OK)
}

/// The directory `--out` writes into (the temporary file is created there and renamed).
fn out_dir(out: &Path) -> PathBuf {
    match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
