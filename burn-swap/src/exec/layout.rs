//! Which tensors may be offloaded: those whose memory layout a fetch restores.
//!
//! An offload reads a tensor's values in logical order and a fetch writes them back
//! contiguous. A tensor that is a strided view (a transposed, permuted, flipped, expanded or
//! sliced one, or an elementwise result that kept such a layout) would come back with another
//! layout, and some kernels give other bits on another layout (Flex's matmul does: its
//! summation order follows the strides). So the engine tracks, per tensor, whether its layout
//! may be strided, from the op that made it, and offloads only tensors known to be
//! contiguous. Under a budget, a strided tensor made by a replayable op gets a recipe, and
//! leaves by recomputation: a replayed view op makes the same view again, from a source that
//! is itself contiguous and may be offloaded meanwhile.

use burn_ir::{BaseOperationIr, FloatOperationIr, OperationIr};

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
