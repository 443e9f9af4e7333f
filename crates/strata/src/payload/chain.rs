//! Upcast chains: pure steps over the raw JSON object, declared per collection in code.

use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;

/// The first payload version: a chain starts here, and a stored version below it is
/// refused.
pub const INITIAL_PAYLOAD_VERSION: i32 = 1;

/// The JSON object a step mutates in place.
pub type JsonObject = Map<String, Value>;

/// When a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Only when a stale document is read (the default).
    #[default]
    Lazy,
    /// On read, and the collection becomes sweepable: [`Collection::sweep`](crate::collection::Collection::sweep)
    /// rewrites every stale document in bulk.
    Eager,
}

/// The error an upcast step returns; it fails that one read and leaves the stored document
/// unchanged.
#[derive(Debug)]
pub struct StepError {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StepError {
    /// A step error with a lowercase message.
    pub fn new(message: impl Into<String>) -> Self {
        StepError {
            message: message.into(),
            source: None,
        }
    }

    /// A step error caused by another error.
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        StepError {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StepError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The function of a step: mutate the object in place from `from` to `from + 1`.
pub type StepFn = Arc<dyn Fn(&mut JsonObject) -> Result<(), StepError> + Send + Sync>;

/// One upcast step `from → from + 1`.
#[derive(Clone)]
pub struct UpcastStep {
    from: i32,
    mode: Mode,
    func: StepFn,
}

impl fmt::Debug for UpcastStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpcastStep")
            .field("from", &self.from)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl UpcastStep {
    /// A step upcasting from `from` to `from + 1`.
    pub fn new(
        from: i32,
        mode: Mode,
        func: impl Fn(&mut JsonObject) -> Result<(), StepError> + Send + Sync + 'static,
    ) -> Self {
        UpcastStep {
            from,
            mode,
            func: Arc::new(func),
        }
    }

    /// The version this step reads.
    pub fn from(&self) -> i32 {
        self.from
    }

    /// The version this step produces (`from + 1`).
    pub fn to(&self) -> i32 {
        self.from.saturating_add(1)
    }

    /// Lazy or eager.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Runs the bare step function (no protection; the engine wraps it).
    pub fn run(&self, obj: &mut JsonObject) -> Result<(), StepError> {
        (self.func)(obj)
    }
}

/// One downcast step `from → from - 1`: the reverse of the upcast step `from - 1 → from`,
/// declared beside it ([`CollectionOptions::downcast`](crate::collection::CollectionOptions::downcast)).
/// During a deploy window a build at `from` writes rows at the window's operational
/// version through it, so a build that knows only `from - 1` keeps reading and writing
/// them.
#[derive(Clone)]
pub struct DowncastStep {
    from: i32,
    func: StepFn,
}

impl fmt::Debug for DowncastStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DowncastStep")
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

impl DowncastStep {
    /// A step downcasting from `from` to `from - 1`.
    pub fn new(
        from: i32,
        func: impl Fn(&mut JsonObject) -> Result<(), StepError> + Send + Sync + 'static,
    ) -> Self {
        DowncastStep {
            from,
            func: Arc::new(func),
        }
    }

    /// The version this step reads.
    pub fn from(&self) -> i32 {
        self.from
    }

    /// The version this step produces (`from - 1`).
    pub fn to(&self) -> i32 {
        self.from.saturating_sub(1)
    }

    /// Runs the bare step function (no protection; the engine wraps it).
    pub fn run(&self, obj: &mut JsonObject) -> Result<(), StepError> {
        (self.func)(obj)
    }
}

/// The reserved top-level property under which a row written through a downcast keeps
/// the content the downcast cannot express (the leaves a round trip — downcast, then
/// upcast — does not reproduce), with the payload version whose shape that content has
/// (the writing build's, under `"__strata_at"`). Every build's write carries it over from
/// the stored row when its own document has none, and the upcast merges it back leaf by
/// leaf when it reaches that version (the older build's changes to other members stay;
/// steps above it then run on the merged object) and removes it.
pub const KEPT_FIELD: &str = "__strata_kept";

/// The member of [`KEPT_FIELD`] naming the payload version whose shape the kept content
/// has (a member without it, written before it existed, is merged after the last step).
pub(crate) const KEPT_AT_FIELD: &str = "__strata_at";

/// An invalid upcast chain declaration (see [`UpcastChain::new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// The chain skips a version.
    #[error("upcast chain of collection `{collection}` has a gap: expected a step from v{expected}, found one from v{found}; declare every step from 1 up without holes")]
    Gap {
        /// The collection.
        collection: String,
        /// The `from` version the chain needed next.
        expected: i32,
        /// The `from` version found instead.
        found: i32,
    },
    /// Two steps upcast from the same version.
    #[error("upcast chain of collection `{collection}` declares two steps from v{from}; declare each step once")]
    Duplicate {
        /// The collection.
        collection: String,
        /// The duplicated `from` version.
        from: i32,
    },
    /// A step from below the initial payload version 1.
    #[error("upcast chain of collection `{collection}` declares a step from v{from}, below the initial payload version 1; steps start at 1")]
    BelowInitial {
        /// The collection.
        collection: String,
        /// The offending `from` version.
        from: i32,
    },
    /// A downcast step without the upcast step it reverses.
    #[error("collection `{collection}` declares a downcast from v{from} but no upcast step from v{} to v{from} (or it is retired); declare each downcast beside the upcast it reverses", .from.saturating_sub(1))]
    DowncastWithoutUpcast {
        /// The collection.
        collection: String,
        /// The downcast's `from` version.
        from: i32,
    },
    /// Two downcast steps from the same version.
    #[error(
        "collection `{collection}` declares two downcasts from v{from}; declare each downcast once"
    )]
    DuplicateDowncast {
        /// The collection.
        collection: String,
        /// The duplicated `from` version.
        from: i32,
    },
    /// A step from below the version the chain declares it starts at
    /// ([`CollectionOptions::retired_below`](crate::collection::CollectionOptions::retired_below)).
    #[error("upcast chain of collection `{collection}` starts at v{start} (the steps below it are retired) but declares a step from v{from}; drop that step or lower `retired_below`")]
    BelowStart {
        /// The collection.
        collection: String,
        /// The offending `from` version.
        from: i32,
        /// The version the chain starts at.
        start: i32,
    },
}

/// A validated, contiguous chain of steps starting at [`INITIAL_PAYLOAD_VERSION`] (or, when
/// the steps below a version were retired, at that version: [`UpcastChain::starting_at`]).
/// Cloning is cheap and shares the steps.
#[derive(Debug, Clone)]
pub struct UpcastChain {
    pub(super) steps: Arc<[UpcastStep]>,
    pub(super) start: i32,
    /// Downcast steps, ordered by `from`; each reverses a declared upcast step.
    pub(super) downs: Arc<[DowncastStep]>,
}

impl Default for UpcastChain {
    fn default() -> Self {
        UpcastChain {
            steps: Arc::from(Vec::new()),
            start: INITIAL_PAYLOAD_VERSION,
            downs: Arc::from(Vec::new()),
        }
    }
}

impl UpcastChain {
    /// Validates `steps` (in any order) for `collection`: a step from below 1 is
    /// [`ChainError::BelowInitial`], two steps from one version [`ChainError::Duplicate`],
    /// a missing version [`ChainError::Gap`] (each becomes the same-named
    /// `CollectionError::Chain*` when a collection is opened).
    ///
    /// ```
    /// use strata::{Mode, UpcastChain, UpcastStep};
    /// let chain = UpcastChain::new("accounts", vec![
    ///     UpcastStep::new(2, Mode::Eager, |_| Ok(())),
    ///     UpcastStep::new(1, Mode::Lazy, |_| Ok(())),
    /// ])?;
    /// assert_eq!(chain.current_version(), 3);
    /// assert_eq!(chain.eager_target_version(), Some(3));
    /// let gap = UpcastChain::new("accounts", vec![
    ///     UpcastStep::new(1, Mode::Lazy, |_| Ok(())),
    ///     UpcastStep::new(3, Mode::Lazy, |_| Ok(())),
    /// ]);
    /// assert!(gap.is_err());
    /// # Ok::<(), strata::ChainError>(())
    /// ```
    pub fn new(collection: &str, steps: Vec<UpcastStep>) -> Result<Self, ChainError> {
        Self::starting_at(collection, INITIAL_PAYLOAD_VERSION, steps)
    }

    /// [`UpcastChain::new`] for a chain whose steps below `start` were retired (proven
    /// unneeded by the store, see [`crate::ops::retire`]): the steps must run from `start`
    /// up without holes; a step from below `start` is [`ChainError::BelowStart`]. With
    /// no step, the chain's current version is `start`.
    ///
    /// ```
    /// use strata::{Mode, UpcastChain, UpcastStep};
    /// let chain = UpcastChain::starting_at("accounts", 3, vec![
    ///     UpcastStep::new(3, Mode::Eager, |_| Ok(())),
    /// ])?;
    /// assert_eq!(chain.start_version(), 3);
    /// assert_eq!(chain.current_version(), 4);
    /// assert!(UpcastChain::starting_at("accounts", 3, vec![
    ///     UpcastStep::new(2, Mode::Lazy, |_| Ok(())),
    /// ]).is_err());
    /// # Ok::<(), strata::ChainError>(())
    /// ```
    pub fn starting_at(
        collection: &str,
        start: i32,
        mut steps: Vec<UpcastStep>,
    ) -> Result<Self, ChainError> {
        if let Some(s) = steps.iter().find(|s| s.from < INITIAL_PAYLOAD_VERSION) {
            return Err(ChainError::BelowInitial {
                collection: collection.to_string(),
                from: s.from,
            });
        }
        let start = start.max(INITIAL_PAYLOAD_VERSION);
        if let Some(s) = steps.iter().find(|s| s.from < start) {
            return Err(ChainError::BelowStart {
                collection: collection.to_string(),
                from: s.from,
                start,
            });
        }
        steps.sort_by_key(|s| s.from);
        for pair in steps.windows(2) {
            if pair[0].from == pair[1].from {
                return Err(ChainError::Duplicate {
                    collection: collection.to_string(),
                    from: pair[0].from,
                });
            }
        }
        let mut expected = start;
        for s in &steps {
            if s.from != expected {
                return Err(ChainError::Gap {
                    collection: collection.to_string(),
                    expected,
                    found: s.from,
                });
            }
            expected = expected.saturating_add(1);
        }
        Ok(UpcastChain {
            steps: steps.into(),
            start,
            downs: Arc::from(Vec::new()),
        })
    }

    /// This chain with `downs`, its downcast steps: each must reverse a declared upcast
    /// step (a downcast from `v` needs the step `v - 1 → v`:
    /// [`ChainError::DowncastWithoutUpcast`]), at most one per version
    /// ([`ChainError::DuplicateDowncast`]).
    ///
    /// ```
    /// use strata::{DowncastStep, Mode, UpcastChain, UpcastStep};
    /// let chain = UpcastChain::new("accounts", vec![UpcastStep::new(1, Mode::Lazy, |_| Ok(()))])?
    ///     .with_downcasts("accounts", vec![DowncastStep::new(2, |_| Ok(()))])?;
    /// assert_eq!(chain.lowest_writable(), 1);
    /// assert!(UpcastChain::new("accounts", vec![])?
    ///     .with_downcasts("accounts", vec![DowncastStep::new(2, |_| Ok(()))])
    ///     .is_err());
    /// # Ok::<(), strata::ChainError>(())
    /// ```
    pub fn with_downcasts(
        mut self,
        collection: &str,
        mut downs: Vec<DowncastStep>,
    ) -> Result<Self, ChainError> {
        downs.sort_by_key(|d| d.from);
        for pair in downs.windows(2) {
            if pair[0].from == pair[1].from {
                return Err(ChainError::DuplicateDowncast {
                    collection: collection.to_string(),
                    from: pair[0].from,
                });
            }
        }
        if let Some(d) = downs
            .iter()
            .find(|d| d.from <= self.start || d.from > self.current_version())
        {
            return Err(ChainError::DowncastWithoutUpcast {
                collection: collection.to_string(),
                from: d.from,
            });
        }
        self.downs = downs.into();
        Ok(self)
    }

    /// The downcast step from `from`, if declared.
    pub fn downcast_from(&self, from: i32) -> Option<&DowncastStep> {
        self.downs.iter().find(|d| d.from == from)
    }

    /// The declared downcast steps, ordered by `from`.
    pub fn downcasts(&self) -> Arc<[DowncastStep]> {
        Arc::clone(&self.downs)
    }

    /// The lowest version this build can write at: the current version less every
    /// contiguous downcast below it (the current version without a downcast from it).
    pub fn lowest_writable(&self) -> i32 {
        let mut v = self.current_version();
        while self.downcast_from(v).is_some() {
            v = v.saturating_sub(1);
        }
        v
    }

    /// The version the chain starts at: 1, or the version below which steps were retired.
    pub fn start_version(&self) -> i32 {
        self.start
    }

    /// The newest payload version this build knows: the start version (1) + the number
    /// of steps.
    pub fn current_version(&self) -> i32 {
        self.steps.last().map_or(self.start, |s| s.to())
    }

    /// True when at least one step is declared.
    pub fn has_chain(&self) -> bool {
        !self.steps.is_empty()
    }

    /// The version the eager sweep must bring every document to: the `to` of the highest
    /// eager step (`None` without an eager step). Because a decoded document always reaches
    /// [`UpcastChain::current_version`] in one pass, the sweep actually runs every pending
    /// step — the eager cascade.
    pub fn eager_target_version(&self) -> Option<i32> {
        self.steps
            .iter()
            .rev()
            .find(|s| s.mode == Mode::Eager)
            .map(UpcastStep::to)
    }

    /// An immutable snapshot of the steps, ordered by `from`.
    pub fn steps(&self) -> Arc<[UpcastStep]> {
        Arc::clone(&self.steps)
    }

    /// The step upcasting from `from`, if declared.
    pub fn step_from(&self, from: i32) -> Option<&UpcastStep> {
        let idx = usize::try_from(from.checked_sub(self.start)?).ok()?;
        self.steps.get(idx)
    }
}

#[cfg(test)]
mod tests {
    use super::super::upcaster::*;
    use super::*;
    use serde_json::json;

    fn noop(from: i32, mode: Mode) -> UpcastStep {
        UpcastStep::new(from, mode, |_| Ok(()))
    }

    #[test]
    fn empty_chain_is_version_one() {
        let c = UpcastChain::new("c", vec![]).unwrap();
        assert_eq!(c.current_version(), 1);
        assert!(!c.has_chain());
        assert_eq!(c.eager_target_version(), None);
        assert!(c.steps().is_empty());
    }

    #[test]
    fn eager_target_is_highest_eager_step() {
        let c = UpcastChain::new(
            "c",
            vec![
                noop(1, Mode::Lazy),
                noop(2, Mode::Eager),
                noop(3, Mode::Lazy),
            ],
        )
        .unwrap();
        assert_eq!(c.current_version(), 4);
        assert_eq!(c.eager_target_version(), Some(3));
    }

    #[test]
    fn upcast_restores_absent_and_null_protected_fields() {
        let chain = UpcastChain::new(
            "c",
            vec![UpcastStep::new(1, Mode::Lazy, |o| {
                o.insert("id".into(), json!("hijacked"));
                o.insert("lock".into(), json!(99));
                o.insert("x".into(), json!(1));
                Ok(())
            })],
        )
        .unwrap();
        let up = Upcaster::new(chain, vec!["id".into(), "lock".into()], None);
        let mut obj = json!({"lock": null}).as_object().cloned().unwrap();
        assert_eq!(up.upcast(&mut obj, 1).unwrap(), 2);
        assert_eq!(obj, *json!({"lock": null, "x": 1}).as_object().unwrap());
    }

    #[test]
    fn every_step_sees_the_original_protected_fields_and_its_own_version() {
        // Step 1 hijacks `id` and drops `lock`; step 2 must still see both as stored, and
        // the version field stamped with its own `from`.
        let chain = UpcastChain::new(
            "c",
            vec![
                UpcastStep::new(1, Mode::Lazy, |o| {
                    o.insert("id".into(), json!("hijacked"));
                    o.remove("lock");
                    o.insert("seen1".into(), o.get("v").cloned().unwrap_or_default());
                    Ok(())
                }),
                UpcastStep::new(2, Mode::Eager, |o| {
                    if o.get("id") != Some(&json!("a")) || o.get("lock") != Some(&json!(3)) {
                        return Err(StepError::new("protected fields not restored"));
                    }
                    o.insert("seen2".into(), o.get("v").cloned().unwrap_or_default());
                    o.insert("id".into(), json!("again"));
                    Ok(())
                }),
            ],
        )
        .unwrap();
        let up = Upcaster::new(chain, vec!["id".into(), "lock".into()], Some("v".into()));
        let mut obj = json!({"id": "a", "lock": 3}).as_object().cloned().unwrap();
        assert_eq!(up.upcast(&mut obj, 1).unwrap(), 3);
        assert_eq!(
            obj,
            *json!({"id": "a", "lock": 3, "v": 3, "seen1": 1, "seen2": 2})
                .as_object()
                .unwrap()
        );
        // Already current: untouched, no stamp.
        let mut cur = json!({"id": "b"}).as_object().cloned().unwrap();
        assert_eq!(up.upcast(&mut cur, 3).unwrap(), 3);
        assert_eq!(cur, *json!({"id": "b"}).as_object().unwrap());
    }
}
