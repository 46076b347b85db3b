//! Op builders of the common ops: the `OperationIr` built from burn-ir's own constructors and
//! run through [`SwapClient::run_one`], without burn-router's list of outputs per op and its
//! second clone of the client. The ops built here are the same `OperationIr` burn-router
//! builds for the same method (the bit-for-bit tests compare every model against the
//! unwrapped backend); the others still go through burn-router.

use burn_backend::Scalar;
use burn_ir::{BackendIr, BinaryOpIr, OperationIr, ScalarOpIr, TensorIr, UnaryOpIr};
use burn_router::{RouterTensor, RunnerClient};

use super::SwapClient;

type Tensor<I> = RouterTensor<SwapClient<I>>;

/// An op of two tensors (broadcast together) into one.
#[inline]
pub(crate) fn binary<I: BackendIr>(
    lhs: Tensor<I>,
    rhs: Tensor<I>,
    op: impl FnOnce(BinaryOpIr) -> OperationIr,
) -> Tensor<I> {
    let client = lhs.client.clone();
    let desc = BinaryOpIr::create(lhs.into_ir(), rhs.into_ir(), || {
        client.create_empty_handle()
    });
    client.run_one(op(desc))
}

/// An op of a tensor and a scalar into a tensor of the tensor's shape.
#[inline]
pub(crate) fn scalar<I: BackendIr>(
    lhs: Tensor<I>,
    rhs: Scalar,
    op: impl FnOnce(ScalarOpIr) -> OperationIr,
) -> Tensor<I> {
    let client = lhs.client.clone();
    let desc = ScalarOpIr::create(lhs.into_ir(), rhs.into(), || client.create_empty_handle());
    client.run_one(op(desc))
}

/// An op of one tensor into one of its shape and dtype.
#[inline]
pub(crate) fn unary<I: BackendIr>(
    input: Tensor<I>,
    op: impl FnOnce(UnaryOpIr) -> OperationIr,
) -> Tensor<I> {
    let client = input.client.clone();
    let desc = UnaryOpIr::create(input.into_ir(), || client.create_empty_handle());
    client.run_one(op(desc))
}

/// An op of one tensor whose description `make` builds from the tensor's IR, taking the
/// output's id from the client (a view: a reshape, a swap of dimensions).
#[inline]
pub(crate) fn one<I: BackendIr>(
    input: Tensor<I>,
    make: impl FnOnce(TensorIr, &SwapClient<I>) -> OperationIr,
) -> Tensor<I> {
    let client = input.client.clone();
    let op = make(input.into_ir(), &client);
    client.run_one(op)
}

/// An op of two tensors whose description `make` builds from their IR, taking the output's
/// id from the client (a matrix product, a gather, a masked fill).
#[inline]
pub(crate) fn two<I: BackendIr>(
    first: Tensor<I>,
    second: Tensor<I>,
    make: impl FnOnce(TensorIr, TensorIr, &SwapClient<I>) -> OperationIr,
) -> Tensor<I> {
    let client = first.client.clone();
    let op = make(first.into_ir(), second.into_ir(), &client);
    client.run_one(op)
}

/// An op of three tensors whose description `make` builds from their IR, taking the
/// output's id from the client (a masked choice between two tensors).
#[inline]
pub(crate) fn three<I: BackendIr>(
    first: Tensor<I>,
    second: Tensor<I>,
    third: Tensor<I>,
    make: impl FnOnce(TensorIr, TensorIr, TensorIr, &SwapClient<I>) -> OperationIr,
) -> Tensor<I> {
    let client = first.client.clone();
    let op = make(first.into_ir(), second.into_ir(), third.into_ir(), &client);
    client.run_one(op)
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;
    use burn::backend::flex::FlexDevice;
    use burn_backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
    use burn_backend::{Scalar, TensorData};
    use burn_router::BackendRouter;
    use burn_std::{BoolStore, FloatDType, IntDType, Shape, Slice};

    use super::Tensor;
    use crate::backend::{Swap, SwapChannel};

    type S = Swap<Flex>;
    /// burn-router's own builders over the same client: its tensors are `S`'s.
    type R = BackendRouter<SwapChannel<Flex>>;

    fn device() -> FlexDevice {
        FlexDevice
    }

    /// Floats in (0.5, 3): inside every unary op's domain but `acos`/`asin`/`atanh` (whose
    /// NaNs compare as bytes all the same).
    fn float(seed: usize, shape: [usize; 2]) -> Tensor<Flex> {
        let n = shape[0] * shape[1];
        let values: Vec<f32> = (0..n)
            .map(|i| 0.5 + ((i * 7 + seed * 3) % 10) as f32 / 4.0)
            .collect();
        S::float_from_data(TensorData::new(values, shape), &device())
    }

    fn int(seed: usize, shape: [usize; 2]) -> Tensor<Flex> {
        let n = shape[0] * shape[1];
        let values: Vec<i64> = (0..n).map(|i| 1 + ((i * 5 + seed) % 7) as i64).collect();
        S::int_from_data(TensorData::new(values, shape), &device())
    }

    /// Indices in 0..2, for gathers and selects.
    fn index(shape: [usize; 2]) -> Tensor<Flex> {
        let n = shape[0] * shape[1];
        let values: Vec<i64> = (0..n).map(|i| ((i * 5 + 1) % 3) as i64 % 2).collect();
        S::int_from_data(TensorData::new(values, shape), &device())
    }

    /// A tensor's shape flattened to one dimension.
    trait Flatten {
        fn reshape1(self) -> Self;
    }

    impl Flatten for Tensor<Flex> {
        fn reshape1(self) -> Self {
            let n = burn_backend::TensorMetadata::shape(&self).num_elements();
            S::int_reshape(self, Shape::new([n]))
        }
    }

    fn bool(seed: usize, shape: [usize; 2]) -> Tensor<Flex> {
        let n = shape[0] * shape[1];
        let values: Vec<bool> = (0..n).map(|i| (i * 3 + seed) % 5 < 2).collect();
        S::bool_from_data(TensorData::new(values, shape), &device())
    }

    /// What one build of an op left: the recorded op's kind and signature, and its output.
    struct Made {
        kind: String,
        signature: u64,
        output: TensorData,
    }

    /// Runs `op` (its inputs already made) and reads what the engine recorded for it and its
    /// output's data.
    fn made(op: impl FnOnce() -> Tensor<Flex>) -> Made {
        // A new trace for each op: a window holding several repeats of the test's pattern
        // is read as iterations of a period, and the op would not be the last one shown.
        crate::restart_trace(&device());
        let out = op();
        let trace = crate::unstable::trace_window(&device()).expect("the device is in use");
        let [last] = &trace.ops[..] else {
            panic!(
                "one op recorded, not {:?}",
                trace.ops.iter().map(|o| &o.kind).collect::<Vec<_>>()
            )
        };
        let (kind, signature) = (last.kind.clone(), last.signature);
        let dtype = burn_backend::TensorMetadata::dtype(&out);
        let output = if dtype.is_float() {
            burn_std::future::block_on(S::float_into_data(out))
        } else if dtype.is_int() {
            burn_std::future::block_on(S::int_into_data(out))
        } else {
            burn_std::future::block_on(S::bool_into_data(out))
        }
        .expect("the output reads back");
        Made {
            kind,
            signature,
            output,
        }
    }

    fn compare(name: &str, built: Made, routed: Made) {
        assert_eq!(built.kind, routed.kind, "{name}: the op's kind");
        assert_eq!(
            built.signature, routed.signature,
            "{name}: the op's signature"
        );
        assert_eq!(built.output.dtype, routed.output.dtype, "{name}: the dtype");
        assert_eq!(built.output.shape, routed.output.shape, "{name}: the shape");
        assert_eq!(
            built.output.bytes[..],
            routed.output.bytes[..],
            "{name}: the bytes"
        );
    }

    /// Every method made by burn-swap's own builders records the same op (kind and
    /// signature: its tensors' shapes and dtypes) and gives the same output, to the byte,
    /// as burn-router's build of it over the same client: the builders send the IR
    /// burn-router sends. Every name in the generator's list is checked.
    #[test]
    fn own_builders_make_the_ops_burn_router_makes() {
        let _guard = crate::exec::device_lock();
        crate::configure(&device(), crate::SwapConfig::default()).unwrap();
        let mut checked: Vec<&str> = Vec::new();
        // `same!(method, Trait, |inputs| (their values))`: the inputs are made before each
        // build, so that the op is the last one the engine recorded.
        macro_rules! same {
            ($name:ident, $ops:ident, |$($a:ident),*| ($($arg:expr),* $(,)?)) => {{
                let inputs = || ($($arg,)*);
                let ($($a,)*) = inputs();
                let built = made(move || <S as $ops<S>>::$name($($a),*));
                let ($($a,)*) = inputs();
                let routed = made(move || <R as $ops<R>>::$name($($a),*));
                compare(stringify!($name), built, routed);
                checked.push(stringify!($name));
            }};
        }
        let half = || Scalar::from(0.5f32);
        let three = || Scalar::from(3i64);
        // Floats: two tensors broadcast together, a tensor and a scalar, one tensor.
        same!(float_add, FloatTensorOps, |a, b| (
            float(1, [2, 3]),
            float(2, [1, 3])
        ));
        same!(float_sub, FloatTensorOps, |a, b| (
            float(1, [2, 3]),
            float(2, [2, 1])
        ));
        same!(float_mul, FloatTensorOps, |a, b| (
            float(1, [2, 3]),
            float(2, [2, 3])
        ));
        same!(float_div, FloatTensorOps, |a, b| (
            float(1, [2, 3]),
            float(2, [1, 3])
        ));
        same!(float_remainder, FloatTensorOps, |a, b| (
            float(1, [2, 3]),
            float(2, [2, 3])
        ));
        same!(float_powf, FloatTensorOps, |a, b| (
            float(1, [2, 3]),
            float(2, [2, 3])
        ));
        same!(float_atan2, FloatTensorOps, |a, b| (
            float(1, [2, 3]),
            float(2, [2, 3])
        ));
        same!(float_add_scalar, FloatTensorOps, |a, s| (
            float(1, [2, 3]),
            half()
        ));
        same!(float_sub_scalar, FloatTensorOps, |a, s| (
            float(1, [2, 3]),
            half()
        ));
        same!(float_mul_scalar, FloatTensorOps, |a, s| (
            float(1, [2, 3]),
            half()
        ));
        same!(float_div_scalar, FloatTensorOps, |a, s| (
            float(1, [2, 3]),
            half()
        ));
        same!(float_remainder_scalar, FloatTensorOps, |a, s| (
            float(1, [2, 3]),
            half()
        ));
        same!(float_powi_scalar_impl, FloatTensorOps, |a, s| (
            float(1, [2, 3]),
            three()
        ));
        same!(float_powf_scalar_impl, FloatTensorOps, |a, s| (
            float(1, [2, 3]),
            half()
        ));
        same!(float_abs, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_exp, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_log, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_log1p, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_sqrt, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_cos, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_cosh, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_sin, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_sinh, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_tan, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_tanh, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_acos, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_acosh, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_asin, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_asinh, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_atan, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_atanh, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_round, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_floor, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_ceil, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_trunc, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_recip, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_erf, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_reshape, FloatTensorOps, |a, s| (
            float(1, [2, 3]),
            Shape::new([3, 2])
        ));
        same!(float_swap_dims, FloatTensorOps, |a, x, y| (
            float(1, [2, 3]),
            0,
            1
        ));
        same!(float_matmul, FloatTensorOps, |a, b| (
            float(1, [2, 3]),
            float(2, [3, 4])
        ));
        let slices = [Slice::new(1, Some(3), 1), Slice::new(0, None, 2)];
        same!(float_slice, FloatTensorOps, |a, s| (
            float(1, [4, 3]),
            &slices[..]
        ));
        same!(float_expand, FloatTensorOps, |a, s| (
            float(1, [1, 3]),
            Shape::new([4, 3])
        ));
        same!(float_cast, FloatTensorOps, |a, d| (
            float(1, [2, 3]),
            FloatDType::F64
        ));
        same!(float_sum, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_mean, FloatTensorOps, |a| (float(1, [2, 3])));
        same!(float_sum_dim, FloatTensorOps, |a, d| (float(1, [2, 3]), 1));
        same!(float_mean_dim, FloatTensorOps, |a, d| (float(1, [2, 3]), 0));
        same!(float_gather, FloatTensorOps, |d, a, i| (
            1,
            float(1, [2, 3]),
            index([2, 2])
        ));
        same!(float_select, FloatTensorOps, |a, d, i| (
            float(1, [3, 3]),
            0,
            index([2, 1]).reshape1()
        ));
        same!(float_mask_fill, FloatTensorOps, |a, m, v| (
            float(1, [2, 3]),
            bool(2, [2, 3]),
            half()
        ));
        same!(float_slice_assign, FloatTensorOps, |a, s, v| (
            float(1, [4, 3]),
            &slices[..],
            float(2, [2, 2])
        ));
        same!(float_mask_where, FloatTensorOps, |a, m, v| (
            float(1, [2, 3]),
            bool(2, [2, 3]),
            float(3, [2, 3])
        ));
        same!(float_into_int, FloatTensorOps, |a, d| (
            float(1, [2, 3]),
            IntDType::I64
        ));
        same!(float_max_dim, FloatTensorOps, |a, d| (float(1, [2, 3]), 1));
        same!(float_min_dim, FloatTensorOps, |a, d| (float(1, [2, 3]), 0));
        same!(float_argmax, FloatTensorOps, |a, d, o| (
            float(1, [2, 3]),
            1,
            IntDType::I64
        ));
        same!(float_argmin, FloatTensorOps, |a, d, o| (
            float(1, [2, 3]),
            0,
            IntDType::I32
        ));
        let native = || BoolStore::Native;
        same!(float_greater, FloatTensorOps, |a, b, o| (
            float(1, [2, 3]),
            float(2, [1, 3]),
            native()
        ));
        same!(float_greater_equal, FloatTensorOps, |a, b, o| (
            float(1, [2, 3]),
            float(2, [2, 3]),
            native()
        ));
        same!(float_lower, FloatTensorOps, |a, b, o| (
            float(1, [2, 3]),
            float(2, [2, 1]),
            native()
        ));
        same!(float_lower_equal, FloatTensorOps, |a, b, o| (
            float(1, [2, 3]),
            float(2, [2, 3]),
            native()
        ));
        same!(float_equal, FloatTensorOps, |a, b, o| (
            float(1, [2, 3]),
            float(1, [2, 3]),
            native()
        ));
        same!(float_greater_elem, FloatTensorOps, |a, s, o| (
            float(1, [2, 3]),
            half(),
            native()
        ));
        same!(float_greater_equal_elem, FloatTensorOps, |a, s, o| (
            float(1, [2, 3]),
            half(),
            native()
        ));
        same!(float_lower_elem, FloatTensorOps, |a, s, o| (
            float(1, [2, 3]),
            half(),
            native()
        ));
        same!(float_lower_equal_elem, FloatTensorOps, |a, s, o| (
            float(1, [2, 3]),
            half(),
            BoolStore::U8
        ));
        same!(float_equal_elem, FloatTensorOps, |a, s, o| (
            float(1, [2, 3]),
            Scalar::from(0.75f32),
            native()
        ));
        // Ints.
        same!(int_add, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [1, 3])
        ));
        same!(int_sub, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 1])
        ));
        same!(int_mul, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 3])
        ));
        same!(int_div, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 3])
        ));
        same!(int_remainder, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 3])
        ));
        same!(int_powi, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 3])
        ));
        same!(int_add_scalar, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            three()
        ));
        same!(int_sub_scalar, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            three()
        ));
        same!(int_mul_scalar, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            three()
        ));
        same!(int_div_scalar, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            three()
        ));
        same!(int_remainder_scalar, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            three()
        ));
        same!(int_powi_scalar_impl, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            three()
        ));
        same!(int_abs, IntTensorOps, |a| (int(1, [2, 3])));
        same!(bitwise_and, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 3])
        ));
        same!(bitwise_or, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 3])
        ));
        same!(bitwise_xor, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 3])
        ));
        same!(bitwise_left_shift, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 3])
        ));
        same!(bitwise_right_shift, IntTensorOps, |a, b| (
            int(1, [2, 3]),
            int(2, [2, 3])
        ));
        same!(bitwise_and_scalar, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            three()
        ));
        same!(bitwise_or_scalar, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            three()
        ));
        same!(bitwise_xor_scalar, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            three()
        ));
        same!(bitwise_not, IntTensorOps, |a| (int(1, [2, 3])));
        same!(int_reshape, IntTensorOps, |a, s| (
            int(1, [2, 3]),
            Shape::new([6, 1])
        ));
        same!(int_swap_dims, IntTensorOps, |a, x, y| (
            int(1, [2, 3]),
            1,
            0
        ));
        // Bools.
        same!(bool_equal, BoolTensorOps, |a, b| (
            bool(1, [2, 3]),
            bool(2, [2, 3])
        ));
        same!(bool_and, BoolTensorOps, |a, b| (
            bool(1, [2, 3]),
            bool(2, [2, 3])
        ));
        same!(bool_or, BoolTensorOps, |a, b| (
            bool(1, [2, 3]),
            bool(2, [2, 3])
        ));
        same!(bool_not, BoolTensorOps, |a| (bool(1, [2, 3])));
        same!(bool_reshape, BoolTensorOps, |a, s| (
            bool(1, [2, 3]),
            Shape::new([3, 2])
        ));
        same!(bool_swap_dims, BoolTensorOps, |a, x, y| (
            bool(1, [2, 3]),
            0,
            1
        ));

        let mut missing: Vec<&str> = super::super::ops::BUILT
            .iter()
            .copied()
            .filter(|name| !checked.contains(name))
            .collect();
        missing.sort();
        assert!(
            missing.is_empty(),
            "built but not checked here: {missing:?}"
        );
    }
}
