//! The per-device engine: every op of the device passes here, in order, and leaves the books
//! as it found them, give or take what it made and what it let go.
//!
//! One type, [`Engine`], the orchestrator, in rooms of one job each, beside the owners of
//! its state (`Residency`, `OpScratch`, `Settings`, `History`, `Plans`, `Copies`, `Machine`)
//! and three views of a few of them for what needs those alone: [`tensors`] (the books and
//! the handles), [`measured_links`] (`LinkMeter`) and, in tests, `test_seams`:
//!
//! - this file: the engine's state, and the op path ([`Engine::run_op_with`]): record the op,
//!   fit it in the budget, run it, book its inputs and outputs;
//! - [`room`]: making room: the budget check of an op, and the escalation that frees bytes
//!   (waiting for offloads in flight, then offloading or evicting the victims
//!   `plan::reactive` picks), with the "no room" error when nothing more can leave;
//! - [`moves`]: offloads and fetches, on the op's thread and on the transfer workers, and
//!   how their completions land in the books;
//! - [`inputs`]: an op's inputs and outputs, gathered before it runs and booked after;
//! - [`tensors`]: tensors leaving the books (released by Burn, dropped, forgotten) and what
//!   they held, and where the backend holds one;
//! - [`buffers`]: which buffer each view lives in (the backend's word), the shared buffers
//!   that count it once, and the inputs read only because they share one;
//! - [`recipes`]: recomputation: recipes of the plan and of strided views, pins, eviction and
//!   rematerialisation;
//! - [`follow`]: following the plan: planning once per profiled schedule, taking the
//!   program's steps after each op, and the cross-stream waits on the compute side;
//! - [`measured_links`]: measuring the copy throughput between the device and the host;
//! - [`memory`]: the allocator's pools (the machine's): their figures after each op, the
//!   budget followed in what they reserve, an op's temporaries;
//! - [`api`]: what the client calls besides ops: data in and out, moves between devices,
//!   reconfiguration, the figures for the report;
//! - [`native`]: ops that run natively on the inner backend, outside burn-router.
//!
//! The engine carries decisions out; it makes none of its own. Which tensors leave and how,
//! when a view keeps its op, how big the link probes are and whether to compress are pure
//! functions in `crate::plan`.

mod api;
mod buffers;
mod copies;
mod follow;
mod groups;
mod history;
mod inputs;
mod machine;
mod measured_links;
pub(crate) use follow::SKIP_FETCH_WAITS;
pub(crate) use machine::{HANDOVER_OVERRIDE, PINNED_LINKS};
mod memory;
mod moves;
mod native;
mod observed_copies;
mod recipes;
mod room;
mod settings;
mod tensors;
#[cfg(test)]
mod test_seams;

use std::time::Instant;

use super::interpreter::{self, Handles};
use burn_backend::DType;
use burn_ir::{BackendIr, OperationIr, TensorId, TensorIr, TensorStatus};

use super::bytes_of;
use super::counters::Wait;
use super::layout::{self, Layout};
use super::op_clock::OpClock;
use super::plans::Plans;
use super::ports;
use super::residency::{Dims, Entry, Recipe, Residency};
use super::transfer::Transfers;
use crate::config::SwapConfig;
use crate::error::SwapError;
use crate::plan::program::Port;
use crate::plan::reactive::Candidate;
use crate::trace::signature;

use copies::Copies;
use history::History;
use machine::Machine;
use settings::Settings;

/// Tries of one transfer on an op's path (an offload to make room, a fetch of an input)
/// before its failure is the op's: a failed transfer leaves the tensor whole where it was,
/// so a transient failure costs a retry.
const TRANSFER_ATTEMPTS: u32 = 8;

/// The engine of one device: the inner backend's handles, the residency table and its books,
/// the op in progress, and the owners of the rest: what is configured, what happened, the
/// plans, the copies, and what was measured of the machine.
pub(crate) struct Engine<B: BackendIr> {
    /// The inner backend's handles of the device's tensors, which ops run over.
    handles: Handles<B>,
    residency: Residency,
    /// The op in progress.
    op: OpScratch,
    settings: Settings,
    history: History,
    /// The plan being followed, and the schedule it was made for.
    plans: Plans,
    copies: Copies<B>,
    machine: Machine,
}

/// The op in progress: scratch space reused by every op, so that the per-op path does not
/// allocate once it has grown.
#[derive(Default)]
struct OpScratch {
    /// Its inputs, in order, with Burn's statuses.
    inputs: Vec<(TensorId, TensorStatus)>,
    /// Its outputs: id, dims, dtype, bytes.
    outputs: Vec<(TensorId, Dims, DType, u64)>,
    /// Output ids of the op that ran last (the plan names tensors by their port).
    out_ids: Vec<TensorId>,
    /// Whether an input may have a strided layout, and the shapes of those that may.
    inputs_strided: bool,
    strided_shapes: Vec<Dims>,
    /// Whether its inputs are being put in place: an offload in flight of one of them that
    /// completes now is undone (the op is about to read it).
    fitting: bool,
    /// Tensors that room-making must not touch (recipe inputs being brought back).
    protect: Vec<TensorId>,
    /// The recipe made for it, given to its output once that is in the books.
    pending_recipe: Option<Box<Recipe>>,
    /// Whether that recipe was made for its output's strided layout alone (not the plan's).
    view_recipe: bool,
    /// For a native op: resident bytes when it was prepared, the room made for its outputs,
    /// and its outputs' bytes.
    native_base: u64,
    native_reserved: u64,
    native_out: u64,
    /// The op broke the budget and fails with an error of its own.
    budget_broken: bool,
    /// Victim candidates (reused by room-making).
    candidates: Vec<Candidate>,
    /// For an op whose outputs may share an input's buffer: its inputs' buffers, as the
    /// backend told them before it ran (id, buffer).
    input_buffers: Vec<(TensorId, usize)>,
    /// Of those inputs, the buffers of the unwrapped run they share (buffer, origin).
    input_origins: Vec<(usize, u32)>,
    /// The shared buffers already counted among its inputs.
    seen_buffers: Vec<u32>,
    /// Inputs it consumes that share their buffer, in the unwrapped run, with another tensor
    /// in the books: read only (the unwrapped backend would not write into them in place),
    /// released after it.
    shared_reads: Vec<TensorId>,
    /// The carriers of shared buffers off the device already counted among its inputs (the
    /// holders of one come back with it, in one buffer).
    seen_carriers: Vec<TensorId>,
    /// Bytes the op's inputs could need on top of what they hold now, were they moved off the
    /// device and brought back under a budget: holders of one buffer that would come back
    /// as buffers of their own (see [`OpScratch::apart_once_back`]). Counted towards the
    /// report's minimum budget, not towards the op's room now.
    apart_bytes: u64,
    /// Its outputs' bytes that no room was made for, as views of its inputs.
    unreserved: u64,
    /// Whether the trace records it (see [`Engine::trace_this_op`]).
    traced: bool,
    /// When it is one of the ops timed in parts (`exec::op_clock`), when it began.
    timed: Option<super::op_clock::Timed>,
    /// For a view op of one input: that input (what a strided output is made from).
    view_source: Option<super::residency::Remake>,
    /// Its shape for the temporaries it reserves beyond its outputs, and those learned of
    /// its shape's earlier runs (`exec::temporaries`): measured under a budget on backends
    /// with allocator figures, `None` otherwise.
    shape: Option<u64>,
    temporaries: u64,
}

impl OpScratch {
    /// Whether an output that may be strided is: the backend's word (see [`layout::probe`]);
    /// for a backend that cannot tell, a view op's output is, and an op that `inherits` its
    /// layout keeps a strided input's only in an output of that input's shape (a reduction,
    /// a broadcast or a matmul writes a fresh buffer).
    #[inline]
    pub(super) fn strided_output(
        &self,
        probe: Option<layout::Probe>,
        entry: &Entry,
        inherits: bool,
    ) -> bool {
        match probe {
            Some(probe) => !probe.dense,
            None if inherits => self.strided_shapes.contains(&entry.dims),
            None => true,
        }
    }

    /// The id of the tensor at `port` of the op that ran last.
    #[inline]
    pub(super) fn port(&self, port: Port) -> Option<TensorId> {
        match port {
            Port::Input(i) => self.inputs.get(i as usize).map(|(id, _)| *id),
            Port::Output(i) => self.out_ids.get(i as usize).copied(),
        }
    }

    /// Whether the op in progress reads an input for the last time.
    #[inline]
    pub(super) fn consumes_any(&self) -> bool {
        self.inputs
            .iter()
            .any(|(_, status)| *status == TensorStatus::ReadWrite)
    }

    /// Whether room-making must leave `id` alone: the op's own inputs while they are put in
    /// place, and the protected tensors (recipe inputs being brought back).
    #[inline]
    pub(super) fn protected(&self, id: &TensorId) -> bool {
        self.protect.contains(id) || (self.fitting && self.inputs.iter().any(|(i, _)| i == id))
    }
}

impl<B: BackendIr> Engine<B> {
    pub fn new(device: B::Device, config: SwapConfig, budget: Option<u64>) -> Self {
        let transfers = Transfers::default();
        transfers.set_jitter(config.transfer_jitter_micros);
        let allocator = super::allocator_usage::<B>(&device).is_some();
        let device_memory = super::device_memory::<B>(&device);
        let peers = super::peers::PeerPool::new(&config.peers, |peer| {
            super::measure_peer::<B>(&device, peer)
        });
        let mut engine = Self {
            handles: Handles::new(device),
            residency: Residency::default(),
            op: OpScratch::default(),
            settings: Settings {
                config,
                budget,
                teller: layout::teller::<B>(),
            },
            history: History::default(),
            plans: Plans::default(),
            copies: Copies {
                transfers,
                peers,
                deferred: Vec::new(),
            },
            machine: Machine {
                allocator,
                device_memory,
                ..Machine::default()
            },
        };
        // Most iterations kept without their tensors while no budget is set: nothing is
        // planned then (`Recorder::set_lean`).
        let lean = engine.budget().is_none();
        engine.history.recorder.set_lean(lean);
        let budget = engine.budget();
        engine.machine.follow_budget_in_pools::<B>(
            budget,
            None,
            engine.handles.device(),
            engine.copies.transfers.pools(),
            &mut engine.history.counters,
        );
        engine
    }

    /// Whether the trace records the op beginning now: the trace is on, and the op comes from
    /// the training thread (or none is judged yet: `trace::threads`). Called once per op;
    /// the answer stays in the op's scratch for the rest of its path.
    /// A change of the training thread starts the trace anew (see [`Engine::trace_anew`]).
    #[inline]
    fn trace_this_op(&mut self) -> bool {
        let traced = self.settings.tracing()
            && self
                .history
                .threads
                .records(crate::trace::threads::current());
        if self.history.threads.take_change() {
            self.trace_anew();
        }
        self.op.traced = traced;
        traced
    }

    /// Starts timing the op about to run, when the trace times it (its profiled
    /// iterations). Under a budget the time is the device's: the device's queue is waited for
    /// before the op and again after it ([`Engine::stop_op_clock`]), so that on asynchronous
    /// backends (CubeCL's CUDA and wgpu) an op is charged with its kernels' time, not with
    /// their launch, and the next op does not wait for them. Without a budget nothing is
    /// planned from the times, and ops are not waited for.
    #[inline]
    pub(crate) fn start_op_clock(&self) -> Option<Instant> {
        if !(self.settings.tracing() && self.history.recorder.timing()) {
            return None;
        }
        if self.budget().is_some() {
            // A failed wait surfaces at the op or at the next read.
            let _ = B::sync(self.handles.device());
        }
        Some(Instant::now())
    }

    /// The time of the op started by [`Engine::start_op_clock`], once its work is done on
    /// the device (under a budget).
    #[inline]
    pub(crate) fn stop_op_clock(&self, start: Option<Instant>) -> Option<u64> {
        let start = start?;
        if self.budget().is_some() {
            let _ = B::sync(self.handles.device());
        }
        Some(start.elapsed().as_nanos() as u64)
    }

    /// The budget in force (`None` when unlimited or burn-swap is off).
    pub fn budget(&self) -> Option<u64> {
        if self.settings.config.enabled {
            self.settings.budget
        } else {
            None
        }
    }

    /// Bytes resident on the device, as the books count them.
    #[inline]
    fn resident(&self) -> u64 {
        self.residency.books().resident
    }

    /// Runs `wait` and counts its time as exposed, for `cause`: time the ops waited on
    /// transfers.
    #[inline]
    fn exposed<T>(&mut self, cause: Wait, wait: impl FnOnce(&mut Self) -> T) -> T {
        let start = Instant::now();
        let out = wait(self);
        self.history
            .counters
            .add_exposed(cause, start.elapsed().as_nanos() as u64);
        out
    }

    /// Runs one operation on the inner backend, first making room and fetching its inputs,
    /// calling `on_output` with each output as it passes (so that the router client builds
    /// its output tensors in the same pass). The interpreter reads the op in place: an
    /// `OperationIr` is 616 bytes, and each move of it by value is a copy. The caller drops
    /// it after.
    ///
    /// The hot path: one pass over the op's inputs and one over its outputs feed both the
    /// books and the recorder; nothing is allocated once the scratch vectors have grown.
    #[inline]
    pub fn run_op_with(
        &mut self,
        op: &mut OperationIr,
        on_output: impl FnMut(&TensorIr),
    ) -> Result<(), SwapError> {
        self.op.timed = OpClock::start(self.history.counters.ops);
        self.poll_transfers();
        let tracing = self.trace_this_op();
        let books = *self.residency.books();
        let live_before = books.resident + books.host;
        if tracing {
            let key = signature::kind_key(op);
            self.history
                .recorder
                .begin(key, || signature::kind_name(op));
        }
        if matches!(op, OperationIr::Drop(_)) {
            self.run_drop(op, tracing, live_before);
            return Ok(());
        }

        // What the op reads and makes, in one pass each (the common ops' tensors read from
        // their fields, the others through burn-ir's boxed iterators).
        let ports = ports::of(op);
        let (input_bytes, absent_bytes) = match ports {
            Some(ports) => self.op.gather_inputs(
                ports.inputs(),
                &self.residency,
                &mut self.history.recorder,
                tracing,
            ),
            None => self.op.gather_inputs(
                op.inputs(),
                &self.residency,
                &mut self.history.recorder,
                tracing,
            ),
        };
        if tracing {
            self.history.recorder.outputs_follow();
        }
        // Only an `Init` op's output is already in the books (registered with its data).
        let registered = matches!(op, OperationIr::Init(_));
        let mut output_bytes = match ports {
            Some(ports) => self.op.gather_outputs(
                ports.outputs(),
                registered,
                &mut self.history.recorder,
                tracing,
                on_output,
            ),
            None => self.op.gather_outputs(
                op.outputs(),
                registered,
                &mut self.history.recorder,
                tracing,
                on_output,
            ),
        };
        // A view shares its input's buffer: no room is made for it (checked after it ran).
        self.op.unreserved = 0;
        if output_bytes > 0 && layout::aliases(op, self.settings.teller, self.op.inputs_strided) {
            self.op.unreserved = std::mem::take(&mut output_bytes);
        }
        let budgeted = self.budget().is_some();
        self.op.expect_temporaries(
            &self.machine,
            budgeted,
            || signature::kind_key(op),
            input_bytes,
            output_bytes,
        );
        if let Err(error) = self.fit(input_bytes, absent_bytes, output_bytes) {
            if tracing {
                self.history.recorder.abort();
            }
            // Not timed: it did not run (the next op starts a clock of its own).
            self.op.timed = None;
            return Err(error.for_op(|| signature::kind_name(op)));
        }

        let during = self.resident() + output_bytes;
        self.residency.note_peak(during);
        let start = if tracing {
            let lap = OpClock::lap(self.op.timed);
            self.history.record_end(
                live_before,
                during,
                self.op
                    .beyond_the_books(self.history.counters.allocator, self.resident()),
            );
            self.history
                .counters
                .op_clock
                .add(|c| &mut c.trace_nanos, lap);
            self.start_op_clock()
        } else {
            None
        };
        // Whether its output may be strided, as far as can be told before it runs; the
        // backend's word after it ran settles it (`book_outputs`).
        let kind = layout::of(op);
        let strided = match kind {
            Layout::Fresh => false,
            Layout::View => true,
            Layout::Inherit => self.op.inputs_strided,
        };
        let view_op = self.keep_what_recipes_need(op, strided);
        self.op.view_source = self.op.view_source(&self.residency, kind);
        let shares = self.settings.teller != layout::Teller::None && layout::may_share(op);
        if shares {
            self.probe_inputs();
        }
        let budget = self.budget();
        self.machine.clear_for_op::<B>(
            &self.op,
            budget,
            output_bytes,
            self.handles.device(),
            self.copies.transfers.pools(),
            &mut self.history.counters,
        );
        let lap = OpClock::lap(self.op.timed);
        interpreter::run(&mut self.handles, op);
        self.history
            .counters
            .op_clock
            .add(|c| &mut c.inner_nanos, lap);
        if let Some(nanos) = self.stop_op_clock(start) {
            self.history.recorder.set_last_nanos(nanos);
        }
        self.book_inputs();
        self.book_outputs(
            registered,
            strided,
            shares,
            kind == Layout::Inherit,
            view_op,
        );
        // An output taken for a view that copied, or one counted in a shared buffer larger
        // than the room made for it, may have put the device over the budget: made good now.
        let room = if self.op.unreserved == 0 && self.budget().is_none_or(|b| self.resident() <= b)
        {
            Ok(())
        } else {
            self.settle_views()
        };
        self.finish_op();
        self.machine
            .name_reserved_over(self.op.shape, || signature::kind_name(op));
        room.map_err(|e| e.for_op(|| "a view that copied".to_string()))
    }

    /// Burn drops a tensor: recorded, then taken out of the books and off the device.
    fn run_drop(&mut self, op: &mut OperationIr, tracing: bool, live_before: u64) {
        let OperationIr::Drop(tensor) = &*op else {
            return;
        };
        let id = tensor.id;
        if tracing {
            self.history
                .recorder
                .dropped(tensor, bytes_of(&tensor.shape, tensor.dtype));
            self.history.recorder.outputs_follow();
            self.history.record_end(live_before, self.resident(), 0);
        }
        self.tensors().remove_dropped(id);
        self.op.inputs.clear();
        self.op.inputs.push((id, TensorStatus::ReadWrite));
        self.op.out_ids.clear();
        self.finish_op();
    }

    /// Counts the op that ran, then takes the plan's steps for it.
    #[inline]
    fn finish_op(&mut self) {
        #[cfg(debug_assertions)]
        self.assert_within_budget();
        self.history.counters.ops += 1;
        self.history.now += 1;
        if self.machine.allocator {
            let budget = self.budget();
            self.machine.sample_allocator::<B>(
                self.handles.device(),
                self.copies.transfers.pools(),
                budget,
                &mut self.history.counters,
            );
        }
        // Without a budget there is nothing to plan, and nothing planned is pending.
        // An op left out of the trace takes no place in the iteration: the plan's steps are
        // taken after the recorded ops only.
        if self.settings.config.policy.planned()
            && self.op.traced
            && (self.settings.budget.is_some()
                || self.plans.active.is_some()
                || !self.copies.deferred.is_empty())
        {
            let lap = OpClock::lap(self.op.timed);
            self.follow_plan();
            self.history
                .counters
                .op_clock
                .add(|c| &mut c.follow_nanos, lap);
        }
        let timed = self.op.timed.take();
        self.history.counters.op_clock.end(timed);
    }

    /// The budget is a promise: after every op the counted resident bytes are within it.
    /// Checked in debug builds (every test); an op that broke it is a bug of burn-swap.
    #[cfg(debug_assertions)]
    fn assert_within_budget(&mut self) {
        if std::mem::take(&mut self.op.budget_broken) {
            // Reported as an error of its own (a native op whose outputs found no room).
            return;
        }
        if let Some(budget) = self.budget() {
            let resident = self.resident();
            // Not while unwinding: a tensor dropped then runs this in a destructor, where a
            // second panic would abort the process.
            assert!(
                resident <= budget || std::thread::panicking(),
                "burn-swap: {resident} bytes resident after op {} under a budget of {budget}",
                self.history.now
            );
        }
    }

    /// Makes every tensor on the device unable to leave it (strided, with no layout to restore
    /// and no op to make it again): see [`crate::unstable::hold_resident`].
    pub fn hold_resident(&mut self) {
        let held: Vec<TensorId> = self
            .residency
            .iter()
            .filter(|(_, e)| e.state().on_device())
            .map(|(id, _)| *id)
            .collect();
        for id in held {
            if let Some(entry) = self.residency.get_mut(&id) {
                entry.strided = true;
                entry.restorable = false;
                entry.set_view_op(None);
                entry.set_view_source(None);
                self.residency.views.strided_live.push(id);
            }
        }
    }

    /// Records an op that did not come as IR (reads, moves, native ops) with the bytes
    /// resident while it ran: `during` when the caller counted them (a native op's inputs
    /// and outputs at once, before what it consumed left), else the books' resident bytes.
    fn record_named(
        &mut self,
        name: &'static str,
        inputs: &[TensorIr],
        outputs: &[TensorIr],
        during: Option<u64>,
    ) {
        if !self.trace_this_op() {
            return;
        }
        let books = *self.residency.books();
        self.history
            .recorder
            .begin(signature::name_key(name), || name.to_string());
        for t in inputs {
            self.history.recorder.input(t, bytes_of(&t.shape, t.dtype));
        }
        self.history.recorder.outputs_follow();
        for t in outputs {
            self.history.recorder.output(t, bytes_of(&t.shape, t.dtype));
        }
        let beyond = if during.is_some() {
            self.op
                .beyond_the_books(self.history.counters.allocator, self.resident())
        } else {
            0
        };
        self.history.record_end(
            books.resident + books.host,
            during.unwrap_or(books.resident),
            beyond,
        );
    }
}
