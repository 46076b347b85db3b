//! Which tensors may be offloaded: those whose memory layout a fetch restores.
//!
//! An offload reads a tensor's values in logical order and a fetch writes them back
//! contiguous. A tensor that is a strided view (a transposed, permuted, flipped, expanded or
//! sliced one, or an elementwise result that kept such a layout) would come back with another
//! layout, and some kernels give other bits on another layout (Flex's matmul does: its
//! summation order follows the strides). So the engine tracks, per tensor, whether its layout
//! is strided, and offloads only tensors that are dense. Under a budget, a strided tensor made
//! by a replayable op gets a recipe, and leaves by recomputation: a replayed view op makes the
//! same view again, from a source that is itself dense and may be offloaded meanwhile.
//!
//! Two sources, the first that answers wins:
//!
//! - **The backend's word** ([`dense`]): Burn's CPU backend (Flex) and its CubeCL backends
//!   tell each tensor's strides and offset, so an output that a view-like op (or an
//!   elementwise op on a strided input) may have left strided is looked at after the op ran.
//!   Most are dense: reductions, broadcasts and most elementwise kernels write fresh
//!   buffers.
//! - **A guess from the op** ([`of`]), for a backend that cannot tell (Burn's fused backends):
//!   view ops make views; an op whose output has the shape of a strided input may have kept
//!   its layout; anything else (a reduction, a broadcast, a matmul) writes a fresh buffer.

use core::any::Any;

use burn_backend::{DType, Shape};
use burn_ir::{BackendIr, BaseOperationIr, FloatOperationIr, OperationIr, TensorHandle};

/// How an op lays out its outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Newly allocated, contiguous.
    Fresh,
    /// A view of an input: possibly strided.
    View,
    /// Contiguous when every input is.
    Inherit,
}

fn base(op: &BaseOperationIr) -> Layout {
    match op {
        BaseOperationIr::SwapDims(_)
        | BaseOperationIr::Permute(_)
        | BaseOperationIr::Flip(_)
        | BaseOperationIr::Expand(_)
        | BaseOperationIr::Unfold(_)
        | BaseOperationIr::Slice(_) => Layout::View,
        BaseOperationIr::Cat(_)
        | BaseOperationIr::Empty(_)
        | BaseOperationIr::Ones(_)
        | BaseOperationIr::Zeros(_) => Layout::Fresh,
        _ => Layout::Inherit,
    }
}

/// The layout of `op`'s outputs.
pub(crate) fn of(op: &OperationIr) -> Layout {
    match op {
        OperationIr::BaseFloat(b) | OperationIr::BaseInt(b) | OperationIr::BaseBool(b) => base(b),
        OperationIr::Float(_, FloatOperationIr::Matmul(_))
        | OperationIr::Float(_, FloatOperationIr::Random(_))
        | OperationIr::Module(_)
        | OperationIr::Init(_) => Layout::Fresh,
        _ => Layout::Inherit,
    }
}

/// Whether the backend holds the tensor of `handle` dense: its elements in row-major order
/// from the start of its buffer, as a fetch writes them back, so that every kernel sees the
/// same layout after a round trip. `None` when the backend cannot tell.
pub(crate) fn dense<B: BackendIr>(handle: &B::Handle, shape: &Shape, dtype: DType) -> Option<bool> {
    let handle = TensorHandle {
        handle: handle.clone(),
        shape: shape.clone(),
    };
    if dtype.is_float() {
        dense_primitive(&B::float_tensor(handle))
    } else if dtype.is_int() {
        dense_primitive(&B::int_tensor(handle))
    } else if dtype.is_bool() {
        dense_primitive(&B::bool_tensor(handle))
    } else {
        None
    }
}

/// [`dense`] of a tensor primitive of the backends that tell: Flex's, by its layout; the
/// CubeCL ones', by their strides and buffer size.
fn dense_primitive<T: 'static>(tensor: &T) -> Option<bool> {
    if let Some(flex) = (tensor as &dyn Any).downcast_ref::<burn::backend::flex::FlexTensor>() {
        return Some(flex.is_contiguous() && flex.layout().start_offset() == 0);
    }
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    if let Some(dense) = super::cube::dense(tensor) {
        return Some(dense);
    }
    None
}

/// Whether replaying `op` makes the same values again: every IR op but random ones (and
/// `Init`, whose data is gone).
pub(crate) fn replayable(op: &OperationIr) -> bool {
    !matches!(
        op,
        OperationIr::Float(_, FloatOperationIr::Random(_))
            | OperationIr::Init(_)
            | OperationIr::Custom(_)
            | OperationIr::Drop(_)
    )
}
