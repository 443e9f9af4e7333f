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
/// A table has future or corrupt metadata.
pub const UNSUPPORTED: u8 = 4;
/// `schema diff` found a non-additive change.
pub const NON_ADDITIVE: u8 = 6;

/// A failed command: the exit code and the error to print.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What went wrong.
    pub error: Box<dyn Error + Send + Sync>,
}

impl Failure {
    /// A failure with exit code 1.
    pub fn error(e: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Failure {
            code: ERROR,
            error: e.into(),
        }
    }

    /// A failure with a specific exit code.
    pub fn with_code(code: u8, e: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Failure {
            code,
            error: e.into(),
        }
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

/// `e` followed by each of its sources, outermost first.
fn chain<'a>(e: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(e), |&err| err.source())
}

/// What a subcommand returns: an exit code on success (0, or 3/4/6 for a verdict the
/// command printed itself), or a failure to report.
pub type CmdResult = Result<u8, Failure>;

/// The error and its sources joined by `": "`.
pub fn message(error: &(dyn Error + 'static)) -> String {
    chain(error)
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

/// The `--json` error document (format 1), printed on stdout in place of the result:
/// `{"format":1,"error":{"message":"…","exit_code":N}}`.
pub fn error_document(message: &str, exit_code: u8) -> serde_json::Value {
    serde_json::json!({
        "format": 1,
        "error": { "message": message, "exit_code": exit_code },
    })
}

/// Prints a failure as one line `strata: <error>: <source>: ...` on stderr (and, when
/// `json`, the [`error_document`] on stdout) and maps to the exit code.
pub fn finish(result: CmdResult, json: bool) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) if f.code == OK || is_broken_pipe(f.error.as_ref()) => ExitCode::SUCCESS,
        Err(f) => {
            let mut line = message(f.error.as_ref());
            if let Some(hint) = cli_hint(f.error.as_ref()) {
                line.push_str(hint);
            }
            eprintln!("strata: {line}");
            if json {
                println!("{}", error_document(&line, f.code));
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
            err.downcast_ref::<strata::PassError>(),
            Some(
                strata::PassError::RecordTooLarge { .. } | strata::PassError::BatchTooLarge { .. }
            )
        ) || matches!(
            err.downcast_ref::<strata_store::StoreError>(),
            Some(strata_store::StoreError::RecordTooLarge { .. })
        )
    });
    if over_budget {
        return Some(" (pass a larger `--max-bytes`)");
    }
    repairable(e).then_some(
        " (`strata repair` lists the metadata it can fix; `strata repair --apply` fixes it)",
    )
}

/// True when `e` (or its chain) is stuck or corrupt metadata `strata repair` handles.
pub(crate) fn repairable(e: &(dyn Error + 'static)) -> bool {
    chain(e).any(|err| {
        err.downcast_ref::<strata::MigrateError>()
            .is_some_and(strata::MigrateError::is_checkpoint)
            || matches!(
                err.downcast_ref::<strata::CollectionError>(),
                Some(
                    strata::CollectionError::CorruptCatalog { .. }
                        | strata::CollectionError::CorruptMarker { .. }
                )
            )
            || matches!(
                err.downcast_ref::<strata::PolicyError>(),
                Some(strata::PolicyError::Corrupted { .. })
            )
    })
}
