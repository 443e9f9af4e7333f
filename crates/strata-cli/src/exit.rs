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
    let mut cur: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::BrokenPipe {
                return true;
            }
        }
        if let Some(json) = err.downcast_ref::<serde_json::Error>() {
            if json.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe) {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

/// What a subcommand returns: an exit code on success (0, or 3/4/6 for a verdict the
/// command printed itself), or a failure to report.
pub type CmdResult = Result<u8, Failure>;

/// The error and its sources joined by `": "`.
pub fn message(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        line.push_str(": ");
        line.push_str(&s.to_string());
        source = s.source();
    }
    line
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

/// The command-line remedy for a library error whose message names no flag (library
/// messages say "raise the byte budget"; the CLI says which option does it).
fn cli_hint(e: &(dyn Error + 'static)) -> Option<&'static str> {
    let mut cur: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(
            strata::PassError::RecordTooLarge { .. } | strata::PassError::BatchTooLarge { .. },
        ) = err.downcast_ref::<strata::PassError>()
        {
            return Some(" (pass a larger `--max-bytes`)");
        }
        if let Some(strata_store::StoreError::RecordTooLarge { .. }) =
            err.downcast_ref::<strata_store::StoreError>()
        {
            return Some(" (pass a larger `--max-bytes`)");
        }
        cur = err.source();
    }
    None
}
