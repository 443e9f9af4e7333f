//! The bulk pass: batching under one shared byte budget, mutation rules, hooks, abort,
//! progress, dry runs and checkpoints.

mod batches;
mod conditions;
mod control;
mod copy;

use crate::migration::{mem, put};
use std::cell::{Cell, RefCell};
use strata::pass::{
    BatchInfo, CheckpointCodec, HookError, MutationRule, Pass, PassError, PassLimits,
    RawCheckpoint, RecordError, RecordRef,
};
use strata_store::{Batch, KvRead, Mutation};

type Out = Vec<Mutation>;

fn k(s: &str) -> Vec<u8> {
    format!("__nx/t/{s}").into_bytes()
}

fn ck() -> RawCheckpoint {
    RawCheckpoint::new(b"__nx/sweep/t".to_vec())
}

fn limits(r: usize, b: usize) -> PassLimits {
    PassLimits::new(r, b).unwrap()
}

fn pass<'a>() -> Pass<'a> {
    Pass::new("t", b"__nx/t/".to_vec(), ck())
}

fn noop(_: &RecordRef<'_>, _: &mut Out) -> Result<(), RecordError> {
    Ok(())
}
