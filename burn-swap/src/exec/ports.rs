//! The tensors an op reads and makes. burn-ir's `OperationIr::inputs` and `outputs` box an
//! iterator (an allocation and a free each, about a hundred instructions per call, twice on
//! every op's path); the ops a training loop runs (elementwise arithmetic, comparisons and
//! reductions of floats and ints, unary float functions, matmul, random tensors, every
//! shape, index and mask op of every dtype, linear layers, convolutions, poolings and
//! embeddings with their backward) are read here from their fields instead. The others (a
//! concatenation's many inputs, the ops with two outputs, the rare rest) go through burn-ir.
//! Debug builds check each op read here against burn-ir's own lists, so every test run
//! checks the ports of every op it runs.

use burn_ir::{
    BaseOperationIr, BinaryOpIr, FloatOperationIr, ModuleOperationIr, NumericOperationIr,
    OperationIr, ScalarOpIr, TensorIr, UnaryOpIr,
};

/// An op's inputs (none to three) and its one output.
#[derive(Clone, Copy)]
pub(crate) struct Ports<'a> {
    inputs: [&'a TensorIr; 3],
    count: usize,
    output: &'a TensorIr,
}

impl<'a> Ports<'a> {
    fn none(output: &'a TensorIr) -> Self {
        Self {
            inputs: [output; 3],
            count: 0,
            output,
        }
    }

    fn one(input: &'a TensorIr, output: &'a TensorIr) -> Self {
        Self {
            inputs: [input; 3],
            count: 1,
            output,
        }
    }

    fn two(lhs: &'a TensorIr, rhs: &'a TensorIr, output: &'a TensorIr) -> Self {
        Self {
            inputs: [lhs, rhs, rhs],
            count: 2,
            output,
        }
    }

    fn three(a: &'a TensorIr, b: &'a TensorIr, c: &'a TensorIr, output: &'a TensorIr) -> Self {
        Self {
            inputs: [a, b, c],
            count: 3,
            output,
        }
    }

    fn binary(op: &'a BinaryOpIr) -> Self {
        Self::two(&op.lhs, &op.rhs, &op.out)
    }

    fn scalar(op: &'a ScalarOpIr) -> Self {
        Self::one(&op.lhs, &op.out)
    }

    fn unary(op: &'a UnaryOpIr) -> Self {
        Self::one(&op.input, &op.out)
    }

    /// The inputs, in burn-ir's order.
    pub(crate) fn inputs(self) -> impl Iterator<Item = &'a TensorIr> {
        self.inputs.into_iter().take(self.count)
    }

    /// The output.
    pub(crate) fn outputs(self) -> impl Iterator<Item = &'a TensorIr> {
        core::iter::once(self.output)
    }
}

/// The ports of `op` when it is one of the ops read here; `None` for the others (ask
/// burn-ir).
#[inline]
pub(crate) fn of(op: &OperationIr) -> Option<Ports<'_>> {
    let ports = read(op);
    #[cfg(debug_assertions)]
    if let Some(ports) = ports {
        let ids = |it: &mut dyn Iterator<Item = &TensorIr>| it.map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(
            ids(&mut ports.inputs()),
            ids(&mut op.inputs()),
            "inputs of {op:?}"
        );
        assert_eq!(
            ids(&mut ports.outputs()),
            ids(&mut op.outputs()),
            "outputs of {op:?}"
        );
    }
    ports
}

#[inline]
fn read(op: &OperationIr) -> Option<Ports<'_>> {
    use BaseOperationIr as Base;
    use FloatOperationIr as F;
    use NumericOperationIr as N;
    Some(match op {
        OperationIr::NumericFloat(_, n) | OperationIr::NumericInt(_, n) => match n {
            N::Add(o)
            | N::Sub(o)
            | N::Mul(o)
            | N::Div(o)
            | N::Rem(o)
            | N::Greater(o)
            | N::GreaterEqual(o)
            | N::Lower(o)
            | N::LowerEqual(o)
            | N::Powi(o) => Ports::binary(o),
            N::AddScalar(o)
            | N::SubScalar(o)
            | N::MulScalar(o)
            | N::DivScalar(o)
            | N::RemScalar(o)
            | N::GreaterElem(o)
            | N::GreaterEqualElem(o)
            | N::LowerElem(o)
            | N::LowerEqualElem(o)
            | N::PowiScalar(o) => Ports::scalar(o),
            N::Abs(o) => Ports::unary(o),
            N::Sum(o) | N::Mean(o) | N::Prod(o) | N::Max(o) | N::Min(o) | N::MaxAbs(o) => {
                Ports::one(&o.input, &o.out)
            }
            N::SumDim(o)
            | N::MeanDim(o)
            | N::ProdDim(o)
            | N::MaxDim(o)
            | N::MinDim(o)
            | N::MaxAbsDim(o)
            | N::ArgMax(o)
            | N::ArgMin(o) => Ports::one(&o.input, &o.out),
            N::Clamp(o) => Ports::one(&o.tensor, &o.out),
            _ => return None,
        },
        OperationIr::Float(_, f) => match f {
            F::Exp(o)
            | F::Log(o)
            | F::Log1p(o)
            | F::Erf(o)
            | F::Sqrt(o)
            | F::Cos(o)
            | F::Sin(o)
            | F::Tanh(o)
            | F::Round(o)
            | F::Floor(o)
            | F::Ceil(o)
            | F::Recip(o) => Ports::unary(o),
            F::PowfScalar(o) => Ports::scalar(o),
            F::Powf(o) => Ports::binary(o),
            F::Matmul(o) => Ports::two(&o.lhs, &o.rhs, &o.out),
            F::Random(o) => Ports::none(&o.out),
            _ => return None,
        },
        OperationIr::BaseFloat(b) | OperationIr::BaseInt(b) | OperationIr::BaseBool(b) => match b {
            Base::Reshape(o) | Base::Expand(o) => Ports::one(&o.input, &o.out),
            Base::SwapDims(o) => Ports::one(&o.input, &o.out),
            Base::Permute(o) => Ports::one(&o.input, &o.out),
            Base::Flip(o) => Ports::one(&o.input, &o.out),
            Base::Slice(o) => Ports::one(&o.tensor, &o.out),
            Base::Cast(o) => Ports::one(&o.input, &o.out),
            Base::Unfold(o) => Ports::one(&o.input, &o.out),
            Base::RepeatDim(o) => Ports::one(&o.tensor, &o.out),
            Base::SliceAssign(o) => Ports::two(&o.tensor, &o.value, &o.out),
            Base::Gather(o) => Ports::two(&o.tensor, &o.indices, &o.out),
            Base::Select(o) => Ports::two(&o.tensor, &o.indices, &o.out),
            Base::Scatter(o) => Ports::three(&o.tensor, &o.indices, &o.value, &o.out),
            Base::SelectAssign(o) => Ports::three(&o.tensor, &o.indices, &o.value, &o.out),
            Base::MaskWhere(o) => Ports::three(&o.tensor, &o.mask, &o.value, &o.out),
            Base::MaskFill(o) => Ports::two(&o.tensor, &o.mask, &o.out),
            Base::Equal(o) => Ports::binary(o),
            Base::EqualElem(o) => Ports::scalar(o),
            Base::Empty(o) | Base::Zeros(o) | Base::Ones(o) => Ports::none(&o.out),
            _ => return None,
        },
        OperationIr::Module(m) => module(m)?,
        _ => return None,
    })
}

/// A layer's ports: its input and weight, and its bias when it has one.
fn with_bias<'a>(
    x: &'a TensorIr,
    weight: &'a TensorIr,
    bias: &'a Option<TensorIr>,
    out: &'a TensorIr,
) -> Ports<'a> {
    match bias {
        Some(bias) => Ports::three(x, weight, bias, out),
        None => Ports::two(x, weight, out),
    }
}

/// The ports of the module ops with one output: linear layers, convolutions, poolings and
/// embeddings, each with its backward.
#[inline]
fn module(m: &ModuleOperationIr) -> Option<Ports<'_>> {
    use ModuleOperationIr as M;
    Some(match m {
        M::Linear(o) => with_bias(&o.x, &o.weight, &o.bias, &o.out),
        M::LinearXBackward(o) => Ports::two(&o.weight, &o.output_grad, &o.out),
        M::LinearWeightBackward(o) => Ports::two(&o.x, &o.output_grad, &o.out),
        M::LinearBiasBackward(o) => Ports::one(&o.output_grad, &o.out),
        M::Conv1d(o) => with_bias(&o.x, &o.weight, &o.bias, &o.out),
        M::Conv2d(o) => with_bias(&o.x, &o.weight, &o.bias, &o.out),
        M::Conv3d(o) => with_bias(&o.x, &o.weight, &o.bias, &o.out),
        M::Conv1dXBackward(o) => Ports::three(&o.x, &o.weight, &o.output_grad, &o.out),
        M::Conv2dXBackward(o) => Ports::three(&o.x, &o.weight, &o.output_grad, &o.out),
        M::Conv3dXBackward(o) => Ports::three(&o.x, &o.weight, &o.output_grad, &o.out),
        M::Conv1dWeightBackward(o) => Ports::three(&o.x, &o.weight, &o.output_grad, &o.out),
        M::Conv2dWeightBackward(o) => Ports::three(&o.x, &o.weight, &o.output_grad, &o.out),
        M::Conv3dWeightBackward(o) => Ports::three(&o.x, &o.weight, &o.output_grad, &o.out),
        M::Conv1dBiasBackward(o) => Ports::three(&o.x, &o.bias, &o.output_grad, &o.out),
        M::Conv2dBiasBackward(o) => Ports::three(&o.x, &o.bias, &o.output_grad, &o.out),
        M::Conv3dBiasBackward(o) => Ports::three(&o.x, &o.bias, &o.output_grad, &o.out),
        M::AvgPool1d(o) => Ports::one(&o.x, &o.out),
        M::AvgPool2d(o) => Ports::one(&o.x, &o.out),
        M::AdaptiveAvgPool1d(o) => Ports::one(&o.x, &o.out),
        M::AdaptiveAvgPool2d(o) => Ports::one(&o.x, &o.out),
        M::MaxPool1d(o) => Ports::one(&o.x, &o.out),
        M::MaxPool2d(o) => Ports::one(&o.x, &o.out),
        M::AvgPool1dBackward(o) => Ports::two(&o.x, &o.grad, &o.out),
        M::AvgPool2dBackward(o) => Ports::two(&o.x, &o.grad, &o.out),
        M::AdaptiveAvgPool1dBackward(o) => Ports::two(&o.x, &o.grad, &o.out),
        M::AdaptiveAvgPool2dBackward(o) => Ports::two(&o.x, &o.grad, &o.out),
        M::MaxPool1dWithIndicesBackward(o) => Ports::three(&o.x, &o.indices, &o.grad, &o.out),
        M::MaxPool2dWithIndicesBackward(o) => Ports::three(&o.x, &o.indices, &o.grad, &o.out),
        M::Embedding(o) => Ports::two(&o.weights, &o.indices, &o.out),
        M::EmbeddingBackward(o) => Ports::three(&o.weights, &o.out_grad, &o.indices, &o.out),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use NumericOperationIr as N;
    use burn_backend::{DType, Shape};
    use burn_ir::{
        CreationOpIr, EmbeddingOpIr, LinearBiasBackwardOpIr, LinearOpIr, LinearWeightBackwardOpIr,
        LinearXBackwardOpIr, MaskWhereOpIr, MatmulOpIr, RandomOpIr, ReduceOpIr, ScalarIr,
        ShapeOpIr, SliceAssignOpIr, TensorId, TensorStatus,
    };

    fn t(id: u64) -> TensorIr {
        TensorIr {
            id: TensorId::new(id),
            shape: Shape::new([2, 3]),
            status: TensorStatus::ReadOnly,
            dtype: DType::F32,
        }
    }

    fn ids(ports: Ports<'_>) -> (Vec<u64>, Vec<u64>) {
        (
            ports.inputs().map(|t| t.id.value()).collect(),
            ports.outputs().map(|t| t.id.value()).collect(),
        )
    }

    #[test]
    fn the_common_ops_are_read_from_their_fields_in_burn_irs_order() {
        let f32 = DType::F32;
        let binary = BinaryOpIr {
            lhs: t(1),
            rhs: t(2),
            out: t(3),
        };
        let scalar = ScalarOpIr {
            lhs: t(1),
            rhs: ScalarIr::Float(2.0),
            out: t(3),
        };
        let unary = UnaryOpIr {
            input: t(1),
            out: t(3),
        };
        let matmul = MatmulOpIr {
            lhs: t(1),
            rhs: t(2),
            out: t(3),
        };
        let reshape = ShapeOpIr {
            input: t(1),
            out: t(3),
        };
        let cases = [
            (
                OperationIr::NumericFloat(f32, N::Add(binary.clone())),
                vec![1, 2],
            ),
            (OperationIr::NumericFloat(f32, N::Sub(binary)), vec![1, 2]),
            (
                OperationIr::NumericFloat(f32, N::MulScalar(scalar.clone())),
                vec![1],
            ),
            (
                OperationIr::Float(f32, FloatOperationIr::PowfScalar(scalar)),
                vec![1],
            ),
            (
                OperationIr::Float(f32, FloatOperationIr::Exp(unary)),
                vec![1],
            ),
            (
                OperationIr::Float(f32, FloatOperationIr::Matmul(matmul)),
                vec![1, 2],
            ),
            (
                OperationIr::BaseFloat(BaseOperationIr::Reshape(reshape)),
                vec![1],
            ),
            (
                OperationIr::NumericFloat(
                    f32,
                    N::Sum(ReduceOpIr {
                        input: t(1),
                        out: t(3),
                    }),
                ),
                vec![1],
            ),
            (
                OperationIr::Module(ModuleOperationIr::Linear(LinearOpIr {
                    x: t(1),
                    weight: t(2),
                    bias: Some(t(4)),
                    out: t(3),
                })),
                vec![1, 2, 4],
            ),
            (
                OperationIr::Module(ModuleOperationIr::Linear(LinearOpIr {
                    x: t(1),
                    weight: t(2),
                    bias: None,
                    out: t(3),
                })),
                vec![1, 2],
            ),
            (
                OperationIr::Module(ModuleOperationIr::LinearXBackward(LinearXBackwardOpIr {
                    weight: t(2),
                    output_grad: t(1),
                    out: t(3),
                })),
                vec![2, 1],
            ),
            (
                OperationIr::Module(ModuleOperationIr::LinearWeightBackward(
                    LinearWeightBackwardOpIr {
                        x: t(1),
                        output_grad: t(2),
                        out: t(3),
                    },
                )),
                vec![1, 2],
            ),
            (
                OperationIr::Module(ModuleOperationIr::LinearBiasBackward(
                    LinearBiasBackwardOpIr {
                        output_grad: t(1),
                        out: t(3),
                    },
                )),
                vec![1],
            ),
            (
                OperationIr::BaseFloat(BaseOperationIr::SliceAssign(SliceAssignOpIr {
                    tensor: t(1),
                    ranges: vec![burn_backend::Slice::new(0, Some(1), 1)],
                    value: t(2),
                    out: t(3),
                })),
                vec![1, 2],
            ),
            (
                OperationIr::BaseFloat(BaseOperationIr::Zeros(CreationOpIr { out: t(3) })),
                vec![],
            ),
            (
                OperationIr::NumericInt(
                    DType::I64,
                    N::Add(BinaryOpIr {
                        lhs: t(1),
                        rhs: t(2),
                        out: t(3),
                    }),
                ),
                vec![1, 2],
            ),
            (
                OperationIr::BaseBool(BaseOperationIr::Reshape(ShapeOpIr {
                    input: t(1),
                    out: t(3),
                })),
                vec![1],
            ),
            (
                OperationIr::BaseFloat(BaseOperationIr::MaskWhere(MaskWhereOpIr {
                    tensor: t(1),
                    mask: t(2),
                    value: t(4),
                    out: t(3),
                })),
                vec![1, 2, 4],
            ),
            (
                OperationIr::Float(
                    f32,
                    FloatOperationIr::Random(RandomOpIr {
                        out: t(3),
                        distribution: burn_backend::Distribution::Default,
                    }),
                ),
                vec![],
            ),
            (
                OperationIr::Module(ModuleOperationIr::Embedding(EmbeddingOpIr {
                    weights: t(1),
                    indices: t(2),
                    out: t(3),
                })),
                vec![1, 2],
            ),
        ];
        for (op, inputs) in cases {
            // `of` also checks each against burn-ir's lists in debug builds.
            let ports = of(&op).unwrap_or_else(|| panic!("{op:?} is read here"));
            assert_eq!(ids(ports), (inputs, vec![3]), "{op:?}");
        }
    }

    #[test]
    fn other_ops_go_through_burn_ir() {
        // A concatenation reads any number of tensors.
        let cat = OperationIr::BaseFloat(BaseOperationIr::Cat(burn_ir::CatOpIr {
            tensors: vec![t(1), t(2), t(4)],
            dim: 0,
            out: t(3),
        }));
        assert!(of(&cat).is_none());
        assert!(of(&OperationIr::Drop(t(1))).is_none());
    }
}
