//! Exit codes and error reporting.

use std::error::Error;
use std::process::ExitCode;

/// Success.
pub const OK: u8 = 0;
/// Any other error.
pub const ERROR: u8 = 1;
/// A usage error (as clap reports them).
pub const USAGE: u8 = 2;
/// A table needs an explicit migration (legacy or older).
pub const MIGRATION_REQUIRED: u8 = 3;
/// A table has future or corrupt metadata, or the datastore's files are damaged.
pub const UNSUPPORTED: u8 = 4;
/// A record cannot be processed within the format's record limit: a bulk pass's
/// checkpoint would exceed it (`PassError::CheckpointTooLarge`: a table key of about
/// 2 MiB or more). No flag raises that limit; nothing of the failing batch was written.
pub const RECORD_LIMIT: u8 = 5;
/// `schema diff` found a non-additive change.
pub const NON_ADDITIVE: u8 = 6;
/// The store is the target of an unfinished `strata copy` (it holds only part of its
/// source): reported by `status`, `verify` and `collections`, flagged after what they show
/// by `inspect`, `fence` and `keys status`; `migrate` refuses it. Resume the copy or
/// delete the store.
pub const UNFINISHED: u8 = 7;
/// A migration of the store was interrupted (a resumable checkpoint): `strata migrate`
/// resumes it. Reported by `status`, `verify` and `collections` (verdict
/// `unfinished_migration`) in place of 0 or 3.
pub const UNFINISHED_MIGRATION: u8 = 8;
/// A coordinated cutover is pending or was interrupted (the fence is not `normal`, or
/// cutovers are pending): writes to its collections are fenced until the application's
/// `cutover` finishes it (or `strata fence abort`). Verdict `unfinished_cutover`, in
/// place of 0 or 3.
pub const UNFINISHED_CUTOVER: u8 = 9;
/// A data-key rotation was interrupted (its checkpoint is in the store): `strata keys
/// rotate` resumes it; both keys open every record meanwhile. Verdict
/// `unfinished_rotation`, in place of 0 or 3.
pub const UNFINISHED_ROTATION: u8 = 10;
/// An eager sweep is running or was interrupted (its marker is in progress): the
/// application's `sweep` resumes it; rows are upcast on read meanwhile. Verdict
/// `unfinished_sweep`, in place of 0 or 3.
pub const UNFINISHED_SWEEP: u8 = 11;

/// A failed command: the exit code and the error to print.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What went wrong.
    pub error: Box<dyn Error + Send + Sync>,
}

impl Failure {
    /// A failure with the exit code its error maps to ([`code_of`]): 5 for a record over
    /// the format's limit, otherwise 1.
    pub fn error(e: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        let error = e.into();
        Failure {
            code: code_of(error.as_ref()),
            error,
        }
    }

    /// A failure whose message ends with command-line `advice` in parentheses (the
    /// library's messages name no flag): the error keeps its sources, and the exit code is
    /// the one `e` maps to.
    pub fn with_advice(
        e: impl Into<Box<dyn Error + Send + Sync>>,
        advice: impl Into<String>,
    ) -> Self {
        let error = e.into();
        Failure {
            code: code_of(error.as_ref()),
            error: Box::new(Advised {
                error,
                advice: advice.into(),
            }),
        }
    }

    /// A failure with a specific exit code.
    pub fn with_code(code: u8, e: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Failure {
            code,
            error: e.into(),
        }
    }

    /// This failure, after the command printed its `--json` document with the error in
    /// it: [`finish`] then prints only the stderr line, so a run prints one document.
    pub fn reported_in_json(self) -> Self {
        Failure {
            code: self.code,
            error: Box::new(InJson(self.error)),
        }
    }
}

/// An error already carried by the `--json` document the command printed.
#[derive(Debug)]
struct InJson(Box<dyn Error + Send + Sync>);

impl std::fmt::Display for InJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Error for InJson {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

/// The line [`finish`] prints for `f` (without `strata: `): its message and the
/// command-line hint.
pub fn failure_line(f: &Failure) -> String {
    let mut line = message(f.error.as_ref());
    if let Some(hint) = cli_hint(f.error.as_ref()) {
        line.push_str(hint);
    }
    // One line whatever the error echoes (a newline in an argument cannot forge a second
    // `strata:` line, an escape sequence cannot drive the terminal).
    strata_store::one_line(&line)
}

/// An error with command-line advice appended to its message. Its sources are the
/// error's own, so a chain prints each message once.
#[derive(Debug)]
struct Advised {
    error: Box<dyn Error + Send + Sync>,
    advice: String,
}

impl std::fmt::Display for Advised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.error, self.advice)
    }
}

impl Error for Advised {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error.source()
    }
}

impl<E: Error + Send + Sync + 'static> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::error(e)
    }
}

/// True when `e` or any error in its chain is a broken pipe (the reader of stdout went
/// away, as with `strata status | head`): that is not a failure.
fn is_broken_pipe(e: &(dyn Error + 'static)) -> bool {
    chain(e).any(|err| {
        err.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || err
                .downcast_ref::<serde_json::Error>()
                .is_some_and(|j| j.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe))
    })
}

/// The exit code of an error no command gave a code of its own: [`RECORD_LIMIT`] when a
/// pass checkpoint over the record limit is anywhere in its chain (directly, or inside a
/// migration error, which forwards the pass error transparently), [`UNSUPPORTED`] when
/// the datastore is damaged ([`strata_store::StoreError::Damaged`]: as corrupt metadata,
/// never healthy) or the database keyring is corrupted or missing beside sealed records,
/// otherwise [`ERROR`].
pub fn code_of(e: &(dyn Error + 'static)) -> u8 {
    let damaged = chain(e).any(|err| {
        matches!(
            err.downcast_ref::<strata_store::StoreError>(),
            Some(strata_store::StoreError::Damaged { .. })
        )
    });
    // A keyring that does not decode, or sealed records whose keyring is gone: corrupt
    // metadata (without it the sealed records cannot be opened).
    let keyring = chain(e).any(|err| {
        matches!(
            err.downcast_ref::<strata::seal::SealError>(),
            Some(
                strata::seal::SealError::CorruptedKeyring { .. }
                    | strata::seal::SealError::KeyringMissing { .. }
            )
        )
    });
    if damaged || keyring {
        return UNSUPPORTED;
    }
    let checkpoint_too_large = chain(e).any(|err| {
        matches!(
            err.downcast_ref::<strata::pass::PassError>(),
            Some(strata::pass::PassError::CheckpointTooLarge { .. })
        ) || matches!(
            err.downcast_ref::<strata::migrate::MigrateError>(),
            Some(strata::migrate::MigrateError::Pass(
                strata::pass::PassError::CheckpointTooLarge { .. }
            ))
        )
    });
    if checkpoint_too_large {
        RECORD_LIMIT
    } else {
        ERROR
    }
}

/// The exit code of a catalog that cannot be read: 4 for a corrupt catalog record (as
/// corrupt metadata), otherwise the error's own code (4 for a damaged datastore, 1 for
/// another store error).
pub(crate) fn catalog_failure(e: Box<dyn std::error::Error + Send + Sync>) -> Failure {
    let corrupt = matches!(
        e.downcast_ref::<strata::CollectionError>(),
        Some(strata::CollectionError::CorruptCatalog { .. })
    );
    Failure {
        code: if corrupt {
            UNSUPPORTED
        } else {
            code_of(e.as_ref())
        },
        error: e,
    }
}

/// `e` followed by each of its sources, outermost first (an error already in the
/// `--json` document counts as the error it carries).
fn chain<'a>(e: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    let e: &'a (dyn Error + 'static) = match e.downcast_ref::<InJson>() {
        Some(inner) => &*inner.0,
        None => e,
    };
    std::iter::successors(Some(e), |&err| err.source())
}

/// What a subcommand returns: an exit code on success (0, or 3/4/6 for a verdict the
/// command printed itself), or a failure to report.
pub type CmdResult = Result<u8, Failure>;

/// The error and its sources joined by `": "` (each as [`render`] says it), skipping a
/// source whose text is already in the line (an error whose message carries its cause's
/// advice is not followed by that cause again).
pub fn message(error: &(dyn Error + 'static)) -> String {
    let mut line = String::new();
    for (i, err) in chain(error).enumerate() {
        let part = match err.downcast_ref::<strata::numax::decode::DecodeError>() {
            // Under an error that already says its reason and names the record, its table
            // and what to do (a pass's invalid record), a Numax decode error adds nothing
            // but a repeat ("invalid record `…` in `…`: <reason>"): it is said once.
            Some(decode) if i > 0 && line.contains(&decode.reason()) => continue,
            _ => render(err),
        };
        if line.is_empty() {
            line = part;
        } else if !line.contains(&part) {
            line.push_str(": ");
            line.push_str(&part);
        }
    }
    line
}

/// One error as the command line says it: a table that needs an explicit migration names
/// the command that runs it, `strata migrate` (the library's message says "run the
/// migrator", its API), a write fenced by a pending cutover names the application's
/// `cutover` command and `strata fence abort` (the library's says `run_schema_cutover()`),
/// an unreadable fence `strata fence abort --reset-corrupt N` (the library's says
/// `Fence::dangerous_reset`); any other error as it displays itself.
pub fn render(error: &(dyn Error + 'static)) -> String {
    const REMEDY: &str = "an explicit migration is required: run `strata migrate`";
    if let Some(text) = fenced(error) {
        return text;
    }
    // An unreadable fence: the command that resets it, not the library call.
    if let Some(strata::policy::PolicyError::Corrupted { key, reason }) =
        error.downcast_ref::<strata::policy::PolicyError>()
    {
        if key.as_slice() == strata::layout::keys::FENCE_KEY {
            return format!(
                "corrupted policy record `__nx/fence`: {reason}; restore it from a backup, or reset it to a normal fence at a chosen generation (`strata fence abort --reset-corrupt N`)"
            );
        }
    }
    match error.downcast_ref::<strata::validate::ValidationError>() {
        Some(strata::validate::ValidationError::Legacy { table }) => {
            format!("legacy unversioned data found in {table}; {REMEDY}")
        }
        Some(strata::validate::ValidationError::MigrationRequired {
            table,
            found,
            current,
        }) => format!(
            "schema for {table} is at version {found}, current version is {current}; {REMEDY}"
        ),
        _ => error.to_string(),
    }
}

/// The command-line message of a write refused by a pending cutover's fence (a
/// [`strata::CollectionError`] or a [`strata::policy::PolicyError`]); `None` for any other
/// error.
fn fenced(error: &(dyn Error + 'static)) -> Option<String> {
    use strata::policy::{FenceState, PolicyError, Refusal};
    let (collection, refusal) = match (
        error.downcast_ref::<strata::CollectionError>(),
        error.downcast_ref::<PolicyError>(),
    ) {
        (Some(strata::CollectionError::Refused { collection, reason }), _)
        | (_, Some(PolicyError::Refused { collection, reason })) => (collection, reason),
        _ => return None,
    };
    let c = collection;
    match refusal {
        Refusal::Fenced {
            state: FenceState::Normal,
            generation,
        } => Some(format!(
            "writes to `{c}` are fenced: a schema cutover is pending for this build's change of `{c}` and has not started (the stored fence is still normal, generation {generation}); run the application's `cutover` command, or write with a build of the stored schema"
        )),
        Refusal::Fenced { state, generation } => Some(format!(
            "writes to `{c}` are fenced: a schema cutover is pending (fence {state}, generation {generation}); run the application's `cutover` command to finish it, or `strata fence abort` to abort it, then write again"
        )),
        _ => None,
    }
}

/// The `--json` error document, printed on one line on stdout in place of the result:
/// `{"format":1,"error":{"message":"…","exit_code":N}}` (written by
/// [`crate::json::line`]).
pub fn error_document(message: &str, exit_code: u8) -> String {
    crate::json::line(&serde_json::json!({
        "error": { "message": message, "exit_code": exit_code },
    }))
}

/// Prints a failure as one line `strata: <error>: <source>: ...` on stderr (and, when
/// `json`, the [`error_document`] on stdout) and maps to the exit code.
pub fn finish(result: CmdResult, json: bool) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) if f.code == OK || is_broken_pipe(f.error.as_ref()) => ExitCode::SUCCESS,
        Err(f) => {
            let line = failure_line(&f);
            eprintln!("strata: {line}");
            if json && f.error.downcast_ref::<InJson>().is_none() {
                // A reader that went away (`| head`) does not change the exit code.
                use std::io::Write;
                let _ = writeln!(std::io::stdout(), "{}", error_document(&line, f.code));
            }
            ExitCode::from(f.code)
        }
    }
}

/// The command-line remedy for a library error whose message names no flag or command
/// (library messages say "raise the byte budget", "delete it"; the CLI says which option
/// or command does it).
fn cli_hint(e: &(dyn Error + 'static)) -> Option<&'static str> {
    let over_budget = chain(e).any(|err| {
        matches!(
            err.downcast_ref::<strata::pass::PassError>(),
            Some(
                strata::pass::PassError::RecordTooLarge { .. }
                    | strata::pass::PassError::BatchTooLarge { .. }
            )
        ) || matches!(
            err.downcast_ref::<strata_store::StoreError>(),
            Some(strata_store::StoreError::RecordTooLarge { .. })
        )
    });
    if over_budget {
        return Some(" (pass a larger `--max-bytes`)");
    }
    if needs_key(e) {
        return Some(" (pass the key: `--passphrase-env VAR` or `--key-file PATH`)");
    }
    repairable(e).then_some(
        " (`strata repair` lists the metadata it can fix; `strata repair --apply` fixes it)",
    )
}

/// True when `e` (or its chain) says a sealed collection or record needs the key the
/// database was opened without.
fn needs_key(e: &(dyn Error + 'static)) -> bool {
    chain(e).any(|err| {
        matches!(
            err.downcast_ref::<strata::CollectionError>(),
            Some(strata::CollectionError::NoKey { .. })
        ) || matches!(
            err.downcast_ref::<strata::seal::SealError>(),
            Some(strata::seal::SealError::NeedsKey { .. })
        )
    })
}

/// True when `e` (or its chain) is stuck or corrupt metadata `strata repair` handles.
pub(crate) fn repairable(e: &(dyn Error + 'static)) -> bool {
    chain(e).any(|err| {
        err.downcast_ref::<strata::migrate::MigrateError>()
            .is_some_and(strata::migrate::MigrateError::is_checkpoint)
            || matches!(
                err.downcast_ref::<strata::CollectionError>(),
                Some(
                    strata::CollectionError::CorruptCatalog { .. }
                        | strata::CollectionError::CorruptMarker { .. }
                )
            )
            || matches!(
                err.downcast_ref::<strata::policy::PolicyError>(),
                Some(strata::policy::PolicyError::Corrupted { .. })
            )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn checkpoint_too_large() -> strata::pass::PassError {
        strata::pass::PassError::CheckpointTooLarge {
            table: "orders".into(),
            key: b"__nx/sweep/orders".to_vec(),
            size: 5 << 20,
            limit: 4 << 20,
            checkpoint: None,
        }
    }

    /// A checkpoint over the record limit exits 5 wherever it is in the chain: alone, as a
    /// migration error, and as the source of a sweep's collection error; other errors exit 1.
    #[test]
    fn checkpoint_too_large_has_its_own_exit_code() {
        assert_eq!(Failure::error(checkpoint_too_large()).code, RECORD_LIMIT);
        assert_eq!(
            Failure::error(strata::migrate::MigrateError::Pass(checkpoint_too_large())).code,
            RECORD_LIMIT
        );
        let sweep = strata::CollectionError::Sweep {
            collection: "orders".into(),
            reason: "the pass failed".into(),
            source: Some(Box::new(checkpoint_too_large())),
        };
        assert_eq!(Failure::from(sweep).code, RECORD_LIMIT);
        let other = strata::pass::PassError::Aborted {
            table: "orders".into(),
            checkpoint: None,
        };
        assert_eq!(Failure::error(other).code, ERROR);
        assert_eq!(Failure::error("plain").code, ERROR);
        let damaged = strata_store::StoreError::Damaged {
            path: "s.redb".into(),
            reason: "truncated".into(),
        };
        assert_eq!(Failure::error(damaged).code, UNSUPPORTED);
        // An explicit code stays.
        assert_eq!(
            Failure::with_code(UNSUPPORTED, checkpoint_too_large()).code,
            UNSUPPORTED
        );
    }

    /// A sealed collection opened without the key names the key flags (the library's
    /// message names the builder call only).
    #[test]
    fn a_missing_key_names_the_key_flags() {
        let e = strata::CollectionError::NoKey {
            collection: "accounts".into(),
        };
        assert!(cli_hint(&e).unwrap().contains("--passphrase-env"));
        let e = strata::CollectionError::Seal {
            collection: "accounts".into(),
            source: strata::seal::SealError::NeedsKey { key: b"k".to_vec() },
        };
        assert!(cli_hint(&e).unwrap().contains("--key-file"));
        assert!(cli_hint(&strata::CollectionError::NoKey {
            collection: String::new()
        })
        .is_some());
    }

    /// Advice is appended once, the error's sources are kept (each message once in the
    /// chain) and the exit code is the wrapped error's.
    #[test]
    fn advice_keeps_the_chain_and_the_code() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("writing the batch failed")
            }
        }
        impl Error for Outer {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let f = Failure::with_advice(
            Outer(std::io::Error::other("disk full")),
            "pass `--max-bytes 9` or more",
        );
        assert_eq!(f.code, ERROR);
        assert_eq!(
            message(f.error.as_ref()),
            "writing the batch failed (pass `--max-bytes 9` or more): disk full"
        );
        assert!(f.error.source().unwrap().is::<std::io::Error>());
        let f = Failure::with_advice(checkpoint_too_large(), "advice");
        assert_eq!(f.code, RECORD_LIMIT);
    }
}
