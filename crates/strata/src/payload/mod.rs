//! Payload schema evolution: the versioned document envelope, upcast chains, the read
//! path's upcaster, the ahead guard and the eager sweep.
//!
//! * [`envelope`] — `NXDV | format | payload version | lock version | JSON`;
//! * [`chain`] — [`UpcastStep`]s `from → from + 1` over the raw JSON object, validated into an
//!   [`UpcastChain`] (with its downcasts);
//! * [`upcaster`] — the [`Upcaster`] that runs a chain up (and down), protecting identity
//!   and lock fields;
//! * the leased, cursor-resumed eager sweep on the bulk pass lives in
//!   [`crate::ops::sweep`], above collections.

pub mod chain;
pub mod envelope;
pub mod retired;
pub mod upcaster;
pub mod window;

pub use chain::{
    ChainError, DowncastStep, JsonObject, Mode, StepError, StepFn, UpcastChain, UpcastStep,
    INITIAL_PAYLOAD_VERSION, KEPT_FIELD,
};
pub use upcaster::{UpcastFailure, Upcaster};
