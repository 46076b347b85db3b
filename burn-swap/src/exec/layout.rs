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

/// What the backend tells of where it holds a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probe {
    /// Its elements are in row-major order from the start of its buffer, as a fetch writes
    /// them back, so that every kernel sees the same layout after a round trip.
    pub dense: bool,
    /// Its buffer: equal for tensors that share one, while they live.
    pub buffer: usize,
    /// That buffer's size.
    pub buffer_bytes: u64,
}

/// Whether the backend holds the tensor of `handle` dense ([`Probe::dense`]); `None` when it
/// cannot tell.
pub(crate) fn dense<B: BackendIr>(handle: &B::Handle, shape: &Shape, dtype: DType) -> Option<bool> {
    probe::<B>(handle, shape, dtype).map(|p| p.dense)
}

/// Where the backend holds the tensor of `handle` ([`Probe`]); `None` when it cannot tell.
pub(crate) fn probe<B: BackendIr>(
    handle: &B::Handle,
    shape: &Shape,
    dtype: DType,
) -> Option<Probe> {
    let handle = TensorHandle {
        handle: handle.clone(),
        shape: shape.clone(),
    };
    if dtype.is_float() {
        probe_primitive(&B::float_tensor(handle))
    } else if dtype.is_int() {
        probe_primitive(&B::int_tensor(handle))
    } else if dtype.is_bool() {
        probe_primitive(&B::bool_tensor(handle))
    } else {
        None
    }
}

/// [`probe`] of a tensor primitive of the backends that tell: Flex's, by its layout and the
/// address of its shared bytes; the CubeCL ones', by their strides and memory handle.
fn probe_primitive<T: 'static>(tensor: &T) -> Option<Probe> {
    if let Some(flex) = (tensor as &dyn Any).downcast_ref::<burn::backend::flex::FlexTensor>() {
        let bytes = flex.bytes();
        return Some(Probe {
            dense: flex.is_contiguous() && flex.layout().start_offset() == 0,
            buffer: bytes.as_ptr() as usize,
            buffer_bytes: bytes.len() as u64,
        });
    }
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    if let Some(probe) = super::cube::probe(tensor) {
        return Some(probe);
    }
    None
}

/// Which backend tells the layouts ([`probe`]), found from its types before any tensor
/// exists: its view ops differ (the CPU backend flips and slices by strides; the CubeCL ones
/// copy a flip, and a slice whose offsets break the buffer alignment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Teller {
    /// A backend that cannot tell (Burn's fused backends).
    None,
    /// Burn's CPU backend.
    Flex,
    /// A CubeCL backend (CUDA, wgpu).
    #[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
    Cube,
}

/// The [`Teller`] of the inner backend `B`.
pub(crate) fn teller<B: BackendIr>() -> Teller {
    use core::any::TypeId;
    if TypeId::of::<B::FloatTensorPrimitive>() == TypeId::of::<burn::backend::flex::FlexTensor>() {
        return Teller::Flex;
    }
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    if super::cube::is_cube::<B::FloatTensorPrimitive>() {
        return Teller::Cube;
    }
    Teller::None
}

/// Whether every output of `op` is, on the backend `teller` names, a view of its input:
/// sharing its buffer, so that room is made for no bytes of its own. A wrong answer costs
/// no more than an overshoot made good after the op (counted in the report).
/// A reshape is one when its input is dense (`inputs_strided` false).
#[inline]
pub(crate) fn aliases(op: &OperationIr, teller: Teller, inputs_strided: bool) -> bool {
    let (OperationIr::BaseFloat(b) | OperationIr::BaseInt(b) | OperationIr::BaseBool(b)) = op
    else {
        return false;
    };
    match (teller, b) {
        (Teller::None, _) => false,
        (_, BaseOperationIr::Reshape(_)) => !inputs_strided,
        (
            _,
            BaseOperationIr::SwapDims(_)
            | BaseOperationIr::Permute(_)
            | BaseOperationIr::Expand(_)
            | BaseOperationIr::Unfold(_),
        ) => true,
        (Teller::Flex, BaseOperationIr::Flip(_)) => true,
        (Teller::Flex, BaseOperationIr::Slice(slice)) => slice.ranges.iter().all(|r| r.step > 0),
        _ => false,
    }
}

/// Whether an output of `op` may share a buffer with one of its inputs: view ops, and a
/// reshape (a view of a dense input).
#[inline]
pub(crate) fn may_share(op: &OperationIr) -> bool {
    match op {
        OperationIr::BaseFloat(b) | OperationIr::BaseInt(b) | OperationIr::BaseBool(b) => {
            matches!(b, BaseOperationIr::Reshape(_)) || base(b) == Layout::View
        }
        _ => false,
    }
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
