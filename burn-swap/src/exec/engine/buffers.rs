//! Buffers: where the backend holds each view, and the shared buffers that count it once.
//!
//! A view (transposed, permuted, flipped, expanded, sliced, reshaped, unfolded) shares the
//! buffer of the tensor it was made from. After an op that may make one, the backend is asked
//! where its output lives (`exec::layout::probe`) and that is compared with where its inputs
//! lived before it ran: an output in an input's buffer joins it in one shared buffer of the
//! residency, counted once. The same answer says whether the output is strided (a fetch
//! would not restore its layout).

use burn_ir::{BackendIr, OperationIr, TensorId, TensorStatus};

use super::{Engine, OpScratch};
use crate::error::SwapError;
use crate::exec::layout::Layout;
use crate::exec::residency::{Remake, Residency};

impl<B: BackendIr> Engine<B> {
    /// Notes the buffers of the op's inputs, before it runs (for [`Self::book_outputs`] to
    /// find which of them an output shares).
    pub(super) fn probe_inputs(&mut self) {
        self.op.input_buffers.clear();
        self.op.input_origins.clear();
        for i in 0..self.op.inputs.len() {
            let id = self.op.inputs[i].0;
            if let Some(probe) = self.tensors().probe(id) {
                self.op.input_buffers.push((id, probe.buffer));
                let origin = self.residency.origin_of(&id);
                if origin != 0 {
                    self.op.input_origins.push((probe.buffer, origin));
                }
            }
        }
    }

    /// After an op whose outputs were taken for views (the caller checks that there were):
    /// an output that turned out to have a buffer of its own (or a view counted at its whole
    /// buffer) may have put the device over the budget. Counted as an overshoot, and room is
    /// made at once. The op's inputs stay listed: the plan's steps after the op name them
    /// (an offload of a view op's input).
    pub(super) fn settle_views(&mut self) -> Result<(), SwapError> {
        self.op.unreserved = 0;
        // Nothing of the op is in use any more: its inputs and outputs may leave too.
        let room = self.make_good_a_view(false);
        self.op.budget_broken = room.is_err();
        room
    }

    /// A view made with no room reserved for it (by an op, or again by its recipe) put the
    /// device over the budget when it copied after all: counted as an overshoot, and room
    /// is made at once (sparing the op's inputs when `protect_inputs`).
    pub(super) fn make_good_a_view(&mut self, protect_inputs: bool) -> Result<(), SwapError> {
        let Some(budget) = self.budget() else {
            return Ok(());
        };
        let resident = self.resident();
        if resident <= budget {
            return Ok(());
        }
        self.history.counters.budget_overshoots += 1;
        tracing::warn!(
            resident,
            budget,
            "burn-swap: an op taken for a view made bytes of its own"
        );
        self.make_room(resident - budget, protect_inputs)
    }
}

impl<B: BackendIr> Engine<B> {
    /// The ops' read-only inputs of `shared_reads` after it ran: Burn is done with them, and
    /// their handles go (a recipe that pins one keeps it, as an orphan).
    pub(super) fn release_shared_reads(&mut self) {
        for i in 0..self.op.shared_reads.len() {
            let id = self.op.shared_reads[i];
            if self.residency.is_pinned(&id) {
                self.tensors().remove_unless_pinned(&id);
            } else {
                self.tensors().remove_with_handle(id);
            }
        }
        self.op.shared_reads.clear();
    }
}

impl OpScratch {
    /// Marks read-only the inputs the op consumes that share their buffer in the unwrapped
    /// run while that buffer is apart under burn-swap (a holder came back from the host on
    /// its own): the unwrapped backend, seeing the buffer shared, would not write into it in
    /// place, and some in-place kernels give other bits (NaN signs). [`Engine::book_inputs`]
    /// releases them after the op.
    pub(super) fn read_shared_inputs(&mut self, op: &mut OperationIr, books: &Residency) {
        self.shared_reads.clear();
        if !books.any_origin() {
            return;
        }
        for i in 0..self.inputs.len() {
            let (id, status) = self.inputs[i];
            if status == TensorStatus::ReadWrite && self.read_only_for_sharing(books, id) {
                self.shared_reads.push(id);
            }
        }
        if !self.shared_reads.is_empty() {
            op.mark_read_only(&self.shared_reads);
        }
    }

    /// For a view op of one input: what its output could be made again from under a budget:
    /// that input; when the op consumes it, what that input could be made from if it is a
    /// view itself, or the input kept by the output's recipe if it is dense (`plan::views`
    /// gives such a view its recipe at once).
    #[inline]
    pub(super) fn view_source(&self, books: &Residency, kind: Layout) -> Option<Remake> {
        let [(input, status)] = self.inputs[..] else {
            return None;
        };
        if kind != Layout::View {
            return None;
        }
        if status != TensorStatus::ReadWrite {
            return Some(Remake::From(input));
        }
        match books.get(&input) {
            Some(e) if e.view_source().is_some() => e.view_source(),
            Some(e) if !e.strided => Some(Remake::Pinned),
            _ => Some(Remake::From(input)),
        }
    }

    /// Whether an input the op consumes is handed over read-only because it shares its
    /// buffer in the unwrapped run (noted in `shared_reads`, once, unless a recipe keeps it
    /// read-only anyway).
    #[inline]
    pub(super) fn read_only_for_sharing(&self, books: &Residency, id: TensorId) -> bool {
        !books.is_pinned(&id) && books.shares_origin(&id) && !self.shared_reads.contains(&id)
    }
}
