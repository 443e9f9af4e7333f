//! The classified difference between two schemas: the seed's top-level summary, the
//! path-level changes below it, rename candidates and the compatibility verdict.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Overall classification of a delta, exactly as the seed defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DeltaKind {
    /// No change to the shape (annotation-only edits such as `description` count as none).
    #[serde(rename = "none")]
    None,
    /// Every change is a new optional top-level property.
    #[serde(rename = "additive")]
    Additive,
    /// Anything else: a removal, a shape change, a required-ness flip, a new required
    /// property, or any change that is not about a top-level property.
    #[serde(rename = "non-additive")]
    NonAdditive,
}

impl DeltaKind {
    /// The seed's spelling: `none`, `additive` or `non-additive`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeltaKind::None => "none",
            DeltaKind::Additive => "additive",
            DeltaKind::NonAdditive => "non-additive",
        }
    }
}

impl fmt::Display for DeltaKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A top-level property present in both schemas whose required-ness or shape changed
/// (the seed's `FieldChange`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldChange {
    /// Property name.
    pub field: String,
    /// The property moved into or out of the root `required` list.
    pub required_changed: bool,
    /// The property's subschema changed (at any depth below it).
    pub shape_changed: bool,
}

/// How an object schema treats properties it does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentModel {
    /// `additionalProperties` absent, `true` or `{}`: undeclared properties are accepted.
    Open,
    /// `additionalProperties: false`: undeclared properties are rejected.
    Closed,
    /// `additionalProperties: {schema}`: undeclared properties must match a schema.
    Constrained,
}

impl fmt::Display for ContentModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ContentModel::Open => "open",
            ContentModel::Closed => "closed",
            ContentModel::Constrained => "constrained",
        })
    }
}

/// What changed at one path. Type lists never contain `"null"` (null acceptance is
/// reported separately as [`ChangeKind::NullAllowed`] / [`ChangeKind::NullDisallowed`]);
/// `None` as a type list means "any type".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChangeKind {
    /// A property appeared.
    PropertyAdded {
        /// It is listed in `required`.
        required: bool,
    },
    /// A property disappeared.
    PropertyRemoved {
        /// It was listed in `required`.
        was_required: bool,
    },
    /// An existing property became required.
    RequiredAdded,
    /// An existing property became optional.
    RequiredRemoved,
    /// The accepted types grew (e.g. `integer` → `number`, `string` → `string|integer`).
    TypeWidened {
        /// Previous types (`None` = any).
        from: Option<Vec<String>>,
        /// New types (`None` = any).
        to: Option<Vec<String>>,
    },
    /// The accepted types shrank.
    TypeNarrowed {
        /// Previous types (`None` = any).
        from: Option<Vec<String>>,
        /// New types (`None` = any).
        to: Option<Vec<String>>,
    },
    /// The accepted types changed with neither containing the other.
    TypeChanged {
        /// Previous types (`None` = any).
        from: Option<Vec<String>>,
        /// New types (`None` = any).
        to: Option<Vec<String>>,
    },
    /// `null` became acceptable (`T` → `Option<T>`, in either schemars form).
    NullAllowed,
    /// `null` stopped being acceptable.
    NullDisallowed,
    /// Values were added to an `enum` (or a union of `const`s).
    EnumValuesAdded {
        /// The added values.
        values: Vec<Value>,
    },
    /// Values were removed from an `enum`.
    EnumValuesRemoved {
        /// The removed values.
        values: Vec<Value>,
    },
    /// An `enum`/`const` restriction appeared where any value of the type was accepted.
    EnumConstraintAdded {
        /// The now-permitted values.
        values: Vec<Value>,
    },
    /// An `enum`/`const` restriction was dropped.
    EnumConstraintRemoved {
        /// The previously permitted values.
        values: Vec<Value>,
    },
    /// A validation keyword now accepts fewer values (bound lowered/raised the strict way,
    /// keyword added, narrower integer `format`, `uniqueItems` turned on, …).
    ConstraintTightened {
        /// The keyword (`maximum`, `minLength`, `pattern`, `format`, …).
        keyword: String,
        /// Previous value (`None` = absent).
        old: Option<Value>,
        /// New value (`None` = absent).
        new: Option<Value>,
    },
    /// A validation keyword now accepts more values.
    ConstraintLoosened {
        /// The keyword.
        keyword: String,
        /// Previous value (`None` = absent).
        old: Option<Value>,
        /// New value (`None` = absent).
        new: Option<Value>,
    },
    /// A validation keyword changed in a way that is neither (`pattern` rewritten,
    /// `multipleOf` 2 → 3, unrelated `format`s).
    ConstraintChanged {
        /// The keyword.
        keyword: String,
        /// Previous value (`None` = absent).
        old: Option<Value>,
        /// New value (`None` = absent).
        new: Option<Value>,
    },
    /// `additionalProperties` became `false`.
    AdditionalPropertiesClosed {
        /// The previous content model.
        from: ContentModel,
    },
    /// `additionalProperties: false` was lifted.
    AdditionalPropertiesOpened {
        /// The new content model.
        to: ContentModel,
    },
    /// An open model got an `additionalProperties` schema.
    AdditionalPropertiesRestricted,
    /// An `additionalProperties` schema was dropped (model is open now).
    AdditionalPropertiesRelaxed,
    /// An `anyOf`/`oneOf` branch appeared (index in the new schema).
    UnionBranchAdded {
        /// Branch index in the new schema.
        index: usize,
    },
    /// An `anyOf`/`oneOf` branch disappeared (index in the old schema).
    UnionBranchRemoved {
        /// Branch index in the old schema.
        index: usize,
    },
    /// `anyOf` ↔ `oneOf`.
    UnionKindChanged {
        /// Previous keyword.
        from: String,
        /// New keyword.
        to: String,
    },
    /// An `allOf` branch appeared (one more constraint).
    AllOfBranchAdded {
        /// Branch index in the new schema.
        index: usize,
    },
    /// An `allOf` branch disappeared (one constraint fewer).
    AllOfBranchRemoved {
        /// Branch index in the old schema.
        index: usize,
    },
    /// The schema became `false` (accepts nothing).
    BecameUnsatisfiable,
    /// The schema was `false` and now accepts values.
    BecameSatisfiable,
    /// A keyword this crate does not interpret (`not`, `patternProperties`, `if`, …)
    /// changed; judged breaking both ways.
    KeywordChanged {
        /// The keyword.
        keyword: String,
    },
}

fn types_text(t: &Option<Vec<String>>) -> String {
    match t {
        None => "any".to_string(),
        Some(list) if list.is_empty() => "nothing".to_string(),
        Some(list) => list.join("|"),
    }
}

fn values_text(values: &[Value]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn opt_text(v: &Option<Value>) -> String {
    match v {
        None => "absent".to_string(),
        Some(v) => v.to_string(),
    }
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChangeKind::PropertyAdded { required: true } => write!(f, "required property added"),
            ChangeKind::PropertyAdded { required: false } => {
                write!(f, "optional property added")
            }
            ChangeKind::PropertyRemoved { was_required: true } => {
                write!(f, "required property removed")
            }
            ChangeKind::PropertyRemoved {
                was_required: false,
            } => {
                write!(f, "optional property removed")
            }
            ChangeKind::RequiredAdded => write!(f, "property became required"),
            ChangeKind::RequiredRemoved => write!(f, "property became optional"),
            ChangeKind::TypeWidened { from, to } => {
                write!(
                    f,
                    "type widened: {} -> {}",
                    types_text(from),
                    types_text(to)
                )
            }
            ChangeKind::TypeNarrowed { from, to } => {
                write!(
                    f,
                    "type narrowed: {} -> {}",
                    types_text(from),
                    types_text(to)
                )
            }
            ChangeKind::TypeChanged { from, to } => {
                write!(
                    f,
                    "type changed: {} -> {}",
                    types_text(from),
                    types_text(to)
                )
            }
            ChangeKind::NullAllowed => write!(f, "null now allowed"),
            ChangeKind::NullDisallowed => write!(f, "null no longer allowed"),
            ChangeKind::EnumValuesAdded { values } => {
                write!(f, "enum values added: {}", values_text(values))
            }
            ChangeKind::EnumValuesRemoved { values } => {
                write!(f, "enum values removed: {}", values_text(values))
            }
            ChangeKind::EnumConstraintAdded { values } => {
                write!(f, "restricted to enum: {}", values_text(values))
            }
            ChangeKind::EnumConstraintRemoved { values } => {
                write!(f, "enum restriction dropped (was: {})", values_text(values))
            }
            ChangeKind::ConstraintTightened { keyword, old, new } => write!(
                f,
                "{keyword} tightened: {} -> {}",
                opt_text(old),
                opt_text(new)
            ),
            ChangeKind::ConstraintLoosened { keyword, old, new } => write!(
                f,
                "{keyword} loosened: {} -> {}",
                opt_text(old),
                opt_text(new)
            ),
            ChangeKind::ConstraintChanged { keyword, old, new } => write!(
                f,
                "{keyword} changed: {} -> {}",
                opt_text(old),
                opt_text(new)
            ),
            ChangeKind::AdditionalPropertiesClosed { from } => {
                write!(f, "additionalProperties closed (was {from})")
            }
            ChangeKind::AdditionalPropertiesOpened { to } => {
                write!(f, "additionalProperties opened (now {to})")
            }
            ChangeKind::AdditionalPropertiesRestricted => {
                write!(f, "additionalProperties restricted to a schema")
            }
            ChangeKind::AdditionalPropertiesRelaxed => {
                write!(f, "additionalProperties schema dropped (open)")
            }
            ChangeKind::UnionBranchAdded { index } => write!(f, "union branch {index} added"),
            ChangeKind::UnionBranchRemoved { index } => {
                write!(f, "union branch {index} removed")
            }
            ChangeKind::UnionKindChanged { from, to } => write!(f, "union changed: {from} -> {to}"),
            ChangeKind::AllOfBranchAdded { index } => write!(f, "allOf branch {index} added"),
            ChangeKind::AllOfBranchRemoved { index } => write!(f, "allOf branch {index} removed"),
            ChangeKind::BecameUnsatisfiable => write!(f, "schema now rejects every value"),
            ChangeKind::BecameSatisfiable => write!(f, "schema no longer rejects every value"),
            ChangeKind::KeywordChanged { keyword } => write!(f, "keyword {keyword} changed"),
        }
    }
}

/// One change at one location, with its compatibility verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathChange {
    /// Where: JSON-pointer-like. `/` is the root object, `/a/b` nested properties
    /// (`~` and `/` in names escaped as `~0`/`~1`), `[]` array items (`/lines[]/qty`),
    /// `[2]` a tuple position, `{}` the `additionalProperties` schema (`/tags{}`),
    /// `|anyOf[1]` / `|oneOf[1]` / `|allOf[1]` a branch.
    pub path: String,
    /// The top-level property this change belongs to; `None` for root-level changes
    /// (e.g. the root's `additionalProperties`).
    pub field: Option<String>,
    /// What changed.
    pub change: ChangeKind,
    /// Data written under the old schema is still valid under the new one.
    pub backward: bool,
    /// Data written under the new schema is still valid under the old one.
    pub forward: bool,
}

/// A property removed and another added in the same object with an identical shape.
/// Reported, never treated as safe: it makes both compatibility directions fail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenameCandidate {
    /// Path of the object holding both properties (`/` for top level).
    pub path: String,
    /// Removed property.
    pub from: String,
    /// Added property.
    pub to: String,
}

/// Several removed and added properties share one shape, so which one became which cannot
/// be told; nothing is guessed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AmbiguousRename {
    /// Path of the object holding the properties (`/` for top level).
    pub path: String,
    /// Removed properties with that shape (sorted).
    pub removed: Vec<String>,
    /// Added properties with that shape (sorted).
    pub added: Vec<String>,
}

/// Summary of the two compatibility directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompatibilityLevel {
    /// Backward and forward.
    Full,
    /// Only backward: the new schema reads old data.
    Backward,
    /// Only forward: the old schema reads new data.
    Forward,
    /// Neither.
    None,
}

impl fmt::Display for CompatibilityLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompatibilityLevel::Full => "full",
            CompatibilityLevel::Backward => "backward",
            CompatibilityLevel::Forward => "forward",
            CompatibilityLevel::None => "none",
        })
    }
}

/// The compatibility verdict for a whole delta.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compatibility {
    /// Every change is backward compatible and there is no rename candidate.
    pub backward: bool,
    /// Every change is forward compatible and there is no rename candidate.
    pub forward: bool,
    /// `backward` and `forward` folded into one word.
    pub level: CompatibilityLevel,
    /// One line per breaking change or rename candidate.
    pub reasons: Vec<String>,
}

impl Compatibility {
    /// Folds the two directions into a [`CompatibilityLevel`].
    pub fn level_of(backward: bool, forward: bool) -> CompatibilityLevel {
        match (backward, forward) {
            (true, true) => CompatibilityLevel::Full,
            (true, false) => CompatibilityLevel::Backward,
            (false, true) => CompatibilityLevel::Forward,
            (false, false) => CompatibilityLevel::None,
        }
    }
}

/// How to judge properties added to or removed from an *open* content model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenContentPolicy {
    /// Records only carry declared properties (true for records strata serializes from a
    /// typed struct): adding an optional property to an open model is backward
    /// compatible, removing an optional one is forward compatible.
    #[default]
    TypedWriters,
    /// The schema-registry rule: old data under an open model may already hold the new
    /// property with any value, so adding a property with a non-empty schema breaks
    /// backward compatibility (and removing one breaks forward compatibility).
    Strict,
}

/// Options for [`crate::diff_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DiffOptions {
    /// Open-content-model rule; see [`OpenContentPolicy`].
    pub open_content: OpenContentPolicy,
}

/// The classified difference between a collection's persisted schema and a new one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaDelta {
    /// Collection name.
    pub collection: String,
    /// Seed classification.
    pub kind: DeltaKind,
    /// New top-level properties (sorted).
    pub added: Vec<String>,
    /// Removed top-level properties (sorted).
    pub removed: Vec<String>,
    /// Top-level properties whose required-ness or shape changed (sorted by field).
    pub changed: Vec<FieldChange>,
    /// Every change, at every depth (top-level ones included), in a deterministic
    /// traversal order: at each node its type/enum/union changes, then for an object the
    /// added, removed and required-flipped properties (by name), then each common
    /// property's subtree (by name), then the object's own keywords.
    pub paths: Vec<PathChange>,
    /// Unambiguous rename candidates, at every depth.
    pub renames: Vec<RenameCandidate>,
    /// Shape groups with several removed/added properties.
    pub ambiguous_renames: Vec<AmbiguousRename>,
    /// The verdict.
    pub compatibility: Compatibility,
    /// [`crate::schema_hash`] of the old schema.
    pub old_hash: String,
    /// [`crate::schema_hash`] of the new schema.
    pub new_hash: String,
}

impl SchemaDelta {
    /// `kind` is [`DeltaKind::None`].
    pub fn is_none(&self) -> bool {
        self.kind == DeltaKind::None
    }

    /// `kind` is [`DeltaKind::NonAdditive`] (the CLI exits 6 on this).
    pub fn is_non_additive(&self) -> bool {
        self.kind == DeltaKind::NonAdditive
    }

    /// True when any of `fields` was added, removed or changed at the top level (what a
    /// field-scoped schema lock checks).
    pub fn touches_any<S: AsRef<str>>(&self, fields: &[S]) -> bool {
        fields.iter().any(|f| {
            let f = f.as_ref();
            self.added.iter().any(|a| a == f)
                || self.removed.iter().any(|r| r == f)
                || self.changed.iter().any(|c| c.field == f)
        })
    }
}
