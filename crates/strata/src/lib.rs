//! strata: safe, resumable evolution of data kept in an ordered key-value store.
#![deny(missing_docs)]

pub mod numax;
