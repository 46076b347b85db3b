//! An op's inputs and outputs: gathered before it runs (which are absent, what they weigh),
//! booked after (last uses, new entries, what recipes keep).

use burn_ir::{BackendIr, OperationIr, TensorId, TensorIr, TensorStatus};

use super::{Engine, OpScratch};
use crate::exec::layout;
use crate::exec::residency::{Dims, Entry, Remake, Residency};
use crate::exec::{bytes_of, bytes_of_dims};
use crate::plan::views::{self, ViewKeep};
use crate::trace::recorder::Recorder;

impl<B: BackendIr> Engine<B> {
    /// Before the op runs: the recipes that will need its inputs keep them (read-only, so
    /// that the handle container keeps them): the plan's recipe for its output, a strided
    /// output's recipe made now, and recipes that already pin an input it consumes. Returns
    /// the op itself when its strided output keeps it for later (`plan::views`).
    #[inline]
    pub(super) fn keep_what_recipes_need(
        &mut self,
        op: &mut OperationIr,
        strided: bool,
    ) -> Option<Box<OperationIr>> {
        // A dense output, no plan, no strided view waiting on a source, no recipe pinning
        // anything and no buffer of the unwrapped run shared: nothing to keep (every op of
        // an unbudgeted run on dense tensors).
        if !strided
            && self.plans.active.is_none()
            && self.residency.views.sources.is_empty()
            && !self.residency.any_pinned()
            && !self.residency.any_origin()
        {
            debug_assert!(!self.op.consumes_pinned(&self.residency));
            self.op.view_recipe = false;
            self.op.shared_reads.clear();
            return None;
        }
        self.keep_what_recipes_need_in_full(op, strided)
    }

    #[inline(never)]
    pub(super) fn keep_what_recipes_need_in_full(
        &mut self,
        op: &mut OperationIr,
        strided: bool,
    ) -> Option<Box<OperationIr>> {
        // Burn lets go of the inputs this op consumes: their strided views get recipes now.
        if !self.residency.views.sources.is_empty() {
            for i in 0..self.op.inputs.len() {
                let (id, status) = self.op.inputs[i];
                if status == TensorStatus::ReadWrite {
                    self.residency.pin_for_views(id);
                }
            }
        }
        let keep = if strided {
            views::keep(&views::ViewFacts {
                budgeted: self.budget().is_some(),
                single_output: self.op.outputs.len() == 1,
                replayable: layout::replayable(op),
                consumes_input: self.op.consumes_any(),
                inputs_can_leave: &|| self.op.inputs_can_leave(&self.residency),
            })
        } else {
            ViewKeep::Nothing
        };
        let view_op = (keep == ViewKeep::KeepOp).then(|| Box::new(op.clone()));
        // (A plan is positional: an op that cannot be replayed never takes a recipe, whatever
        // the plan says of its position.)
        let planned = self.wants_recipe() && layout::replayable(op);
        self.op.view_recipe = !planned && keep == ViewKeep::RecipeNow;
        let recipe = planned || keep == ViewKeep::RecipeNow;
        if recipe || self.op.consumes_pinned(&self.residency) {
            self.op.keep_inputs(op, recipe, &mut self.residency);
        }
        self.op.read_shared_inputs(op, &self.residency);
        view_op
    }

    /// After the op ran: inputs read for the last time are gone, the others were used now.
    #[inline]
    pub(super) fn book_inputs(&mut self) {
        let now = self.history.now;
        for i in 0..self.op.inputs.len() {
            let (id, status) = self.op.inputs[i];
            if status == TensorStatus::ReadWrite {
                // Kept by the op (read only) because it is shared: released below.
                if !self.op.shared_reads.contains(&id) {
                    self.tensors().remove_unless_pinned(&id);
                }
            } else if let Some(entry) = self.residency.get_mut(&id) {
                entry.last_use = now;
            }
        }
        if !self.op.shared_reads.is_empty() {
            self.release_shared_reads();
        }
    }

    /// After the op ran: its outputs are new and resident (an `Init` op's one is in the books
    /// already), with the layout, kept op or recipe they were given. An output that may be
    /// strided is looked at: when the backend says it is dense after all, it keeps no op and
    /// no recipe for its layout's sake (the recipe made for it lets go of its inputs).
    #[inline]
    pub(super) fn book_outputs(
        &mut self,
        registered: bool,
        strided: bool,
        shares: bool,
        inherits: bool,
        view_op: Option<Box<OperationIr>>,
    ) {
        let now = self.history.now;
        self.op.out_ids.clear();
        let mut any_strided = false;
        // Taken out and put back, so that its room is kept for the next op.
        let mut outputs = std::mem::take(&mut self.op.outputs);
        for (k, (id, dims, dtype, bytes)) in outputs.drain(..).enumerate() {
            self.op.out_ids.push(id);
            if registered {
                if let Some(entry) = self.residency.get_mut(&id) {
                    entry.last_use = now;
                }
                continue;
            }
            if !(strided || shares) {
                // The common case, a dense output with a buffer of its own: its entry goes
                // into the books as made (set up field by field, it is copied twice more).
                self.residency
                    .admit(id, Entry::sized(bytes, dims, dtype, now));
                continue;
            }
            let mut entry = Entry::sized(bytes, dims, dtype, now);
            // Asked once, for its layout and for the buffer it may share.
            let probe = self.tensors().probe_entry(id, &entry);
            entry.strided = strided && self.op.strided_output(probe, &entry, inherits);
            if entry.strided {
                any_strided = true;
                entry.set_view_source(self.op.view_source);
            }
            entry.restorable = entry.strided
                && probe.is_some_and(|p| layout::restorable(self.settings.teller, &p, dtype));
            if entry.strided && !entry.restorable {
                // Only these may be unable to leave (see `note_minimum`): a restorable
                // layout stays restorable.
                self.residency.views.strided_live.push(id);
            }
            // Neither a holder of a shared buffer nor a strided tensor whose layout would not
            // come back leaves by an offload of its own: the planners are told.
            let stays = entry.strided && !entry.restorable;
            // In an input's buffer: it shares what that input shares in the unwrapped run,
            // known before it is booked (the input may have left the books with this op, and
            // a view sharing its buffer would otherwise start a buffer of its own).
            if let Some(probe) = probe.filter(|_| shares)
                && let Some(&(_, origin)) = self
                    .op
                    .input_origins
                    .iter()
                    .find(|(buffer, _)| *buffer == probe.buffer)
            {
                entry = entry.in_origin(origin);
            }
            let (shared, source) = match probe
                .filter(|_| shares)
                .and_then(|p| self.residency.shared_with(&self.op.input_buffers, bytes, p))
            {
                Some((source, key, buffer_bytes)) => {
                    self.residency
                        .admit_view(id, entry, source.as_ref(), key, buffer_bytes);
                    (true, source)
                }
                None => {
                    self.residency.admit(id, entry);
                    (false, None)
                }
            };
            if self.op.traced {
                // The input whose buffer it was made in, even when that input has gone with
                // this op (the output then holds that buffer alone): the planners count one
                // buffer where the executor does.
                let made_in = probe.filter(|_| shares).and_then(|p| {
                    let inputs = &self.op.input_buffers;
                    inputs
                        .iter()
                        .find(|(_, b)| *b == p.buffer)
                        .map(|(id, _)| *id)
                });
                if shared || stays {
                    self.history
                        .recorder
                        .mark_output_shares(k, source.or(made_in));
                } else if let Some(input) = made_in {
                    self.history.recorder.mark_output_source(k, input);
                }
            }
        }
        self.op.outputs = outputs;
        let recipe = self.op.pending_recipe.take();
        if !any_strided && strided && self.op.view_recipe {
            // The recipe was made for a layout the output does not have.
            if let Some(recipe) = recipe {
                for input in recipe.inputs {
                    self.tensors().unpin(input);
                }
            }
            return;
        }
        if let Some(view_op) = view_op
            && any_strided
        {
            self.residency.keep_view_op(self.op.out_ids[0], view_op);
        }
        if let Some(recipe) = recipe
            && let Some(entry) = self.residency.get_mut(&self.op.out_ids[0])
        {
            entry.recipe = Some(recipe);
        }
    }
}

impl OpScratch {
    /// Lists the op's inputs (in `self.inputs`), recording each when `record`, and
    /// returns the bytes of the distinct ones and of those not on the device (to fetch, wait
    /// for or recompute).
    pub(super) fn gather_inputs<'a>(
        &mut self,
        inputs: impl Iterator<Item = &'a TensorIr>,
        books: &Residency,
        recorder: &mut Recorder,
        record: bool,
    ) -> (u64, u64) {
        self.inputs.clear();
        self.inputs_strided = false;
        self.strided_shapes.clear();
        self.seen_buffers.clear();
        self.seen_carriers.clear();
        self.apart_bytes = 0;
        let (mut shared_twice, mut any_absent) = (false, false);
        let (mut input_bytes, mut absent_bytes) = (0, 0);
        for t in inputs {
            let seen = self.inputs.iter().any(|(id, _)| *id == t.id);
            self.inputs.push((t.id, t.status));
            let bytes = match books.get(&t.id) {
                Some(entry) => {
                    if entry.strided {
                        self.inputs_strided = true;
                        self.strided_shapes.push(entry.dims.clone());
                    }
                    if let Some(buffer) = entry.shared() {
                        // Views of one buffer count it once.
                        if !self.seen_buffers.contains(&buffer) {
                            self.seen_buffers.push(buffer);
                            input_bytes += books.counted(entry);
                        } else if !seen {
                            shared_twice = true;
                        }
                    } else if let Some(carrier) = entry.carrier(t.id) {
                        // A buffer that left whole comes back whole, with every holder.
                        if !self.seen_carriers.contains(&carrier) {
                            self.seen_carriers.push(carrier);
                            let bytes = books.fetch_bytes(&carrier);
                            input_bytes += bytes;
                            any_absent = true;
                            absent_bytes += bytes;
                        }
                    } else if !seen {
                        input_bytes += entry.bytes();
                        if !entry.state().on_device() {
                            any_absent = true;
                            // Fetches in flight are counted already but must be waited for.
                            absent_bytes += entry.bytes();
                        }
                    }
                    entry.bytes()
                }
                None => bytes_of(&t.shape, t.dtype),
            };
            if record {
                recorder.input(t, bytes);
            }
        }
        if any_absent {
            input_bytes -= self.remade_in_an_input(books);
        }
        if shared_twice {
            self.apart_bytes = self.apart_once_back(books).saturating_sub(input_bytes);
        }
        (input_bytes, absent_bytes)
    }

    /// Lists the op's outputs (in `self.outputs`), recording each when `record` and
    /// handing each to `on_output`; returns the bytes of those not yet in the books.
    #[inline]
    pub(super) fn gather_outputs<'a>(
        &mut self,
        outputs: impl Iterator<Item = &'a TensorIr>,
        registered: bool,
        recorder: &mut Recorder,
        record: bool,
        mut on_output: impl FnMut(&TensorIr),
    ) -> u64 {
        self.outputs.clear();
        let mut output_bytes = 0;
        for t in outputs {
            on_output(t);
            let dims = t.shape.as_slice();
            let bytes = bytes_of_dims(dims, t.dtype);
            if !registered {
                output_bytes += bytes;
            }
            if record {
                recorder.output(t, bytes);
            }
            self.outputs
                .push((t.id, Dims::from_slice(dims), t.dtype, bytes));
        }
        output_bytes
    }

    /// The op's distinct inputs that are in the books, each with its entry and whether it
    /// is a strided view made again, in that input's buffer, from another of the op's
    /// inputs: by its recipe, or (with no budget yet) from the source its view op names.
    pub(super) fn distinct_inputs<'a>(
        &'a self,
        books: &'a Residency,
    ) -> impl Iterator<Item = (&'a Entry, bool, bool)> + 'a {
        let inputs = &self.inputs;
        let is_input =
            move |id: TensorId, s: TensorId| s != id && inputs.iter().any(|(i, _)| *i == s);
        inputs.iter().enumerate().filter_map(move |(k, (id, _))| {
            if inputs[..k].iter().any(|(i, _)| i == id) {
                return None;
            }
            let entry = books.get(id)?;
            let from_recipe = entry
                .recipe
                .as_ref()
                .is_some_and(|r| matches!(r.inputs[..], [s] if is_input(*id, s)));
            let from_source =
                matches!(entry.view_source(), Some(Remake::From(s)) if is_input(*id, s));
            Some((
                entry,
                entry.strided && from_recipe,
                entry.strided && from_source,
            ))
        })
    }

    /// What the op's inputs would hold once moved off the device under a budget and brought
    /// back, when several of them hold one buffer now: a dense holder is fetched into a
    /// buffer of its own, a strided one is made again in its source's buffer, which is one
    /// of the op's inputs (then not counted again) or another buffer that must be there.
    /// The smallest budget a run can have must allow for that.
    pub(super) fn apart_once_back(&self, books: &Residency) -> u64 {
        self.distinct_inputs(books)
            .filter(|(_, by_recipe, by_source)| !(*by_recipe || *by_source))
            .map(|(entry, ..)| books.counted(entry))
            .sum()
    }

    /// Bytes counted twice by [`Self::gather_inputs`]: an absent view (strided, to be made
    /// again from its recipe) whose recipe is a view of another input of the same op shares
    /// that input's buffer once made again, as it did before it left (`x + x.transpose()`
    /// with `x` offloaded: one buffer, not two).
    pub(super) fn remade_in_an_input(&self, books: &Residency) -> u64 {
        self.distinct_inputs(books)
            .filter(|(entry, by_recipe, _)| {
                *by_recipe && !entry.state().on_device() && entry.shared().is_none()
            })
            .map(|(entry, ..)| entry.bytes())
            .sum()
    }

    /// Whether every input of the op in progress could leave the device itself (it is
    /// contiguous, has a recipe, or keeps a view op that can still be replayed): a recipe that
    /// pinned an input that can never leave would hold its bytes for nothing.
    pub(super) fn inputs_can_leave(&self, books: &Residency) -> bool {
        self.inputs.iter().all(|(id, _)| {
            books
                .get(id)
                .is_none_or(|e| !e.strided || e.recipe.is_some() || books.can_rebuild(e))
        })
    }

    /// Whether the op consumes (reads for the last time) a tensor that a recipe still needs.
    #[inline]
    pub(super) fn consumes_pinned(&self, books: &Residency) -> bool {
        if !books.any_pinned() {
            debug_assert!(
                self.inputs
                    .iter()
                    .all(|(id, _)| !books.pinned_uncounted(id)),
                "an input is pinned while the count of pinned entries is zero"
            );
            return false;
        }
        self.inputs
            .iter()
            .any(|(id, status)| *status == TensorStatus::ReadWrite && books.is_pinned(id))
    }
}
