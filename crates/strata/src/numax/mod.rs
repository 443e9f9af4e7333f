//! The Numax-compatible sync layout: the 14 managed tables, their wire types and decoders.

pub mod decode;
pub mod wire;
