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
//! Their public items keep their earlier paths too (`strata::payload::sweep`,
//! `strata::policy::CutoverOptions`, `strata::seal::rotate_data_key`, ...).

pub mod cutover;
pub mod fixture;
pub mod retire;
pub mod revert;
pub mod rotate;
pub mod sweep;
pub mod verify;
pub mod window;
