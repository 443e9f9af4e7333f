//! Exit codes and error reporting.

use std::error::Error;
use std::process::ExitCode;

/// Success.
pub const OK: u8 = 0;
/// Any other error.
pub const ERROR: u8 = 1;
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
        if let Some(io) = (&e as &dyn Error).downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::BrokenPipe {
                return Failure::with_code(OK, e);
            }
        }
        Failure::error(e)
    }
}

/// What a subcommand returns: an exit code on success (0, or 3/4/6 for a verdict the
/// command printed itself), or a failure to report.
pub type CmdResult = Result<u8, Failure>;

/// Prints a failure as one line `strata: <error>: <source>: ...` and maps to the exit code.
pub fn finish(result: CmdResult) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) if f.code == OK => ExitCode::SUCCESS, // broken pipe: the reader went away
        Err(f) => {
            let mut line = format!("strata: {}", f.error);
            let mut source = f.error.source();
            while let Some(s) = source {
                line.push_str(": ");
                line.push_str(&s.to_string());
                source = s.source();
            }
            eprintln!("{line}");
            ExitCode::from(f.code)
        }
    }
}
