//! The catalog of managed tables.

use crate::header::{MIGRATION_PREFIX, RESERVED_PREFIX, SCHEMA_PREFIX};
use crate::record_error::RecordError;
use std::fmt;
use std::sync::Arc;
use strata_store::escape_key;

/// Validates one record of a table: `(key suffix after the table prefix, value)`. Returns
/// why the record is invalid ([`RecordError`]: a reason, and
/// the decode error behind it as its cause). Must never rewrite anything.
pub type RecordDecoder = Arc<dyn Fn(&[u8], &[u8]) -> Result<(), RecordError> + Send + Sync>;

/// One managed table: a name, a fixed `u16` id, a data prefix, the version this build
/// writes, and (optionally) a decoder that certifies its records.
#[derive(Clone)]
pub struct TableDef {
    name: String,
    id: u16,
    prefix: Vec<u8>,
    current_version: u16,
    decoder: Option<RecordDecoder>,
}

impl fmt::Debug for TableDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableDef")
            .field("name", &self.name)
            .field("id", &self.id)
            .field("prefix", &escape_key(&self.prefix))
            .field("current_version", &self.current_version)
            .field("decoder", &self.decoder.is_some())
            .finish()
    }
}

impl TableDef {
    /// A table definition without a decoder.
    pub fn new(
        name: impl Into<String>,
        id: u16,
        prefix: impl Into<Vec<u8>>,
        current_version: u16,
    ) -> Self {
        TableDef {
            name: name.into(),
            id,
            prefix: prefix.into(),
            current_version,
            decoder: None,
        }
    }

    /// Attaches the record decoder used by certification and `strata verify`.
    pub fn with_decoder(mut self, decoder: RecordDecoder) -> Self {
        self.decoder = Some(decoder);
        self
    }

    /// The table name (also the suffix of its header and checkpoint keys).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The fixed table id stored in its header.
    pub fn id(&self) -> u16 {
        self.id
    }
    /// The key prefix of its records.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }
    /// The schema version this build reads and writes.
    pub fn current_version(&self) -> u16 {
        self.current_version
    }
    /// The record decoder, if any.
    pub fn decoder(&self) -> Option<&RecordDecoder> {
        self.decoder.as_ref()
    }
    /// Runs the decoder on a full key (prefix included); `Ok` when there is no decoder.
    pub fn decode(&self, key: &[u8], value: &[u8]) -> Result<(), RecordError> {
        let suffix = key.strip_prefix(self.prefix.as_slice()).ok_or_else(|| {
            RecordError::new(format!(
                "key `{}` is outside the table prefix `{}`",
                escape_key(key),
                escape_key(&self.prefix)
            ))
        })?;
        match &self.decoder {
            Some(d) => d(suffix, value),
            None => Ok(()),
        }
    }
}

/// Why a table could not be added to a catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Two tables with one name.
    #[error("table name `{name}` is already registered; table names must be unique")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// Two tables with one id.
    #[error("table id {id} of `{name}` is already used by `{existing}`; table ids must be unique")]
    DuplicateId {
        /// The id.
        id: u16,
        /// The new table.
        name: String,
        /// The table that has it.
        existing: String,
    },
    /// Two prefixes where one is a prefix of the other.
    #[error("prefix `{}` of `{name}` overlaps prefix `{}` of `{existing}`; table prefixes must not overlap", escape_key(.prefix), escape_key(.existing_prefix))]
    OverlappingPrefix {
        /// The new table.
        name: String,
        /// Its prefix.
        prefix: Vec<u8>,
        /// The table it overlaps.
        existing: String,
        /// That table's prefix.
        existing_prefix: Vec<u8>,
    },
    /// A name or prefix that cannot be used.
    #[error("table `{name}` is invalid: {reason}")]
    Invalid {
        /// The table.
        name: String,
        /// Why.
        reason: String,
    },
}

/// The set of managed tables of one store, in registration order.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    tables: Vec<TableDef>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a table, refusing a duplicate name or id, an overlapping prefix, an empty name,
    /// a prefix outside `__nx/`, or a prefix inside the engine's own `__nx/schema/` and
    /// `__nx/migration/` spaces.
    pub fn add(&mut self, table: TableDef) -> Result<(), CatalogError> {
        let invalid = |reason: &str| CatalogError::Invalid {
            name: table.name.clone(),
            reason: reason.to_string(),
        };
        if table.name.is_empty() || table.name.contains('/') {
            return Err(invalid(
                "the name must be non-empty and must not contain `/`",
            ));
        }
        if !table.prefix.starts_with(RESERVED_PREFIX) || table.prefix.len() <= RESERVED_PREFIX.len()
        {
            return Err(invalid("the prefix must lie under `__nx/`"));
        }
        for engine in [SCHEMA_PREFIX, MIGRATION_PREFIX] {
            if table.prefix.starts_with(engine) || engine.starts_with(&table.prefix) {
                return Err(invalid(
                    "the prefix overlaps the engine's `__nx/schema/` or `__nx/migration/` keys",
                ));
            }
        }
        for t in &self.tables {
            if t.name == table.name {
                return Err(CatalogError::DuplicateName { name: table.name });
            }
            if t.id == table.id {
                return Err(CatalogError::DuplicateId {
                    id: table.id,
                    name: table.name,
                    existing: t.name.clone(),
                });
            }
            if t.prefix.starts_with(&table.prefix) || table.prefix.starts_with(&t.prefix) {
                return Err(CatalogError::OverlappingPrefix {
                    name: table.name,
                    prefix: table.prefix,
                    existing: t.name.clone(),
                    existing_prefix: t.prefix.clone(),
                });
            }
        }
        self.tables.push(table);
        Ok(())
    }

    /// Builder form of [`Catalog::add`].
    pub fn with(mut self, table: TableDef) -> Result<Self, CatalogError> {
        self.add(table)?;
        Ok(self)
    }

    /// The tables in registration order.
    pub fn tables(&self) -> &[TableDef] {
        &self.tables
    }

    /// Looks a table up by name.
    pub fn get(&self, name: &str) -> Option<&TableDef> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// Looks a table up by id.
    pub fn by_id(&self, id: u16) -> Option<&TableDef> {
        self.tables.iter().find(|t| t.id == id)
    }

    /// The table whose prefix contains `key`.
    pub fn table_of(&self, key: &[u8]) -> Option<&TableDef> {
        self.tables.iter().find(|t| key.starts_with(&t.prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, id: u16, prefix: &str) -> TableDef {
        TableDef::new(name, id, prefix.as_bytes().to_vec(), 1)
    }

    #[test]
    fn refuses_duplicate_name_id_and_overlap() {
        let mut c = Catalog::new();
        c.add(t("a", 1, "__nx/a/")).unwrap();
        assert!(matches!(
            c.add(t("a", 2, "__nx/b/")),
            Err(CatalogError::DuplicateName { .. })
        ));
        assert!(matches!(
            c.add(t("b", 1, "__nx/b/")),
            Err(CatalogError::DuplicateId { .. })
        ));
        assert!(matches!(
            c.add(t("b", 2, "__nx/a/x/")),
            Err(CatalogError::OverlappingPrefix { .. })
        ));
        assert!(matches!(
            c.add(t("b", 2, "__nx/")),
            Err(CatalogError::Invalid { .. })
        ));
        assert!(matches!(
            c.add(t("b", 2, "__nx/schema/x/")),
            Err(CatalogError::Invalid { .. })
        ));
        assert!(matches!(
            c.add(t("b", 2, "app/")),
            Err(CatalogError::Invalid { .. })
        ));
        c.add(t("b", 2, "__nx/b/")).unwrap();
        assert_eq!(c.tables().len(), 2);
        assert_eq!(c.table_of(b"__nx/b/k").map(TableDef::name), Some("b"));
    }

    #[test]
    fn decode_strips_prefix_and_refuses_foreign_keys() {
        let d: RecordDecoder = Arc::new(|suffix, _| {
            if suffix == b"ok" {
                Ok(())
            } else {
                Err("bad".into())
            }
        });
        let table = t("a", 1, "__nx/a/").with_decoder(d);
        assert!(table.decode(b"__nx/a/ok", b"").is_ok());
        assert!(table.decode(b"__nx/a/no", b"").is_err());
        assert!(table.decode(b"__nx/b/ok", b"").is_err());
    }
}
