//! `strata keys status|add|rewrap|remove|rotate` and the key flags other commands share
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
use strata::ops::rotate::{rotation_checkpoint_key, RotateOptions};
use strata::pass::PassLimits;
use strata::seal::{Credential, Keyring, KeyringRecord, SealError, Sealer};
use strata_store::{KvRead, KvWrite, Store};

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
        self.credentials_from("--passphrase-env")
    }

    /// [`KeyArgs::credentials`], naming `flag` in its errors.
    fn credentials_from(&self, flag: &str) -> Result<Vec<Credential>, Failure> {
        let mut out = Vec::new();
        for var in &self.passphrase_env {
            let value = std::env::var(var).map_err(|_| {
                Failure::error(format!(
                    "environment variable `{var}` (from `{flag}`) is not set or not UTF-8; export the passphrase in it"
                ))
            })?;
            // Used exactly as the application's `Credential::passphrase(env::var(..))` would
            // use it (no trimming): the same variable opens the same keyring in both.
            if value.is_empty() {
                return Err(Failure::error(format!(
                    "environment variable `{var}` (from `{flag}`) is empty; export the passphrase in it"
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

/// The credential of a new wrapping entry: exactly one of `--new-passphrase-env VAR` or
/// `--new-key-file PATH`.
#[derive(Debug, Clone, clap::Args)]
#[group(required = true, multiple = false)]
pub struct NewKeyArgs {
    /// The environment variable holding the new passphrase (Argon2id with the default
    /// parameters).
    #[arg(long = "new-passphrase-env", value_name = "VAR")]
    new_passphrase_env: Option<String>,
    /// A file holding the new raw 256-bit key (32 bytes, or 64 hex digits).
    #[arg(long = "new-key-file", value_name = "PATH")]
    new_key_file: Option<PathBuf>,
}

impl NewKeyArgs {
    /// The new credential, read now.
    fn credential(&self) -> Result<Credential, Failure> {
        let args = KeyArgs {
            passphrase_env: self.new_passphrase_env.iter().cloned().collect(),
            key_file: self.new_key_file.iter().cloned().collect(),
        };
        let mut creds = args.credentials_from("--new-passphrase-env")?;
        creds.pop().ok_or_else(|| {
            Failure::with_code(
                crate::exit::USAGE,
                "pass the new key: `--new-passphrase-env VAR` or `--new-key-file PATH`",
            )
        })
    }
}

/// Checks on a read-only open that `key` names credentials and that one of them opens the
/// database keyring (a wrong key leaves the datastore's files as they were), then opens
/// the store for writing: the store and the credential that opened the keyring.
///
/// `precheck` runs on the keyring read there too: what it refuses (a bad or duplicate
/// label, the last entry) is refused before the writable open, which alone rewrites a
/// redb file's header.
fn open_for_keyring_change(
    db_path: &Path,
    key: &KeyArgs,
    command: &str,
    precheck: impl Fn(&KeyringRecord) -> Result<(), SealError>,
) -> Result<(Store, Credential), Failure> {
    if key.is_empty() {
        return Err(Failure::with_code(
            crate::exit::USAGE,
            format!("`strata keys {command}` needs a current key of the keyring: `--passphrase-env VAR` or `--key-file PATH`"),
        ));
    }
    let creds = key.credentials()?;
    let reading = db::open_for_reading(db_path)?;
    // Only part of a copy's source (its keyring may not have come yet): never changed.
    crate::cmd::unfinished::refuse_partial_copy(
        &reading,
        &db::describe(db_path),
        &format!("strata keys {command}"),
    )?;
    let ring = Keyring::database();
    refuse_without_keyring(&ring, &reading, db_path, command)?;
    let mut opened = None;
    let mut last = None;
    for c in creds {
        match ring.unlock(&reading, &c) {
            Ok(_) => {
                opened = Some(c);
                break;
            }
            Err(e @ SealError::WrongKey { .. }) => last = Some(e),
            Err(e) => return Err(Failure::error(e)),
        }
    }
    let Some(cred) = opened else {
        return Err(Failure::error(last.unwrap_or(SealError::WrongKey {
            scope: ring.scope().to_string(),
            keyring: ring.store_key().to_vec(),
        })));
    };
    if let Some((_, rec)) = ring.read(&reading)? {
        precheck(&rec)?;
    }
    drop(reading);
    Ok((db::open_existing(db_path)?, cred))
}

/// Refuses `strata keys <command>` on a store without a database keyring: corrupt
/// metadata (exit 4) when a record is sealed, else nothing in it is sealed, and the
/// keyring is created by an application, not by the CLI (the library's own message names
/// that call, `Keyring::create`).
fn refuse_without_keyring(
    ring: &Keyring,
    reading: &Store,
    db_path: &Path,
    command: &str,
) -> Result<(), Failure> {
    if ring.read(reading)?.is_some() {
        return Ok(());
    }
    // Sealed records without their keyring: corrupt metadata (exit 4), as `keys status`.
    if let Some(record) = strata::seal::first_sealed_document(reading, None)? {
        return Err(Failure::with_code(
            crate::exit::UNSUPPORTED,
            SealError::KeyringMissing {
                keyring: ring.store_key().to_vec(),
                record,
            },
        ));
    }
    Err(Failure::error(format!(
        "`strata keys {command}` refused, nothing was written: `{}` has no database keyring `{}`, so nothing in it is sealed; an application seals a database by opening it with a key (`Database::builder(store).key(credential)`), and `strata keys` then manages that keyring",
        db::describe(db_path),
        strata_store::escape_key(ring.store_key()),
    )))
}

/// The most bytes a key file may hold: 64 hex digits with whitespace around them fit
/// many times over; anything longer is not a key file.
const MAX_KEY_FILE_BYTES: u64 = 4096;

/// Reads a key file: only a regular file (a FIFO, a device such as `/dev/zero`, a
/// directory is refused before it is opened, so nothing blocks or reads forever), and at
/// most [`MAX_KEY_FILE_BYTES`] of it.
fn read_key_file_bytes(path: &Path) -> Result<Vec<u8>, Failure> {
    use std::io::Read;
    let shown = strata_store::shown_text(&path.to_string_lossy());
    let cannot = |e: std::io::Error| {
        Failure::error(format!(
            "cannot read key file `{shown}`: {e}; check the path given to `--key-file`"
        ))
    };
    let not_regular = || {
        Failure::error(format!(
            "key file `{shown}` is not a regular file (a pipe, a device or a directory); write the key to a file and pass its path to `--key-file`"
        ))
    };
    // Checked before opening: opening a FIFO blocks until someone writes to it.
    if !std::fs::metadata(path).map_err(cannot)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::File::open(path).map_err(cannot)?;
    // And again on what was opened (the path may have been replaced in between).
    if !file.metadata().map_err(cannot)?.is_file() {
        return Err(not_regular());
    }
    let mut bytes = Vec::new();
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(Failure::error(format!(
            "key file `{shown}` is larger than {MAX_KEY_FILE_BYTES} bytes, so it is not a key file; check the path given to `--key-file` (the 256-bit key is 32 raw bytes or 64 hex digits)"
        )));
    }
    Ok(bytes)
}

fn read_key_file(path: &Path) -> Result<Credential, Failure> {
    let bytes = read_key_file_bytes(path)?;
    let bad = || {
        Failure::error(format!(
            "key file `{}` holds neither 32 raw bytes nor 64 hex digits; write the 256-bit key in one of those forms",
            strata_store::shown_text(&path.to_string_lossy())
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
    /// On the target of an unfinished `strata copy`, flagged as part of its source (exit 7).
    Status {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Add a wrapping entry: the data key wrapped under a new passphrase or raw key too
    /// (one atomic write), authorized by a current key.
    Add {
        /// The new entry's label (1-64 characters of `A-Z a-z 0-9 _ - .`).
        label: String,
        #[command(flatten)]
        new: NewKeyArgs,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// Re-wrap the entry a current key opens under a new passphrase or raw key (same
    /// label; one atomic write): the old passphrase or key no longer opens the keyring.
    Rewrap {
        #[command(flatten)]
        new: NewKeyArgs,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// Remove a wrapping entry (never the last one), authorized by a current key.
    Remove {
        /// The label of the entry to remove (see `strata keys status`).
        label: String,
        #[command(flatten)]
        key: KeyArgs,
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
    let ring = Keyring::database();
    match args.command {
        KeysCommand::Add { label, new, key } => {
            strata::seal::validate_label(&label)?;
            let new = new.credential()?;
            let (store, cred) = open_for_keyring_change(db_path, &key, "add", |rec| {
                match rec.entries().iter().any(|e| e.label == label) {
                    true => Err(SealError::DuplicateLabel {
                        keyring: ring.store_key().to_vec(),
                        label: label.clone(),
                    }),
                    false => Ok(()),
                }
            })?;
            ring.add_entry(&store, &cred, &label, &new)?;
            store.flush()?;
            writeln!(
                std::io::stdout(),
                "added entry `{label}` to keyring `__nx/keys/database`"
            )?;
            Ok(0)
        }
        KeysCommand::Rewrap { new, key } => {
            let new = new.credential()?;
            let (store, cred) = open_for_keyring_change(db_path, &key, "rewrap", |_| Ok(()))?;
            ring.rewrap(&store, &cred, &new)?;
            store.flush()?;
            writeln!(
                std::io::stdout(),
                "re-wrapped the entry of keyring `__nx/keys/database` the given key opened: the old passphrase or key no longer opens it"
            )?;
            Ok(0)
        }
        KeysCommand::Remove { label, key } => {
            let (store, cred) = open_for_keyring_change(db_path, &key, "remove", |rec| {
                let entries = rec.entries();
                let keyring = ring.store_key().to_vec();
                let label = label.clone();
                if !entries.iter().any(|e| e.label == label) {
                    Err(SealError::NoSuchEntry { keyring, label })
                } else if entries.len() == 1 {
                    Err(SealError::LastEntry { keyring, label })
                } else {
                    Ok(())
                }
            })?;
            ring.remove_entry(&store, &cred, &label)?;
            store.flush()?;
            writeln!(
                std::io::stdout(),
                "removed entry `{label}` from keyring `__nx/keys/database`"
            )?;
            Ok(0)
        }
        command => status_or_rotate(db_path, command),
    }
}

/// `keys status` and `keys rotate`.
fn status_or_rotate(db_path: &Path, command: KeysCommand) -> CmdResult {
    let store = match &command {
        // Handled by `run`.
        KeysCommand::Add { .. } | KeysCommand::Rewrap { .. } | KeysCommand::Remove { .. } => {
            return Ok(0)
        }
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
            let creds = key.credentials()?;
            let reading = db::open_for_reading(db_path)?;
            crate::cmd::unfinished::refuse_partial_copy(
                &reading,
                &db::describe(db_path),
                "strata keys rotate",
            )?;
            let ring = Keyring::database();
            refuse_without_keyring(&ring, &reading, db_path, "rotate")?;
            for c in &creds {
                ring.unlock(&reading, c)?;
            }
            // Starting needs a credential for every entry: refused here too.
            if let Some((_, rec)) = ring.read(&reading)? {
                let refs: Vec<&Credential> = creds.iter().collect();
                let missing = ring.entries_not_opened_by(&reading, &refs)?;
                if rec.retiring_key_id().is_none() && !missing.is_empty() {
                    return Err(Failure::error(SealError::RotationNeedsEveryEntry {
                        keyring: ring.store_key().to_vec(),
                        missing,
                    }));
                }
            }
            drop(reading);
            db::open_existing(db_path)?
        }
    };
    let mut out = std::io::stdout().lock();
    match command {
        KeysCommand::Add { .. } | KeysCommand::Rewrap { .. } | KeysCommand::Remove { .. } => Ok(0),
        KeysCommand::Status { json } => {
            let ring = Keyring::database();
            // Only part of a copy's source (its keyring may not have been copied yet):
            // what is shown is flagged (exit 7).
            let copy = crate::cmd::unfinished::copy(&store, &db::describe(db_path))?;
            let Some((_, rec)) = ring.read(&store)? else {
                // "Nothing is sealed" only when no record is: sealed records without their
                // keyring cannot be opened (exit 4, as corrupt metadata; exit 7 when an
                // unfinished copy may not have brought the keyring yet).
                if let Some(record) = strata::seal::first_sealed_document(&store, None)? {
                    let missing = SealError::KeyringMissing {
                        keyring: ring.store_key().to_vec(),
                        record,
                    };
                    return Err(match &copy {
                        Some(u) => Failure::with_code(
                            crate::exit::UNFINISHED,
                            format!(
                                "{missing}; {}, which may not have reached the keyring; {}",
                                u.detail, u.next
                            ),
                        ),
                        None => Failure::with_code(crate::exit::UNSUPPORTED, missing),
                    });
                }
                if json {
                    let mut doc = serde_json::json!({"keyring": null});
                    let code =
                        crate::cmd::unfinished::flag_partial_copy_json(&mut doc, copy.as_ref())?;
                    crate::json::emit(&mut out, &doc)?;
                    return Ok(code);
                }
                writeln!(
                    out,
                    "no database keyring: nothing in `{}` is sealed",
                    db::describe(db_path)
                )?;
                return Ok(crate::cmd::unfinished::flag_partial_copy(
                    &mut out,
                    copy.as_ref(),
                )?);
            };
            let catalog = db::catalog(&store).map_err(Failure::error)?;
            let mut rotating = Vec::new();
            // Which collections are sealed: the database mark, else each collection's mark
            // or (stores sealed before marks existed) its first document.
            let every = strata::seal::mark::database_is_marked(&store)?;
            let mut sealed = Vec::new();
            for t in catalog.tables() {
                if store.get(&rotation_checkpoint_key(t.name()))?.is_some() {
                    rotating.push(t.name().to_string());
                }
                if t.id() >= strata::layout::catalog::FIRST_COLLECTION_ID
                    && (every || strata::seal::mark::is_sealed_collection(&store, t.name())?)
                {
                    sealed.push(t.name().to_string());
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
                let mut doc = serde_json::json!({
                    "keyring": {
                        "active_key_id": rec.active_key_id(),
                        "retiring_key_id": rec.retiring_key_id(),
                        "entries": entries,
                        "rotation_checkpoints": rotating,
                    },
                    "sealed": {"every_collection": every, "collections": sealed},
                });
                let code = crate::cmd::unfinished::flag_partial_copy_json(&mut doc, copy.as_ref())?;
                crate::json::emit(&mut out, &doc)?;
                return Ok(code);
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
                        "{:<17} {}{kdf}, wraps keys {:?}",
                        format!("entry `{}`", e.label),
                        e.kind,
                        e.key_ids
                    )?;
                }
                if !rotating.is_empty() {
                    writeln!(out, "rotation checkpoints: {}", rotating.join(", "))?;
                }
                let which = match (every, sealed.is_empty()) {
                    (true, _) => "every collection (the database is sealed as a whole)".to_string(),
                    (false, true) => "none yet".to_string(),
                    (false, false) => sealed.join(", "),
                };
                writeln!(out, "sealed            {which}")?;
            }
            Ok(crate::cmd::unfinished::flag_partial_copy(
                &mut out,
                copy.as_ref(),
            )?)
        }
        KeysCommand::Rotate {
            key,
            batch_records,
            no_finish,
        } => {
            let creds = key.credentials()?;
            let refs: Vec<&Credential> = creds.iter().collect();
            let limits = PassLimits::new(batch_records, strata::pass::DEFAULT_MAX_BYTES)?;
            let report = strata::ops::rotate::rotate_data_key(
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
