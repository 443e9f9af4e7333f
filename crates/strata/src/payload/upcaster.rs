//! The read path's [`Upcaster`]: runs a validated [`UpcastChain`] over a stored
//! document's JSON object (up, and down through the declared downcasts), protecting the
//! identity and lock fields and stamping the version field; and what a downcast cannot
//! express ([`KEPT_FIELD`]).

use super::chain::{
    JsonObject, Mode, StepError, UpcastChain, UpcastStep, INITIAL_PAYLOAD_VERSION, KEPT_AT_FIELD,
    KEPT_FIELD,
};
use serde_json::Value;
use std::sync::Arc;

/// The chain plus the fields the engine protects: what the read path and the sweep run.
#[derive(Debug, Clone, Default)]
pub struct Upcaster {
    chain: UpcastChain,
    protected: Arc<[String]>,
    version_field: Option<Arc<str>>,
    /// The store's retirement: rows stored below this version are refused.
    retired_below: Option<i32>,
}

/// Why an upcast failed (without collection or key; the caller adds them).
#[derive(Debug)]
pub enum UpcastFailure {
    /// The stored version is below 1.
    InvalidVersion {
        /// The version found.
        found: i32,
    },
    /// The stored version is below the collection's retired versions.
    Retired {
        /// The version found.
        found: i32,
        /// Versions below this one are retired.
        below: i32,
    },
    /// The chain cannot read the stored version: it starts above it (steps retired) and
    /// the store records no retirement that would explain the row.
    Unreachable {
        /// The version found.
        found: i32,
        /// The version the chain starts at.
        start: i32,
    },
    /// A step returned an error.
    Step {
        /// The failing step's `from`.
        from: i32,
        /// The step's error.
        source: StepError,
    },
    /// A downcast step returned an error, or none is declared down to the target.
    Downcast {
        /// The failing (or missing) downcast's `from`.
        from: i32,
        /// The step's error (`None`: no downcast from `from` is declared).
        source: Option<StepError>,
    },
}

impl Upcaster {
    /// An upcaster over `chain` protecting `protected` fields, and re-stamping
    /// `version_field` (when given) into the object before every step and after the last.
    pub fn new(chain: UpcastChain, protected: Vec<String>, version_field: Option<String>) -> Self {
        Upcaster {
            chain,
            protected: protected.into(),
            version_field: version_field.map(Into::into),
            retired_below: None,
        }
    }

    /// This upcaster refusing rows stored below `below` (the store's retirement record,
    /// see [`crate::ops::retire`]); `None`: nothing retired.
    pub fn with_retired_below(mut self, below: Option<i32>) -> Self {
        self.retired_below = below;
        self
    }

    /// Versions below this one are retired in the store (rows there are refused).
    pub fn retired_below(&self) -> Option<i32> {
        self.retired_below
    }

    /// The refusal of a row stored at `version`, when it is below the retired versions
    /// (or below a chain that starts above 1): the failure to report, else `None`.
    pub fn check_retired(&self, version: i32) -> Option<UpcastFailure> {
        if let Some(below) = self.retired_below {
            if version < below {
                return Some(UpcastFailure::Retired {
                    found: version,
                    below,
                });
            }
        }
        let start = self.chain.start_version();
        (version < start && version >= INITIAL_PAYLOAD_VERSION).then_some(
            UpcastFailure::Unreachable {
                found: version,
                start,
            },
        )
    }

    /// The lowest version this build can write a row at: the chain's downcasts' reach
    /// ([`UpcastChain::lowest_writable`]), never below the store's retirement (a row
    /// written below it would be refused by every reader, this build included).
    pub fn lowest_writable(&self) -> i32 {
        let reach = self.chain.lowest_writable();
        self.retired_below.map_or(reach, |below| reach.max(below))
    }

    /// The chain.
    pub fn chain(&self) -> &UpcastChain {
        &self.chain
    }

    /// The protected field names (identity fields and the lock field).
    pub fn protected_fields(&self) -> &[String] {
        &self.protected
    }

    /// The field the payload version is stamped into, if configured.
    pub fn version_field(&self) -> Option<&str> {
        self.version_field.as_deref()
    }

    /// True when a document stored at `version` needs steps to reach the current version.
    pub fn is_behind(&self, version: i32) -> bool {
        version < self.chain.current_version()
    }

    /// True when a document stored at `version` was written by a newer build.
    pub fn is_ahead(&self, version: i32) -> bool {
        version > self.chain.current_version()
    }

    /// Runs every pending step on `obj`, stored at `stored`, and returns the version
    /// reached. A document at or above the current version is not touched. The protected
    /// fields are snapshotted before the first step; before each step the version field is
    /// stamped with the step's `from`, and after it the protected fields are restored
    /// exactly to the snapshot (absent stays absent, null stays null). After the last step
    /// the version field holds the version reached.
    pub fn upcast(&self, obj: &mut JsonObject, stored: i32) -> Result<i32, UpcastFailure> {
        if stored < INITIAL_PAYLOAD_VERSION {
            return Err(UpcastFailure::InvalidVersion { found: stored });
        }
        if let Some(refused) = self.check_retired(stored) {
            return Err(refused);
        }
        let current = self.chain.current_version();
        if stored >= current {
            return Ok(stored);
        }
        // One snapshot serves every step: after each step the protected fields are put
        // back to it, so they hold the snapshot's values again before the next one. A field
        // the step left alone is not rewritten (no clone, no allocation).
        let snapshot = self.snapshot(obj);
        // Content a downcast kept has the shape of the version that wrote it: merged back
        // when the upcast reaches that version, so the steps above it see it. A layer
        // kept by a build newer than this one (see [`Upcaster::keep`]) is never merged
        // here: it stays in the object as it is, for that build.
        let mut version = stored;
        while version < current {
            let Some(step) = self.chain.step_from(version) else {
                break; // unreachable for a validated chain
            };
            self.stamp(obj, version);
            step.run(obj).map_err(|source| UpcastFailure::Step {
                from: version,
                source,
            })?;
            self.restore(obj, &snapshot);
            version = step.to();
            merge_kept_while(obj, |at| at == Some(version));
        }
        if version != stored {
            self.stamp(obj, version);
        }
        // What is left and due: layers written before the version was recorded (merged
        // after the last step, as they always were) and any at or below this version.
        merge_kept_while(obj, |at| at.is_none_or(|at| at <= version));
        Ok(version)
    }

    /// Puts `kept`, the content [`Upcaster::downcast`] returned, into the downcast `obj`
    /// under [`KEPT_FIELD`], with this build's version (the shape of that content); an
    /// empty `kept` adds nothing.
    ///
    /// Content kept by a build newer than this one (a *foreign layer*: its version is
    /// above this build's, so this build can neither read nor rewrite it, and the upcast
    /// leaves it in the object) arrives in `kept` as its own [`KEPT_FIELD`] member. It is
    /// nested unchanged, with its own version, inside this build's layer (or stays the
    /// whole kept member when this build keeps nothing): the upcast merges this build's
    /// layer at this build's version, which exposes the newer one, merged in turn at its
    /// version. So every build gets back exactly what it kept, in the shape it kept it.
    pub fn keep(&self, obj: &mut JsonObject, mut kept: JsonObject) {
        let foreign = kept.remove(KEPT_FIELD);
        if kept.is_empty() {
            if let Some(foreign) = foreign {
                obj.insert(KEPT_FIELD.to_string(), foreign);
            }
            return;
        }
        kept.insert(
            KEPT_AT_FIELD.to_string(),
            Value::from(self.chain.current_version()),
        );
        if let Some(foreign) = foreign {
            kept.insert(KEPT_FIELD.to_string(), foreign);
        }
        obj.insert(KEPT_FIELD.to_string(), Value::Object(kept));
    }

    /// The layer of the kept content `kept` (a [`KEPT_FIELD`] value) that a build newer
    /// than this one wrote, with the layers nested in it (`None`: none). Layers of this
    /// build or older ones are looked through: this build's document already holds what
    /// they kept.
    pub(crate) fn foreign_layer(&self, mut kept: Value) -> Option<Value> {
        let current = self.chain.current_version();
        loop {
            let at = kept.get(KEPT_AT_FIELD).and_then(Value::as_i64);
            if at.is_some_and(|at| at > i64::from(current)) {
                return Some(kept);
            }
            kept = match kept {
                Value::Object(mut o) => o.remove(KEPT_FIELD)?,
                _ => return None,
            };
        }
    }

    /// Runs the downcast steps on `obj`, at the current version, down to `target`; the
    /// protected fields are restored after each step and the version field stamped, as
    /// in [`Upcaster::upcast`]. Returns the content the downcast cannot express: the
    /// leaves of `obj` (members of objects, recursively; anything else as a whole) that a
    /// round trip — the downcast, then the upcast back — does not reproduce, which the
    /// caller keeps under [`KEPT_FIELD`] ([`Upcaster::keep`]). A layer a newer build kept
    /// in `obj` is returned with it, unchanged, as its [`KEPT_FIELD`] member.
    pub fn downcast(&self, obj: &mut JsonObject, target: i32) -> Result<JsonObject, UpcastFailure> {
        let current = self.chain.current_version();
        if target >= current {
            return Ok(JsonObject::new());
        }
        // A newer build's layer (see [`Upcaster::keep`]) is carried, not recomputed: this
        // build cannot express it, and the round trip below knows nothing of it.
        let foreign = obj.remove(KEPT_FIELD).and_then(|k| self.foreign_layer(k));
        let original = obj.clone();
        let snapshot = self.snapshot(obj);
        let mut version = current;
        while version > target {
            let Some(step) = self.chain.downcast_from(version) else {
                return Err(UpcastFailure::Downcast {
                    from: version,
                    source: None,
                });
            };
            self.stamp(obj, version);
            step.run(obj).map_err(|source| UpcastFailure::Downcast {
                from: version,
                source: Some(source),
            })?;
            self.restore(obj, &snapshot);
            version = step.to();
        }
        self.stamp(obj, version);
        // The round trip: what the upcast back produces is expressed; the rest is kept.
        let mut back = obj.clone();
        self.upcast(&mut back, version)?;
        let mut kept = lost(&original, &back);
        if let Some(f) = self.version_field.as_deref() {
            kept.remove(f);
        }
        if let Some(foreign) = foreign {
            kept.insert(KEPT_FIELD.to_string(), foreign);
        }
        Ok(kept)
    }

    /// An upcaster whose chain is `version - 1` steps that change nothing: for a
    /// collection declared to the policy by its raw schema and payload version only (no
    /// chain known), so that rows above `version` still count as written by a newer
    /// build.
    pub(crate) fn identity_to(version: i32) -> Self {
        let steps: Vec<UpcastStep> = (INITIAL_PAYLOAD_VERSION
            ..version.max(INITIAL_PAYLOAD_VERSION))
            .map(|from| UpcastStep::new(from, Mode::Lazy, |_| Ok(())))
            .collect();
        Upcaster {
            chain: UpcastChain {
                steps: steps.into(),
                start: INITIAL_PAYLOAD_VERSION,
                downs: Arc::from(Vec::new()),
            },
            protected: Arc::from(Vec::new()),
            version_field: None,
            retired_below: None,
        }
    }

    /// The values of the protected fields (`None`: absent), to restore after code that
    /// must not change them (a step, a cutover transform).
    pub(crate) fn snapshot(&self, obj: &JsonObject) -> Snapshot {
        match &*self.protected {
            [] => Snapshot::One(Saved::Absent),
            // The common case (one identity field): no vector to allocate per row, and a
            // short string is kept inline.
            [only] => Snapshot::One(Saved::of(obj.get(only))),
            many => Snapshot::Many(many.iter().map(|f| Saved::of(obj.get(f))).collect()),
        }
    }

    /// Puts the protected fields back to `snapshot` (absent stays absent, null stays
    /// null); a field left alone is not rewritten.
    pub(crate) fn restore(&self, obj: &mut JsonObject, snapshot: &Snapshot) {
        for (name, saved) in self.protected.iter().zip(snapshot.values()) {
            if saved.matches(obj.get(name)) {
                continue;
            }
            match saved.value() {
                Some(v) => {
                    obj.insert(name.clone(), v);
                }
                None => {
                    obj.remove(name);
                }
            }
        }
    }

    /// Writes `version` into the version field, if one is configured (in place when the
    /// field exists: no key allocation).
    pub(crate) fn stamp(&self, obj: &mut JsonObject, version: i32) {
        let Some(f) = &self.version_field else {
            return;
        };
        match obj.get_mut(&**f) {
            Some(v) => *v = Value::from(version),
            None => {
                obj.insert(f.to_string(), Value::from(version));
            }
        }
    }
}

/// What the round trip `back` lost of `original`, leaf by leaf: the members whose values
/// it does not reproduce (objects compared member by member, anything else as a whole).
fn lost(original: &JsonObject, back: &JsonObject) -> JsonObject {
    let mut out = JsonObject::new();
    for (k, v) in original {
        match (v, back.get(k)) {
            (Value::Object(o), Some(Value::Object(b))) => {
                let inner = lost(o, b);
                if !inner.is_empty() {
                    out.insert(k.clone(), Value::Object(inner));
                }
            }
            (v, Some(b)) if v == b => {}
            (v, _) => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// Merges `kept` into `target` leaf by leaf (objects member by member, anything else
/// replaced).
fn merge_kept(target: &mut JsonObject, kept: JsonObject) {
    for (k, v) in kept {
        match (target.get_mut(&k), v) {
            (Some(Value::Object(t)), Value::Object(v)) => merge_kept(t, v),
            (_, v) => {
                target.insert(k, v);
            }
        }
    }
}

/// Merges kept layers into `obj` ([`restore_kept`], one layer at a time: merging one may
/// expose a newer one nested in it) while `due` says the top layer's version
/// (`None`: not recorded) is due.
fn merge_kept_while(obj: &mut JsonObject, due: impl Fn(Option<i32>) -> bool) {
    while obj.contains_key(KEPT_FIELD) && due(kept_version(obj)) {
        restore_kept(obj);
    }
}

/// Puts the content a downcast kept (under [`KEPT_FIELD`]) back into an object that was
/// upcast to the version that wrote it: the kept leaves replace what the upcast
/// produced for them (a value the older build could not express), every other member
/// stays as the upcast made it (the older build's changes). Removes [`KEPT_FIELD`].
fn restore_kept(obj: &mut JsonObject) {
    if let Some(Value::Object(mut kept)) = obj.remove(KEPT_FIELD) {
        kept.remove(KEPT_AT_FIELD);
        merge_kept(obj, kept);
    }
}

/// The version whose shape the content kept in `obj` has (`None`: nothing kept, or kept
/// before the version was recorded).
fn kept_version(obj: &JsonObject) -> Option<i32> {
    let at = obj.get(KEPT_FIELD)?.get(KEPT_AT_FIELD)?.as_i64()?;
    i32::try_from(at).ok()
}

/// The protected fields' values taken by [`Upcaster::snapshot`], in the order they are
/// declared.
#[derive(Debug)]
pub(crate) enum Snapshot {
    /// At most one protected field (with none, restoring zips over nothing).
    One(Saved),
    /// Several.
    Many(Vec<Saved>),
}

impl Snapshot {
    fn values(&self) -> &[Saved] {
        match self {
            Snapshot::One(v) => std::slice::from_ref(v),
            Snapshot::Many(v) => v,
        }
    }
}

/// Strings up to this many bytes are snapshotted inline, without an allocation (identity
/// fields are short).
const INLINE: usize = 40;

/// One protected field's value as snapshotted.
#[derive(Debug)]
pub(crate) enum Saved {
    /// The field was absent.
    Absent,
    /// A string of at most [`INLINE`] bytes: its bytes, inline.
    Short {
        /// How many of `bytes` are the string.
        len: u8,
        /// The string's bytes (the rest zero).
        bytes: [u8; INLINE],
    },
    /// Any other value, cloned.
    Other(Value),
}

impl Saved {
    fn of(value: Option<&Value>) -> Saved {
        match value {
            None => Saved::Absent,
            Some(Value::String(s)) if s.len() <= INLINE => {
                let mut bytes = [0u8; INLINE];
                bytes[..s.len()].copy_from_slice(s.as_bytes());
                Saved::Short {
                    len: s.len() as u8,
                    bytes,
                }
            }
            Some(v) => Saved::Other(v.clone()),
        }
    }

    /// True when `current` is exactly the snapshotted value (`None`: absent), as
    /// `Value`'s equality decides.
    fn matches(&self, current: Option<&Value>) -> bool {
        match (self, current) {
            (Saved::Absent, None) => true,
            (Saved::Short { len, bytes }, Some(Value::String(s))) => {
                s.as_bytes() == &bytes[..usize::from(*len)]
            }
            (Saved::Other(saved), Some(v)) => saved == v,
            _ => false,
        }
    }

    /// The snapshotted value, to put back (`None`: absent).
    fn value(&self) -> Option<Value> {
        match self {
            Saved::Absent => None,
            // The bytes of a `String`: valid UTF-8, so nothing is replaced.
            Saved::Short { len, bytes } => Some(Value::String(
                String::from_utf8_lossy(&bytes[..usize::from(*len)]).into_owned(),
            )),
            Saved::Other(v) => Some(v.clone()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::super::chain::{Mode, UpcastStep};
    use super::*;
    use serde_json::json;

    /// A step that sets the protected `id` to `to` (`None`: removes it).
    fn hijack(from: i32, to: Option<Value>) -> UpcastStep {
        UpcastStep::new(from, Mode::Lazy, move |o| {
            match &to {
                Some(v) => o.insert("id".into(), v.clone()),
                None => o.remove("id"),
            };
            Ok(())
        })
    }

    /// Short ids (inline), ids of exactly and just over the inline size, non-string ids and
    /// an absent id are all put back exactly, whatever the step did to them: replaced by a
    /// string sharing a prefix or of another length, by a non-string, or removed.
    #[test]
    fn protected_values_of_every_shape_are_restored_exactly() {
        let long = "x".repeat(INLINE);
        let longer = "y".repeat(INLINE + 1);
        let stored = [
            Some(json!("a1")),
            Some(json!("")),
            Some(json!(long)),
            Some(json!(longer)),
            Some(json!("h\u{e9}llo \u{1F600}")),
            Some(json!(42)),
            Some(json!({"k": ["v"]})),
            Some(Value::Null),
            None,
        ];
        let hijacks = [
            Some(json!("a1x")),
            Some(json!("a")),
            Some(json!("")),
            Some(json!(format!("{long}z"))),
            Some(json!(42)),
            Some(Value::Null),
            None,
        ];
        for original in &stored {
            for to in &hijacks {
                let chain = UpcastChain::new(
                    "c",
                    vec![hijack(1, to.clone()), hijack(2, Some(json!("again")))],
                )
                .unwrap();
                let up = Upcaster::new(chain, vec!["id".into()], None);
                let mut obj = JsonObject::new();
                if let Some(v) = original {
                    obj.insert("id".into(), v.clone());
                }
                obj.insert("other".into(), json!(1));
                assert_eq!(up.upcast(&mut obj, 1).unwrap(), 3);
                assert_eq!(obj.get("id"), original.as_ref(), "{original:?} / {to:?}");
                assert_eq!(obj.get("other"), Some(&json!(1)));
            }
        }
    }

    /// v1 `{}`, v2 adds `dollars` (default 0), v3 stores `cents` instead (`dollars × 100`;
    /// the cents below a dollar are what v2 cannot express).
    fn priced(up_to: i32) -> Upcaster {
        let mut steps = vec![UpcastStep::new(1, Mode::Lazy, |o| {
            o.entry("dollars").or_insert(json!(0));
            Ok(())
        })];
        let mut downs = vec![super::super::chain::DowncastStep::new(2, |o| {
            o.remove("dollars");
            Ok(())
        })];
        if up_to == 3 {
            steps.push(UpcastStep::new(2, Mode::Lazy, |o| {
                let d = o.remove("dollars").and_then(|d| d.as_i64()).unwrap_or(0);
                o.insert("cents".into(), json!(d * 100));
                Ok(())
            }));
            downs.push(super::super::chain::DowncastStep::new(3, |o| {
                let c = o.remove("cents").and_then(|c| c.as_i64()).unwrap_or(0);
                o.insert("dollars".into(), json!(c / 100));
                Ok(())
            }));
        }
        let chain = UpcastChain::new("c", steps)
            .unwrap()
            .with_downcasts("c", downs)
            .unwrap();
        Upcaster::new(chain, vec!["id".into()], None)
    }

    fn object(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap()
    }

    /// A layer kept by a newer build is neither merged by an older reader nor relabelled
    /// by its downcast: it is nested in the older build's own layer, with its version,
    /// and the newest build gets back exactly what it kept.
    #[test]
    fn a_newer_builds_layer_is_nested_not_merged_or_relabelled() {
        let (v2, v3) = (priced(2), priced(3));
        // Build 3 writes {cents: 150} at v1.
        let mut row = object(json!({"id": "p", "cents": 150}));
        let kept = v3.downcast(&mut row, 1).unwrap();
        v3.keep(&mut row, kept);
        assert_eq!(
            Value::Object(row.clone()),
            json!({"id": "p", KEPT_FIELD: {"cents": 150, "__strata_at": 3}})
        );
        // Build 2 reads it: v3 content stays a layer of its own.
        let mut read = row.clone();
        assert_eq!(v2.upcast(&mut read, 1).unwrap(), 2);
        assert_eq!(read.get("cents"), None, "{read:?}");
        assert_eq!(
            read.get(KEPT_FIELD),
            Some(&json!({"cents": 150, "__strata_at": 3}))
        );
        // Build 2 writes dollars 7 (which v1 cannot express) back at v1: its own layer,
        // with build 3's nested in it unchanged.
        read.insert("dollars".into(), json!(7));
        let kept = v2.downcast(&mut read, 1).unwrap();
        v2.keep(&mut read, kept);
        assert_eq!(
            Value::Object(read.clone()),
            json!({"id": "p", KEPT_FIELD: {
                "dollars": 7, "__strata_at": 2,
                KEPT_FIELD: {"cents": 150, "__strata_at": 3}
            }})
        );
        // Build 2 reads its own layer back; build 3 gets its cents (not 700).
        let mut again = read.clone();
        v2.upcast(&mut again, 1).unwrap();
        assert_eq!(again.get("dollars"), Some(&json!(7)));
        let mut newest = read.clone();
        v3.upcast(&mut newest, 1).unwrap();
        assert_eq!(Value::Object(newest), json!({"id": "p", "cents": 150}));
        // A layer without a version (written before versions were recorded) is still
        // merged after the last step.
        let mut legacy = object(json!({"id": "p", KEPT_FIELD: {"dollars": 3}}));
        v2.upcast(&mut legacy, 1).unwrap();
        assert_eq!(Value::Object(legacy), json!({"id": "p", "dollars": 3}));
    }

    /// A step that changes a short id in place (same length, same buffer) is still seen.
    #[test]
    fn an_in_place_change_of_a_short_id_is_restored() {
        let chain = UpcastChain::new(
            "c",
            vec![UpcastStep::new(1, Mode::Lazy, |o| {
                if let Some(Value::String(s)) = o.get_mut("id") {
                    s.make_ascii_uppercase();
                }
                Ok(())
            })],
        )
        .unwrap();
        let up = Upcaster::new(chain, vec!["id".into()], None);
        let mut obj = json!({"id": "abc"}).as_object().cloned().unwrap();
        up.upcast(&mut obj, 1).unwrap();
        assert_eq!(obj.get("id"), Some(&json!("abc")));
    }
}
