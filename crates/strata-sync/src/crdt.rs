//! The six CRDT families: state types (the Numax state JSON), merge, op application and
//! the materialized view.

use crate::SyncError;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use strata::numax::wire::{
    self, GCounterState, LwwMapEntry, LwwMapState, LwwRegisterState, ORSetState, OpKind,
    PNCounterState, RgaElement, RgaState,
};

/// A CRDT family: which pair of tables (materialized + state) holds its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// Grow-only counter.
    GCounter,
    /// Positive-negative counter.
    PNCounter,
    /// Last-writer-wins register.
    LwwRegister,
    /// Last-writer-wins map (field-level).
    LwwMap,
    /// Observed-remove set.
    ORSet,
    /// Replicated growable array (sequence).
    Rga,
}

impl Family {
    /// Every family, in table-id order.
    pub const ALL: [Family; 6] = [
        Family::GCounter,
        Family::PNCounter,
        Family::LwwRegister,
        Family::LwwMap,
        Family::ORSet,
        Family::Rga,
    ];

    /// Data prefix of the materialized table.
    pub fn materialized_prefix(self) -> &'static str {
        match self {
            Family::GCounter => wire::GCOUNTER_PREFIX,
            Family::PNCounter => wire::PNCOUNTER_PREFIX,
            Family::LwwRegister => wire::LWW_REGISTER_PREFIX,
            Family::LwwMap => wire::LWW_MAP_PREFIX,
            Family::ORSet => wire::ORSET_PREFIX,
            Family::Rga => wire::RGA_PREFIX,
        }
    }

    /// Data prefix of the state table.
    pub fn state_prefix(self) -> &'static str {
        match self {
            Family::GCounter => wire::GCOUNTER_STATE_PREFIX,
            Family::PNCounter => wire::PNCOUNTER_STATE_PREFIX,
            Family::LwwRegister => wire::LWW_REGISTER_STATE_PREFIX,
            Family::LwwMap => wire::LWW_MAP_STATE_PREFIX,
            Family::ORSet => wire::ORSET_STATE_PREFIX,
            Family::Rga => wire::RGA_STATE_PREFIX,
        }
    }

    /// Name of the materialized table.
    pub fn materialized_table(self) -> &'static str {
        match self {
            Family::GCounter => "gcounter-materialized",
            Family::PNCounter => "pncounter-materialized",
            Family::LwwRegister => "lww-register-materialized",
            Family::LwwMap => "lww-map-materialized",
            Family::ORSet => "orset-materialized",
            Family::Rga => "rga-materialized",
        }
    }

    /// Name of the state table.
    pub fn state_table(self) -> &'static str {
        match self {
            Family::GCounter => "gcounter-state",
            Family::PNCounter => "pncounter-state",
            Family::LwwRegister => "lww-register-state",
            Family::LwwMap => "lww-map-state",
            Family::ORSet => "orset-state",
            Family::Rga => "rga-state",
        }
    }

    /// The family an op kind targets.
    pub fn of(kind: &OpKind) -> Family {
        match kind {
            OpKind::GCounterIncrement { .. } => Family::GCounter,
            OpKind::PNCounterIncrement { .. } | OpKind::PNCounterDecrement { .. } => {
                Family::PNCounter
            }
            OpKind::LwwRegisterSet { .. } => Family::LwwRegister,
            OpKind::LwwMapSet { .. } | OpKind::LwwMapRemove { .. } => Family::LwwMap,
            OpKind::ORSetAdd { .. } | OpKind::ORSetRemove { .. } => Family::ORSet,
            OpKind::RgaInsert { .. } | OpKind::RgaDelete { .. } => Family::Rga,
        }
    }
}

/// A state-based CRDT with a materialized view.
///
/// `merge` is commutative, associative and idempotent; `value` is what an application
/// reads, `encode_value` its bytes in the family's materialized table.
pub trait Crdt: Clone + Default + PartialEq + std::fmt::Debug {
    /// The materialized value.
    type Value;
    /// The family.
    const FAMILY: Family;
    /// Merges `other` into `self`.
    fn merge(&mut self, other: &Self);
    /// The materialized value.
    fn value(&self) -> Self::Value;
    /// The materialized value in its table's encoding.
    fn encode_value(&self) -> Result<Vec<u8>, SyncError>;
    /// The state in its table's JSON.
    fn encode_state(&self) -> Result<Vec<u8>, SyncError>;
    /// Decodes the state from its table's JSON.
    fn decode_state(bytes: &[u8]) -> Result<Self, SyncError>;
}

fn sum(counts: &BTreeMap<String, u64>) -> u64 {
    counts.values().fold(0u64, |a, b| a.saturating_add(*b))
}

fn merge_counts(into: &mut BTreeMap<String, u64>, other: &BTreeMap<String, u64>) {
    for (node, n) in other {
        let e = into.entry(node.clone()).or_insert(0);
        *e = (*e).max(*n);
    }
}

impl Crdt for GCounterState {
    type Value = u64;
    const FAMILY: Family = Family::GCounter;
    fn merge(&mut self, other: &Self) {
        merge_counts(&mut self.counts, &other.counts);
    }
    fn value(&self) -> u64 {
        sum(&self.counts)
    }
    fn encode_value(&self) -> Result<Vec<u8>, SyncError> {
        Ok(wire::encode_gcounter_materialized(self.value()))
    }
    fn encode_state(&self) -> Result<Vec<u8>, SyncError> {
        Ok(self.to_json()?)
    }
    fn decode_state(bytes: &[u8]) -> Result<Self, SyncError> {
        Ok(GCounterState::from_json(bytes)?)
    }
}

impl Crdt for PNCounterState {
    type Value = i64;
    const FAMILY: Family = Family::PNCounter;
    fn merge(&mut self, other: &Self) {
        merge_counts(&mut self.positive.counts, &other.positive.counts);
        merge_counts(&mut self.negative.counts, &other.negative.counts);
    }
    /// Positive total minus negative total, clamped to the `i64` range.
    fn value(&self) -> i64 {
        let v = i128::from(sum(&self.positive.counts)) - i128::from(sum(&self.negative.counts));
        i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
    }
    fn encode_value(&self) -> Result<Vec<u8>, SyncError> {
        Ok(wire::encode_pncounter_materialized(self.value()))
    }
    fn encode_state(&self) -> Result<Vec<u8>, SyncError> {
        Ok(self.to_json()?)
    }
    fn decode_state(bytes: &[u8]) -> Result<Self, SyncError> {
        Ok(PNCounterState::from_json(bytes)?)
    }
}

/// LWW order: timestamp, then writer, then the value itself (so even two writes with one
/// timestamp and one writer resolve the same way everywhere).
fn register_wins(candidate: &LwwRegisterState, current: &LwwRegisterState) -> bool {
    (candidate.timestamp_ms, &candidate.writer, &candidate.value)
        > (current.timestamp_ms, &current.writer, &current.value)
}

impl Crdt for LwwRegisterState {
    type Value = Vec<u8>;
    const FAMILY: Family = Family::LwwRegister;
    fn merge(&mut self, other: &Self) {
        if register_wins(other, self) {
            *self = other.clone();
        }
    }
    fn value(&self) -> Vec<u8> {
        self.value.clone()
    }
    fn encode_value(&self) -> Result<Vec<u8>, SyncError> {
        Ok(wire::encode_lww_register_materialized(&self.value))
    }
    fn encode_state(&self) -> Result<Vec<u8>, SyncError> {
        Ok(self.to_json()?)
    }
    fn decode_state(bytes: &[u8]) -> Result<Self, SyncError> {
        Ok(LwwRegisterState::from_json(bytes)?)
    }
}

/// LWW-map order, exactly Numax's: timestamp, then writer, then — on a tie of both — a
/// tombstone beats a value and the larger value beats the smaller (so a set and a remove
/// with one timestamp and one writer leave the field removed, in either order).
fn entry_wins(candidate: &LwwMapEntry, current: &LwwMapEntry) -> bool {
    match (candidate.timestamp_ms, &candidate.writer).cmp(&(current.timestamp_ms, &current.writer))
    {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => match (&candidate.value, &current.value) {
            (None, Some(_)) => true,
            (Some(_), None) | (None, None) => false,
            (Some(c), Some(v)) => c > v,
        },
    }
}

fn apply_entry(map: &mut LwwMapState, field: &str, candidate: LwwMapEntry) {
    match map.entries.get_mut(field) {
        Some(current) => {
            if entry_wins(&candidate, current) {
                *current = candidate;
            }
        }
        None => {
            map.entries.insert(field.to_string(), candidate);
        }
    }
}

impl Crdt for LwwMapState {
    /// Visible fields (tombstones left out), in field order.
    type Value = BTreeMap<String, Vec<u8>>;
    const FAMILY: Family = Family::LwwMap;
    fn merge(&mut self, other: &Self) {
        for (field, entry) in &other.entries {
            apply_entry(self, field, entry.clone());
        }
    }
    fn value(&self) -> BTreeMap<String, Vec<u8>> {
        self.entries
            .iter()
            .filter_map(|(f, e)| e.value.clone().map(|v| (f.clone(), v)))
            .collect()
    }
    fn encode_value(&self) -> Result<Vec<u8>, SyncError> {
        let entries: Vec<(String, Vec<u8>)> = self.value().into_iter().collect();
        Ok(wire::encode_lww_map_materialized(&entries)?)
    }
    fn encode_state(&self) -> Result<Vec<u8>, SyncError> {
        Ok(self.to_json()?)
    }
    fn decode_state(bytes: &[u8]) -> Result<Self, SyncError> {
        Ok(LwwMapState::from_json(bytes)?)
    }
}

fn union_tags(
    into: &mut BTreeMap<String, BTreeSet<String>>,
    other: &BTreeMap<String, BTreeSet<String>>,
) {
    for (element, tags) in other {
        into.entry(element.clone())
            .or_default()
            .extend(tags.iter().cloned());
    }
}

impl Crdt for ORSetState {
    /// Visible elements (an add tag not removed), sorted.
    type Value = Vec<String>;
    const FAMILY: Family = Family::ORSet;
    fn merge(&mut self, other: &Self) {
        union_tags(&mut self.adds, &other.adds);
        union_tags(&mut self.removes, &other.removes);
    }
    fn value(&self) -> Vec<String> {
        self.adds
            .iter()
            .filter(|(element, tags)| match self.removes.get(*element) {
                Some(removed) => tags.iter().any(|t| !removed.contains(t)),
                None => !tags.is_empty(),
            })
            .map(|(element, _)| element.clone())
            .collect()
    }
    fn encode_value(&self) -> Result<Vec<u8>, SyncError> {
        Ok(wire::encode_orset_materialized(&self.value())?)
    }
    fn encode_state(&self) -> Result<Vec<u8>, SyncError> {
        Ok(self.to_json()?)
    }
    fn decode_state(bytes: &[u8]) -> Result<Self, SyncError> {
        Ok(ORSetState::from_json(bytes)?)
    }
}

fn insert_element(rga: &mut RgaState, element: RgaElement) {
    match rga.elements.get_mut(&element.id) {
        // Ids are unique by contract; should two inserts ever disagree, the smaller
        // element wins everywhere so replicas still converge.
        Some(current) => {
            if element < *current {
                *current = element;
            }
        }
        None => {
            rga.elements.insert(element.id.clone(), element);
        }
    }
}

/// Every element id in sequence order, tombstones included.
///
/// Elements hang under their parent (an element whose parent is unknown hangs at the
/// head); siblings are ordered by ascending id; the sequence is the depth-first pre-order
/// walk from the head. Iterative, so a long chain cannot overflow the stack.
pub fn rga_order(rga: &RgaState) -> Vec<&RgaElement> {
    let mut children: BTreeMap<Option<&str>, Vec<&RgaElement>> = BTreeMap::new();
    for element in rga.elements.values() {
        let parent = element
            .parent
            .as_deref()
            .filter(|p| rga.elements.contains_key(*p));
        children.entry(parent).or_default().push(element);
    }
    // `elements` iterates in id order, so each sibling list is already sorted.
    let mut out = Vec::with_capacity(rga.elements.len());
    let mut visited: HashSet<&str> = HashSet::new();
    let mut stack: Vec<&RgaElement> = Vec::new();
    if let Some(heads) = children.get(&None) {
        stack.extend(heads.iter().rev());
    }
    while let Some(element) = stack.pop() {
        if !visited.insert(element.id.as_str()) {
            continue;
        }
        out.push(element);
        if let Some(kids) = children.get(&Some(element.id.as_str())) {
            stack.extend(kids.iter().rev());
        }
    }
    out
}

impl Crdt for RgaState {
    /// Visible values in sequence order.
    type Value = Vec<Vec<u8>>;
    const FAMILY: Family = Family::Rga;
    fn merge(&mut self, other: &Self) {
        for element in other.elements.values() {
            insert_element(self, element.clone());
        }
        self.tombstones.extend(other.tombstones.iter().cloned());
    }
    fn value(&self) -> Vec<Vec<u8>> {
        rga_order(self)
            .into_iter()
            .filter(|e| !self.tombstones.contains(&e.id))
            .map(|e| e.value.clone())
            .collect()
    }
    fn encode_value(&self) -> Result<Vec<u8>, SyncError> {
        Ok(wire::encode_rga_materialized(&self.value())?)
    }
    fn encode_state(&self) -> Result<Vec<u8>, SyncError> {
        Ok(wire::encode_rga_state(self)?)
    }
    fn decode_state(bytes: &[u8]) -> Result<Self, SyncError> {
        Ok(wire::decode_rga_state(bytes)?)
    }
}

/// The state of one CRDT key, of any family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrdtState {
    /// Grow-only counter.
    GCounter(GCounterState),
    /// PN counter.
    PNCounter(PNCounterState),
    /// LWW register.
    LwwRegister(LwwRegisterState),
    /// LWW map.
    LwwMap(LwwMapState),
    /// OR-set.
    ORSet(ORSetState),
    /// RGA sequence.
    Rga(RgaState),
}

impl CrdtState {
    /// An empty state of `family`.
    pub fn empty(family: Family) -> Self {
        match family {
            Family::GCounter => CrdtState::GCounter(Default::default()),
            Family::PNCounter => CrdtState::PNCounter(Default::default()),
            Family::LwwRegister => CrdtState::LwwRegister(Default::default()),
            Family::LwwMap => CrdtState::LwwMap(Default::default()),
            Family::ORSet => CrdtState::ORSet(Default::default()),
            Family::Rga => CrdtState::Rga(Default::default()),
        }
    }

    /// The family.
    pub fn family(&self) -> Family {
        match self {
            CrdtState::GCounter(_) => Family::GCounter,
            CrdtState::PNCounter(_) => Family::PNCounter,
            CrdtState::LwwRegister(_) => Family::LwwRegister,
            CrdtState::LwwMap(_) => Family::LwwMap,
            CrdtState::ORSet(_) => Family::ORSet,
            CrdtState::Rga(_) => Family::Rga,
        }
    }

    /// Decodes a state record of `family`.
    pub fn decode(family: Family, bytes: &[u8]) -> Result<Self, SyncError> {
        Ok(match family {
            Family::GCounter => CrdtState::GCounter(Crdt::decode_state(bytes)?),
            Family::PNCounter => CrdtState::PNCounter(Crdt::decode_state(bytes)?),
            Family::LwwRegister => CrdtState::LwwRegister(Crdt::decode_state(bytes)?),
            Family::LwwMap => CrdtState::LwwMap(Crdt::decode_state(bytes)?),
            Family::ORSet => CrdtState::ORSet(Crdt::decode_state(bytes)?),
            Family::Rga => CrdtState::Rga(Crdt::decode_state(bytes)?),
        })
    }

    /// The state JSON.
    pub fn encode_state(&self) -> Result<Vec<u8>, SyncError> {
        match self {
            CrdtState::GCounter(s) => s.encode_state(),
            CrdtState::PNCounter(s) => s.encode_state(),
            CrdtState::LwwRegister(s) => s.encode_state(),
            CrdtState::LwwMap(s) => s.encode_state(),
            CrdtState::ORSet(s) => s.encode_state(),
            CrdtState::Rga(s) => s.encode_state(),
        }
    }

    /// The materialized value bytes.
    pub fn encode_value(&self) -> Result<Vec<u8>, SyncError> {
        match self {
            CrdtState::GCounter(s) => s.encode_value(),
            CrdtState::PNCounter(s) => s.encode_value(),
            CrdtState::LwwRegister(s) => s.encode_value(),
            CrdtState::LwwMap(s) => s.encode_value(),
            CrdtState::ORSet(s) => s.encode_value(),
            CrdtState::Rga(s) => s.encode_value(),
        }
    }

    /// The state Numax hydrates for a counter stored in the early layout — a materialized
    /// value and NO state record: the whole value is the contribution of the local node
    /// (`local`); a negative PN value is its decrement. `None` for the other families
    /// (Numax hydrates them from state records only).
    pub fn from_early_layout(
        family: Family,
        local: &str,
        materialized: &[u8],
    ) -> Result<Option<Self>, SyncError> {
        Ok(match family {
            Family::GCounter => {
                let value = wire::decode_gcounter_materialized(materialized)?;
                let mut s = GCounterState::default();
                s.counts.insert(local.to_string(), value);
                Some(CrdtState::GCounter(s))
            }
            Family::PNCounter => {
                let value = wire::decode_pncounter_materialized(materialized)?;
                let mut s = PNCounterState::default();
                if value >= 0 {
                    s.positive
                        .counts
                        .insert(local.to_string(), value.unsigned_abs());
                } else {
                    s.negative
                        .counts
                        .insert(local.to_string(), value.unsigned_abs());
                }
                Some(CrdtState::PNCounter(s))
            }
            _ => None,
        })
    }

    /// Applies one op (from `origin`) to this state. Returns false, changing nothing, when
    /// the op targets another family.
    pub fn apply(&mut self, origin: &str, kind: &OpKind) -> bool {
        match (self, kind) {
            (CrdtState::GCounter(s), OpKind::GCounterIncrement { increment, .. }) => {
                add(&mut s.counts, origin, *increment)
            }
            (CrdtState::PNCounter(s), OpKind::PNCounterIncrement { increment, .. }) => {
                add(&mut s.positive.counts, origin, *increment)
            }
            (CrdtState::PNCounter(s), OpKind::PNCounterDecrement { decrement, .. }) => {
                add(&mut s.negative.counts, origin, *decrement)
            }
            (
                CrdtState::LwwRegister(s),
                OpKind::LwwRegisterSet {
                    value,
                    timestamp_ms,
                    ..
                },
            ) => s.merge(&LwwRegisterState {
                value: value.clone(),
                timestamp_ms: *timestamp_ms,
                writer: origin.to_string(),
            }),
            (
                CrdtState::LwwMap(s),
                OpKind::LwwMapSet {
                    field,
                    value,
                    timestamp_ms,
                    ..
                },
            ) => apply_entry(
                s,
                field,
                LwwMapEntry {
                    value: Some(value.clone()),
                    timestamp_ms: *timestamp_ms,
                    writer: origin.to_string(),
                },
            ),
            (
                CrdtState::LwwMap(s),
                OpKind::LwwMapRemove {
                    field,
                    timestamp_ms,
                    ..
                },
            ) => apply_entry(
                s,
                field,
                LwwMapEntry {
                    value: None,
                    timestamp_ms: *timestamp_ms,
                    writer: origin.to_string(),
                },
            ),
            (CrdtState::ORSet(s), OpKind::ORSetAdd { element, tag, .. }) => {
                s.adds
                    .entry(element.clone())
                    .or_default()
                    .insert(tag.clone());
            }
            (
                CrdtState::ORSet(s),
                OpKind::ORSetRemove {
                    element,
                    observed_tags,
                    ..
                },
            ) => {
                s.removes
                    .entry(element.clone())
                    .or_default()
                    .extend(observed_tags.iter().cloned());
            }
            (
                CrdtState::Rga(s),
                OpKind::RgaInsert {
                    id, parent, value, ..
                },
            ) => insert_element(
                s,
                RgaElement {
                    id: id.clone(),
                    parent: parent.clone(),
                    value: value.clone(),
                },
            ),
            (CrdtState::Rga(s), OpKind::RgaDelete { id, .. }) => {
                s.tombstones.insert(id.clone());
            }
            _ => return false,
        }
        true
    }
}

fn add(counts: &mut BTreeMap<String, u64>, origin: &str, n: u64) {
    let e = counts.entry(origin.to_string()).or_insert(0);
    *e = e.saturating_add(n);
}
