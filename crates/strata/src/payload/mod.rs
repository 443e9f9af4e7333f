//! Payload schema evolution: the versioned document envelope, upcast chains, the read
//! path's upcaster, the ahead guard and the eager sweep.
//!
//! * [`envelope`] — `NXDV | format | payload version | lock version | JSON`;
//! * [`chain`] — [`UpcastStep`]s `from → from + 1` over the raw JSON object, validated into an
//!   [`UpcastChain`], run by an [`Upcaster`] that protects identity and lock fields;
//! * [`sweep`] — the leased, cursor-resumed eager sweep on the bulk pass.

pub mod chain;
pub mod envelope;
pub mod sweep;

pub use chain::{
    ChainError, JsonObject, Mode, StepError, UpcastChain, UpcastFailure, UpcastStep, Upcaster,
    INITIAL_PAYLOAD_VERSION,
};
pub use envelope::{Envelope, EnvelopeError};
pub use sweep::{SweepMarker, SweepOptions, SweepReport};
