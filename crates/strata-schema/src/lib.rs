//! JSON Schema canonicalization, hashing, delta classification and backward/forward
//! compatibility verdicts — the pure "brain" of strata's shape-policy axis.
//!
//! This crate touches no store. A collection persists its schema (derived from the record
//! type, e.g. with `schemars::schema_for!`) as a [`PersistedSchema`] (canonical bytes plus
//! a SHA-256 [`schema_hash`]); on the next open it calls [`diff()`] with the persisted and the
//! freshly derived schema and hands the [`SchemaDelta`] to its strategies.
//!
//! # What a delta contains
//!
//! * The seed's summary, unchanged: `kind` (`none` / `additive` / `non-additive`), `added`
//!   and `removed` top-level properties, and `changed` top-level properties with
//!   `required_changed` / `shape_changed`. `kind` is `additive` only when every change is
//!   a new optional top-level property.
//! * `paths`: every change at every depth (top level included), e.g. `/address/zip`,
//!   `/lines[]/qty`, `/tags{}` (the `additionalProperties` schema), `/kind|oneOf[1]`
//!   (a union branch), `/pair[0]` (a tuple position), each with its own verdict.
//! * `renames` / `ambiguous_renames`: a removed and an added property of identical shape
//!   (annotations ignored, `$ref`s inlined) in the same object. One-to-one pairs are
//!   rename candidates; groups with two or more on either side are reported as ambiguous
//!   and nothing is guessed. Either makes both compatibility directions fail, so a rename
//!   is never silently treated as safe.
//! * `compatibility`: `backward` = data written under the old schema validates under the
//!   new one (new readers read old data); `forward` = the reverse. Each holds when every
//!   path change holds it and there is no rename finding.
//!
//! Annotations (`title`, `description`, `default`, `examples`, `$comment`, `deprecated`,
//! `readOnly`, `writeOnly`, `$schema`, `$id`, `x-…`) never count as changes (they do change
//! the hash). `$ref` is followed into `$defs`/`definitions` (any local JSON pointer),
//! with sibling keywords merged, and recursive types are cut at the first repeated pair of
//! references. `Option<T>` is recognized in both schemars spellings (`type: [T, "null"]`
//! and `anyOf: [{$ref}, {type: "null"}]`) and reported as [`ChangeKind::NullAllowed`] /
//! [`ChangeKind::NullDisallowed`]; a union of `const`s (a documented unit enum) is
//! compared like an `enum`.
//!
//! # How verdicts are decided
//!
//! The rules follow what schema registries (Confluent's JSON Schema checks) apply; forward
//! is always the backward verdict of the reversed change.
//!
//! | change | backward | forward |
//! |---|---|---|
//! | optional property added, old model open | yes¹ | yes |
//! | optional property added, old model closed (`additionalProperties: false`) | yes | **no** |
//! | required property added | **no** | yes if old model open |
//! | property removed, new model open | yes | yes if it was optional¹ |
//! | property removed, new model closed | **no** | yes if it was optional |
//! | property added/removed, `additionalProperties: {S}` | S vs the property's schema, checked recursively | same, reversed |
//! | property becomes required / optional | **no** / yes | yes / **no** |
//! | type widened (`integer` → `number`, a type added) / narrowed / changed | yes / **no** / **no** | **no** / yes / **no** |
//! | `null` allowed / disallowed | yes / **no** | **no** / yes |
//! | enum values added / removed | yes / **no** | **no** / yes |
//! | bound tightened (`maximum`, `maxLength`, `maxItems` lowered; `minimum`… raised; keyword added; narrower integer `format`; `uniqueItems` on) | **no** | yes |
//! | bound loosened (the reverse, keyword removed) | yes | **no** |
//! | `pattern` / `multipleOf` / `format` changed incomparably | **no** | **no** |
//! | `anyOf`/`oneOf` branch added / removed | yes / **no** | **no** / yes |
//! | `oneOf` → `anyOf` / `anyOf` → `oneOf` | yes / **no** | **no** / yes |
//! | `allOf` branch added / removed | **no** / yes | yes / **no** |
//! | `additionalProperties` closed / opened | **no** / yes | yes / **no** |
//! | uninterpreted keyword changed (`not`, `patternProperties`, `if`, …) | **no** | **no** |
//! | rename candidate or ambiguous rename | **no** | **no** |
//!
//! ¹ With [`OpenContentPolicy::TypedWriters`] (the default): records only carry declared
//! properties, which holds for records strata serializes from a typed struct. With
//! [`OpenContentPolicy::Strict`] (the registry rule), old data under an open model may
//! already carry the new name with any value, so adding a property whose schema is not
//! empty breaks backward compatibility, and removing one breaks forward compatibility.
//!
//! Type-specific keywords are only compared where both sides admit that type (string
//! bounds when both accept strings, and so on), so a `string` → `object` change is one
//! [`ChangeKind::TypeChanged`], not a cascade.
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use strata_schema::{diff, render_human, ChangeKind, DeltaKind};
//!
//! # fn main() -> Result<(), strata_schema::SchemaError> {
//! let old = json!({
//!     "type": "object",
//!     "properties": { "id": { "type": "string" }, "qty": { "type": "integer" } },
//!     "required": ["id"]
//! });
//! let new = json!({
//!     "type": "object",
//!     "properties": {
//!         "id": { "type": "string" },
//!         "qty": { "type": "number" },
//!         "note": { "type": "string" }
//!     },
//!     "required": ["id"]
//! });
//! let delta = diff("invoices", &old, &new)?;
//! assert_eq!(delta.kind, DeltaKind::NonAdditive); // `qty` changed shape
//! assert_eq!(delta.added, vec!["note".to_string()]);
//! assert!(delta.changed[0].shape_changed);
//! assert!(delta
//!     .paths
//!     .iter()
//!     .any(|p| p.path == "/qty" && matches!(p.change, ChangeKind::TypeWidened { .. })));
//! // integer → number: new readers read old data, old readers may choke on 1.5.
//! assert!(delta.compatibility.backward);
//! assert!(!delta.compatibility.forward);
//! assert!(render_human(&delta).contains("type widened: integer -> number"));
//! # Ok(())
//! # }
//! ```
//!
//! # Bounded work
//!
//! A definition shared by many paths is compared (and fingerprinted) once and its
//! findings are replayed at each path, so the cost is polynomial in the schema size even
//! when each level of `$defs` refers to the next one several times. A hard budget of
//! [`MAX_DIFF_WORK`] steps is the last guard: a diff that would need more (for instance
//! a change reachable by millions of paths) fails with [`SchemaError::TooComplex`]
//! instead of running for minutes, so opening a collection never hangs on its schema.
//!
//! What this crate is not: it does not validate instances against schemas, does not
//! fetch remote `$ref`s, and does not decide policy (allow / reject / cutover) — callers
//! do that from [`SchemaDelta::kind`] and [`SchemaDelta::compatibility`].

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod budget;
mod canonical;
mod delta;
mod diff;
mod engine;
mod error;
mod render;
mod view;

pub use budget::MAX_DIFF_WORK;
pub use canonical::{
    canonical_bytes, canonicalize, schema_hash, PersistedSchema, PERSISTED_SCHEMA_FORMAT,
};
pub use delta::{
    AmbiguousRename, ChangeKind, Compatibility, CompatibilityLevel, ContentModel, DeltaKind,
    DiffOptions, FieldChange, OpenContentPolicy, PathChange, RenameCandidate, SchemaDelta,
};
pub use diff::{diff, diff_with};
pub use error::{SchemaError, Side};
pub use render::render_human;
