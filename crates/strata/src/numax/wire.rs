//! Serde types of the Numax state and op JSON (DESIGN.md §2).
