//! The op families of one tensor kind: bool, int and float only ops.

use burn_ir::{
    BackendIr, BoolOperationIr, FloatOperationIr, IntOperationIr, OperationIr, TensorId,
};

use super::{Handles, unsupported};
use crate::exec::shape_of;

/// The ops of bool tensors alone.
#[inline(never)]
pub(super) fn bool_ops<B: BackendIr>(h: &mut Handles<B>, op: &BoolOperationIr) {
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
pub(super) fn int_ops<B: BackendIr>(h: &mut Handles<B>, op: &IntOperationIr) {
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
pub(super) fn float_ops<B: BackendIr>(h: &mut Handles<B>, op: &FloatOperationIr) {
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
