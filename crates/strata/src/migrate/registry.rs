//! Per-table registries of `N → N+1` migration steps.

use crate::catalog::{Catalog, TableDef};
use crate::migrate::MigrateError;
use crate::pass::{RecordError, RecordRef};
use std::fmt;
use std::sync::Arc;
use strata_store::Mutation;

/// A record step: receives one record (table, key, value) of the table being migrated and
/// returns the mutations that migrate it — replace, create, move, delete (see the helpers
/// on [`RecordRef`]). Returning no mutation keeps the record as it is.
pub type RecordStepFn =
    Arc<dyn Fn(&RecordRef<'_>) -> Result<Vec<Mutation>, RecordError> + Send + Sync>;

#[derive(Clone)]
enum StepAction {
    Certify,
    Records(RecordStepFn),
}

/// One `from → to` step of a table's registry.
#[derive(Clone)]
pub struct RecordStep {
    from: u16,
    to: u16,
    action: StepAction,
}

impl fmt::Debug for RecordStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordStep")
            .field("from", &self.from)
            .field("to", &self.to)
            .field("certify", &matches!(self.action, StepAction::Certify))
            .finish()
    }
}

impl RecordStep {
    /// A certification step: validates every record with the table's decoder and rewrites
    /// nothing (the legacy `v0 → v1` step).
    pub fn certify(from: u16, to: u16) -> Self {
        RecordStep {
            from,
            to,
            action: StepAction::Certify,
        }
    }

    /// A record step running `f` on every record.
    pub fn records(
        from: u16,
        to: u16,
        f: impl Fn(&RecordRef<'_>) -> Result<Vec<Mutation>, RecordError> + Send + Sync + 'static,
    ) -> Self {
        RecordStep {
            from,
            to,
            action: StepAction::Records(Arc::new(f)),
        }
    }

    /// The version this step migrates from.
    pub fn from(&self) -> u16 {
        self.from
    }

    /// The version this step migrates to.
    pub fn to(&self) -> u16 {
        self.to
    }

    /// True for a certification step (no rewrites).
    pub fn is_certification(&self) -> bool {
        matches!(self.action, StepAction::Certify)
    }

    /// Runs the step on one record, pushing its mutations onto `out`.
    pub(crate) fn apply(
        &self,
        table: &TableDef,
        record: &RecordRef<'_>,
        out: &mut Vec<Mutation>,
    ) -> Result<(), RecordError> {
        match &self.action {
            StepAction::Certify => table.decode(record.key, record.value),
            StepAction::Records(f) => {
                out.extend(f(record)?);
                Ok(())
            }
        }
    }
}

/// The ordered registry of one table: its definition, the oldest version this build can
/// migrate from (0 by default: legacy data), and its steps.
#[derive(Debug, Clone)]
pub struct TableMigrations {
    table: TableDef,
    oldest: u16,
    steps: Vec<RecordStep>,
}

impl TableMigrations {
    /// An empty registry for `table`, oldest supported version 0.
    pub fn new(table: TableDef) -> Self {
        TableMigrations {
            table,
            oldest: 0,
            steps: Vec::new(),
        }
    }

    /// Sets the oldest version this build can migrate from.
    pub fn oldest_supported(mut self, version: u16) -> Self {
        self.oldest = version;
        self
    }

    /// Adds a step (order of registration does not matter).
    pub fn step(mut self, step: RecordStep) -> Self {
        self.steps.push(step);
        self.steps.sort_by_key(|s| s.from);
        self
    }

    /// The table.
    pub fn table(&self) -> &TableDef {
        &self.table
    }

    /// The oldest supported version.
    pub fn oldest(&self) -> u16 {
        self.oldest
    }

    /// The steps in version order.
    pub fn steps(&self) -> &[RecordStep] {
        &self.steps
    }

    /// The step leaving `version`.
    pub fn step_from(&self, version: u16) -> Option<&RecordStep> {
        self.steps.iter().find(|s| s.from == version)
    }

    /// Checks the registry: it starts at the oldest supported version, every step
    /// advances by exactly one, there are no gaps or duplicates, and it ends at the
    /// table's current version. Each defect is a distinct error.
    pub fn validate(&self) -> Result<(), MigrateError> {
        let table = || self.table.name().to_string();
        let current = self.table.current_version();
        let Some(first) = self.steps.first() else {
            if self.oldest != current {
                return Err(MigrateError::RegistryEnd {
                    table: table(),
                    last: self.oldest,
                    current,
                });
            }
            return Ok(());
        };
        if first.from != self.oldest {
            return Err(MigrateError::RegistryStart {
                table: table(),
                first: first.from,
                oldest: self.oldest,
            });
        }
        let mut expected = self.oldest;
        for s in &self.steps {
            if s.from < expected {
                return Err(MigrateError::RegistryDuplicate {
                    table: table(),
                    from: s.from,
                });
            }
            if s.from > expected {
                return Err(MigrateError::RegistryGap {
                    table: table(),
                    missing: expected,
                });
            }
            if s.from.checked_add(1) != Some(s.to) {
                return Err(MigrateError::RegistryNotSequential {
                    table: table(),
                    from: s.from,
                    to: s.to,
                });
            }
            expected = s.to;
        }
        if expected != current {
            return Err(MigrateError::RegistryEnd {
                table: table(),
                last: expected,
                current,
            });
        }
        Ok(())
    }
}

/// The registries of every table a migration covers. Tables advance independently.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    tables: Vec<TableMigrations>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one table's registry.
    pub fn table(mut self, table: TableMigrations) -> Self {
        self.tables.push(table);
        self
    }

    /// The tables in registration order.
    pub fn tables(&self) -> &[TableMigrations] {
        &self.tables
    }

    /// A registry certifying every table of `catalog` from version 0 with its decoder
    /// (one certification step per version up to the current one).
    pub fn certification(catalog: &Catalog) -> Self {
        let mut r = Registry::new();
        for t in catalog.tables() {
            let mut tm = TableMigrations::new(t.clone());
            for v in 0..t.current_version() {
                tm = tm.step(RecordStep::certify(v, v + 1));
            }
            r = r.table(tm);
        }
        r
    }

    /// The registry of the 14 Numax tables: legacy `v0 → v1` certification.
    pub fn numax() -> Self {
        Self::certification(&crate::numax::catalog())
    }

    /// Validates every table's registry and refuses a table registered twice.
    pub fn validate(&self) -> Result<(), MigrateError> {
        for (i, tm) in self.tables.iter().enumerate() {
            if self.tables[..i]
                .iter()
                .any(|o| o.table.name() == tm.table.name())
            {
                return Err(MigrateError::RegistryDuplicateTable {
                    table: tm.table.name().to_string(),
                });
            }
            tm.validate()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numax_registry_is_valid() {
        let r = Registry::numax();
        assert_eq!(r.tables().len(), 14);
        r.validate().unwrap();
        assert!(r
            .tables()
            .iter()
            .all(|t| t.steps().len() == 1 && t.steps()[0].is_certification()));
    }
}
