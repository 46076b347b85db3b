//! The interpreter: runs one `OperationIr` on the inner backend, over the engine's own
//! handle store ([`Handles`]).
//!
//! This is what burn-router's runner did for burn-swap until 2026-11-25, without the
//! runner's lock (the engine's own lock already serialises a device's ops), its second table
//! of handles, or the ids it locked for. Each op family is a function of its own, so that an
//! op runs through a small frame: the dispatch, its family's `match`, its arm. Every arm
//! takes its inputs from the store as their status says (a read-only use leaves the handle
//! there), calls the inner backend's method the op's builder in burn-router stands for,
//! with the op's own parameters, and puts each output under its id.
//!
//! The op builders that make these ops are burn-router's (`crate::backend::ops` forwards to
//! them); the arms are kept in the order of burn-ir's enums, so that a Burn bump's new
//! variants show up as compile errors here, never as a silent fallback.

mod base;
mod handles;
mod module;
mod numeric;
mod typed;

pub(crate) use handles::{Handles, fresh_id};

use base::{base_bool, base_float, base_int};
use numeric::{numeric_float, numeric_int};
use typed::{bool_ops, float_ops, int_ops};

use burn_backend::tensor::IndexingUpdateOp;

use burn_ir::{BackendIr, OperationIr};

/// Runs `op` on the inner backend: its inputs from `handles`, its outputs into it.
///
/// # Panics
/// On an input the store has no handle for (a bug in burn-swap), on a custom op (which
/// only a fusion backend makes), on a scatter or select-assign with an update other than
/// addition (no op builder of Burn 0.21 makes one), and wherever the inner backend panics.
pub(crate) fn run<B: BackendIr>(handles: &mut Handles<B>, op: &OperationIr) {
    match op {
        OperationIr::BaseFloat(op) => base_float(handles, op),
        OperationIr::BaseInt(op) => base_int(handles, op),
        OperationIr::BaseBool(op) => base_bool(handles, op),
        OperationIr::NumericFloat(_, op) => numeric_float(handles, op),
        OperationIr::NumericInt(_, op) => numeric_int(handles, op),
        OperationIr::Bool(op) => bool_ops(handles, op),
        OperationIr::Int(op) => int_ops(handles, op),
        OperationIr::Float(_, op) => float_ops(handles, op),
        OperationIr::Module(op) => module::run(handles, op),
        // The data came with the op that made the tensor: nothing left to do.
        OperationIr::Init(_) => {}
        OperationIr::Drop(tensor) => {
            handles.remove(&tensor.id);
        }
        #[allow(unreachable_patterns)]
        other => unsupported(other),
    }
}

#[cold]
#[inline(never)]
fn unsupported(op: &OperationIr) -> ! {
    panic!("burn-swap cannot run this operation on the inner backend: {op:?}")
}

#[cold]
#[inline(never)]
fn unsupported_update(op: &'static str, update: IndexingUpdateOp) -> ! {
    panic!("burn-swap: {op} with the update {update:?} has no backend method in Burn 0.21")
}

#[cfg(test)]
mod tests;
