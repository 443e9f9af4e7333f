//! Operations on top of the layers: each drives collections, the policy and the keyrings
//! through the bulk pass, and nothing below depends on them (see the layer map in the
//! crate docs).
//!
//! * [`sweep`] — the leased, cursor-resumed eager sweep of one collection
//!   ([`Collection::sweep`](crate::Collection::sweep));
//! * [`cutover`] — the coordinated cutover: drain barrier, every pending collection
//!   rewritten through its transform, one generation bump
//!   ([`Database::run_schema_cutover`](crate::Database::run_schema_cutover));
//! * [`rotate`] — data-key rotation ([`Database::rotate_data_key`](crate::Database::rotate_data_key));
//! * [`verify`] — checking the sealed records of a store;
//! * [`window`] — deploy windows (two builds live at once) and [`revert`] — taking a
//!   completed version back down through the declared downcasts.
//!
//! * [`fixture`] — capturing and replaying real stores as test fixtures;
//! * [`retire`] — retiring the rows below a payload version.
//!
//! Each item has one path: its operation's module (`strata::ops::sweep::SweepOptions`).

pub mod cutover;
pub mod fixture;
pub mod retire;
pub mod revert;
pub mod rotate;
pub mod sweep;
pub mod verify;
pub mod window;
