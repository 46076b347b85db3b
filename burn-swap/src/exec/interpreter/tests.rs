use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn_backend::ops::FloatTensorOps;
use burn_backend::tensor::FloatTensor;
use burn_backend::{DType, Shape, TensorData};
use burn_ir::{
    BaseOperationIr, BinaryOpIr, BoolOperationIr, CatOpIr, FloatOperationIr, MatmulOpIr,
    NumericOperationIr, OperationIr, ReduceDimOpIr, ReduceDimWithIndicesOpIr, ScalarIr, ScalarOpIr,
    ShapeOpIr, TensorId, TensorIr, TensorStatus, UnaryOpIr,
};

use super::{Handles, fresh_id, run};

fn store() -> Handles<Flex> {
    Handles::new(FlexDevice)
}

/// A float tensor of `values` (shape `shape`) in the store, as a use of `status`.
fn put(
    h: &mut Handles<Flex>,
    values: Vec<f32>,
    shape: [usize; 2],
    status: TensorStatus,
) -> TensorIr {
    let ir = h.upload(TensorData::new(values, shape));
    TensorIr { status, ..ir }
}

fn out(shape: [usize; 2], dtype: DType) -> TensorIr {
    TensorIr {
        id: fresh_id(),
        shape: Shape::new(shape),
        status: TensorStatus::NotInit,
        dtype,
    }
}

fn read(h: &mut Handles<Flex>, t: &TensorIr) -> TensorData {
    let t = TensorIr {
        status: TensorStatus::ReadOnly,
        ..t.clone()
    };
    burn_std::reader::try_read_sync(h.read(&t))
        .unwrap()
        .unwrap()
}

fn bits(data: &TensorData) -> Vec<u32> {
    data.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// Flex's own result of `f` on fresh tensors of `a` and `b`.
fn direct(
    a: &[f32],
    b: &[f32],
    shape: [usize; 2],
    f: impl FnOnce(FloatTensor<Flex>, FloatTensor<Flex>) -> FloatTensor<Flex>,
) -> TensorData {
    let x = Flex::float_from_data(TensorData::new(a.to_vec(), shape), &FlexDevice);
    let y = Flex::float_from_data(TensorData::new(b.to_vec(), shape), &FlexDevice);
    burn_std::reader::try_read_sync(Flex::float_into_data(f(x, y)))
        .unwrap()
        .unwrap()
}

#[test]
fn a_read_only_use_leaves_the_handle_and_a_read_write_use_takes_it() {
    let mut h = store();
    let a = put(&mut h, vec![1.0; 4], [2, 2], TensorStatus::ReadOnly);
    let b = put(&mut h, vec![2.0; 4], [2, 2], TensorStatus::ReadWrite);
    assert_eq!(h.len(), 2);
    let sum = out([2, 2], DType::F32);
    let add = BinaryOpIr {
        lhs: a.clone(),
        rhs: b.clone(),
        out: sum.clone(),
    };
    run(
        &mut h,
        &OperationIr::NumericFloat(DType::F32, NumericOperationIr::Add(add)),
    );
    assert!(h.get(&a.id).is_some(), "read-only input stays");
    assert!(h.get(&b.id).is_none(), "read-write input taken");
    assert!(h.get(&sum.id).is_some(), "output under its id");
    assert_eq!(read(&mut h, &sum).to_vec::<f32>().unwrap(), vec![3.0; 4]);
    run(
        &mut h,
        &OperationIr::Drop(TensorIr {
            status: TensorStatus::ReadWrite,
            ..sum.clone()
        }),
    );
    assert!(h.get(&sum.id).is_none(), "a drop frees the handle");
    assert_eq!(h.len(), 1);
}

/// The same input named twice in one op (read-only first, its last use second) runs: the
/// inputs are taken in the order of the op's builder.
#[test]
fn an_op_that_reads_one_tensor_twice_takes_it_in_order() {
    let mut h = store();
    let values = vec![0.5, -1.25, 3.0, 7.5];
    let a = put(&mut h, values.clone(), [2, 2], TensorStatus::ReadOnly);
    let last = TensorIr {
        status: TensorStatus::ReadWrite,
        ..a.clone()
    };
    let product = out([2, 2], DType::F32);
    let mul = BinaryOpIr {
        lhs: a.clone(),
        rhs: last,
        out: product.clone(),
    };
    run(
        &mut h,
        &OperationIr::NumericFloat(DType::F32, NumericOperationIr::Mul(mul)),
    );
    assert!(h.get(&a.id).is_none());
    let expected = direct(&values, &values, [2, 2], Flex::float_mul);
    assert_eq!(bits(&read(&mut h, &product)), bits(&expected));
}

/// Ops of each family, bit for bit against Flex called directly.
#[test]
fn each_family_gives_the_inner_backends_own_bits() {
    let a: Vec<f32> = vec![0.1, -2.7, 3.3, 0.0, 5.9, -0.3];
    let b: Vec<f32> = vec![1.7, 0.2, -3.3, 4.4, 0.6, 2.0];
    let mut h = store();
    let x = put(&mut h, a.clone(), [2, 3], TensorStatus::ReadOnly);
    let y = put(&mut h, b.clone(), [3, 2], TensorStatus::ReadOnly);

    // Float: matmul.
    let mm = out([2, 2], DType::F32);
    run(
        &mut h,
        &OperationIr::Float(
            DType::F32,
            FloatOperationIr::Matmul(MatmulOpIr {
                lhs: x.clone(),
                rhs: y.clone(),
                out: mm.clone(),
            }),
        ),
    );
    let expected = {
        let xa = Flex::float_from_data(TensorData::new(a.clone(), [2, 3]), &FlexDevice);
        let yb = Flex::float_from_data(TensorData::new(b.clone(), [3, 2]), &FlexDevice);
        burn_std::reader::try_read_sync(Flex::float_into_data(Flex::float_matmul(xa, yb)))
            .unwrap()
            .unwrap()
    };
    assert_eq!(bits(&read(&mut h, &mm)), bits(&expected));

    // Float: an elementwise function and a scalar op.
    let e = out([2, 3], DType::F32);
    run(
        &mut h,
        &OperationIr::Float(
            DType::F32,
            FloatOperationIr::Exp(UnaryOpIr {
                input: x.clone(),
                out: e.clone(),
            }),
        ),
    );
    let expected = direct(&a, &a, [2, 3], |x, _| Flex::float_exp(x));
    assert_eq!(bits(&read(&mut h, &e)), bits(&expected));
    let s = out([2, 3], DType::F32);
    run(
        &mut h,
        &OperationIr::NumericFloat(
            DType::F32,
            NumericOperationIr::MulScalar(ScalarOpIr {
                lhs: x.clone(),
                rhs: ScalarIr::Float(0.3),
                out: s.clone(),
            }),
        ),
    );
    let expected = direct(&a, &a, [2, 3], |x, _| {
        Flex::float_mul_scalar(x, ScalarIr::Float(0.3).into())
    });
    assert_eq!(bits(&read(&mut h, &s)), bits(&expected));

    // Base: a reshape keeps the values, under the output's shape.
    let r = out([3, 2], DType::F32);
    run(
        &mut h,
        &OperationIr::BaseFloat(BaseOperationIr::Reshape(ShapeOpIr {
            input: x.clone(),
            out: r.clone(),
        })),
    );
    let back = read(&mut h, &r);
    assert_eq!(back.shape.as_slice(), &[3, 2]);
    assert_eq!(bits(&back), bits(&TensorData::new(a.clone(), [2, 3])));

    // A float op with a bool output, then a bool op on it, then a bool-to-float cast.
    let y2 = put(&mut h, b.clone(), [2, 3], TensorStatus::ReadOnly);
    let gt = out([2, 3], DType::Bool(burn_backend::BoolStore::Native));
    run(
        &mut h,
        &OperationIr::NumericFloat(
            DType::F32,
            NumericOperationIr::Greater(BinaryOpIr {
                lhs: x.clone(),
                rhs: y2.clone(),
                out: gt.clone(),
            }),
        ),
    );
    let not = TensorIr {
        id: fresh_id(),
        ..gt.clone()
    };
    run(
        &mut h,
        &OperationIr::Bool(BoolOperationIr::Not(UnaryOpIr {
            input: TensorIr {
                status: TensorStatus::ReadWrite,
                ..gt.clone()
            },
            out: not.clone(),
        })),
    );
    let as_float = out([2, 3], DType::F32);
    run(
        &mut h,
        &OperationIr::Bool(BoolOperationIr::IntoFloat(burn_ir::CastOpIr {
            input: TensorIr {
                status: TensorStatus::ReadWrite,
                ..not.clone()
            },
            out: as_float.clone(),
        })),
    );
    let expected: Vec<f32> = a
        .iter()
        .zip(&b)
        .map(|(p, q)| if p > q { 0.0 } else { 1.0 })
        .collect();
    assert_eq!(read(&mut h, &as_float).to_vec::<f32>().unwrap(), expected);

    // Two outputs: the maximum along a dimension and its indices (an int tensor).
    let values = out([2, 1], DType::F32);
    let indices = out([2, 1], DType::I64);
    run(
        &mut h,
        &OperationIr::NumericFloat(
            DType::F32,
            NumericOperationIr::MaxDimWithIndices(ReduceDimWithIndicesOpIr {
                tensor: x.clone(),
                dim: 1,
                out: values.clone(),
                out_indices: indices.clone(),
            }),
        ),
    );
    assert_eq!(
        read(&mut h, &values).to_vec::<f32>().unwrap(),
        vec![3.3, 5.9]
    );
    assert_eq!(read(&mut h, &indices).to_vec::<i64>().unwrap(), vec![2, 1]);

    // An argmax (float in, int out) and a concatenation (a list of inputs).
    let arg = out([1, 3], DType::I64);
    run(
        &mut h,
        &OperationIr::NumericFloat(
            DType::F32,
            NumericOperationIr::ArgMax(ReduceDimOpIr {
                input: x.clone(),
                out: arg.clone(),
                axis: 0,
                accumulator_len: 0,
            }),
        ),
    );
    assert_eq!(read(&mut h, &arg).to_vec::<i64>().unwrap(), vec![0, 1, 0]);
    let cat = out([4, 3], DType::F32);
    run(
        &mut h,
        &OperationIr::BaseFloat(BaseOperationIr::Cat(CatOpIr {
            tensors: vec![x.clone(), y2.clone()],
            dim: 0,
            out: cat.clone(),
        })),
    );
    let joined: Vec<f32> = a.iter().chain(&b).copied().collect();
    assert_eq!(
        bits(&read(&mut h, &cat)),
        bits(&TensorData::new(joined, [4, 3]))
    );
}

#[test]
#[should_panic(expected = "no handle for tensor")]
fn an_input_the_store_does_not_hold_is_a_named_panic() {
    let mut h = store();
    let ghost = TensorIr {
        status: TensorStatus::ReadOnly,
        ..out([2, 2], DType::F32)
    };
    run(
        &mut h,
        &OperationIr::Float(
            DType::F32,
            FloatOperationIr::Exp(UnaryOpIr {
                input: ghost,
                out: out([2, 2], DType::F32),
            }),
        ),
    );
}

#[test]
fn fresh_ids_are_never_zero_and_never_repeat() {
    let ids: Vec<TensorId> = (0..1000).map(|_| fresh_id()).collect();
    assert!(ids.iter().all(|id| id.value() != 0));
    let mut sorted: Vec<u64> = ids.iter().map(|id| id.value()).collect();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len());
}
