//! The view books: strided views that keep the op that made them, by the tensor they were
//! made from, and the tensors admitted strided.

use burn_ir::TensorId;
use hashbrown::HashMap;

/// Which strided tensors live, and which keep their op for later.
#[derive(Default)]
pub(crate) struct ViewBooks {
    /// For each tensor, the strided views made from it that keep their op for later (see
    /// [`super::Entry::view_op`]): when Burn lets go of the tensor, those views get their
    /// recipes.
    pub sources: HashMap<TensorId, Vec<TensorId>>,
    /// Tensors admitted with a strided layout that cannot be restored (some may have left the
    /// books since): what the report's minimum budget counts as unable to leave. Restorable
    /// views are never in it: they can always leave, and on models that slice and chunk
    /// thousands of them live at once, which the per-op count would read every op.
    pub strided_live: Vec<TensorId>,
}
