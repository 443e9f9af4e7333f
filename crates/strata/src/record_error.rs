//! Why one record is bad: a reason, and the error behind it when there is one.
//!
//! A record's decoder ([`crate::RecordDecoder`]), a pass's processor and a checkpoint
//! codec say why a record is invalid with a [`RecordError`]; the errors above them
//! (a pass, a collection, a policy error) carry it as their
//! [`source`](std::error::Error::source), so the cause of a corrupted record is never
//! flattened into a string on its way up. Public as `strata::pass::RecordError`.

use std::fmt;

/// The error a [`RecordError`] was made from, shared (a record error is `Clone`).
pub type RecordCause = std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A per-record processor's verdict that a record is invalid (or cannot be transformed):
/// a reason, and the error behind it when there is one — kept as an error (its
/// [`source`](std::error::Error::source) chain), never flattened into the reason.
/// One word wide (the parts are boxed), so the error enums that carry it stay small.
#[derive(Debug, Clone)]
pub struct RecordError(Box<Parts>);

#[derive(Debug, Clone)]
struct Parts {
    reason: String,
    /// The error this one was made from ([`RecordError::from_error`]): it displays as that
    /// error and its sources are that error's sources.
    cause: Option<RecordCause>,
    /// True when made by [`RecordError::from_error`]: this error *is* its cause (so its
    /// source is the cause's source); false: the cause is this error's source.
    transparent: bool,
}

impl RecordError {
    /// A record error with a lowercase human-readable reason.
    pub fn new(reason: impl Into<String>) -> Self {
        RecordError(Box::new(Parts {
            reason: reason.into(),
            cause: None,
            transparent: false,
        }))
    }

    /// A record error that *is* `error`: it displays as `error` does and its
    /// [`source`](std::error::Error::source) is `error`'s, so the chain reads as
    /// `error`'s own (a step's or store's failure on one record keeps its causes).
    pub fn from_error<E: std::error::Error + Send + Sync + 'static>(error: E) -> Self {
        RecordError(Box::new(Parts {
            reason: error.to_string(),
            cause: Some(std::sync::Arc::new(error)),
            transparent: true,
        }))
    }

    /// A record error that says `reason` (what `cause` means for this record) and keeps
    /// `cause` as its [`source`](std::error::Error::source) (and [`cause`](Self::cause)).
    pub fn with_cause<E: std::error::Error + Send + Sync + 'static>(
        reason: impl Into<String>,
        cause: E,
    ) -> Self {
        RecordError(Box::new(Parts {
            reason: reason.into(),
            cause: Some(std::sync::Arc::new(cause)),
            transparent: false,
        }))
    }

    /// The reason (the message of the error it was made from, without that error's
    /// sources).
    pub fn reason(&self) -> &str {
        &self.0.reason
    }

    /// The error it was made from, if any.
    pub fn cause(&self) -> Option<&RecordCause> {
        self.0.cause.as_ref()
    }
}

impl PartialEq for RecordError {
    /// Two record errors are equal when they say the same (their causes are not compared).
    fn eq(&self, other: &Self) -> bool {
        self.0.reason == other.0.reason
    }
}

impl Eq for RecordError {}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.reason)
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let cause = self.0.cause.as_deref()?;
        if self.0.transparent {
            // The error it was made from is this error, so its sources are ours.
            cause.source()
        } else {
            Some(cause)
        }
    }
}

impl From<String> for RecordError {
    fn from(reason: String) -> Self {
        RecordError::new(reason)
    }
}

impl From<&str> for RecordError {
    fn from(reason: &str) -> Self {
        RecordError::new(reason)
    }
}
