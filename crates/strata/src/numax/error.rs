//! The decode error of the Numax tables, in its own module so that the wire codecs
//! ([`super::wire`]) and the record decoders ([`super::decode`], which call the codecs)
//! depend on it without depending on each other both ways.

use strata_store::escape_key;

/// Why a Numax record (or value) failed to decode or encode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The table id is none of the 14 Numax tables.
    #[error("unknown numax table id {table_id}; known ids are 1 to 14, check the catalog")]
    UnknownTable {
        /// The id asked for.
        table_id: u16,
    },
    /// A record or value does not have its table's layout.
    #[error("invalid record{} in `{table}`: {reason}; the record was not written by a compatible numax release, restore it from a backup or remove it", render_key(.key_suffix))]
    Invalid {
        /// The table name.
        table: &'static str,
        /// The key suffix (after the table prefix), when known.
        key_suffix: Option<Vec<u8>>,
        /// What is wrong, for humans.
        reason: String,
    },
    /// A value could not be serialized (a bug: these types always serialize).
    #[error(
        "failed to encode a `{table}` value: {reason}; this is a bug in strata, please report it"
    )]
    Encode {
        /// The table name.
        table: &'static str,
        /// The serializer's message.
        reason: String,
    },
}

fn render_key(key: &Option<Vec<u8>>) -> String {
    match key {
        Some(k) => format!(" `{}`", escape_key(k)),
        None => String::new(),
    }
}

impl DecodeError {
    pub(crate) fn invalid(table: &'static str, reason: impl Into<String>) -> Self {
        DecodeError::Invalid {
            table,
            key_suffix: None,
            reason: reason.into(),
        }
    }

    /// Attaches the record's key suffix (for errors raised by value codecs).
    pub fn with_key(self, suffix: &[u8]) -> Self {
        match self {
            DecodeError::Invalid { table, reason, .. } => DecodeError::Invalid {
                table,
                key_suffix: Some(suffix.to_vec()),
                reason,
            },
            other => other,
        }
    }

    /// The human-readable reason alone, without table or key (e.g. `expected exactly 8
    /// bytes, found 5`).
    pub fn reason(&self) -> String {
        match self {
            DecodeError::UnknownTable { table_id } => format!("unknown numax table id {table_id}"),
            DecodeError::Invalid { reason, .. } | DecodeError::Encode { reason, .. } => {
                reason.clone()
            }
        }
    }
}
