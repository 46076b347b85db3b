//! Buffers several tensors share in the books: which output lives in an input's buffer, which
//! tensors hold a buffer, whether they must leave together, and what a carrier's fetch brings.

use burn_ir::TensorId;

use super::{Group, Residency, State};
use crate::exec::layout::Probe;

impl Residency {
    /// The backend says an output of `bytes` lives in `probe`'s buffer: when one of `inputs`
    /// (as the engine's `probe_inputs` noted them) lives there too, the buffer it shares
    /// (with that input when it is still in the books), its key and its size; `None` for a buffer of its own. (A view whose input is gone holds
    /// that input's whole buffer, and is counted at its size, or joins the shared buffer of
    /// that key in the books.)
    #[inline]
    pub(crate) fn shared_with(
        &self,
        inputs: &[(TensorId, usize)],
        bytes: u64,
        probe: Probe,
    ) -> Option<(Option<TensorId>, usize, u64)> {
        let &(source, _) = inputs.iter().find(|(_, buffer)| *buffer == probe.buffer)?;
        let source = self.get(&source).is_some().then_some(source);
        (source.is_some() || probe.buffer_bytes != bytes || self.any_shared()).then_some((
            source,
            probe.buffer,
            probe.buffer_bytes,
        ))
    }

    /// The resident tensors that hold `buffer`.
    pub(crate) fn holders(&self, buffer: u32) -> Vec<TensorId> {
        self.iter()
            .filter(|(_, e)| e.shared() == Some(buffer) && matches!(e.state(), State::Resident))
            .map(|(id, _)| *id)
            .collect()
    }

    /// Whether the holders of a shared buffer must leave together: one of them cannot leave
    /// on its own (strided, no recipe, and no op that could make it again).
    pub(crate) fn leaves_whole(&self, holders: &[TensorId]) -> bool {
        holders.iter().any(|id| {
            self.get(id)
                .is_some_and(|e| e.strided && e.recipe.is_none() && !self.can_rebuild(e))
        })
    }

    /// The device bytes a fetch of a tensor makes room for: a carrier's whole buffer (its
    /// holders come back with it), else its own.
    #[inline]
    pub(crate) fn fetch_bytes(&self, id: &TensorId) -> u64 {
        self.get(id).map_or(0, |e| match e.group() {
            Some(Group::Carrier { buffer_bytes, .. }) => (*buffer_bytes).max(e.bytes()),
            _ => e.bytes(),
        })
    }
}
