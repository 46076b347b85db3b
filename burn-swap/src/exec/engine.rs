//! The per-device engine: every op of the device passes here, in order.

use std::time::Instant;

use burn_backend::{DType, ExecutionError, Shape, TensorData};
use burn_ir::{BackendIr, OperationIr, TensorId, TensorIr, TensorStatus};
use burn_router::{Runner, RunnerClient};
use burn_std::future::DynFut;

use super::layout::{self, Layout};
use super::residency::{Dims, Entry, HostCopy, Recipe, Residency, State};
use super::transfer::{self, Done, Transfers};
use super::{bytes_of, host};
use crate::config::{Compression, SwapConfig};
use crate::error::SwapError;
use crate::plan::program::{self, Port, Program, Step};
use crate::plan::reactive::{self, Candidate, LinkModel};
use crate::report::Counters;
use crate::trace::recorder::{OpCounters, Recorder};
use crate::trace::signature;

/// The engine of one device: the inner backend's runner, the residency table, the counters,
/// the recorder, and the configuration in force.
pub(crate) struct Engine<B: BackendIr> {
    pub runner: Runner<B>,
    pub config: SwapConfig,
    /// The budget in bytes, resolved from the configuration; `None` is unlimited.
    pub budget: Option<u64>,
    pub counters: Counters,
    pub recorder: Recorder,
    residency: Residency,
    link: LinkModel,
    /// Global index of the next op.
    now: u64,
    // Scratch space reused by every op, so that the per-op path does not allocate.
    inputs: Vec<(TensorId, TensorStatus)>,
    outputs: Vec<(TensorId, Dims, DType, u64)>,
    candidates: Vec<Candidate>,
    /// The measured copy throughput, once measured.
    links: Option<crate::plan::profile::Links>,
    /// Resident bytes when the native op in progress was prepared, and its outputs' bytes.
    native_base: u64,
    native_out: u64,
    /// Output ids of the op that ran last (the plan names tensors by their port).
    out_ids: Vec<TensorId>,
    /// The send and receive workers.
    transfers: Transfers<B>,
    /// Bytes of the tensors whose offload is in flight.
    offloading_bytes: u64,
    /// The plan being followed, and the schedule it was made for.
    program: Option<Active>,
    /// The schedule last planned for (planned once per schedule).
    planned_for: Option<(usize, u64)>,
    /// Prefetches that found no room yet, retried after each op.
    deferred: Vec<TensorId>,
    /// The recipe made for the op running now, given to its output once it is in the books.
    pending_recipe: Option<Box<Recipe>>,
    /// Tensors that room-making must not touch (recipe inputs being brought back).
    protect: Vec<TensorId>,
    /// What was moved since the last op was recorded (for the trace's per-op events).
    events: crate::trace::OpEvents,
    /// For each tensor, the strided views made from it that keep their op for later (see
    /// [`Entry::view_op`]): when Burn lets go of the tensor, those views get their recipes.
    view_sources: hashbrown::HashMap<TensorId, Vec<TensorId>>,
    /// The CPU codec's measured throughput (raw bytes per second), once measured.
    codec_bandwidth: Option<f64>,
    /// Whether an input of the op in progress may have a strided layout.
    inputs_strided: bool,
    /// Whether an op's inputs are being put in place: an offload in flight of one of them
    /// that completes now is undone (the op is about to read it).
    fitting: bool,
    /// Whether the inner backend gives its allocator's figures (sampled after each op).
    allocator: bool,
    /// The device's total memory, when the backend can tell it.
    pub device_memory: Option<u64>,
    /// The peers offloads go to (seed 000), when configured.
    pub peers: Option<std::sync::Arc<super::peers::PeerPool>>,
}

/// A program in force: its steps, and the tensors it offloaded this iteration, by tag.
struct Active {
    program: Program,
    tags: hashbrown::HashMap<u32, TensorId>,
    /// The tensors whose planned prefetch started, by tag, until an op waited for them.
    fetching: hashbrown::HashMap<u32, TensorId>,
}

impl<B: BackendIr> Engine<B> {
    pub fn new(runner: Runner<B>, config: SwapConfig, budget: Option<u64>) -> Self {
        let transfers = Transfers::default();
        transfers.set_jitter(config.transfer_jitter_micros);
        let device = runner.device();
        let allocator = super::allocator_usage::<B>(&device).is_some();
        let device_memory = super::device_memory::<B>(&device);
        let peers = super::peers::PeerPool::new(&config.peers, |peer| {
            super::measure_peer::<B>(&device, peer)
        });
        Self {
            allocator,
            device_memory,
            peers,
            runner,
            config,
            budget,
            counters: Counters::default(),
            recorder: Recorder::default(),
            residency: Residency::default(),
            link: LinkModel::default(),
            now: 0,
            inputs: Vec::new(),
            outputs: Vec::new(),
            candidates: Vec::new(),
            native_base: 0,
            native_out: 0,
            links: None,
            out_ids: Vec::new(),
            transfers,
            offloading_bytes: 0,
            program: None,
            planned_for: None,
            deferred: Vec::new(),
            pending_recipe: None,
            protect: Vec::new(),
            fitting: false,
            inputs_strided: false,
            codec_bandwidth: None,
            events: Default::default(),
            view_sources: Default::default(),
        }
    }

    /// The program in force, if any.
    pub fn program(&self) -> Option<&Program> {
        self.program.as_ref().map(|a| &a.program)
    }

    /// Forgets the trace and the plan made from it.
    pub fn restart_trace(&mut self) {
        self.recorder = Default::default();
        self.program = None;
        self.planned_for = None;
    }

    fn tracing(&self) -> bool {
        self.config.enabled && self.config.trace
    }

    fn budget(&self) -> Option<u64> {
        if self.config.enabled {
            self.budget
        } else {
            None
        }
    }

    /// Runs one operation on the inner backend, first making room and fetching its inputs.
    ///
    /// The hot path: one pass over the op's inputs and one over its outputs feed both the
    /// books and the recorder; nothing is allocated once the scratch vectors have grown.
    #[inline]
    pub fn run_op(&mut self, op: OperationIr) -> Result<(), SwapError> {
        self.run_op_with(op, |_| {})
    }

    /// [`Engine::run_op`], calling `on_output` with each output as it passes (so that the
    /// router client builds its output tensors in the same pass).
    #[inline]
    pub fn run_op_with(
        &mut self,
        mut op: OperationIr,
        mut on_output: impl FnMut(&TensorIr),
    ) -> Result<(), SwapError> {
        if self.transfers.in_flight() > 0 {
            self.poll_transfers();
        }
        let tracing = self.tracing();
        let live_before = self.counters.resident + self.counters.host;
        if tracing {
            let key = signature::kind_key(&op);
            self.recorder.begin(key, || signature::kind_name(&op));
        }
        if let OperationIr::Drop(tensor) = &op {
            let id = tensor.id;
            if tracing {
                self.recorder
                    .input(tensor, bytes_of(&tensor.shape, tensor.dtype));
                self.recorder.outputs_follow();
                self.recorder.end(OpCounters {
                    nanos: 0,
                    live_before,
                    events: std::mem::take(&mut self.events),
                    resident_during: self.counters.resident,
                });
            }
            self.drop_tensor(id, op);
            self.inputs.clear();
            self.inputs.push((id, TensorStatus::ReadWrite));
            self.out_ids.clear();
            self.finish_op();
            return Ok(());
        }

        // What the op reads and makes, in one pass each.
        let (input_bytes, fetch_bytes) = self.gather_inputs(op.inputs(), tracing);
        if tracing {
            self.recorder.outputs_follow();
        }
        // Only an `Init` op's output is already in the books (registered with its data).
        let registered = matches!(op, OperationIr::Init(_));
        self.outputs.clear();
        let mut output_bytes = 0;
        for t in op.outputs() {
            on_output(t);
            let bytes = bytes_of(&t.shape, t.dtype);
            if !registered {
                output_bytes += bytes;
            }
            if tracing {
                self.recorder.output(t, bytes);
            }
            self.outputs
                .push((t.id, Dims::from_slice(t.shape.as_slice()), t.dtype, bytes));
        }
        if let Err(error) = self.fit(input_bytes, fetch_bytes, output_bytes, || {
            signature::kind_name(&op)
        }) {
            if tracing {
                self.recorder.abort();
            }
            return Err(error);
        }

        let during = self.counters.resident + output_bytes;
        self.counters.note_resident(during);
        let start = if tracing {
            let timed = self.recorder.timing();
            self.recorder.end(OpCounters {
                nanos: 0,
                live_before,
                events: std::mem::take(&mut self.events),
                resident_during: during,
            });
            timed.then(Instant::now)
        } else {
            None
        };
        // A recipe of the plan, or a pinned input that Burn hands over for its last use, keeps
        // the op's inputs in the handle container: the op reads them.
        let strided = match layout::of(&op) {
            Layout::Fresh => false,
            Layout::View => true,
            Layout::Inherit => self.inputs_strided,
        };
        // A strided output cannot be offloaded bit for bit (see `exec::layout`): under a
        // budget it gets a recipe, so that it can leave by recomputation instead.
        // A strided output cannot be offloaded bit for bit (see `exec::layout`): under a
        // budget its op is kept, so that it can later leave by recomputation while its
        // inputs are still there (they are pinned only then).
        if !self.view_sources.is_empty() {
            for i in 0..self.inputs.len() {
                let (id, status) = self.inputs[i];
                if status == TensorStatus::ReadWrite {
                    self.pin_for_views(id);
                }
            }
        }
        let replayable_view = strided
            && self.budget().is_some()
            && self.outputs.len() == 1
            && layout::replayable(&op);
        // When the op consumes its input, the input would be gone by then: the recipe is made
        // now (pinning the input, which must itself be able to leave).
        let eager = replayable_view && self.consumes_any() && self.inputs_can_leave();
        let view_op = (replayable_view && !eager).then(|| Box::new(op.clone()));
        let recipe = self.wants_recipe() || eager;
        if recipe || self.consumes_pinned() {
            self.keep_inputs(&mut op, recipe);
        }
        self.runner.register_op(op);
        if let Some(start) = start {
            self.recorder
                .set_last_nanos(start.elapsed().as_nanos() as u64);
        }

        // Inputs read for the last time are gone; outputs are new and resident.
        let now = self.now;
        for i in 0..self.inputs.len() {
            let (id, status) = self.inputs[i];
            if status == TensorStatus::ReadWrite {
                self.release_by_burn(&id);
            } else if let Some(entry) = self.residency.get_mut(&id) {
                entry.last_use = now;
            }
        }
        self.out_ids.clear();
        for (id, dims, dtype, bytes) in self.outputs.drain(..) {
            self.out_ids.push(id);
            if registered {
                if let Some(entry) = self.residency.get_mut(&id) {
                    entry.last_use = now;
                }
                continue;
            }
            self.counters.resident += bytes;
            let mut entry = Entry::new(bytes, dims, dtype, now);
            entry.strided = strided;
            self.residency.insert(id, entry);
        }
        if let Some(view_op) = view_op
            && let Some(entry) = self.residency.get_mut(&self.out_ids[0])
        {
            let view = self.out_ids[0];
            for t in view_op.inputs() {
                let views = self.view_sources.entry(t.id).or_default();
                if !views.contains(&view) {
                    views.push(view);
                }
            }
            entry.view_op = Some(view_op);
        }
        if let Some(recipe) = self.pending_recipe.take()
            && let Some(entry) = self.residency.get_mut(&self.out_ids[0])
        {
            entry.recipe = Some(recipe);
        }
        self.finish_op();
        Ok(())
    }

    /// Counts the op that ran, then takes the plan's steps for it.
    #[inline]
    fn finish_op(&mut self) {
        self.counters.ops += 1;
        self.now += 1;
        if self.allocator {
            self.sample_allocator();
        }
        // Without a budget there is nothing to plan, and nothing planned is pending.
        if self.config.policy.planned()
            && self.tracing()
            && (self.budget.is_some() || self.program.is_some() || !self.deferred.is_empty())
        {
            self.follow_plan();
        }
    }

    /// Reads the allocator's figures: this thread's stream plus the workers' streams (as they
    /// last read theirs).
    fn sample_allocator(&mut self) {
        let Some(own) = super::allocator_usage::<B>(&self.runner.device()) else {
            return;
        };
        let total = own + self.transfers.memory();
        self.counters.allocator = Some(total);
        self.counters.allocator_peak = Some(
            self.counters
                .allocator_peak
                .map_or(total, |peak| peak.max(total)),
        );
    }

    /// Whether the plan keeps a recipe for the output of the op recorded last.
    #[inline]
    fn wants_recipe(&self) -> bool {
        let Some(active) = &self.program else {
            return false;
        };
        let Some(pos) = self.recorder.position_of_last() else {
            return false;
        };
        self.outputs.len() == 1
            && active
                .program
                .recipes
                .get(pos)
                .is_some_and(|r| !r.is_empty())
    }

    /// Whether every input of the op in progress could leave the device itself (it is
    /// contiguous, or has a recipe): a recipe that pinned an input that can never leave would
    /// hold its bytes for nothing.
    fn inputs_can_leave(&self) -> bool {
        self.inputs.iter().all(|(id, _)| {
            self.residency
                .get(id)
                .is_none_or(|e| !e.strided || e.recipe.is_some())
        })
    }

    /// Whether the op in progress reads an input for the last time.
    fn consumes_any(&self) -> bool {
        self.inputs
            .iter()
            .any(|(_, status)| *status == TensorStatus::ReadWrite)
    }

    /// Whether the op consumes (reads for the last time) a tensor that a recipe still needs.
    #[inline]
    fn consumes_pinned(&self) -> bool {
        self.inputs
            .iter()
            .any(|(id, status)| *status == TensorStatus::ReadWrite && self.residency.is_pinned(id))
    }

    /// Marks inputs of `op` read-only so that they stay in the handle container: all of them
    /// when `recipe` (then a copy of the op becomes the output's recipe, pinning them), else
    /// the pinned ones it consumes.
    fn keep_inputs(&mut self, op: &mut OperationIr, recipe: bool) {
        let mut ids: Vec<TensorId> = Vec::new();
        for &(id, status) in &self.inputs {
            if ids.contains(&id) {
                continue;
            }
            if recipe || (status == TensorStatus::ReadWrite && self.residency.is_pinned(&id)) {
                ids.push(id);
            }
        }
        op.mark_read_only(&ids);
        if recipe {
            for id in &ids {
                if let Some(entry) = self.residency.get_mut(id) {
                    entry.pins += 1;
                }
            }
            self.pending_recipe = Some(Box::new(Recipe {
                op: op.clone(),
                inputs: ids,
            }));
        }
    }

    /// Burn is done with a tensor (consumed or dropped it): it leaves the books, unless a
    /// recipe still needs it, in which case it stays as an orphan until the recipe is done.
    /// Returns whether it left.
    fn release_by_burn(&mut self, id: &TensorId) -> bool {
        match self.residency.get_mut(id) {
            Some(entry) if entry.pins > 0 => {
                entry.orphan = true;
                false
            }
            _ => {
                self.forget(id);
                true
            }
        }
    }

    /// Lists the op's inputs (in `self.inputs`), recording each when `record`, and returns
    /// the bytes of the distinct ones and of those not on the device (to fetch, wait for or
    /// recompute).
    fn gather_inputs<'a>(
        &mut self,
        inputs: impl Iterator<Item = &'a TensorIr>,
        record: bool,
    ) -> (u64, u64) {
        self.inputs.clear();
        self.inputs_strided = false;
        let (mut input_bytes, mut absent_bytes) = (0, 0);
        for t in inputs {
            let seen = self.inputs.iter().any(|(id, _)| *id == t.id);
            self.inputs.push((t.id, t.status));
            let bytes = match self.residency.get(&t.id) {
                Some(entry) => {
                    self.inputs_strided |= entry.strided;
                    if !seen {
                        input_bytes += entry.bytes;
                        if !entry.state.on_device() {
                            // Fetches in flight are counted already but must be waited for.
                            absent_bytes += entry.bytes;
                        }
                    }
                    entry.bytes
                }
                None => bytes_of(&t.shape, t.dtype),
            };
            if record {
                self.recorder.input(t, bytes);
            }
        }
        (input_bytes, absent_bytes)
    }

    /// Keeps the budget for an op whose inputs are in `self.inputs`: its inputs and outputs
    /// must fit at once; other tensors are offloaded to make room, then its inputs brought
    /// back (fetched, waited for, or recomputed).
    fn fit(
        &mut self,
        input_bytes: u64,
        absent_bytes: u64,
        output_bytes: u64,
        name: impl FnOnce() -> String,
    ) -> Result<(), SwapError> {
        let needed = input_bytes + output_bytes;
        self.counters.largest_op = self.counters.largest_op.max(needed);
        if let Some(budget) = self.budget()
            && needed > budget
        {
            return Err(SwapError::OpExceedsBudget {
                op: name(),
                needed,
                budget,
            });
        }
        self.fitting = true;
        let result = self.put_inputs_in_place(absent_bytes, output_bytes);
        self.fitting = false;
        result
    }

    /// Brings the op's absent inputs back one by one (each making its own room: a
    /// recomputation may need its own inputs back first), then makes room for its outputs.
    /// The op's inputs are protected throughout, so room made later never takes back what
    /// was brought earlier.
    fn put_inputs_in_place(
        &mut self,
        absent_bytes: u64,
        output_bytes: u64,
    ) -> Result<(), SwapError> {
        if absent_bytes > 0 {
            for i in 0..self.inputs.len() {
                let id = self.inputs[i].0;
                if self.residency.is_absent(&id) {
                    self.bring(id)?;
                }
            }
        }
        self.reserve(output_bytes)
    }

    /// Whether room-making must leave `id` alone.
    fn protected(&self, id: &TensorId) -> bool {
        self.protect.contains(id) || (self.fitting && self.inputs.iter().any(|(i, _)| i == id))
    }

    /// Makes room for `bytes` more resident bytes, never touching the current op's inputs
    /// or the protected tensors.
    fn reserve(&mut self, bytes: u64) -> Result<(), SwapError> {
        if let Some(budget) = self.budget() {
            let after = self.counters.resident + bytes;
            if after > budget {
                self.make_room(after - budget, true)?;
            }
        }
        Ok(())
    }

    /// Puts a tensor that is not on the device back there: a fetch in flight is waited for,
    /// an offloaded one fetched on this thread, an evicted one recomputed.
    fn bring(&mut self, id: TensorId) -> Result<(), SwapError> {
        let Some(entry) = self.residency.get(&id) else {
            return Ok(());
        };
        match entry.state {
            State::Resident | State::Offloading => Ok(()),
            State::Offloaded(_) => {
                let bytes = entry.bytes;
                self.protect.push(id);
                let room = self.reserve(bytes);
                self.protect.pop();
                room?;
                let start = Instant::now();
                let fetched = self.fetch(id);
                self.counters.exposed_wait_nanos += start.elapsed().as_nanos() as u64;
                fetched
            }
            State::Fetching => {
                let start = Instant::now();
                let result = self.wait_for(id);
                self.counters.exposed_wait_nanos += start.elapsed().as_nanos() as u64;
                result
            }
            State::Evicted => self.recompute(id),
        }
    }

    /// Settles transfers until the one of `id` has; an error when its fetch failed.
    fn wait_for(&mut self, id: TensorId) -> Result<(), SwapError> {
        while matches!(
            self.residency.get(&id).map(|e| &e.state),
            Some(State::Fetching)
        ) {
            let Some(done) = self.transfers.next() else {
                break;
            };
            self.settle(done);
        }
        match self.residency.get(&id) {
            Some(entry) if !entry.state.on_device() => Err(SwapError::TransferFailed {
                tensor: id.value(),
                bytes: entry.bytes,
                reason: "the fetch from host memory failed".into(),
            }),
            _ => Ok(()),
        }
    }

    /// Rematerialises an evicted tensor by replaying its recipe, bringing back the recipe's
    /// inputs first (recursively, when they were evicted too).
    fn recompute(&mut self, id: TensorId) -> Result<(), SwapError> {
        let Some(entry) = self.residency.get_mut(&id) else {
            return Ok(());
        };
        let bytes = entry.bytes;
        let Some(recipe) = entry.recipe.take() else {
            return Err(SwapError::TransferFailed {
                tensor: id.value(),
                bytes,
                reason: "the tensor left the device and cannot be brought back".into(),
            });
        };
        let _span =
            tracing::debug_span!("burn_swap::recompute", tensor = id.value(), bytes).entered();
        let start = Instant::now();
        let base = self.protect.len();
        self.protect.push(id);
        self.protect.extend_from_slice(&recipe.inputs);
        let mut result = Ok(());
        for &input in &recipe.inputs {
            result = self.bring(input);
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() {
            result = self.reserve(bytes);
        }
        self.protect.truncate(base);
        if let Err(error) = result {
            if let Some(entry) = self.residency.get_mut(&id) {
                entry.recipe = Some(recipe);
            }
            return Err(error);
        }
        let Recipe { op, inputs } = *recipe;
        self.runner.register_op(op);
        if let Some(entry) = self.residency.get_mut(&id) {
            entry.state = State::Resident;
        }
        self.counters.resident += bytes;
        self.counters.note_resident(self.counters.resident);
        for input in inputs {
            self.unpin(input);
        }
        self.counters.recomputes += 1;
        self.events.recomputes += 1;
        self.counters.recompute_nanos += start.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// One recipe less needs `id`; an orphan nobody needs any more is released.
    fn unpin(&mut self, id: TensorId) {
        let Some(entry) = self.residency.get_mut(&id) else {
            return;
        };
        entry.pins = entry.pins.saturating_sub(1);
        if entry.pins == 0 && entry.orphan {
            self.release(id);
        }
    }

    /// Removes a tensor from the books and from the device.
    fn release(&mut self, id: TensorId) {
        if let Some(entry) = self.forget(&id)
            && entry.state.on_device()
        {
            self.runner
                .register_op(OperationIr::Drop(entry.ir(id, TensorStatus::ReadWrite)));
        }
    }

    /// Prepares a native op: fetches its inputs and makes room for its outputs, as
    /// [`native_output_bytes`] predicts them.
    pub fn native_prepare(
        &mut self,
        name: &'static str,
        inputs: &[TensorIr],
    ) -> Result<(), SwapError> {
        if self.transfers.in_flight() > 0 {
            self.poll_transfers();
        }
        let (input_bytes, absent_bytes) = self.gather_inputs(inputs.iter(), false);
        let output_bytes = native_output_bytes(name, inputs);
        self.fit(input_bytes, absent_bytes, output_bytes, || {
            format!("Native.{name}")
        })?;
        self.native_base = self.counters.resident;
        self.native_out = 0;
        self.out_ids.clear();
        Ok(())
    }

    /// Takes an input's handle for a native op (removing it from the books when it is the
    /// input's last use, unless a recipe still needs it).
    pub fn native_take(&mut self, tensor: &TensorIr) -> B::Handle {
        self.take_for_read(tensor)
    }

    /// Registers an output of a native op; returns its id.
    pub fn native_output(&mut self, handle: B::Handle, shape: Shape, dtype: DType) -> TensorId {
        let id = self
            .runner
            .register_tensor(handle, shape.clone(), dtype, self.runner.clone())
            .into_ir()
            .id;
        self.native_out += bytes_of(&shape, dtype);
        self.insert_resident(id, shape, dtype);
        if self.inputs_strided
            && let Some(entry) = self.residency.get_mut(&id)
        {
            // A native op may keep its input's layout.
            entry.strided = true;
        }
        self.out_ids.push(id);
        id
    }

    /// Whether the next op is to be timed (the trace's profiled iterations).
    pub fn times_next_op(&self) -> bool {
        self.tracing() && self.recorder.timing()
    }

    /// Records a native op once it ran, with its wall time when it was timed.
    pub fn native_finish(
        &mut self,
        name: &'static str,
        inputs: &[TensorIr],
        outputs: &[TensorIr],
        nanos: Option<u64>,
    ) {
        let during = self.native_base + self.native_out;
        self.counters.note_resident(during);
        let inputs: Vec<&TensorIr> = inputs.iter().collect();
        let outputs: Vec<&TensorIr> = outputs.iter().collect();
        self.record_named(name, &inputs, &outputs);
        if let (Some(nanos), true) = (nanos, self.tracing()) {
            self.recorder.set_last_nanos(nanos);
        }
        self.finish_op();
    }

    /// Releases what an op that failed (and so never ran) was handed for its last use: Burn
    /// will never name those tensors again.
    pub fn abandon_op(&mut self) {
        for i in 0..self.inputs.len() {
            let (id, status) = self.inputs[i];
            if status != TensorStatus::ReadWrite {
                continue;
            }
            if self.residency.is_pinned(&id) {
                self.release_by_burn(&id);
            } else {
                self.release(id);
            }
        }
        self.inputs.clear();
    }

    /// Removes a tensor from the books, taking its bytes off the resident or host count;
    /// its recipe, if any, releases the inputs it pinned.
    fn forget(&mut self, id: &TensorId) -> Option<Entry> {
        let mut entry = self.residency.remove(id)?;
        match entry.state {
            State::Offloaded(ref copy) => self.counters.host -= copy.bytes(),
            State::Evicted => {}
            State::Offloading => {
                self.offloading_bytes -= entry.bytes;
                self.counters.resident -= entry.bytes;
            }
            State::Resident | State::Fetching => self.counters.resident -= entry.bytes,
        }
        if let Some(recipe) = entry.recipe.take() {
            for input in recipe.inputs {
                self.unpin(input);
            }
        }
        Some(entry)
    }

    fn record_named(&mut self, name: &'static str, inputs: &[&TensorIr], outputs: &[&TensorIr]) {
        if !self.tracing() {
            return;
        }
        let live_before = self.counters.resident + self.counters.host;
        self.recorder
            .begin(signature::name_key(name), || name.to_string());
        for t in inputs {
            self.recorder.input(t, bytes_of(&t.shape, t.dtype));
        }
        self.recorder.outputs_follow();
        for t in outputs {
            self.recorder.output(t, bytes_of(&t.shape, t.dtype));
        }
        self.recorder.end(OpCounters {
            nanos: 0,
            live_before,
            events: std::mem::take(&mut self.events),
            resident_during: self.counters.resident,
        });
    }

    fn drop_tensor(&mut self, id: TensorId, op: OperationIr) {
        self.pin_for_views(id);
        if self.residency.is_pinned(&id) {
            // A recipe still reads it: it stays, as an orphan.
            self.release_by_burn(&id);
            return;
        }
        match self.forget(&id) {
            // Nothing of it is left on the device.
            Some(entry) if !entry.state.on_device() => {}
            _ => self.runner.register_op(op),
        }
    }

    /// Frees at least `deficit` resident bytes, never touching a tensor the current op uses
    /// (when `protect_inputs`) or a protected one: first by letting offloads in flight finish,
    /// then by offloading on this thread the tensors the reactive policy picks. Tensors whose
    /// offload fails stay resident and the next candidate is tried.
    fn make_room(&mut self, deficit: u64, protect_inputs: bool) -> Result<(), SwapError> {
        let _span = tracing::debug_span!("burn_swap::make_room", deficit).entered();
        let target = self.counters.resident.saturating_sub(deficit);
        if self.offloading_bytes > 0 {
            let start = Instant::now();
            while self.counters.resident > target && self.offloading_bytes > 0 {
                let Some(done) = self.transfers.next() else {
                    break;
                };
                self.settle(done);
            }
            self.counters.exposed_wait_nanos += start.elapsed().as_nanos() as u64;
            if self.counters.resident <= target {
                return Ok(());
            }
        }
        let result = self.offload_victims(self.counters.resident - target, protect_inputs);
        if result.is_err() && self.transfers.in_flight() > 0 {
            // Fetches in flight hold room that only they can give back once landed: let every
            // transfer finish, then choose again.
            let start = Instant::now();
            while let Some(done) = self.transfers.next() {
                self.settle(done);
            }
            self.counters.exposed_wait_nanos += start.elapsed().as_nanos() as u64;
            if self.counters.resident <= target {
                return Ok(());
            }
            return self.offload_victims(self.counters.resident - target, protect_inputs);
        }
        result
    }

    /// Offloads on this thread the resident tensors the reactive policy picks to free
    /// `deficit` bytes.
    fn offload_victims(&mut self, deficit: u64, protect_inputs: bool) -> Result<(), SwapError> {
        let mut candidates = std::mem::take(&mut self.candidates);
        candidates.clear();
        for (id, entry) in self.residency.entries.iter() {
            if matches!(entry.state, State::Resident)
                && (!entry.strided || entry.recipe.is_some() || self.can_rebuild(entry))
                && !(protect_inputs && self.inputs.iter().any(|(i, _)| i == id))
                && !self.protect.contains(id)
            {
                candidates.push(Candidate {
                    key: id.value(),
                    bytes: entry.bytes,
                    last_use: entry.last_use,
                });
            }
        }
        let planned = reactive::choose_victims(
            &mut candidates,
            deficit,
            self.now,
            self.config.eviction,
            &self.link,
        );
        let mut result = Ok(());
        if planned.is_some() {
            let mut freed = 0;
            let mut last_error = None;
            for c in candidates.iter() {
                if freed >= deficit {
                    break;
                }
                let id = TensorId::new(c.key);
                if self.residency.get(&id).is_some_and(|e| e.strided) {
                    // Strided: it leaves by recomputation, from a recipe made now if needed.
                    self.make_view_recipe(id);
                    self.evict(id);
                    freed += c.bytes;
                    continue;
                }
                match self.offload(id) {
                    Ok(()) => freed += c.bytes,
                    Err(e) => last_error = Some(e),
                }
            }
            if freed < deficit {
                result = Err(last_error.unwrap_or(SwapError::TransferFailed {
                    tensor: 0,
                    bytes: deficit,
                    reason: "not enough tensors could be offloaded".into(),
                }));
            }
        } else {
            result = Err(SwapError::TransferFailed {
                tensor: 0,
                bytes: deficit,
                reason: "not enough resident tensors outside the op to offload".into(),
            });
        }
        self.candidates = candidates;
        result
    }

    /// Offloads a resident tensor on this thread (the reactive path): the op waits for it.
    fn offload(&mut self, id: TensorId) -> Result<(), SwapError> {
        let compression = self.compression_policy();
        let Some(entry) = self.residency.get(&id) else {
            return Ok(());
        };
        let bytes = entry.bytes;
        let _span =
            tracing::debug_span!("burn_swap::offload", tensor = id.value(), bytes).entered();
        let start = Instant::now();
        // Read-only, so that a failed copy leaves the device handle in place: a failed
        // offload never loses data.
        let ir = entry.ir(id, TensorStatus::ReadOnly);
        let result = if host::faults::take() {
            Err("injected offload failure".to_string())
        } else {
            let handle = self.runner.get_tensor_handle(&ir);
            transfer::copy_out::<B>(
                handle,
                ir.shape.clone(),
                ir.dtype,
                &compression,
                self.peers.as_ref(),
                &self.runner.device(),
            )
        };
        let nanos = start.elapsed().as_nanos() as u64;
        self.counters.exposed_wait_nanos += nanos;
        match result {
            Ok((copy, codec_nanos, on_device)) => {
                self.runner.register_op(OperationIr::Drop(TensorIr {
                    status: TensorStatus::ReadWrite,
                    ..ir
                }));
                self.counters.resident -= bytes;
                self.note_offloaded(id, &copy, nanos, codec_nanos);
                self.counters.device_compressed += u64::from(on_device);
                if let Some(entry) = self.residency.get_mut(&id) {
                    entry.state = State::Offloaded(Box::new(copy));
                }
                self.events.offloads += 1;
                Ok(())
            }
            Err(error) => {
                self.counters.failed_offloads += 1;
                tracing::warn!(tensor = id.value(), bytes, %error, "burn-swap: offload failed; the tensor stays resident");
                Err(SwapError::TransferFailed {
                    tensor: id.value(),
                    bytes,
                    reason: error,
                })
            }
        }
    }

    /// Books an offload that completed: its host copy (raw or compressed) holds `copy.bytes()`.
    fn note_offloaded(&mut self, id: TensorId, copy: &HostCopy, nanos: u64, codec_nanos: u64) {
        let Some(entry) = self.residency.get(&id) else {
            return;
        };
        let (raw, moved) = (entry.bytes, copy.stored_bytes());
        self.counters.host += copy.bytes();
        self.counters.peak_host = self.counters.peak_host.max(self.counters.host);
        self.counters.offloads += 1;
        self.counters.offloaded_bytes += raw;
        self.counters.offload_nanos += nanos;
        self.counters.raw_bytes += raw;
        self.counters.moved_bytes += moved;
        self.counters.codec_nanos += codec_nanos;
        if copy.compressed() {
            self.counters.compressed_offloads += 1;
        }
        if self.config.compression != Compression::Off {
            let stat = self
                .counters
                .moves
                .entry((entry.dims.clone(), entry.dtype))
                .or_default();
            stat.0 += 1;
            stat.1 += raw;
            stat.2 += moved;
        }
    }

    /// The compression policy of offloads: the configured mode and, for `Auto`, the measured
    /// link bandwidth and CPU codec throughput.
    fn compression_policy(&mut self) -> crate::compress::Policy {
        let mode = self.config.compression;
        let (mut link_bandwidth, mut codec_bandwidth) = (None, None);
        if let Compression::Auto { .. } = mode {
            link_bandwidth = self.links().and_then(|l| match l.fits() {
                (Some(out), Some(back)) => Some(out.bandwidth.min(back.bandwidth)),
                _ => None,
            });
            codec_bandwidth = Some(
                *self
                    .codec_bandwidth
                    .get_or_insert_with(crate::compress::measure_cpu_codec),
            );
        }
        crate::compress::Policy {
            mode,
            link_bandwidth,
            codec_bandwidth,
        }
    }

    /// Fetches an offloaded tensor on this thread (the caller made room), decompressing it
    /// when it was compressed.
    fn fetch(&mut self, id: TensorId) -> Result<(), SwapError> {
        let Some(entry) = self.residency.get_mut(&id) else {
            return Ok(());
        };
        let State::Offloaded(copy) = core::mem::replace(&mut entry.state, State::Resident) else {
            return Ok(());
        };
        let bytes = entry.bytes;
        let _span = tracing::debug_span!("burn_swap::fetch", tensor = id.value(), bytes).entered();
        let start = Instant::now();
        let stored = copy.bytes();
        let compressed = copy.compressed();
        if let Some(Ok(handle)) = transfer::device_route::<B>(&copy, &self.runner.device()) {
            // On the device: only the compressed bytes crossed the link, or the pieces came
            // back from the peers by peer copies.
            if compressed {
                self.counters.codec_nanos += start.elapsed().as_nanos() as u64;
                self.counters.device_decompressed += 1;
            }
            if let Some(entry) = self.residency.get(&id) {
                let ir = entry.ir(id, TensorStatus::NotInit);
                self.install(handle, ir);
            }
            self.note_fetched_here(bytes, stored, start);
            return Ok(());
        }
        let data = match copy.into_data() {
            Ok(data) => data,
            Err(error) => {
                // A corrupt host copy: the tensor cannot come back.
                self.counters.host -= stored;
                if let Some(entry) = self.residency.get_mut(&id) {
                    entry.state = State::Evicted;
                    entry.recipe = None;
                }
                return Err(SwapError::TransferFailed {
                    tensor: id.value(),
                    bytes,
                    reason: error.to_string(),
                });
            }
        };
        if compressed {
            self.counters.codec_nanos += start.elapsed().as_nanos() as u64;
        }
        host::fetch(&self.runner, id, data);
        self.note_fetched_here(bytes, stored, start);
        Ok(())
    }

    /// Books a fetch made on the op's thread: `bytes` back on the device, `stored` off the
    /// host, since `start`.
    fn note_fetched_here(&mut self, bytes: u64, stored: u64, start: Instant) {
        self.events.fetches += 1;
        self.counters.host -= stored;
        self.counters.resident += bytes;
        self.counters.note_resident(self.counters.resident);
        self.counters.fetches += 1;
        self.counters.fetched_bytes += bytes;
        self.counters.fetch_nanos += start.elapsed().as_nanos() as u64;
    }

    /// Starts offloading a resident tensor on the send worker: it stays usable, and its device
    /// copy goes when the copy has completed.
    fn start_offload(&mut self, id: TensorId) -> bool {
        let Some(entry) = self.residency.get(&id) else {
            return false;
        };
        if !matches!(entry.state, State::Resident) || entry.strided {
            return false;
        }
        let ir = entry.ir(id, TensorStatus::ReadOnly);
        let bytes = entry.bytes;
        let handle = self.runner.get_tensor_handle(&ir);
        let compression = self.compression_policy();
        let route = transfer::Route {
            compression,
            device: self.runner.device(),
            peers: self.peers.clone(),
        };
        if !self
            .transfers
            .offload(id, handle, ir.shape, ir.dtype, route)
        {
            return self.offload(id).is_ok();
        }
        if let Some(entry) = self.residency.get_mut(&id) {
            entry.state = State::Offloading;
        }
        self.offloading_bytes += bytes;
        self.events.offloads += 1;
        true
    }

    /// Starts fetching an offloaded tensor on the receive worker, when its bytes fit in the
    /// budget now; `false` when they do not (the caller retries later).
    fn start_prefetch(&mut self, id: TensorId) -> bool {
        let budget = self.budget();
        let resident = self.counters.resident;
        let Some(entry) = self.residency.get_mut(&id) else {
            return true;
        };
        if !matches!(entry.state, State::Offloaded(_)) {
            return true;
        }
        let bytes = entry.bytes;
        if budget.is_some_and(|b| resident + bytes > b) {
            return false;
        }
        let State::Offloaded(copy) = core::mem::replace(&mut entry.state, State::Fetching) else {
            return true;
        };
        let stored = copy.bytes();
        let device = self.runner.device();
        if let Err(copy) = self.transfers.fetch(id, *copy, device, false) {
            if let Some(entry) = self.residency.get_mut(&id) {
                entry.state = State::Offloaded(Box::new(copy));
            }
            // The receive worker is gone: fetch here (an error surfaces at the next use).
            let _ = self.fetch(id);
            return true;
        }
        self.counters.host -= stored;
        self.counters.resident += bytes;
        self.counters.note_resident(self.counters.resident);
        self.events.fetches += 1;
        true
    }

    /// Settles every transfer that has finished, without waiting.
    fn poll_transfers(&mut self) {
        while let Some(done) = self.transfers.try_next() {
            self.settle(done);
        }
    }

    /// Applies a finished transfer to the books.
    fn settle(&mut self, done: Done<B>) {
        let id = done.id();
        let Some(entry) = self.residency.get_mut(&id) else {
            // Burn dropped it meanwhile: the worker's copy is all that is left; it goes.
            return;
        };
        let bytes = entry.bytes;
        match done {
            Done::Offloaded {
                result,
                nanos,
                codec_nanos,
                on_device,
                ..
            } => {
                if !matches!(entry.state, State::Offloading) {
                    return;
                }
                self.offloading_bytes -= bytes;
                let in_use = self.protected(&id);
                let Some(entry) = self.residency.get_mut(&id) else {
                    return;
                };
                if in_use {
                    // The op about to run reads it: the device copy stays, the host copy goes.
                    entry.state = State::Resident;
                    return;
                }
                match result {
                    Ok(copy) => {
                        let ir = entry.ir(id, TensorStatus::ReadWrite);
                        self.runner.register_op(OperationIr::Drop(ir));
                        self.counters.resident -= bytes;
                        self.note_offloaded(id, &copy, nanos, codec_nanos);
                        self.counters.device_compressed += u64::from(on_device);
                        if let Some(entry) = self.residency.get_mut(&id) {
                            entry.state = State::Offloaded(Box::new(copy));
                        }
                    }
                    Err(reason) => {
                        entry.state = State::Resident;
                        self.counters.failed_offloads += 1;
                        tracing::warn!(tensor = id.value(), bytes, %reason, "burn-swap: offload failed; the tensor stays resident");
                    }
                }
            }
            Done::Fetched {
                result,
                nanos,
                codec_nanos,
                on_device,
                ..
            } => {
                if !matches!(entry.state, State::Fetching) {
                    return;
                }
                match result {
                    Ok(handle) => {
                        let ir = entry.ir(id, TensorStatus::NotInit);
                        entry.state = State::Resident;
                        self.install(handle, ir);
                        self.counters.fetches += 1;
                        self.counters.fetched_bytes += bytes;
                        self.counters.fetch_nanos += nanos;
                        self.counters.codec_nanos += codec_nanos;
                        self.counters.device_decompressed += u64::from(on_device);
                    }
                    Err(reason) => {
                        // The bytes are gone with the failed allocation: the tensor cannot
                        // come back, and its next use fails with a transfer error.
                        tracing::error!(tensor = id.value(), bytes, %reason, "burn-swap: fetch failed");
                        entry.state = State::Evicted;
                        entry.recipe = None;
                        self.counters.resident -= bytes;
                    }
                }
            }
        }
    }

    /// Puts a fetched handle in the handle container under the tensor's id: registered
    /// under a fresh id, then renamed by a same-shape reshape, which moves no bytes.
    fn install(&mut self, handle: B::Handle, out: TensorIr) {
        let fresh = self
            .runner
            .register_tensor(handle, out.shape.clone(), out.dtype, self.runner.clone())
            .into_ir();
        let input = TensorIr {
            status: TensorStatus::ReadWrite,
            ..fresh
        };
        let dtype = out.dtype;
        let reshape = burn_ir::BaseOperationIr::Reshape(burn_ir::ShapeOpIr { input, out });
        self.runner.register_op(if dtype.is_float() {
            OperationIr::BaseFloat(reshape)
        } else if dtype.is_int() {
            OperationIr::BaseInt(reshape)
        } else {
            OperationIr::BaseBool(reshape)
        });
    }

    /// Takes the plan's steps after the op that ran last, plans when a new schedule was
    /// profiled, and retries deferred prefetches.
    fn follow_plan(&mut self) {
        if !self.deferred.is_empty() {
            let mut deferred = std::mem::take(&mut self.deferred);
            deferred.retain(|&id| !self.start_prefetch(id));
            self.deferred = deferred;
        }
        let Some(pos) = self.recorder.position_of_last() else {
            return;
        };
        if pos + 1 == self.recorder_period() {
            self.maybe_plan();
        }
        let Some(active) = self.program.as_mut() else {
            return;
        };
        if pos >= active.program.period {
            return;
        }
        let steps = std::mem::take(&mut active.program.after[pos]);
        for &step in &steps {
            match step {
                Step::Offload { port, tag } => {
                    if let Some(id) = self.port(port)
                        && self.start_offload(id)
                        && let Some(active) = self.program.as_mut()
                    {
                        active.tags.insert(tag, id);
                    }
                }
                Step::Evict { port } => {
                    if let Some(id) = self.port(port) {
                        self.evict(id);
                    }
                }
                Step::Prefetch { tag } => {
                    let id = self.program.as_mut().and_then(|a| a.tags.remove(&tag));
                    if let Some(id) = id {
                        if let Some(active) = self.program.as_mut() {
                            active.fetching.insert(tag, id);
                        }
                        if !self.start_prefetch(id) {
                            self.deferred.push(id);
                        }
                    }
                }
            }
        }
        if let Some(active) = self.program.as_mut() {
            active.program.after[pos] = steps;
        }
        self.await_fetches((pos + 1) % self.program.as_ref().map_or(1, |a| a.program.period));
    }

    /// Seed 003's waits on the compute side: before the op at `pos`, the planned fetches it
    /// reads must have landed (`Program::fetch_waits`). A fetch that failed surfaces at the
    /// op's own use of the tensor, which fetches again on this thread.
    fn await_fetches(&mut self, pos: usize) {
        let Some(active) = self.program.as_mut() else {
            return;
        };
        let Some(tags) = active.program.fetch_waits.get(pos) else {
            return;
        };
        if tags.is_empty() {
            return;
        }
        let ids: Vec<TensorId> = tags
            .iter()
            .filter_map(|tag| active.fetching.remove(tag))
            .collect();
        for id in ids {
            if matches!(
                self.residency.get(&id).map(|e| &e.state),
                Some(State::Fetching)
            ) {
                let start = Instant::now();
                let _ = self.wait_for(id);
                self.counters.exposed_wait_nanos += start.elapsed().as_nanos() as u64;
                self.counters.planned_waits += 1;
            }
        }
    }

    fn recorder_period(&self) -> usize {
        self.recorder.profiled_schedule().map_or(0, |(p, _)| p)
    }

    /// The id of the tensor at `port` of the op that ran last.
    fn port(&self, port: Port) -> Option<TensorId> {
        match port {
            Port::Input(i) => self.inputs.get(i as usize).map(|(id, _)| *id),
            Port::Output(i) => self.out_ids.get(i as usize).copied(),
        }
    }

    /// Burn is about to let go of `source`: the strided views still made from it get their
    /// recipes now (pinning it), so that they can still leave by recomputation.
    fn pin_for_views(&mut self, source: TensorId) {
        let Some(views) = self.view_sources.remove(&source) else {
            return;
        };
        for view in views {
            let rebuildable = self
                .residency
                .get(&view)
                .is_some_and(|e| e.view_op.is_some() && self.can_rebuild(e));
            if rebuildable {
                self.make_view_recipe(view);
            }
        }
    }

    /// Whether a strided tensor's kept op can still be replayed: every input is in the books.
    fn can_rebuild(&self, entry: &Entry) -> bool {
        entry
            .view_op
            .as_ref()
            .is_some_and(|op| op.inputs().all(|t| self.residency.get(&t.id).is_some()))
    }

    /// Turns a strided tensor's kept op into its recipe: its inputs (all in the books, see
    /// [`Self::can_rebuild`]) are pinned from now on.
    fn make_view_recipe(&mut self, id: TensorId) {
        let Some(entry) = self.residency.get_mut(&id) else {
            return;
        };
        if entry.recipe.is_some() {
            return;
        }
        let Some(mut op) = entry.view_op.take() else {
            return;
        };
        let mut ids: Vec<TensorId> = Vec::new();
        for t in op.inputs() {
            if !ids.contains(&t.id) {
                ids.push(t.id);
            }
        }
        op.mark_read_only(&ids);
        for input in &ids {
            if let Some(e) = self.residency.get_mut(input) {
                e.pins += 1;
            }
        }
        if let Some(entry) = self.residency.get_mut(&id) {
            entry.recipe = Some(Box::new(Recipe {
                op: *op,
                inputs: ids,
            }));
        }
    }

    /// Drops a resident tensor that has a recipe; it is recomputed before its next use.
    fn evict(&mut self, id: TensorId) {
        let Some(entry) = self.residency.get_mut(&id) else {
            return;
        };
        if !matches!(entry.state, State::Resident) || entry.recipe.is_none() {
            return;
        }
        let ir = entry.ir(id, TensorStatus::ReadWrite);
        entry.state = State::Evicted;
        self.counters.resident -= entry.bytes;
        self.counters.evictions += 1;
        self.runner.register_op(OperationIr::Drop(ir));
    }

    /// Plans once per profiled schedule: the last complete iteration's trace and profile go
    /// to the planner, whose program is followed from the next iteration on.
    fn maybe_plan(&mut self) {
        let Some(key) = self.recorder.profiled_schedule() else {
            return;
        };
        let Some(budget) = self.budget() else {
            return;
        };
        if self.planned_for == Some(key) {
            return;
        }
        self.planned_for = Some(key);
        let start = Instant::now();
        let Some(trace) = self.recorder.trace() else {
            return;
        };
        let links = if self.config.policy == crate::config::Policy::RecomputeOnly {
            None
        } else {
            self.links()
        };
        let profile = crate::plan::profile::Profile::new(&trace, links);
        let program = program::build(&trace, &profile, budget, self.config.policy);
        tracing::debug!(
            period = program.period,
            offloads = program.offloads,
            recomputes = program.recomputes,
            predicted_peak = program.predicted_peak_bytes,
            "burn-swap: planned the iteration"
        );
        self.counters.plans += 1;
        self.counters.planning_nanos += start.elapsed().as_nanos() as u64;
        self.counters.predicted_peak = Some(program.predicted_peak_bytes);
        self.counters.predicted_exposed_nanos =
            Some((program.predicted_exposed_seconds * 1e9) as u64);
        self.program = Some(Active {
            program,
            tags: Default::default(),
            fetching: Default::default(),
        });
    }

    /// The copy throughput between device and host, measured on first request with
    /// temporary tensors of 4 KiB to 8 MiB (those that fit in half the budget's headroom),
    /// through the transfer workers (the path planned transfers take, hand-over latency
    /// included) or, when they cannot run, on this thread; the fitted model then also scores
    /// the reactive policy's choices. `None` when fewer than two sizes fit or the measurement
    /// failed.
    pub fn links(&mut self) -> Option<crate::plan::profile::Links> {
        if self.links.is_none() {
            let headroom = self
                .budget()
                .map_or(u64::MAX, |b| b.saturating_sub(self.counters.resident));
            let sizes: Vec<u64> = [4u64 << 10, 64 << 10, 1 << 20, 8 << 20]
                .into_iter()
                .filter(|&s| s <= headroom / 2)
                .collect();
            if sizes.len() < 2 {
                return None;
            }
            let measured = match self.measure_worker_links(&sizes) {
                Some(links) => Ok(links),
                None => host::measure_links(&self.runner, &sizes),
            };
            match measured {
                Ok(links) => {
                    if let Some(model) = links.link_model() {
                        self.link = model;
                    }
                    self.links = Some(links);
                }
                Err(error) => {
                    tracing::warn!(%error, "burn-swap: could not measure copy throughput");
                    return None;
                }
            }
        }
        self.links.clone()
    }

    /// [`Engine::measure_worker_links`] for the given sizes, outside the budget (the caller
    /// makes sure they fit on the device).
    pub fn measure_transfers(&mut self, sizes: &[u64]) -> Option<crate::plan::profile::Links> {
        self.measure_worker_links(sizes)
    }

    /// Times round trips of temporary tensors (outside the books) through the send and
    /// receive workers, the fastest of three per size; `None` when a worker is unavailable.
    /// Each fetch is timed until its bytes are on the device.
    fn measure_worker_links(&mut self, sizes: &[u64]) -> Option<crate::plan::profile::Links> {
        use crate::plan::profile::{CopySample, Links};
        let _span = tracing::debug_span!("burn_swap::measure_links", sizes = sizes.len()).entered();
        // Transfers in flight first, so that each measured one is alone.
        while let Some(done) = self.transfers.next() {
            self.settle(done);
        }
        let mut links = Links {
            to_host: Vec::new(),
            to_device: Vec::new(),
        };
        let device = self.runner.device();
        for &bytes in sizes {
            let elements = (bytes / 4) as usize;
            let (mut down, mut up) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..3 {
                let ir = self
                    .runner
                    .register_tensor_data_desc(TensorData::new(vec![0f32; elements], [elements]));
                let read = TensorIr {
                    status: TensorStatus::ReadOnly,
                    ..ir.clone()
                };
                let handle = self.runner.get_tensor_handle(&read);
                let start = Instant::now();
                let off = crate::compress::Policy {
                    mode: Compression::Off,
                    link_bandwidth: None,
                    codec_bandwidth: None,
                };
                let route = transfer::Route {
                    compression: off,
                    device: device.clone(),
                    peers: self.peers.clone(),
                };
                let queued =
                    self.transfers
                        .offload(ir.id, handle, ir.shape.clone(), ir.dtype, route);
                let done = if queued { self.transfers.next() } else { None };
                self.runner.register_op(OperationIr::Drop(ir.clone()));
                let Some(Done::Offloaded {
                    result: Ok(copy), ..
                }) = done
                else {
                    return None;
                };
                down = down.min(start.elapsed().as_secs_f64());
                let start = Instant::now();
                if self
                    .transfers
                    .fetch(ir.id, copy, device.clone(), true)
                    .is_err()
                {
                    return None;
                }
                let Some(Done::Fetched {
                    result: Ok(handle), ..
                }) = self.transfers.next()
                else {
                    return None;
                };
                up = up.min(start.elapsed().as_secs_f64());
                drop(handle);
            }
            let bytes = 4 * elements as u64;
            links.to_host.push(CopySample {
                bytes,
                seconds: down,
            });
            links.to_device.push(CopySample { bytes, seconds: up });
        }
        Some(links)
    }

    /// Applies a new configuration; when the new budget is below what is resident, offloads at
    /// once so that the budget holds from now on. A new policy or budget is planned afresh.
    pub fn reconfigure(
        &mut self,
        config: SwapConfig,
        budget: Option<u64>,
    ) -> Result<(), SwapError> {
        if config.policy != self.config.policy || budget != self.budget {
            self.program = None;
            self.planned_for = None;
        }
        self.transfers.set_jitter(config.transfer_jitter_micros);
        if !self.peers.as_ref().is_some_and(|p| p.is(&config.peers)) {
            let device = self.runner.device();
            self.peers = super::peers::PeerPool::new(&config.peers, |peer| {
                super::measure_peer::<B>(&device, peer)
            });
        }
        self.config = config;
        self.budget = budget;
        if let Some(budget) = self.budget()
            && self.counters.resident > budget
        {
            self.inputs.clear();
            self.make_room(self.counters.resident - budget, false)?;
        }
        Ok(())
    }

    /// Makes room for `bytes` new bytes outside any op (a tensor created from data, or arriving
    /// from another device).
    fn admit(&mut self, bytes: u64, what: &'static str) -> Result<(), SwapError> {
        self.counters.largest_op = self.counters.largest_op.max(bytes);
        if let Some(budget) = self.budget() {
            if bytes > budget {
                return Err(SwapError::OpExceedsBudget {
                    op: what.to_string(),
                    needed: bytes,
                    budget,
                });
            }
            let after = self.counters.resident + bytes;
            if after > budget {
                self.inputs.clear();
                self.make_room(after - budget, false)?;
            }
        }
        Ok(())
    }

    fn insert_resident(&mut self, id: TensorId, shape: Shape, dtype: DType) {
        let bytes = bytes_of(&shape, dtype);
        self.counters.resident += bytes;
        self.counters.note_resident(self.counters.resident);
        self.residency.insert(
            id,
            Entry::new(bytes, Dims::from_slice(shape.as_slice()), dtype, self.now),
        );
    }

    /// Registers a tensor made from host data (its `Init` op follows).
    pub fn register_data(&mut self, data: TensorData) -> Result<TensorIr, SwapError> {
        self.admit(bytes_of(&data.shape, data.dtype), "FromData")?;
        let ir = self.runner.register_tensor_data_desc(data);
        self.insert_resident(ir.id, ir.shape.clone(), ir.dtype);
        Ok(ir)
    }

    /// Registers a tensor arriving from another device as a backend handle; returns its id.
    pub fn register_handle(
        &mut self,
        handle: B::Handle,
        shape: Shape,
        dtype: DType,
    ) -> Result<TensorId, SwapError> {
        self.admit(bytes_of(&shape, dtype), "Arrive")?;
        let ir = self
            .runner
            .register_tensor(handle, shape.clone(), dtype, self.runner.clone())
            .into_ir();
        self.insert_resident(ir.id, shape, dtype);
        let out = TensorIr {
            status: TensorStatus::NotInit,
            ..ir
        };
        self.record_named("Arrive", &[], &[&out]);
        self.inputs.clear();
        self.out_ids.clear();
        self.out_ids.push(out.id);
        self.finish_op();
        Ok(out.id)
    }

    /// Takes a tensor's handle out for a move to another device.
    pub fn take_handle(&mut self, tensor: &TensorIr) -> Result<B::Handle, SwapError> {
        self.ensure_resident(tensor)?;
        self.record_named("Depart", &[tensor], &[]);
        let handle = self.take_for_read(tensor);
        self.out_ids.clear();
        self.finish_op();
        Ok(handle)
    }

    /// The handle of a tensor that is on the device, for a read or a move; Burn's last use of
    /// it takes it out of the books (unless a recipe still needs it).
    fn take_for_read(&mut self, tensor: &TensorIr) -> B::Handle {
        let read = self.read_status(tensor);
        let handle = self.runner.get_tensor_handle(&read);
        self.consume_if_last(tensor);
        handle
    }

    /// `tensor` as the inner backend must be asked for it: Burn's last use of a tensor a
    /// recipe still needs (or will need: the source of a kept view) becomes a read-only one.
    fn read_status(&mut self, tensor: &TensorIr) -> TensorIr {
        if tensor.status == TensorStatus::ReadWrite {
            self.pin_for_views(tensor.id);
        }
        let status = if self.residency.is_pinned(&tensor.id) {
            TensorStatus::ReadOnly
        } else {
            tensor.status
        };
        TensorIr {
            status,
            ..tensor.clone()
        }
    }

    /// Brings a tensor back to the device before it leaves through a read or a move.
    fn ensure_resident(&mut self, tensor: &TensorIr) -> Result<(), SwapError> {
        if self.transfers.in_flight() > 0 {
            self.poll_transfers();
        }
        self.inputs.clear();
        self.inputs.push((tensor.id, tensor.status));
        if self.residency.is_absent(&tensor.id) {
            self.bring(tensor.id)?;
        }
        Ok(())
    }

    fn consume_if_last(&mut self, tensor: &TensorIr) {
        if tensor.status == TensorStatus::ReadWrite {
            self.release_by_burn(&tensor.id);
        } else if let Some(entry) = self.residency.get_mut(&tensor.id) {
            entry.last_use = self.now;
        }
    }

    /// Reads a tensor's data. An offloaded tensor is served from the host store without
    /// coming back to the device.
    pub fn read(&mut self, tensor: TensorIr) -> DynFut<Result<TensorData, ExecutionError>> {
        self.record_named("Read", &[&tensor], &[]);
        self.out_ids.clear();
        let future: DynFut<Result<TensorData, ExecutionError>> =
            if self.residency.is_offloaded(&tensor.id) {
                let last = tensor.status == TensorStatus::ReadWrite
                    && !self.residency.is_pinned(&tensor.id);
                let data = if last {
                    match self.forget(&tensor.id).map(|e| e.state) {
                        Some(State::Offloaded(copy)) => copy.into_data(),
                        _ => unreachable!("checked offloaded above"),
                    }
                } else {
                    let data = match self.residency.get(&tensor.id).map(|e| &e.state) {
                        Some(State::Offloaded(copy)) => copy.to_data(),
                        _ => unreachable!("checked offloaded above"),
                    };
                    self.consume_if_last(&tensor);
                    data
                };
                self.inputs.clear();
                let data = data.map_err(|e| ExecutionError::WithContext {
                    reason: format!("burn-swap: {e}"),
                });
                Box::pin(async move { data })
            } else {
                match self.ensure_resident(&tensor) {
                    Ok(()) => {
                        let read = self.read_status(&tensor);
                        let future = self.runner.read_tensor_async(read);
                        self.consume_if_last(&tensor);
                        future
                    }
                    Err(error) => {
                        let reason = error.to_string();
                        Box::pin(async move { Err(ExecutionError::WithContext { reason }) })
                    }
                }
            };
        self.finish_op();
        future
    }

    /// Test seams: start a transfer, settle everything in flight, read the books.
    #[cfg(test)]
    pub fn start_offload_for_test(&mut self, id: TensorId) {
        self.start_offload(id);
    }

    #[cfg(test)]
    pub fn start_prefetch_for_test(&mut self, id: TensorId) {
        self.start_prefetch(id);
    }

    #[cfg(test)]
    pub fn set_jitter_for_test(&mut self, max_micros: u64) {
        self.transfers.set_jitter(max_micros);
    }

    #[cfg(test)]
    pub fn settle_all_for_test(&mut self) {
        while let Some(done) = self.transfers.next() {
            self.settle(done);
        }
    }

    /// Resident and host bytes.
    #[cfg(test)]
    pub fn books(&self) -> (u64, u64) {
        (self.counters.resident, self.counters.host)
    }

    #[cfg(test)]
    pub fn offload_nanos_for_test(&self) -> u64 {
        self.counters.offload_nanos
    }
}

/// The bytes a native op's outputs will take, from its name and inputs: the shapes of the ops
/// whose outputs outgrow their inputs (an embedding's rows, a sort's indices, a grid sample's
/// grid) are computed; every other native op (activations, norms, sorts, transposes) makes
/// one output no larger than its largest input. Ops without tensor inputs (`int_arange`,
/// `int_full`) and `unfold4d` are not predicted: their outputs are counted as they arrive.
fn native_output_bytes(name: &str, inputs: &[TensorIr]) -> u64 {
    let largest = inputs
        .iter()
        .map(|t| bytes_of(&t.shape, t.dtype))
        .max()
        .unwrap_or(0);
    let dims = |i: usize| inputs.get(i).map(|t| t.shape.as_slice());
    match name {
        // embedding(weights [V, D], indices [..]) -> [.., D]
        "embedding" => match (dims(0), dims(1)) {
            (Some([_, d]), Some(idx)) => {
                (idx.iter().product::<usize>() * d * inputs[0].dtype.size()) as u64
            }
            _ => largest,
        },
        // Values and their i64 indices.
        "float_sort_with_indices" | "int_sort_with_indices" => {
            inputs.first().map_or(largest, |t| {
                bytes_of(&t.shape, t.dtype) + 8 * t.shape.num_elements() as u64
            })
        }
        // grid_sample_2d(tensor [N, C, H, W], grid [N, Ho, Wo, 2]) -> [N, C, Ho, Wo]
        "float_grid_sample_2d" => match (dims(0), dims(1)) {
            (Some([n, c, _, _]), Some([_, ho, wo, _])) => {
                (n * c * ho * wo * inputs[0].dtype.size()) as u64
            }
            _ => largest,
        },
        _ => largest,
    }
}

#[cfg(test)]
mod tests {
    use super::native_output_bytes;
    use burn_backend::{DType, Shape};
    use burn_ir::{TensorId, TensorIr, TensorStatus};

    fn ir(dims: &[usize], dtype: DType) -> TensorIr {
        TensorIr {
            id: TensorId::new(0),
            shape: Shape::from(dims.to_vec()),
            status: TensorStatus::ReadOnly,
            dtype,
        }
    }

    #[test]
    fn native_outputs_are_predicted_from_their_shapes() {
        // An embedding of 32 rows of 64 floats looked up for 8 × 32 indices: 8·32·64 floats,
        // more than either input.
        let weights = ir(&[32, 64], DType::F32);
        let indices = ir(&[8, 32], DType::I64);
        assert_eq!(
            native_output_bytes("embedding", &[weights, indices]),
            8 * 32 * 64 * 4
        );
        // A sort with indices makes the values and i64 indices.
        let x = ir(&[100], DType::F32);
        assert_eq!(
            native_output_bytes("float_sort_with_indices", std::slice::from_ref(&x)),
            400 + 800
        );
        // A grid sample makes [N, C, Ho, Wo] from the grid's size.
        let t = ir(&[2, 3, 8, 8], DType::F32);
        let grid = ir(&[2, 16, 16, 2], DType::F32);
        assert_eq!(
            native_output_bytes("float_grid_sample_2d", &[t, grid]),
            2 * 3 * 16 * 16 * 4
        );
        // Anything else: the largest input.
        assert_eq!(native_output_bytes("relu", &[x]), 400);
        assert_eq!(native_output_bytes("int_arange", &[]), 0);
    }
}
