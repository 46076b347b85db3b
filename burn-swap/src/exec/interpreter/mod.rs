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

mod handles;
mod module;

pub(crate) use handles::{Handles, fresh_id};

use burn_backend::tensor::IndexingUpdateOp;

use crate::exec::shape_of;
use burn_ir::{
    BackendIr, BaseOperationIr, BoolOperationIr, FloatOperationIr, IntOperationIr,
    NumericOperationIr, OperationIr, TensorId,
};

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

/// The op family of a float tensor's shape, indexing and creation ops.
#[inline(never)]
fn base_float<B: BackendIr>(h: &mut Handles<B>, op: &BaseOperationIr) {
    use BaseOperationIr as Op;
    let (out, tensor): (TensorId, _) = match op {
        Op::Reshape(d) => (
            d.out.id,
            B::float_reshape(h.float(&d.input), shape_of(&d.out.shape)),
        ),
        Op::SwapDims(d) => (
            d.out.id,
            B::float_swap_dims(h.float(&d.input), d.dim1, d.dim2),
        ),
        Op::Permute(d) => (d.out.id, B::float_permute(h.float(&d.input), &d.axes)),
        Op::Flip(d) => (d.out.id, B::float_flip(h.float(&d.input), &d.axes)),
        Op::Expand(d) => (
            d.out.id,
            B::float_expand(h.float(&d.input), shape_of(&d.out.shape)),
        ),
        Op::Unfold(d) => {
            let x = h.float(&d.input);
            (d.out.id, B::float_unfold(x, d.dim, d.size, d.step))
        }
        Op::Slice(d) => (d.out.id, B::float_slice(h.float(&d.tensor), &d.ranges)),
        Op::SliceAssign(d) => {
            let (x, value) = (h.float(&d.tensor), h.float(&d.value));
            (d.out.id, B::float_slice_assign(x, &d.ranges, value))
        }
        Op::Select(d) => {
            let (x, indices) = (h.float(&d.tensor), h.int(&d.indices));
            (d.out.id, B::float_select(x, d.dim, indices))
        }
        Op::SelectAssign(d) => {
            let (x, indices, value) = (h.float(&d.tensor), h.int(&d.indices), h.float(&d.value));
            match d.update {
                IndexingUpdateOp::Add => (d.out.id, B::float_select_add(x, d.dim, indices, value)),
                other => unsupported_update("select_assign", other),
            }
        }
        Op::MaskWhere(d) => {
            let (x, mask, value) = (h.float(&d.tensor), h.bool(&d.mask), h.float(&d.value));
            (d.out.id, B::float_mask_where(x, mask, value))
        }
        Op::MaskFill(d) => {
            let (x, mask) = (h.float(&d.tensor), h.bool(&d.mask));
            (d.out.id, B::float_mask_fill(x, mask, d.value.into()))
        }
        Op::Gather(d) => {
            let (x, indices) = (h.float(&d.tensor), h.int(&d.indices));
            (d.out.id, B::float_gather(d.dim, x, indices))
        }
        Op::Scatter(d) => {
            let (x, indices, value) = (h.float(&d.tensor), h.int(&d.indices), h.float(&d.value));
            match d.update {
                IndexingUpdateOp::Add => (d.out.id, B::float_scatter_add(d.dim, x, indices, value)),
                other => unsupported_update("scatter", other),
            }
        }
        Op::ScatterNd(d) => {
            let (x, indices, values) = (h.float(&d.data), h.int(&d.indices), h.float(&d.values));
            (
                d.out.id,
                B::float_scatter_nd(x, indices, values, d.reduction),
            )
        }
        Op::GatherNd(d) => {
            let (x, indices) = (h.float(&d.data), h.int(&d.indices));
            (d.out.id, B::float_gather_nd(x, indices))
        }
        Op::Equal(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            let out = B::float_equal(lhs, rhs, d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::EqualElem(d) => {
            let out = B::float_equal_elem(h.float(&d.lhs), d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::RepeatDim(d) => {
            let x = h.float(&d.tensor);
            (d.out.id, B::float_repeat_dim(x, d.dim, d.times))
        }
        Op::Cat(d) => (d.out.id, B::float_cat(h.floats(&d.tensors), d.dim)),
        Op::Cast(d) => (
            d.out.id,
            B::float_cast(h.float(&d.input), d.out.dtype.into()),
        ),
        Op::Empty(d) => {
            let device = h.device();
            (
                d.out.id,
                B::float_empty(shape_of(&d.out.shape), device, d.out.dtype.into()),
            )
        }
        Op::Ones(d) => {
            let device = h.device();
            (
                d.out.id,
                B::float_ones(shape_of(&d.out.shape), device, d.out.dtype.into()),
            )
        }
        Op::Zeros(d) => {
            let device = h.device();
            (
                d.out.id,
                B::float_zeros(shape_of(&d.out.shape), device, d.out.dtype.into()),
            )
        }
    };
    h.put_float(out, tensor);
}

/// The op family of an int tensor's shape, indexing and creation ops.
#[inline(never)]
fn base_int<B: BackendIr>(h: &mut Handles<B>, op: &BaseOperationIr) {
    use BaseOperationIr as Op;
    let (out, tensor): (TensorId, _) = match op {
        Op::Reshape(d) => (
            d.out.id,
            B::int_reshape(h.int(&d.input), shape_of(&d.out.shape)),
        ),
        Op::SwapDims(d) => (d.out.id, B::int_swap_dims(h.int(&d.input), d.dim1, d.dim2)),
        Op::Permute(d) => (d.out.id, B::int_permute(h.int(&d.input), &d.axes)),
        Op::Flip(d) => (d.out.id, B::int_flip(h.int(&d.input), &d.axes)),
        Op::Expand(d) => (
            d.out.id,
            B::int_expand(h.int(&d.input), shape_of(&d.out.shape)),
        ),
        Op::Unfold(d) => {
            let x = h.int(&d.input);
            (d.out.id, B::int_unfold(x, d.dim, d.size, d.step))
        }
        Op::Slice(d) => (d.out.id, B::int_slice(h.int(&d.tensor), &d.ranges)),
        Op::SliceAssign(d) => {
            let (x, value) = (h.int(&d.tensor), h.int(&d.value));
            (d.out.id, B::int_slice_assign(x, &d.ranges, value))
        }
        Op::Select(d) => {
            let (x, indices) = (h.int(&d.tensor), h.int(&d.indices));
            (d.out.id, B::int_select(x, d.dim, indices))
        }
        Op::SelectAssign(d) => {
            let (x, indices, value) = (h.int(&d.tensor), h.int(&d.indices), h.int(&d.value));
            match d.update {
                IndexingUpdateOp::Add => (d.out.id, B::int_select_add(x, d.dim, indices, value)),
                other => unsupported_update("select_assign", other),
            }
        }
        Op::MaskWhere(d) => {
            let (x, mask, value) = (h.int(&d.tensor), h.bool(&d.mask), h.int(&d.value));
            (d.out.id, B::int_mask_where(x, mask, value))
        }
        Op::MaskFill(d) => {
            let (x, mask) = (h.int(&d.tensor), h.bool(&d.mask));
            (d.out.id, B::int_mask_fill(x, mask, d.value.into()))
        }
        Op::Gather(d) => {
            let (x, indices) = (h.int(&d.tensor), h.int(&d.indices));
            (d.out.id, B::int_gather(d.dim, x, indices))
        }
        Op::Scatter(d) => {
            let (x, indices, value) = (h.int(&d.tensor), h.int(&d.indices), h.int(&d.value));
            match d.update {
                IndexingUpdateOp::Add => (d.out.id, B::int_scatter_add(d.dim, x, indices, value)),
                other => unsupported_update("scatter", other),
            }
        }
        Op::ScatterNd(d) => {
            let (x, indices, values) = (h.int(&d.data), h.int(&d.indices), h.int(&d.values));
            (d.out.id, B::int_scatter_nd(x, indices, values, d.reduction))
        }
        Op::GatherNd(d) => {
            let (x, indices) = (h.int(&d.data), h.int(&d.indices));
            (d.out.id, B::int_gather_nd(x, indices))
        }
        Op::Equal(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            let out = B::int_equal(lhs, rhs, d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::EqualElem(d) => {
            let out = B::int_equal_elem(h.int(&d.lhs), d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::RepeatDim(d) => {
            let x = h.int(&d.tensor);
            (d.out.id, B::int_repeat_dim(x, d.dim, d.times))
        }
        Op::Cat(d) => {
            let tensors = d.tensors.iter().map(|t| h.int(t)).collect();
            (d.out.id, B::int_cat(tensors, d.dim))
        }
        Op::Cast(d) => (d.out.id, B::int_cast(h.int(&d.input), d.out.dtype.into())),
        Op::Empty(d) => {
            let device = h.device();
            (
                d.out.id,
                B::int_empty(shape_of(&d.out.shape), device, d.out.dtype.into()),
            )
        }
        Op::Ones(d) => {
            let device = h.device();
            (
                d.out.id,
                B::int_ones(shape_of(&d.out.shape), device, d.out.dtype.into()),
            )
        }
        Op::Zeros(d) => {
            let device = h.device();
            (
                d.out.id,
                B::int_zeros(shape_of(&d.out.shape), device, d.out.dtype.into()),
            )
        }
    };
    h.put_int(out, tensor);
}

/// The op family of a bool tensor's shape, indexing and creation ops.
#[inline(never)]
fn base_bool<B: BackendIr>(h: &mut Handles<B>, op: &BaseOperationIr) {
    use BaseOperationIr as Op;
    let (out, tensor): (TensorId, _) = match op {
        Op::Reshape(d) => (
            d.out.id,
            B::bool_reshape(h.bool(&d.input), shape_of(&d.out.shape)),
        ),
        Op::SwapDims(d) => (
            d.out.id,
            B::bool_swap_dims(h.bool(&d.input), d.dim1, d.dim2),
        ),
        Op::Permute(d) => (d.out.id, B::bool_permute(h.bool(&d.input), &d.axes)),
        Op::Flip(d) => (d.out.id, B::bool_flip(h.bool(&d.input), &d.axes)),
        Op::Expand(d) => (
            d.out.id,
            B::bool_expand(h.bool(&d.input), shape_of(&d.out.shape)),
        ),
        Op::Unfold(d) => {
            let x = h.bool(&d.input);
            (d.out.id, B::bool_unfold(x, d.dim, d.size, d.step))
        }
        Op::Slice(d) => (d.out.id, B::bool_slice(h.bool(&d.tensor), &d.ranges)),
        Op::SliceAssign(d) => {
            let (x, value) = (h.bool(&d.tensor), h.bool(&d.value));
            (d.out.id, B::bool_slice_assign(x, &d.ranges, value))
        }
        Op::Select(d) => {
            let (x, indices) = (h.bool(&d.tensor), h.int(&d.indices));
            (d.out.id, B::bool_select(x, d.dim, indices))
        }
        Op::SelectAssign(d) => {
            let (x, indices, value) = (h.bool(&d.tensor), h.int(&d.indices), h.bool(&d.value));
            match d.update {
                IndexingUpdateOp::Add => (d.out.id, B::bool_select_or(x, d.dim, indices, value)),
                other => unsupported_update("select_assign", other),
            }
        }
        Op::MaskWhere(d) => {
            let (x, mask, value) = (h.bool(&d.tensor), h.bool(&d.mask), h.bool(&d.value));
            (d.out.id, B::bool_mask_where(x, mask, value))
        }
        Op::MaskFill(d) => {
            let (x, mask) = (h.bool(&d.tensor), h.bool(&d.mask));
            (d.out.id, B::bool_mask_fill(x, mask, d.value.into()))
        }
        Op::Gather(d) => {
            let (x, indices) = (h.bool(&d.tensor), h.int(&d.indices));
            (d.out.id, B::bool_gather(d.dim, x, indices))
        }
        Op::Scatter(d) => {
            let (x, indices, value) = (h.bool(&d.tensor), h.int(&d.indices), h.bool(&d.value));
            match d.update {
                IndexingUpdateOp::Add => (d.out.id, B::bool_scatter_or(d.dim, x, indices, value)),
                other => unsupported_update("scatter", other),
            }
        }
        Op::Equal(d) => {
            let (lhs, rhs) = (h.bool(&d.lhs), h.bool(&d.rhs));
            (d.out.id, B::bool_equal(lhs, rhs))
        }
        Op::EqualElem(d) => (d.out.id, B::bool_equal_elem(h.bool(&d.lhs), d.rhs.into())),
        Op::RepeatDim(d) => {
            let x = h.bool(&d.tensor);
            (d.out.id, B::bool_repeat_dim(x, d.dim, d.times))
        }
        Op::Cat(d) => {
            let tensors = d.tensors.iter().map(|t| h.bool(t)).collect();
            (d.out.id, B::bool_cat(tensors, d.dim))
        }
        Op::Empty(d) => {
            let device = h.device();
            (
                d.out.id,
                B::bool_empty(shape_of(&d.out.shape), device, d.out.dtype.into()),
            )
        }
        Op::Ones(d) => {
            let device = h.device();
            (
                d.out.id,
                B::bool_ones(shape_of(&d.out.shape), device, d.out.dtype.into()),
            )
        }
        Op::Zeros(d) => {
            let device = h.device();
            (
                d.out.id,
                B::bool_zeros(shape_of(&d.out.shape), device, d.out.dtype.into()),
            )
        }
        // No op builder makes these for bool tensors.
        other @ (Op::ScatterNd(_) | Op::GatherNd(_) | Op::Cast(_)) => {
            unsupported(&OperationIr::BaseBool(other.clone()))
        }
    };
    h.put_bool(out, tensor);
}

/// The op family of a float tensor's arithmetic, comparisons and reductions.
#[inline(never)]
fn numeric_float<B: BackendIr>(h: &mut Handles<B>, op: &NumericOperationIr) {
    use NumericOperationIr as Op;
    let (out, tensor): (TensorId, _) = match op {
        Op::Add(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            (d.out.id, B::float_add(lhs, rhs))
        }
        Op::AddScalar(d) => (d.out.id, B::float_add_scalar(h.float(&d.lhs), d.rhs.into())),
        Op::Sub(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            (d.out.id, B::float_sub(lhs, rhs))
        }
        Op::SubScalar(d) => (d.out.id, B::float_sub_scalar(h.float(&d.lhs), d.rhs.into())),
        Op::Div(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            (d.out.id, B::float_div(lhs, rhs))
        }
        Op::DivScalar(d) => (d.out.id, B::float_div_scalar(h.float(&d.lhs), d.rhs.into())),
        Op::Rem(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            (d.out.id, B::float_remainder(lhs, rhs))
        }
        Op::RemScalar(d) => {
            let x = h.float(&d.lhs);
            (d.out.id, B::float_remainder_scalar(x, d.rhs.into()))
        }
        Op::Mul(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            (d.out.id, B::float_mul(lhs, rhs))
        }
        Op::MulScalar(d) => (d.out.id, B::float_mul_scalar(h.float(&d.lhs), d.rhs.into())),
        Op::Abs(d) => (d.out.id, B::float_abs(h.float(&d.input))),
        Op::Full(d) => {
            let device = h.device();
            let dtype = d.out.dtype.into();
            (
                d.out.id,
                B::float_full(shape_of(&d.out.shape), d.value.into(), device, dtype),
            )
        }
        Op::MeanDim(d) => (d.out.id, B::float_mean_dim(h.float(&d.input), d.axis)),
        Op::Mean(d) => (d.out.id, B::float_mean(h.float(&d.input))),
        Op::Sum(d) => (d.out.id, B::float_sum(h.float(&d.input))),
        Op::SumDim(d) => (d.out.id, B::float_sum_dim(h.float(&d.input), d.axis)),
        Op::Prod(d) => (d.out.id, B::float_prod(h.float(&d.input))),
        Op::ProdDim(d) => (d.out.id, B::float_prod_dim(h.float(&d.input), d.axis)),
        Op::Greater(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            return h.put_bool(d.out.id, B::float_greater(lhs, rhs, d.out.dtype.into()));
        }
        Op::GreaterElem(d) => {
            let x = h.float(&d.lhs);
            let out = B::float_greater_elem(x, d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::GreaterEqual(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            let out = B::float_greater_equal(lhs, rhs, d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::GreaterEqualElem(d) => {
            let x = h.float(&d.lhs);
            let out = B::float_greater_equal_elem(x, d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::Lower(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            return h.put_bool(d.out.id, B::float_lower(lhs, rhs, d.out.dtype.into()));
        }
        Op::LowerElem(d) => {
            let x = h.float(&d.lhs);
            let out = B::float_lower_elem(x, d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::LowerEqual(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            let out = B::float_lower_equal(lhs, rhs, d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::LowerEqualElem(d) => {
            let x = h.float(&d.lhs);
            let out = B::float_lower_equal_elem(x, d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::ArgMax(d) => {
            let x = h.float(&d.input);
            return h.put_int(d.out.id, B::float_argmax(x, d.axis, d.out.dtype.into()));
        }
        Op::ArgTopK(d) => {
            let x = h.float(&d.input);
            let out = B::float_argtopk(x, d.axis, d.accumulator_len, d.out.dtype.into());
            return h.put_int(d.out.id, out);
        }
        Op::TopK(d) => {
            let x = h.float(&d.input);
            (d.out.id, B::float_topk(x, d.axis, d.accumulator_len))
        }
        Op::ArgMin(d) => {
            let x = h.float(&d.input);
            return h.put_int(d.out.id, B::float_argmin(x, d.axis, d.out.dtype.into()));
        }
        Op::Max(d) => (d.out.id, B::float_max(h.float(&d.input))),
        Op::MaxDimWithIndices(d) => {
            let x = h.float(&d.tensor);
            let dtype = d.out_indices.dtype.into();
            let (values, indices) = B::float_max_dim_with_indices(x, d.dim, dtype);
            h.put_int(d.out_indices.id, indices);
            (d.out.id, values)
        }
        Op::MinDimWithIndices(d) => {
            let x = h.float(&d.tensor);
            let dtype = d.out_indices.dtype.into();
            let (values, indices) = B::float_min_dim_with_indices(x, d.dim, dtype);
            h.put_int(d.out_indices.id, indices);
            (d.out.id, values)
        }
        Op::Min(d) => (d.out.id, B::float_min(h.float(&d.input))),
        Op::MaxDim(d) => (d.out.id, B::float_max_dim(h.float(&d.input), d.axis)),
        Op::MinDim(d) => (d.out.id, B::float_min_dim(h.float(&d.input), d.axis)),
        Op::MaxAbs(d) => (d.out.id, B::float_max_abs(h.float(&d.input))),
        Op::MaxAbsDim(d) => (d.out.id, B::float_max_abs_dim(h.float(&d.input), d.axis)),
        Op::Clamp(d) => {
            let x = h.float(&d.tensor);
            (d.out.id, B::float_clamp(x, d.min.into(), d.max.into()))
        }
        Op::Powi(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::float_powi(lhs, rhs))
        }
        Op::PowiScalar(d) => (
            d.out.id,
            B::float_powi_scalar(h.float(&d.lhs), d.rhs.into()),
        ),
        Op::CumSum(d) => (d.out.id, B::float_cumsum(h.float(&d.input), d.axis)),
        Op::CumProd(d) => (d.out.id, B::float_cumprod(h.float(&d.input), d.axis)),
        Op::CumMin(d) => (d.out.id, B::float_cummin(h.float(&d.input), d.axis)),
        Op::CumMax(d) => (d.out.id, B::float_cummax(h.float(&d.input), d.axis)),
        // Made for int tensors only.
        other @ Op::IntRandom(_) => unsupported(&OperationIr::NumericFloat(
            burn_backend::DType::F32,
            other.clone(),
        )),
    };
    h.put_float(out, tensor);
}

/// The op family of an int tensor's arithmetic, comparisons and reductions.
#[inline(never)]
fn numeric_int<B: BackendIr>(h: &mut Handles<B>, op: &NumericOperationIr) {
    use NumericOperationIr as Op;
    let (out, tensor): (TensorId, _) = match op {
        Op::Add(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::int_add(lhs, rhs))
        }
        Op::AddScalar(d) => (d.out.id, B::int_add_scalar(h.int(&d.lhs), d.rhs.into())),
        Op::Sub(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::int_sub(lhs, rhs))
        }
        Op::SubScalar(d) => (d.out.id, B::int_sub_scalar(h.int(&d.lhs), d.rhs.into())),
        Op::Div(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::int_div(lhs, rhs))
        }
        Op::DivScalar(d) => (d.out.id, B::int_div_scalar(h.int(&d.lhs), d.rhs.into())),
        Op::Rem(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::int_remainder(lhs, rhs))
        }
        Op::RemScalar(d) => (
            d.out.id,
            B::int_remainder_scalar(h.int(&d.lhs), d.rhs.into()),
        ),
        Op::Mul(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::int_mul(lhs, rhs))
        }
        Op::MulScalar(d) => (d.out.id, B::int_mul_scalar(h.int(&d.lhs), d.rhs.into())),
        Op::Abs(d) => (d.out.id, B::int_abs(h.int(&d.input))),
        Op::Full(d) => {
            let device = h.device();
            let dtype = d.out.dtype.into();
            (
                d.out.id,
                B::int_full(shape_of(&d.out.shape), d.value.into(), device, dtype),
            )
        }
        Op::MeanDim(d) => (d.out.id, B::int_mean_dim(h.int(&d.input), d.axis)),
        Op::Mean(d) => (d.out.id, B::int_mean(h.int(&d.input))),
        Op::Sum(d) => (d.out.id, B::int_sum(h.int(&d.input))),
        Op::SumDim(d) => (d.out.id, B::int_sum_dim(h.int(&d.input), d.axis)),
        Op::Prod(d) => (d.out.id, B::int_prod(h.int(&d.input))),
        Op::ProdDim(d) => (d.out.id, B::int_prod_dim(h.int(&d.input), d.axis)),
        Op::Greater(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            return h.put_bool(d.out.id, B::int_greater(lhs, rhs, d.out.dtype.into()));
        }
        Op::GreaterElem(d) => {
            let x = h.int(&d.lhs);
            let out = B::int_greater_elem(x, d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::GreaterEqual(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            let out = B::int_greater_equal(lhs, rhs, d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::GreaterEqualElem(d) => {
            let x = h.int(&d.lhs);
            let out = B::int_greater_equal_elem(x, d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::Lower(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            return h.put_bool(d.out.id, B::int_lower(lhs, rhs, d.out.dtype.into()));
        }
        Op::LowerElem(d) => {
            let x = h.int(&d.lhs);
            let out = B::int_lower_elem(x, d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::LowerEqual(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            let out = B::int_lower_equal(lhs, rhs, d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::LowerEqualElem(d) => {
            let x = h.int(&d.lhs);
            let out = B::int_lower_equal_elem(x, d.rhs.into(), d.out.dtype.into());
            return h.put_bool(d.out.id, out);
        }
        Op::ArgMax(d) => (d.out.id, B::int_argmax(h.int(&d.input), d.axis)),
        Op::ArgTopK(d) => {
            let x = h.int(&d.input);
            (d.out.id, B::int_argtopk(x, d.axis, d.accumulator_len))
        }
        Op::TopK(d) => {
            let x = h.int(&d.input);
            (d.out.id, B::int_topk(x, d.axis, d.accumulator_len))
        }
        Op::ArgMin(d) => (d.out.id, B::int_argmin(h.int(&d.input), d.axis)),
        Op::Max(d) => (d.out.id, B::int_max(h.int(&d.input))),
        Op::MaxDimWithIndices(d) => {
            let (values, indices) = B::int_max_dim_with_indices(h.int(&d.tensor), d.dim);
            h.put_int(d.out_indices.id, indices);
            (d.out.id, values)
        }
        Op::MinDimWithIndices(d) => {
            let (values, indices) = B::int_min_dim_with_indices(h.int(&d.tensor), d.dim);
            h.put_int(d.out_indices.id, indices);
            (d.out.id, values)
        }
        Op::Min(d) => (d.out.id, B::int_min(h.int(&d.input))),
        Op::MaxDim(d) => (d.out.id, B::int_max_dim(h.int(&d.input), d.axis)),
        Op::MinDim(d) => (d.out.id, B::int_min_dim(h.int(&d.input), d.axis)),
        Op::MaxAbs(d) => (d.out.id, B::int_max_abs(h.int(&d.input))),
        Op::MaxAbsDim(d) => (d.out.id, B::int_max_abs_dim(h.int(&d.input), d.axis)),
        Op::Clamp(d) => {
            let x = h.int(&d.tensor);
            (d.out.id, B::int_clamp(x, d.min.into(), d.max.into()))
        }
        Op::IntRandom(d) => {
            let device = h.device();
            let dtype = d.out.dtype.into();
            (
                d.out.id,
                B::int_random(shape_of(&d.out.shape), d.distribution, device, dtype),
            )
        }
        Op::Powi(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::int_powi(lhs, rhs))
        }
        Op::PowiScalar(d) => (d.out.id, B::int_powi_scalar(h.int(&d.lhs), d.rhs.into())),
        Op::CumSum(d) => (d.out.id, B::int_cumsum(h.int(&d.input), d.axis)),
        Op::CumProd(d) => (d.out.id, B::int_cumprod(h.int(&d.input), d.axis)),
        Op::CumMin(d) => (d.out.id, B::int_cummin(h.int(&d.input), d.axis)),
        Op::CumMax(d) => (d.out.id, B::int_cummax(h.int(&d.input), d.axis)),
    };
    h.put_int(out, tensor);
}

/// The ops of bool tensors alone.
#[inline(never)]
fn bool_ops<B: BackendIr>(h: &mut Handles<B>, op: &BoolOperationIr) {
    use BoolOperationIr as Op;
    let (out, tensor): (TensorId, _) = match op {
        Op::IntoFloat(d) => {
            let x = h.bool(&d.input);
            return h.put_float(d.out.id, B::bool_into_float(x, d.out.dtype.into()));
        }
        Op::IntoInt(d) => {
            let x = h.bool(&d.input);
            return h.put_int(d.out.id, B::bool_into_int(x, d.out.dtype.into()));
        }
        Op::Not(d) => (d.out.id, B::bool_not(h.bool(&d.input))),
        Op::And(d) => {
            let (lhs, rhs) = (h.bool(&d.lhs), h.bool(&d.rhs));
            (d.out.id, B::bool_and(lhs, rhs))
        }
        Op::Or(d) => {
            let (lhs, rhs) = (h.bool(&d.lhs), h.bool(&d.rhs));
            (d.out.id, B::bool_or(lhs, rhs))
        }
    };
    h.put_bool(out, tensor);
}

/// The ops of int tensors alone: bitwise ops, the cast to float, the int matmul.
#[inline(never)]
fn int_ops<B: BackendIr>(h: &mut Handles<B>, op: &IntOperationIr) {
    use IntOperationIr as Op;
    let (out, tensor): (TensorId, _) = match op {
        Op::IntoFloat(d) => {
            let x = h.int(&d.input);
            return h.put_float(d.out.id, B::int_into_float(x, d.out.dtype.into()));
        }
        Op::BitwiseAnd(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::bitwise_and(lhs, rhs))
        }
        Op::BitwiseAndScalar(d) => (d.out.id, B::bitwise_and_scalar(h.int(&d.lhs), d.rhs.into())),
        Op::BitwiseOr(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::bitwise_or(lhs, rhs))
        }
        Op::BitwiseOrScalar(d) => (d.out.id, B::bitwise_or_scalar(h.int(&d.lhs), d.rhs.into())),
        Op::BitwiseXor(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::bitwise_xor(lhs, rhs))
        }
        Op::BitwiseXorScalar(d) => (d.out.id, B::bitwise_xor_scalar(h.int(&d.lhs), d.rhs.into())),
        Op::BitwiseNot(d) => (d.out.id, B::bitwise_not(h.int(&d.input))),
        Op::BitwiseLeftShift(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::bitwise_left_shift(lhs, rhs))
        }
        Op::BitwiseLeftShiftScalar(d) => {
            let x = h.int(&d.lhs);
            (d.out.id, B::bitwise_left_shift_scalar(x, d.rhs.into()))
        }
        Op::BitwiseRightShift(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::bitwise_right_shift(lhs, rhs))
        }
        Op::BitwiseRightShiftScalar(d) => {
            let x = h.int(&d.lhs);
            (d.out.id, B::bitwise_right_shift_scalar(x, d.rhs.into()))
        }
        Op::Matmul(d) => {
            let (lhs, rhs) = (h.int(&d.lhs), h.int(&d.rhs));
            (d.out.id, B::int_matmul(lhs, rhs))
        }
    };
    h.put_int(out, tensor);
}

/// The ops of float tensors alone: elementwise functions, matmul, casts, random.
#[inline(never)]
fn float_ops<B: BackendIr>(h: &mut Handles<B>, op: &FloatOperationIr) {
    use FloatOperationIr as Op;
    let (out, tensor): (TensorId, _) = match op {
        Op::Exp(d) => (d.out.id, B::float_exp(h.float(&d.input))),
        Op::Log(d) => (d.out.id, B::float_log(h.float(&d.input))),
        Op::Log1p(d) => (d.out.id, B::float_log1p(h.float(&d.input))),
        Op::Erf(d) => (d.out.id, B::float_erf(h.float(&d.input))),
        Op::PowfScalar(d) => (
            d.out.id,
            B::float_powf_scalar(h.float(&d.lhs), d.rhs.into()),
        ),
        Op::Sqrt(d) => (d.out.id, B::float_sqrt(h.float(&d.input))),
        Op::Cos(d) => (d.out.id, B::float_cos(h.float(&d.input))),
        Op::Cosh(d) => (d.out.id, B::float_cosh(h.float(&d.input))),
        Op::Sin(d) => (d.out.id, B::float_sin(h.float(&d.input))),
        Op::Sinh(d) => (d.out.id, B::float_sinh(h.float(&d.input))),
        Op::Tan(d) => (d.out.id, B::float_tan(h.float(&d.input))),
        Op::Tanh(d) => (d.out.id, B::float_tanh(h.float(&d.input))),
        Op::ArcCos(d) => (d.out.id, B::float_acos(h.float(&d.input))),
        Op::ArcCosh(d) => (d.out.id, B::float_acosh(h.float(&d.input))),
        Op::ArcSin(d) => (d.out.id, B::float_asin(h.float(&d.input))),
        Op::ArcSinh(d) => (d.out.id, B::float_asinh(h.float(&d.input))),
        Op::ArcTan(d) => (d.out.id, B::float_atan(h.float(&d.input))),
        Op::ArcTanh(d) => (d.out.id, B::float_atanh(h.float(&d.input))),
        Op::ArcTan2(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            (d.out.id, B::float_atan2(lhs, rhs))
        }
        Op::Round(d) => (d.out.id, B::float_round(h.float(&d.input))),
        Op::Floor(d) => (d.out.id, B::float_floor(h.float(&d.input))),
        Op::Ceil(d) => (d.out.id, B::float_ceil(h.float(&d.input))),
        Op::Trunc(d) => (d.out.id, B::float_trunc(h.float(&d.input))),
        Op::IntoInt(d) => {
            let x = h.float(&d.input);
            return h.put_int(d.out.id, B::float_into_int(x, d.out.dtype.into()));
        }
        Op::Matmul(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            (d.out.id, B::float_matmul(lhs, rhs))
        }
        Op::Cross(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            (d.out.id, B::float_cross(lhs, rhs, d.dim))
        }
        Op::Random(d) => {
            let device = h.device();
            let dtype = d.out.dtype.into();
            (
                d.out.id,
                B::float_random(shape_of(&d.out.shape), d.distribution, device, dtype),
            )
        }
        Op::Recip(d) => (d.out.id, B::float_recip(h.float(&d.input))),
        Op::IsNan(d) => {
            let x = h.float(&d.input);
            return h.put_bool(d.out.id, B::float_is_nan(x, d.out.dtype.into()));
        }
        Op::IsInf(d) => {
            let x = h.float(&d.input);
            return h.put_bool(d.out.id, B::float_is_inf(x, d.out.dtype.into()));
        }
        Op::GridSample2d(d) => {
            let (x, grid) = (h.float(&d.tensor), h.float(&d.grid));
            (
                d.out.id,
                B::float_grid_sample_2d(x, grid, d.options.clone().into()),
            )
        }
        Op::Powf(d) => {
            let (lhs, rhs) = (h.float(&d.lhs), h.float(&d.rhs));
            (d.out.id, B::float_powf(lhs, rhs))
        }
        // burn-router 0.21 builds no quantize or dequantize op (`Swap` runs them natively).
        other @ (Op::Quantize(_) | Op::Dequantize(_)) => {
            unsupported(&OperationIr::Float(burn_backend::DType::F32, other.clone()))
        }
    };
    h.put_float(out, tensor);
}

#[cfg(test)]
mod tests;
