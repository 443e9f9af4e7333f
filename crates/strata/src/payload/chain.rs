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
/// upcast — does not reproduce). Every build's write carries it over from the stored row
/// when its own document has none, and the upcast to the version that wrote it merges it
/// back leaf by leaf (the older build's changes to other members stay) and removes it.
pub const KEPT_FIELD: &str = "__strata_kept";

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
    steps: Arc<[UpcastStep]>,
    start: i32,
    /// Downcast steps, ordered by `from`; each reverses a declared upcast step.
    downs: Arc<[DowncastStep]>,
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
    /// use strata::payload::{Mode, UpcastStep, UpcastChain};
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
    /// # Ok::<(), strata::payload::chain::ChainError>(())
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
    /// use strata::payload::{Mode, UpcastStep, UpcastChain};
    /// let chain = UpcastChain::starting_at("accounts", 3, vec![
    ///     UpcastStep::new(3, Mode::Eager, |_| Ok(())),
    /// ])?;
    /// assert_eq!(chain.start_version(), 3);
    /// assert_eq!(chain.current_version(), 4);
    /// assert!(UpcastChain::starting_at("accounts", 3, vec![
    ///     UpcastStep::new(2, Mode::Lazy, |_| Ok(())),
    /// ]).is_err());
    /// # Ok::<(), strata::payload::chain::ChainError>(())
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
    /// use strata::payload::{DowncastStep, Mode, UpcastChain, UpcastStep};
    /// let chain = UpcastChain::new("accounts", vec![UpcastStep::new(1, Mode::Lazy, |_| Ok(()))])?
    ///     .with_downcasts("accounts", vec![DowncastStep::new(2, |_| Ok(()))])?;
    /// assert_eq!(chain.lowest_writable(), 1);
    /// assert!(UpcastChain::new("accounts", vec![])?
    ///     .with_downcasts("accounts", vec![DowncastStep::new(2, |_| Ok(()))])
    ///     .is_err());
    /// # Ok::<(), strata::payload::chain::ChainError>(())
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
        }
        if version != stored {
            self.stamp(obj, version);
        }
        restore_kept(obj);
        Ok(version)
    }

    /// Runs the downcast steps on `obj`, at the current version, down to `target`; the
    /// protected fields are restored after each step and the version field stamped, as
    /// in [`Upcaster::upcast`]. Returns the content the downcast cannot express: the
    /// leaves of `obj` (members of objects, recursively; anything else as a whole) that a
    /// round trip — the downcast, then the upcast back — does not reproduce, which the
    /// caller keeps under [`KEPT_FIELD`].
    pub fn downcast(&self, obj: &mut JsonObject, target: i32) -> Result<JsonObject, UpcastFailure> {
        let current = self.chain.current_version();
        if target >= current {
            return Ok(JsonObject::new());
        }
        obj.remove(KEPT_FIELD);
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
            [] => Snapshot::One(None),
            // The common case (one identity field): no vector to allocate per row.
            [only] => Snapshot::One(obj.get(only).cloned()),
            many => Snapshot::Many(many.iter().map(|f| obj.get(f).cloned()).collect()),
        }
    }

    /// Puts the protected fields back to `snapshot` (absent stays absent, null stays
    /// null); a field left alone is not rewritten.
    pub(crate) fn restore(&self, obj: &mut JsonObject, snapshot: &Snapshot) {
        for (name, saved) in self.protected.iter().zip(snapshot.values()) {
            if obj.get(name) == saved.as_ref() {
                continue;
            }
            match saved {
                Some(v) => {
                    obj.insert(name.clone(), v.clone());
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

/// Puts the content a downcast kept (under [`KEPT_FIELD`]) back into an object that was
/// upcast to the version that wrote it: the kept leaves replace what the upcast
/// produced for them (a value the older build could not express), every other member
/// stays as the upcast made it (the older build's changes). Removes [`KEPT_FIELD`].
fn restore_kept(obj: &mut JsonObject) {
    if let Some(Value::Object(kept)) = obj.remove(KEPT_FIELD) {
        merge_kept(obj, kept);
    }
}

/// The protected fields' values taken by [`Upcaster::snapshot`], in the order they are
/// declared (`None`: absent).
#[derive(Debug)]
pub(crate) enum Snapshot {
    /// At most one protected field (with none, restoring zips over nothing).
    One(Option<Value>),
    /// Several.
    Many(Vec<Option<Value>>),
}

impl Snapshot {
    fn values(&self) -> &[Option<Value>] {
        match self {
            Snapshot::One(v) => std::slice::from_ref(v),
            Snapshot::Many(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
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
