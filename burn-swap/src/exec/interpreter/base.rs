//! The base op families of float, int and bool tensors: shapes, indexing, creation.

use burn_backend::tensor::IndexingUpdateOp;
use burn_ir::{BackendIr, BaseOperationIr, OperationIr, TensorId};

use super::{Handles, unsupported, unsupported_update};
use crate::exec::shape_of;

/// The op family of a float tensor's shape, indexing and creation ops.
#[inline(never)]
pub(super) fn base_float<B: BackendIr>(h: &mut Handles<B>, op: &BaseOperationIr) {
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
pub(super) fn base_int<B: BackendIr>(h: &mut Handles<B>, op: &BaseOperationIr) {
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
pub(super) fn base_bool<B: BackendIr>(h: &mut Handles<B>, op: &BaseOperationIr) {
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
