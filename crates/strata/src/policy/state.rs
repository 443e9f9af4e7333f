//! The fence's state: where a store is in the cutover cycle. A leaf module, so the
//! policy errors can name a state without depending on the fence record's code.

use serde::{Deserialize, Serialize};

/// Where a store is in the cutover cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FenceState {
    /// No cutover running (cutovers may be pending).
    Normal,
    /// A coordinator waits for every live client to acknowledge the next generation.
    Draining,
    /// The coordinator rewrites the pending collections.
    Migrating,
    /// Every pending collection is rewritten and the generation bumped; the coordinator is
    /// finishing its bookkeeping.
    Complete,
}

impl FenceState {
    /// The lowercase name (`normal`, `draining`, `migrating`, `complete`).
    pub fn as_str(&self) -> &'static str {
        match self {
            FenceState::Normal => "normal",
            FenceState::Draining => "draining",
            FenceState::Migrating => "migrating",
            FenceState::Complete => "complete",
        }
    }
}

impl std::fmt::Display for FenceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
