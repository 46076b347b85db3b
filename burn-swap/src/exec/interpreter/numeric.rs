//! The numeric op families of float and int tensors: arithmetic, comparisons, reductions.

use burn_ir::{BackendIr, NumericOperationIr, OperationIr, TensorId};

use super::{Handles, unsupported};
use crate::exec::shape_of;

/// The op family of a float tensor's arithmetic, comparisons and reductions.
#[inline(never)]
pub(super) fn numeric_float<B: BackendIr>(h: &mut Handles<B>, op: &NumericOperationIr) {
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
pub(super) fn numeric_int<B: BackendIr>(h: &mut Handles<B>, op: &NumericOperationIr) {
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
