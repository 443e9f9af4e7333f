//! `strata keys status|rotate` and the key flags other commands share
//! (`--passphrase-env VAR`, `--key-file PATH`).
//!
//! A passphrase is never taken from the command line (it would show in `ps` and in shell
//! history): `--passphrase-env VAR` names the environment variable that holds it.
//! `--key-file PATH` names a file holding a raw 256-bit key: 32 bytes, or 64 hex digits
//! (surrounding whitespace ignored).

use crate::db;
use crate::exit::{CmdResult, Failure};
use std::io::Write;
use std::path::{Path, PathBuf};
use strata::pass::PassLimits;
use strata::seal::{
    rotation_checkpoint_key, Credential, Keyring, RotateOptions, SealError, Sealer,
};
use strata_store::{KvRead, Store};

/// The key flags: how to obtain the credential(s) of the database keyring.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KeyArgs {
    /// The environment variable holding the database passphrase (never the passphrase
    /// itself on the command line). Repeat for several keyring entries.
    #[arg(long = "passphrase-env", value_name = "VAR")]
    passphrase_env: Vec<String>,
    /// A file holding a raw 256-bit key (32 bytes, or 64 hex digits). Repeatable.
    #[arg(long = "key-file", value_name = "PATH")]
    key_file: Vec<PathBuf>,
}

impl KeyArgs {
    /// True when no key flag was given.
    pub fn is_empty(&self) -> bool {
        self.passphrase_env.is_empty() && self.key_file.is_empty()
    }

    /// The credentials the flags name, read now (errors name the variable or file, never
    /// the secret).
    pub fn credentials(&self) -> Result<Vec<Credential>, Failure> {
        let mut out = Vec::new();
        for var in &self.passphrase_env {
            let value = std::env::var(var).map_err(|_| {
                Failure::error(format!(
                    "environment variable `{var}` (from `--passphrase-env`) is not set or not UTF-8; export the passphrase in it"
                ))
            })?;
            let value = value.strip_suffix('\n').unwrap_or(&value).to_string();
            if value.is_empty() {
                return Err(Failure::error(format!(
                    "environment variable `{var}` (from `--passphrase-env`) is empty; export the passphrase in it"
                )));
            }
            out.push(Credential::passphrase(value));
        }
        for path in &self.key_file {
            out.push(read_key_file(path)?);
        }
        Ok(out)
    }

    /// Unlocks the database keyring with the first credential that opens it: `None`
    /// when no key flag was given. A wrong key fails here, before any record is read.
    pub fn unlock(&self, store: &Store) -> Result<Option<Sealer>, Failure> {
        if self.is_empty() {
            return Ok(None);
        }
        let creds = self.credentials()?;
        let ring = Keyring::database();
        let mut last = None;
        for c in &creds {
            match ring.unlock(store, c) {
                Ok(s) => return Ok(Some(s)),
                Err(e @ SealError::WrongKey { .. }) => last = Some(e),
                Err(e) => return Err(Failure::error(e)),
            }
        }
        Err(Failure::error(last.unwrap_or(SealError::WrongKey {
            scope: ring.scope().to_string(),
            keyring: ring.store_key().to_vec(),
        })))
    }
}

fn read_key_file(path: &Path) -> Result<Credential, Failure> {
    let bytes = std::fs::read(path).map_err(|e| {
        Failure::error(format!(
            "cannot read key file `{}`: {e}; check the path given to `--key-file`",
            path.display()
        ))
    })?;
    let bad = || {
        Failure::error(format!(
            "key file `{}` holds neither 32 raw bytes nor 64 hex digits; write the 256-bit key in one of those forms",
            path.display()
        ))
    };
    let key = if bytes.len() == 32 {
        bytes
    } else {
        let text = std::str::from_utf8(&bytes).map_err(|_| bad())?.trim();
        if text.len() != 64 {
            return Err(bad());
        }
        (0..64)
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(|_| bad()))
            .collect::<Result<Vec<u8>, Failure>>()?
    };
    Credential::raw_key(&key).map_err(Failure::error)
}

/// Arguments of `strata keys`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Debug, clap::Subcommand)]
enum KeysCommand {
    /// Show the database keyring: active data key, a rotation in progress, the wrapping
    /// entries (labels, kinds, Argon2id parameters; never key material). No key needed.
    Status {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Rotate the data key: a fresh key, every sealed record re-encrypted under it
    /// (resumable: rerun after an interruption), then the old key removed. Starting needs
    /// a credential for every keyring entry; resuming needs one.
    Rotate {
        #[command(flatten)]
        key: KeyArgs,
        /// Records per batch of the re-encryption pass.
        #[arg(long, default_value = "512", value_parser = crate::size::parse_nonzero)]
        batch_records: usize,
        /// Re-encrypt every record but keep the old key (both keys keep opening every
        /// record); a later `strata keys rotate` removes it.
        #[arg(long)]
        no_finish: bool,
    },
}

/// Runs the command.
pub fn run(db_path: &Path, args: Args) -> CmdResult {
    let store = match &args.command {
        KeysCommand::Status { .. } => db::open_for_reading(db_path)?,
        KeysCommand::Rotate { key, .. } => {
            if key.is_empty() {
                return Err(Failure::with_code(
                    crate::exit::USAGE,
                    "`strata keys rotate` needs the key: `--passphrase-env VAR` or `--key-file PATH` (one per keyring entry to start a rotation)",
                ));
            }
            // Every credential must open the keyring: checked on a read-only open, so a
            // wrong key leaves the datastore's files as they were (bytes and mtime).
            let reading = db::open_for_reading(db_path)?;
            let ring = Keyring::database();
            for c in &key.credentials()? {
                ring.unlock(&reading, c)?;
            }
            drop(reading);
            db::open_existing(db_path)?
        }
    };
    let mut out = std::io::stdout().lock();
    match args.command {
        KeysCommand::Status { json } => {
            let ring = Keyring::database();
            let Some((_, rec)) = ring.read(&store)? else {
                // "Nothing is sealed" only when no record is: sealed records without their
                // keyring cannot be opened (exit 4, as corrupt metadata).
                if let Some(record) = strata::seal::first_sealed_document(&store, None)? {
                    return Err(Failure::with_code(
                        crate::exit::UNSUPPORTED,
                        SealError::KeyringMissing {
                            keyring: ring.store_key().to_vec(),
                            record,
                        },
                    ));
                }
                if json {
                    writeln!(out, "{}", serde_json::json!({"format": 1, "keyring": null}))?;
                } else {
                    writeln!(
                        out,
                        "no database keyring: nothing in `{}` is sealed",
                        db::describe(db_path)
                    )?;
                }
                return Ok(0);
            };
            let catalog = db::catalog(&store).map_err(Failure::error)?;
            let mut rotating = Vec::new();
            for t in catalog.tables() {
                if store.get(&rotation_checkpoint_key(t.name()))?.is_some() {
                    rotating.push(t.name().to_string());
                }
            }
            if json {
                let entries: Vec<_> = rec
                    .entries()
                    .into_iter()
                    .map(|e| {
                        serde_json::json!({
                            "label": e.label,
                            "kind": e.kind,
                            "kdf": e.kdf.map(|k| serde_json::json!({
                                "m_cost_kib": k.m_cost_kib, "t_cost": k.t_cost, "parallelism": k.parallelism
                            })),
                            "key_ids": e.key_ids,
                        })
                    })
                    .collect();
                let doc = serde_json::json!({
                    "format": 1,
                    "keyring": {
                        "active_key_id": rec.active_key_id(),
                        "retiring_key_id": rec.retiring_key_id(),
                        "entries": entries,
                        "rotation_checkpoints": rotating,
                    }
                });
                serde_json::to_writer_pretty(&mut out, &doc)?;
                writeln!(out)?;
            } else {
                writeln!(out, "active data key   {}", rec.active_key_id())?;
                match rec.retiring_key_id() {
                    Some(old) => writeln!(
                        out,
                        "rotation          in progress: retiring key {old} (both keys open every record); run `strata keys rotate` to resume"
                    )?,
                    None => writeln!(out, "rotation          none in progress")?,
                }
                for e in rec.entries() {
                    let kdf = e
                        .kdf
                        .map(|k| {
                            format!(
                                " (Argon2id {} KiB, {} passes, {} lanes)",
                                k.m_cost_kib, k.t_cost, k.parallelism
                            )
                        })
                        .unwrap_or_default();
                    writeln!(
                        out,
                        "entry `{}`        {}{kdf}, wraps keys {:?}",
                        e.label, e.kind, e.key_ids
                    )?;
                }
                if !rotating.is_empty() {
                    writeln!(out, "rotation checkpoints: {}", rotating.join(", "))?;
                }
            }
            Ok(0)
        }
        KeysCommand::Rotate {
            key,
            batch_records,
            no_finish,
        } => {
            let creds = key.credentials()?;
            let refs: Vec<&Credential> = creds.iter().collect();
            let limits = PassLimits::new(batch_records, strata::pass::DEFAULT_MAX_BYTES)?;
            let report = strata::seal::rotate_data_key(
                &store,
                &refs,
                RotateOptions::new()
                    .limits(limits)
                    .finish(!no_finish)
                    .on_progress(|p| {
                        if p.done {
                            eprintln!(
                                "strata: re-encrypted collection `{}` ({} records re-sealed)",
                                p.collection, p.counters.rewritten
                            );
                        }
                    }),
            )?;
            for c in &report.collections {
                let what = if c.already_done {
                    "done in an earlier run".to_string()
                } else {
                    format!(
                        "{} re-sealed, {} unchanged, {} changed concurrently",
                        c.resealed, c.unchanged, c.conflicted
                    )
                };
                writeln!(out, "{:<26} {what}", c.collection)?;
            }
            let verb = if report.began { "started" } else { "resumed" };
            if report.finished {
                writeln!(
                    out,
                    "\ndata-key rotation {verb} and finished: every sealed record is under key {}; key {} was removed",
                    report.new_key_id, report.old_key_id
                )?;
            } else {
                writeln!(
                    out,
                    "\ndata-key rotation {verb}: every sealed record is under key {}; key {} is kept until `strata keys rotate` finishes it",
                    report.new_key_id, report.old_key_id
                )?;
            }
            Ok(0)
        }
    }
}
