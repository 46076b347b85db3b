//! Recomputation: recipes (an op replayed with its inputs read-only), the pins they hold on
//! their inputs, eviction and rematerialisation. Recipes come from the plan (the program's
//! recomputed tensors) and from strided views, which cannot be offloaded bit for bit (see
//! `exec::layout`); when a view keeps its op is `plan::views`' choice.

use std::time::Instant;

use burn_ir::{BackendIr, OperationIr, TensorId, TensorStatus};

use super::{Engine, OpScratch};
use crate::error::SwapError;
use crate::exec::layout;
use crate::exec::residency::{Recipe, Residency};

impl<B: BackendIr> Engine<B> {
    /// Whether the plan keeps a recipe for the output of the op recorded last.
    #[inline]
    pub(super) fn wants_recipe(&self) -> bool {
        let Some(active) = &self.plans.active else {
            return false;
        };
        let Some(pos) = self.history.recorder.place_of_last().map(|p| p.position) else {
            return false;
        };
        self.op.outputs.len() == 1
            && active
                .program
                .recipes
                .get(pos)
                .is_some_and(|r| !r.is_empty())
    }

    /// Rematerialises an evicted tensor by replaying its recipe, bringing back the recipe's
    /// inputs first (recursively, when they were evicted too).
    pub(super) fn recompute(&mut self, id: TensorId) -> Result<(), SwapError> {
        let Some(entry) = self.residency.get_mut(&id) else {
            return Ok(());
        };
        let bytes = entry.bytes();
        let Some(recipe) = entry.recipe.take() else {
            return Err(SwapError::TensorLost {
                tensor: id.value(),
                bytes,
                reason: "it was evicted without a recipe".into(),
            });
        };
        let _span =
            tracing::debug_span!("burn_swap::recompute", tensor = id.value(), bytes).entered();
        let start = Instant::now();
        let base = self.op.protect.len();
        self.op.protect.push(id);
        self.op.protect.extend_from_slice(&recipe.inputs);
        let mut result = Ok(());
        for &input in &recipe.inputs {
            result = self.bring(input);
            if result.is_err() {
                break;
            }
        }
        // A view made again shares its source's buffer: no room is made for it.
        let strided_input = recipe
            .inputs
            .iter()
            .any(|i| self.residency.get(i).is_some_and(|e| e.strided));
        let alias = layout::aliases(&recipe.op, self.settings.teller, strided_input);
        if result.is_ok() {
            result = self.reserve(if alias { 0 } else { bytes });
        }
        if result.is_ok() {
            self.replay(id, *recipe, bytes);
            if alias {
                result = self.make_good_a_view(true);
            }
        } else if let Some(entry) = self.residency.get_mut(&id) {
            entry.recipe = Some(recipe);
        }
        self.op.protect.truncate(base);
        result?;
        self.history.counters.recomputes += 1;
        self.history.events.recomputes += 1;
        self.history
            .counters
            .add_recompute(start.elapsed().as_nanos() as u64);
        Ok(())
    }

    /// Replays the recipe of evicted tensor `id` (of `bytes`), its inputs in place: it is
    /// resident again, shares its source's buffer again when it is a view, and keeps its op
    /// when it is strided, so that it can leave again the same way.
    fn replay(&mut self, id: TensorId, recipe: Recipe, bytes: u64) {
        let Recipe { op, inputs } = recipe;
        let keep = self
            .residency
            .get(&id)
            .is_some_and(|e| e.strided)
            .then(|| Box::new(op.clone()));
        let shares = self.settings.teller != layout::Teller::None && layout::may_share(&op);
        let buffers: Vec<(TensorId, usize)> = if shares {
            inputs
                .iter()
                .filter_map(|&i| self.tensors().probe(i).map(|p| (i, p.buffer)))
                .collect()
        } else {
            Vec::new()
        };
        crate::exec::interpreter::run(&mut self.handles, &op);
        let peak = self.residency.books().peak;
        self.residency.rematerialise(&id);
        if shares
            && let Some(probe) = self.tensors().probe(id)
            && let Some((source, key, buffer_bytes)) =
                self.residency.shared_with(&buffers, bytes, probe)
        {
            self.residency
                .share(&id, source.as_ref(), key, buffer_bytes);
            self.residency.restore_peak(peak);
        }
        if let Some(op) = keep {
            self.residency.keep_view_op(id, op);
        }
        for input in inputs {
            self.tensors().unpin(input);
        }
    }

    /// Drops a resident tensor that has a recipe; it is recomputed before its next use.
    pub(super) fn evict(&mut self, id: TensorId) {
        let Some(entry) = self.residency.get(&id) else {
            return;
        };
        let ir = entry.ir(id, TensorStatus::ReadWrite);
        if self.residency.evict(&id) {
            self.history.counters.evictions += 1;
            self.handles.remove(&ir.id);
        }
    }
}

impl OpScratch {
    /// Marks inputs of `op` read-only so that they stay in the handle container: all of them
    /// when `recipe` (then a copy of the op becomes the output's recipe, pinning them), else
    /// the pinned ones it consumes.
    pub(super) fn keep_inputs(
        &mut self,
        op: &mut OperationIr,
        recipe: bool,
        books: &mut Residency,
    ) {
        let mut ids: Vec<TensorId> = Vec::new();
        for &(id, status) in &self.inputs {
            if ids.contains(&id) {
                continue;
            }
            if recipe || (status == TensorStatus::ReadWrite && books.is_pinned(&id)) {
                ids.push(id);
            }
        }
        op.mark_read_only(&ids);
        if recipe {
            self.pending_recipe = Some(books.recipe_of(op.clone(), ids));
        }
    }
}
