//! Schema-update strategies: what to do when a collection's JSON Schema changed.
//!
//! A collection registers an ordered list of strategies; [`evaluate_strategies`] runs them
//! in order against the [`SchemaDelta`] and the first non-allow decision wins (later
//! strategies are not called).
//!
//! ```
//! use strata::policy::{additive_only, evaluate_strategies, lock_schema, UpdateContext, UpdateDecision};
//! use serde_json::json;
//!
//! let old = json!({"type":"object","properties":{"id":{"type":"string"}},"required":["id"]});
//! let new = json!({"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string"}},"required":["id"]});
//! let delta = strata_schema::diff("invoices", &old, &new).unwrap();
//! let ctx = UpdateContext::new("invoices");
//! // Additive: additive_only() allows it…
//! assert!(matches!(evaluate_strategies(&[additive_only()], &delta, &ctx).decision, UpdateDecision::Allow));
//! // …but a lock placed first takes precedence.
//! let verdict = evaluate_strategies(&[lock_schema(), additive_only()], &delta, &ctx);
//! assert_eq!(verdict.strategy.as_deref(), Some("lock_schema"));
//! ```

use super::error::{PolicyError, Refusal};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;
pub use strata_schema::{DeltaKind, FieldChange, SchemaDelta};

/// What a strategy sees besides the delta.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpdateContext {
    /// The collection.
    pub collection: String,
    /// The collection's payload version recorded with the baseline schema (`None`: the
    /// baseline was recorded without one).
    pub baseline_payload_version: Option<i32>,
    /// The collection's current payload version (its upcast chain's target).
    pub payload_version: Option<i32>,
    /// True when the collection's registered upcast steps form a chain from
    /// `baseline_payload_version` up to `payload_version` (stored rows will be upcast on
    /// read).
    pub upcasts_cover: bool,
}

impl UpdateContext {
    /// A context with no payload-version information.
    pub fn new(collection: impl Into<String>) -> Self {
        UpdateContext {
            collection: collection.into(),
            baseline_payload_version: None,
            payload_version: None,
            upcasts_cover: false,
        }
    }

    /// Sets the payload versions (baseline → current) and whether upcast steps cover them.
    pub fn with_payload(
        mut self,
        baseline: Option<i32>,
        current: i32,
        upcasts_cover: bool,
    ) -> Self {
        self.baseline_payload_version = baseline;
        self.payload_version = Some(current);
        self.upcasts_cover = upcasts_cover;
        self
    }

    /// True when the payload version moved forward since the baseline and the upcast
    /// steps cover the move.
    pub fn payload_moved_forward_with_upcasts(&self) -> bool {
        match (self.baseline_payload_version, self.payload_version) {
            (Some(b), Some(c)) => c > b && self.upcasts_cover,
            _ => false,
        }
    }
}

/// A cutover transform: the old JSON document in, the new one out (or a reason).
#[derive(Clone)]
pub struct Transform(Arc<dyn Fn(Value) -> Result<Value, String> + Send + Sync>);

impl Transform {
    /// Wraps a fallible transform.
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    {
        Transform(Arc::new(f))
    }

    /// Applies the transform.
    pub fn apply(&self, doc: Value) -> Result<Value, String> {
        (self.0)(doc)
    }

    /// The transform as the payload step `from → from + 1` (eager: the sweep may run it
    /// too). A coordinated cutover is a payload step: a collection that declares
    /// [`coordinated_cutover`] gets this step on top of its declared upcast chain, so the
    /// cutover moves every row to the next payload version, a row written later at the
    /// old version is upcast by the transform on read, and a build that knows only the old
    /// version meets the ahead guard instead of writing old shapes under the new one. A
    /// transform that does not return a JSON object fails the step.
    pub fn into_step(self, from: i32) -> crate::payload::UpcastStep {
        crate::payload::UpcastStep::new(from, crate::payload::Mode::Eager, move |obj| {
            let doc = Value::Object(std::mem::take(obj));
            match self.apply(doc) {
                Ok(Value::Object(out)) => {
                    *obj = out;
                    Ok(())
                }
                Ok(_) => Err(crate::payload::StepError::new(
                    "the cutover transform did not return a JSON object",
                )),
                Err(reason) => Err(crate::payload::StepError::new(reason)),
            }
        })
    }
}

impl fmt::Debug for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Transform(..)")
    }
}

/// Why a strategy refused a change (turned into a [`PolicyError`] on every refused
/// write).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejection {
    /// A non-additive change ([`Refusal::NonAdditive`]).
    NonAdditive {
        /// New top-level properties.
        added: Vec<String>,
        /// Removed top-level properties.
        removed: Vec<String>,
        /// Changed top-level properties.
        changed: Vec<String>,
    },
    /// The schema is locked ([`Refusal::Locked`]).
    Locked,
    /// A user strategy's reason ([`Refusal::Rejected`]).
    Custom {
        /// The reason (lowercase, says what to do).
        reason: String,
    },
}

impl Rejection {
    /// A non-additive rejection built from a delta.
    pub fn non_additive(delta: &SchemaDelta) -> Self {
        Rejection::NonAdditive {
            added: delta.added.clone(),
            removed: delta.removed.clone(),
            changed: delta.changed.iter().map(|c| c.field.clone()).collect(),
        }
    }

    /// The refusal a write gets while `strategy` rejects the change.
    pub fn to_refusal(&self, strategy: &str) -> Refusal {
        match self {
            Rejection::NonAdditive {
                added,
                removed,
                changed,
            } => Refusal::NonAdditive {
                added: added.clone(),
                removed: removed.clone(),
                changed: changed.clone(),
            },
            Rejection::Locked => Refusal::Locked,
            Rejection::Custom { reason } => Refusal::Rejected {
                strategy: strategy.to_string(),
                reason: reason.clone(),
            },
        }
    }

    /// The error a refused write of `collection` gets.
    pub fn to_error(&self, collection: &str, strategy: &str) -> PolicyError {
        PolicyError::Refused {
            collection: collection.to_string(),
            reason: self.to_refusal(strategy),
        }
    }
}

/// A strategy's verdict.
#[derive(Debug, Clone)]
pub enum UpdateDecision {
    /// Let the change through (the next strategy decides).
    Allow,
    /// Accept the change and stop: later strategies are not consulted (terminal). A
    /// strategy that vouches for a change the ones after it would refuse decides this —
    /// [`covered_by_upcasts`] accepts a non-additive change whose payload version moved
    /// forward with upcast steps, so an [`additive_only`] placed after it does not reject
    /// it.
    Accept,
    /// Refuse the change: every write fails until it is fixed (terminal).
    Reject(Rejection),
    /// Accept the change but fence the collection until a cutover rewrites every record
    /// through the transform (terminal).
    Cutover(Transform),
}

/// The shape every strategy — built-in or your own — implements.
pub trait SchemaUpdateStrategy: Send + Sync + fmt::Debug {
    /// The strategy's name (shown in errors and introspection).
    fn name(&self) -> &str;

    /// Decides on `delta` (never called for an unchanged schema).
    fn on_schema_delta(&self, delta: &SchemaDelta, ctx: &UpdateContext) -> UpdateDecision;

    /// The transform this strategy's cutover applies, when it schedules one (the
    /// default: none). A collection opened with such a strategy declares it as the payload
    /// step on top of its upcast chain ([`Transform::into_step`]): the cutover then moves
    /// every row to that next payload version. A strategy that decides
    /// [`UpdateDecision::Cutover`] without declaring its transform here gets a cutover that
    /// reshapes rows in place at the same payload version (an older build can then still
    /// write the old shape under it), and a warning.
    fn cutover_transform(&self) -> Option<Transform> {
        None
    }
}

/// A shared strategy, as collections hold them.
pub type Strategy = Arc<dyn SchemaUpdateStrategy>;

/// The outcome of [`evaluate_strategies`].
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The first non-allow decision, or allow.
    pub decision: UpdateDecision,
    /// The name of the strategy that decided (`None` when every strategy allowed).
    pub strategy: Option<String>,
}

/// Runs `strategies` in order; the first decision other than
/// [`UpdateDecision::Allow`] wins (accept, reject or cutover) and later strategies are not
/// called.
pub fn evaluate_strategies(
    strategies: &[Strategy],
    delta: &SchemaDelta,
    ctx: &UpdateContext,
) -> Evaluation {
    for s in strategies {
        let decision = s.on_schema_delta(delta, ctx);
        if !matches!(decision, UpdateDecision::Allow) {
            tracing::debug!(collection = %ctx.collection, strategy = s.name(), "strategy decided");
            return Evaluation {
                decision,
                strategy: Some(s.name().to_string()),
            };
        }
    }
    Evaluation {
        decision: UpdateDecision::Allow,
        strategy: None,
    }
}

#[derive(Debug)]
struct BlindUpdate;

impl SchemaUpdateStrategy for BlindUpdate {
    fn name(&self) -> &str {
        "blind_update"
    }
    fn on_schema_delta(&self, _: &SchemaDelta, _: &UpdateContext) -> UpdateDecision {
        UpdateDecision::Allow
    }
}

/// Allows every change unconditionally (the explicit pre-schema-update behaviour).
pub fn blind_update() -> Strategy {
    Arc::new(BlindUpdate)
}

#[derive(Debug)]
struct AdditiveOnly;

impl SchemaUpdateStrategy for AdditiveOnly {
    fn name(&self) -> &str {
        "additive_only"
    }
    fn on_schema_delta(&self, delta: &SchemaDelta, _: &UpdateContext) -> UpdateDecision {
        match delta.kind {
            DeltaKind::NonAdditive => UpdateDecision::Reject(Rejection::non_additive(delta)),
            _ => UpdateDecision::Allow,
        }
    }
}

/// Allows unchanged and additive deltas (new optional top-level fields); rejects anything
/// else with [`Refusal::NonAdditive`]. The recommended backstop.
pub fn additive_only() -> Strategy {
    Arc::new(AdditiveOnly)
}

#[derive(Debug)]
struct LockSchema {
    fields: Option<Vec<String>>,
}

impl SchemaUpdateStrategy for LockSchema {
    fn name(&self) -> &str {
        "lock_schema"
    }
    fn on_schema_delta(&self, delta: &SchemaDelta, _: &UpdateContext) -> UpdateDecision {
        let refused = match &self.fields {
            None => !delta.is_none(),
            Some(fields) => delta.touches_any(fields),
        };
        if refused {
            UpdateDecision::Reject(Rejection::Locked)
        } else {
            UpdateDecision::Allow
        }
    }
}

/// Refuses any schema change with [`Refusal::Locked`], additive or not.
pub fn lock_schema() -> Strategy {
    Arc::new(LockSchema { fields: None })
}

/// Refuses a change only when one of `fields` was added, removed or changed at the top
/// level; other changes fall through to the next strategy.
pub fn lock_schema_fields<I, S>(fields: I) -> Strategy
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    Arc::new(LockSchema {
        fields: Some(fields.into_iter().map(Into::into).collect()),
    })
}

#[derive(Debug)]
struct CoordinatedCutover {
    transform: Transform,
}

impl SchemaUpdateStrategy for CoordinatedCutover {
    fn name(&self) -> &str {
        "coordinated_cutover"
    }
    fn on_schema_delta(&self, delta: &SchemaDelta, _: &UpdateContext) -> UpdateDecision {
        match delta.kind {
            DeltaKind::NonAdditive => UpdateDecision::Cutover(self.transform.clone()),
            _ => UpdateDecision::Allow,
        }
    }
    fn cutover_transform(&self) -> Option<Transform> {
        Some(self.transform.clone())
    }
}

/// On a non-additive delta, schedules a coordinated cutover that runs `transform` once
/// over every stored record (see [`crate::policy::Policy::run_schema_cutover`]); the
/// collection's writes are fenced until it completes. Additive and unchanged deltas are
/// allowed through.
///
/// **The cutover is a payload step.** A collection opened with this strategy declares
/// `transform` as the step `N → N + 1` on top of its upcast chain (`N`: the version its
/// declared steps reach, 1 without steps), so the cutover moves every row to payload
/// version `N + 1`; rows already at `N + 1` are never transformed again. Afterwards a row
/// written at `N` (by an older build, a sync peer, an import) is upcast by the transform
/// when read, and a build that knows only `N` is told to upgrade (the ahead guard on rows,
/// [`Refusal::BuildBehind`] on its schema declaration).
/// Keep the strategy declared as you keep upcast steps; when a later release changes the
/// shape again, declare this transform as an upcast step at its version
/// (`CollectionOptions::step(Transform::new(f).into_step(N))`) and put the new cutover
/// strategy in its place.
pub fn coordinated_cutover<F>(transform: F) -> Strategy
where
    F: Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
{
    Arc::new(CoordinatedCutover {
        transform: Transform::new(transform),
    })
}

#[derive(Debug)]
struct CoveredByUpcasts;

impl SchemaUpdateStrategy for CoveredByUpcasts {
    fn name(&self) -> &str {
        "covered_by_upcasts"
    }
    fn on_schema_delta(&self, delta: &SchemaDelta, ctx: &UpdateContext) -> UpdateDecision {
        if delta.kind == DeltaKind::NonAdditive && !ctx.payload_moved_forward_with_upcasts() {
            UpdateDecision::Reject(Rejection::Custom {
                reason: format!(
                    "non-additive change (added: {}, removed: {}, changed: {}) without a payload version bump covered by upcast steps (baseline payload version {}, current {}); bump the payload version and register the upcast steps, or revert the change",
                    super::error::list(&delta.added),
                    super::error::list(&delta.removed),
                    super::error::list(&delta.changed.iter().map(|c| c.field.clone()).collect::<Vec<_>>()),
                    ctx.baseline_payload_version.map_or("none".to_string(), |v| v.to_string()),
                    ctx.payload_version.map_or("none".to_string(), |v| v.to_string()),
                ),
            })
        } else if delta.kind == DeltaKind::NonAdditive {
            // Covered: vouch for it, so a backstop placed after (additive_only) does not
            // reject what the upcasts make safe.
            UpdateDecision::Accept
        } else {
            UpdateDecision::Allow
        }
    }
}

/// The bridge to payload evolution: **accepts** a non-additive change when the
/// collection's payload version moved forward since the baseline and its registered upcast
/// steps cover the move (stored rows are upcast on read) — a terminal
/// [`UpdateDecision::Accept`], so strategies after it are not consulted — and rejects it
/// otherwise. Additive and unchanged deltas pass through to the next strategy. Place it
/// before [`additive_only`]: `[covered_by_upcasts(), additive_only()]` accepts a covered
/// version bump and still rejects an uncovered non-additive change.
///
/// It replaces a [`coordinated_cutover`] when every build that reads the collection
/// carries the upcast steps: rows are upcast lazily on read (and by the eager sweep for an
/// eager step), no fence is needed. Use a cutover when rows must all be rewritten before
/// any build writes the new shape (a build that cannot read the old shape).
pub fn covered_by_upcasts() -> Strategy {
    Arc::new(CoveredByUpcasts)
}
