//! The quantized tensor of [`Swap`](super::Swap): burn-router's tensor, plus what the inner
//! backend says about quantization, so that a model quantizes through `Swap<I>` as it does
//! on `I` (the same default scheme, accumulation precision and propagation).

use burn_backend::{DType, QTensorPrimitive, Shape, TensorMetadata};
use burn_ir::BackendIr;
use burn_router::RouterTensor;
use burn_std::quantization::{QuantAcc, QuantPropagation, QuantScheme};

use super::SwapClient;

/// A quantized tensor of `Swap<I>`: known to the swap client like any other tensor (its
/// bytes are counted against the budget), and answering the quantization questions of
/// [`QTensorPrimitive`] as the inner backend `I`'s quantized tensor that made it.
pub struct SwapQTensor<I: BackendIr> {
    pub(crate) tensor: RouterTensor<SwapClient<I>>,
    acc: QuantAcc,
    propagation: QuantPropagation,
}

impl<I: BackendIr> SwapQTensor<I> {
    /// Wraps `tensor`, with what the inner backend's quantized tensor that made it says.
    pub(crate) fn new(
        tensor: RouterTensor<SwapClient<I>>,
        acc: QuantAcc,
        propagation: QuantPropagation,
    ) -> Self {
        Self {
            tensor,
            acc,
            propagation,
        }
    }
}

impl<I: BackendIr> From<SwapQTensor<I>> for RouterTensor<SwapClient<I>> {
    fn from(tensor: SwapQTensor<I>) -> Self {
        tensor.tensor
    }
}

impl<I: BackendIr> Clone for SwapQTensor<I> {
    fn clone(&self) -> Self {
        Self {
            tensor: self.tensor.clone(),
            acc: self.acc,
            propagation: self.propagation,
        }
    }
}

impl<I: BackendIr> core::fmt::Debug for SwapQTensor<I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SwapQTensor")
            .field("tensor", &self.tensor)
            .field("acc", &self.acc)
            .field("propagation", &self.propagation)
            .finish()
    }
}

impl<I: BackendIr> TensorMetadata for SwapQTensor<I> {
    fn dtype(&self) -> DType {
        self.tensor.dtype()
    }

    fn shape(&self) -> Shape {
        self.tensor.shape()
    }

    fn rank(&self) -> usize {
        self.tensor.rank()
    }
}

impl<I: BackendIr> QTensorPrimitive for SwapQTensor<I> {
    fn scheme(&self) -> &QuantScheme {
        self.tensor.scheme()
    }

    fn acc_precision(&self) -> QuantAcc {
        self.acc
    }

    fn propagation(&self) -> QuantPropagation {
        self.propagation
    }

    /// The inner backend's default scheme (burn-router's would be `QuantScheme::default()`,
    /// which for example Flex does not store natively).
    fn default_scheme() -> QuantScheme {
        <I::QuantizedTensorPrimitive as QTensorPrimitive>::default_scheme()
    }
}
