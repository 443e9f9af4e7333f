//! strata-testkit: test an evolution before it ships.
//!
//! For an application's `[dev-dependencies]`. Three tools:
//!
//! * **given/expected checks** of one step or a whole chain on raw JSON, run exactly as the
//!   engine runs them (identity and lock fields protected, the version field stamped):
//!   [`assert_upcasts`], [`assert_step`], [`assert_upcast_fails`], and the ahead guard,
//!   [`assert_ahead_refused`];
//! * **fixtures captured from a real store** (`strata fixture capture --collection C
//!   [--sample N] [--redact PATH]…`, see [`strata::ops::fixture`]): the rows of one
//!   collection with their payload versions, its schema history, sweep marker and container
//!   header, with secrets redacted;
//! * **replay** of a fixture against this build's chain of the collection it was captured
//!   from ([`replay()`], [`Replay`]; a fixture of another collection is refused before
//!   anything runs, [`ReplayError`]): every row read into the build's type from the
//!   version it is stored at, the eager sweep uninterrupted and killed (SIGKILL, in a
//!   child process) at every batch boundary with each row rewritten exactly once, and
//!   `schema check` against the fixture's history — one [`ReplayReport`], with
//!   [`ReplayReport::assert_ok`] for `cargo test`.
//!
//! ```
//! use serde_json::json;
//! use strata::{CollectionOptions, Mode};
//!
//! let options = CollectionOptions::new()
//!     .identity_fields(["id"])
//!     .upcast(1, Mode::Eager, |o| {
//!         let d = o.remove("balance").and_then(|v| v.as_i64()).unwrap_or(0);
//!         o.insert("balance_cents".into(), json!(d * 100));
//!         Ok(())
//!     });
//! strata_testkit::assert_upcasts(
//!     &options,
//!     1,
//!     json!({"id": "a", "balance": 3}),
//!     json!({"id": "a", "balance_cents": 300}),
//! );
//! strata_testkit::assert_ahead_refused(&options, 3);
//! ```
//!
//! A kill replay runs the current test again as a child process (`--exact <test name>`,
//! with [`CHILD_ENV`] set): keep the test deterministic up to its `replay` call, and run it
//! under libtest (`cargo test`; the test's thread name is its name). Elsewhere the kills are
//! simulated in-process and the report says so.

// The `assert_*` helpers and `ReplayReport::assert_ok` are test assertions: failing by
// panicking (with the report) is their contract, as for `assert!`. Nothing else panics.
#![allow(clippy::panic)]

mod replay;
mod steps;

pub use replay::{
    replay, Replay, ReplayError, ReplayReport, RowFailure, SweepRun, Sweeper, CHILD_ENV,
};
pub use steps::{
    assert_ahead_refused, assert_downcasts, assert_step, assert_upcast_fails, assert_upcasts,
    upcast,
};
pub use strata::ops::fixture::{capture, CaptureOptions, Fixture, FixtureRow, RedactPath};
