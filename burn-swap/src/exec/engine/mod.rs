//! The per-device engine: every op of the device passes here, in order, and leaves the books
//! as it found them, give or take what it made and what it let go.
//!
//! One type, [`Engine`], in rooms of one job each:
//!
//! - this file: the engine's state, and the op path ([`Engine::run_op_with`]): record the op,
//!   fit it in the budget, run it, book its inputs and outputs;
//! - [`room`]: making room: the budget check of an op, and the escalation that frees bytes
//!   (waiting for offloads in flight, then offloading or evicting the victims
//!   `plan::reactive` picks), with the "no room" error when nothing more can leave;
//! - [`moves`]: offloads and fetches, on the op's thread and on the transfer workers, and
//!   how their completions land in the books;
//! - [`buffers`]: which buffer each view lives in (the backend's word), and the shared
//!   buffers that count it once;
//! - [`recipes`]: recomputation: recipes of the plan and of strided views, pins, eviction and
//!   rematerialisation;
//! - [`follow`]: following the plan: planning once per profiled schedule, taking the
//!   program's steps after each op, and seed 003's waits on the compute side;
//! - [`links`]: measuring the copy throughput between the device and the host;
//! - [`memory`]: the allocator's pools: their figures after each op, the budget followed in
//!   what they reserve;
//! - [`api`]: what the client calls besides ops: data in and out, moves between devices,
//!   reconfiguration, the figures for the report;
//! - [`native`]: ops that run natively on the inner backend, outside burn-router.
//!
//! The engine carries decisions out; it makes none of its own. Which tensors leave and how,
//! when a view keeps its op, how big the link probes are and whether to compress are pure
//! functions in `crate::plan`.

mod api;
mod buffers;
mod follow;
mod groups;
mod links;
pub(crate) use links::{HANDOVER_OVERRIDE, PINNED_LINKS};
mod memory;
mod moves;
mod native;
mod recipes;
mod room;

use std::time::Instant;

use super::interpreter::{self, Handles};
use burn_backend::DType;
use burn_ir::{BackendIr, OperationIr, TensorId, TensorIr, TensorStatus};

use super::counters::{Counters, Wait};
use super::layout::{self, Layout};
use super::plans::Plans;
use super::ports;
use super::residency::{Dims, Entry, Group, Recipe, Remake, Residency};
use super::transfer::Transfers;
use super::{bytes_of, bytes_of_dims};
use crate::config::SwapConfig;
use crate::error::SwapError;
use crate::plan::reactive::{Candidate, LinkModel};
use crate::plan::views::{self, ViewKeep};
use crate::trace::recorder::{OpCounters, Recorder};
use crate::trace::signature;

pub(crate) use api::Figures;

/// Tries of one transfer on an op's path (an offload to make room, a fetch of an input)
/// before its failure is the op's: a failed transfer leaves the tensor whole where it was,
/// so a transient failure costs a retry.
const TRANSFER_ATTEMPTS: u32 = 8;

/// The engine of one device: the inner backend's handles, the residency table and its books,
/// the counters, the recorder, the transfer workers, and the configuration in force.
pub(crate) struct Engine<B: BackendIr> {
    /// The inner backend's handles of the device's tensors, which ops run over.
    handles: Handles<B>,
    config: SwapConfig,
    /// The budget in bytes, resolved from the configuration; `None` is unlimited.
    budget: Option<u64>,
    counters: Counters,
    recorder: Recorder,
    residency: Residency,
    /// The op in progress.
    op: OpScratch,
    /// The cost model of one offload, for the reactive policy's scores.
    link: LinkModel,
    /// Global index of the next op.
    now: u64,
    /// The measured copy throughput, once measured.
    links: Option<crate::plan::profile::Links>,
    /// The send and receive workers.
    transfers: Transfers<B>,
    /// The plan being followed, and the schedule it was made for.
    plans: Plans,
    /// Prefetches that found no room yet, retried after each op.
    deferred: Vec<TensorId>,
    /// What was moved since the last op was recorded (for the trace's per-op events).
    events: crate::trace::OpEvents,
    /// For each tensor, the strided views made from it that keep their op for later (see
    /// [`Entry::view_op`]): when Burn lets go of the tensor, those views get their recipes.
    view_sources: hashbrown::HashMap<TensorId, Vec<TensorId>>,
    /// Tensors admitted with a strided layout (some may have left the books since): what
    /// the report's minimum budget counts as unable to leave.
    strided_live: Vec<TensorId>,
    /// The CPU codec's measured throughput (raw bytes per second), once measured.
    codec_bandwidth: Option<f64>,
    /// Whether the inner backend gives its allocator's figures (sampled after each op).
    allocator: bool,
    /// The allocator's pools on the compute streams (what the device reserves).
    pools: super::pools::Pools,
    /// The device's total memory, when the backend can tell it.
    device_memory: Option<u64>,
    /// The peers offloads go to (seed 000), when configured.
    peers: Option<std::sync::Arc<super::peers::PeerPool>>,
    /// Which backend tells where its tensors live (`exec::layout`), if any.
    teller: layout::Teller,
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
    /// as buffers of their own (see [`Engine::apart_once_back`]). Counted towards the
    /// report's minimum budget, not towards the op's room now.
    apart_bytes: u64,
    /// Its outputs' bytes that no room was made for, as views of its inputs.
    unreserved: u64,
    /// For a view op of one input: that input (what a strided output is made from).
    view_source: Option<super::residency::Remake>,
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
            allocator,
            pools: Default::default(),
            device_memory,
            peers,
            handles: Handles::new(device),
            config,
            budget,
            counters: Counters::default(),
            recorder: Recorder::default(),
            residency: Residency::default(),
            op: OpScratch::default(),
            link: LinkModel::default(),
            now: 0,
            links: None,
            transfers,
            plans: Plans::default(),
            deferred: Vec::new(),
            codec_bandwidth: None,
            events: Default::default(),
            view_sources: Default::default(),
            strided_live: Vec::new(),
            teller: layout::teller::<B>(),
        };
        engine.record_lean_when_unbudgeted();
        engine.follow_budget_in_pools(None);
        engine
    }

    /// Lets the recorder keep most iterations without their tensors while no budget is
    /// set: nothing is planned then (see [`Recorder::set_lean`]).
    fn record_lean_when_unbudgeted(&mut self) {
        self.recorder.set_lean(self.budget().is_none());
    }

    fn tracing(&self) -> bool {
        self.config.enabled && self.config.trace
    }

    /// Starts timing the op about to run, when the trace times it (its profiled
    /// iterations). Under a budget the time is the device's: the device's queue is waited for
    /// before the op and again after it ([`Engine::stop_op_clock`]), so that on asynchronous
    /// backends (CubeCL's CUDA and wgpu) an op is charged with its kernels' time, not with
    /// their launch, and the next op does not wait for them. Without a budget nothing is
    /// planned from the times, and ops are not waited for.
    #[inline]
    pub(crate) fn start_op_clock(&self) -> Option<Instant> {
        if !(self.tracing() && self.recorder.timing()) {
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
        if self.config.enabled {
            self.budget
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
        self.counters
            .add_exposed(cause, start.elapsed().as_nanos() as u64);
        out
    }

    /// Runs one operation on the inner backend, first making room and fetching its inputs.
    /// The interpreter reads the op in place: an `OperationIr` is 616 bytes, and each move of
    /// it by value is a copy. The caller drops it after.
    #[inline]
    pub fn run_op(&mut self, op: &mut OperationIr) -> Result<(), SwapError> {
        self.run_op_with(op, |_| {})
    }

    /// [`Engine::run_op`], calling `on_output` with each output as it passes (so that the
    /// router client builds its output tensors in the same pass).
    ///
    /// The hot path: one pass over the op's inputs and one over its outputs feed both the
    /// books and the recorder; nothing is allocated once the scratch vectors have grown.
    #[inline]
    pub fn run_op_with(
        &mut self,
        op: &mut OperationIr,
        on_output: impl FnMut(&TensorIr),
    ) -> Result<(), SwapError> {
        self.poll_transfers();
        let tracing = self.tracing();
        let books = *self.residency.books();
        let live_before = books.resident + books.host;
        if tracing {
            let key = signature::kind_key(op);
            self.recorder.begin(key, || signature::kind_name(op));
        }
        if matches!(op, OperationIr::Drop(_)) {
            self.run_drop(op, tracing, live_before);
            return Ok(());
        }

        // What the op reads and makes, in one pass each (the common ops' tensors read from
        // their fields, the others through burn-ir's boxed iterators).
        let ports = ports::of(op);
        let (input_bytes, absent_bytes) = match ports {
            Some(ports) => self.gather_inputs(ports.inputs(), tracing),
            None => self.gather_inputs(op.inputs(), tracing),
        };
        if tracing {
            self.recorder.outputs_follow();
        }
        // Only an `Init` op's output is already in the books (registered with its data).
        let registered = matches!(op, OperationIr::Init(_));
        let mut output_bytes = match ports {
            Some(ports) => self.gather_outputs(ports.outputs(), registered, tracing, on_output),
            None => self.gather_outputs(op.outputs(), registered, tracing, on_output),
        };
        // A view shares its input's buffer: no room is made for it (checked after it ran).
        self.op.unreserved = 0;
        if output_bytes > 0 && layout::aliases(op, self.teller, self.op.inputs_strided) {
            self.op.unreserved = std::mem::take(&mut output_bytes);
        }
        if let Err(error) = self.fit(input_bytes, absent_bytes, output_bytes) {
            if tracing {
                self.recorder.abort();
            }
            return Err(error.for_op(|| signature::kind_name(op)));
        }

        let during = self.resident() + output_bytes;
        self.residency.note_peak(during);
        let start = if tracing {
            self.record_end(live_before, during);
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
        self.op.view_source = self.view_source(kind);
        let shares = self.teller != layout::Teller::None && layout::may_share(op);
        if shares {
            self.probe_inputs();
        }
        interpreter::run(&mut self.handles, op);
        if let Some(nanos) = self.stop_op_clock(start) {
            self.recorder.set_last_nanos(nanos);
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
        room.map_err(|e| e.for_op(|| "a view that copied".to_string()))
    }

    /// Burn drops a tensor: recorded, then taken out of the books and off the device.
    fn run_drop(&mut self, op: &mut OperationIr, tracing: bool, live_before: u64) {
        let OperationIr::Drop(tensor) = &*op else {
            return;
        };
        let id = tensor.id;
        if tracing {
            self.recorder
                .input(tensor, bytes_of(&tensor.shape, tensor.dtype));
            self.recorder.outputs_follow();
            self.record_end(live_before, self.resident());
        }
        self.drop_tensor(id);
        self.op.inputs.clear();
        self.op.inputs.push((id, TensorStatus::ReadWrite));
        self.op.out_ids.clear();
        self.finish_op();
    }

    /// Closes the op's record in the trace.
    #[inline]
    fn record_end(&mut self, live_before: u64, resident_during: u64) {
        self.recorder.end(OpCounters {
            nanos: 0,
            live_before,
            events: std::mem::take(&mut self.events),
            resident_during,
        });
    }

    /// Lists the op's inputs (in `self.op.inputs`), recording each when `record`, and
    /// returns the bytes of the distinct ones and of those not on the device (to fetch, wait
    /// for or recompute).
    fn gather_inputs<'a>(
        &mut self,
        inputs: impl Iterator<Item = &'a TensorIr>,
        record: bool,
    ) -> (u64, u64) {
        self.op.inputs.clear();
        self.op.inputs_strided = false;
        self.op.strided_shapes.clear();
        self.op.seen_buffers.clear();
        self.op.seen_carriers.clear();
        self.op.apart_bytes = 0;
        let (mut shared_twice, mut any_absent) = (false, false);
        let (mut input_bytes, mut absent_bytes) = (0, 0);
        for t in inputs {
            let seen = self.op.inputs.iter().any(|(id, _)| *id == t.id);
            self.op.inputs.push((t.id, t.status));
            let bytes = match self.residency.get(&t.id) {
                Some(entry) => {
                    if entry.strided {
                        self.op.inputs_strided = true;
                        self.op.strided_shapes.push(entry.dims.clone());
                    }
                    if let Some(buffer) = entry.shared() {
                        // Views of one buffer count it once.
                        if !self.op.seen_buffers.contains(&buffer) {
                            self.op.seen_buffers.push(buffer);
                            input_bytes += self.residency.counted(entry);
                        } else if !seen {
                            shared_twice = true;
                        }
                    } else if let Some(carrier) = entry.carrier(t.id) {
                        // A buffer that left whole comes back whole, with every holder.
                        if !self.op.seen_carriers.contains(&carrier) {
                            self.op.seen_carriers.push(carrier);
                            let bytes = self.fetch_bytes(&carrier);
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
                self.recorder.input(t, bytes);
            }
        }
        if any_absent {
            input_bytes -= self.remade_in_an_input();
        }
        if shared_twice {
            self.op.apart_bytes = self.apart_once_back().saturating_sub(input_bytes);
        }
        (input_bytes, absent_bytes)
    }

    /// The op's distinct inputs that are in the books, each with its entry and whether it
    /// is a strided view made again, in that input's buffer, from another of the op's
    /// inputs: by its recipe, or (with no budget yet) from the source its view op names.
    fn distinct_inputs(&self) -> impl Iterator<Item = (&Entry, bool, bool)> {
        let inputs = &self.op.inputs;
        let is_input =
            move |id: TensorId, s: TensorId| s != id && inputs.iter().any(|(i, _)| *i == s);
        inputs.iter().enumerate().filter_map(move |(k, (id, _))| {
            if inputs[..k].iter().any(|(i, _)| i == id) {
                return None;
            }
            let entry = self.residency.get(id)?;
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
    fn apart_once_back(&self) -> u64 {
        self.distinct_inputs()
            .filter(|(_, by_recipe, by_source)| !(*by_recipe || *by_source))
            .map(|(entry, ..)| self.residency.counted(entry))
            .sum()
    }

    /// Bytes counted twice by [`Self::gather_inputs`]: an absent view (strided, to be made
    /// again from its recipe) whose recipe is a view of another input of the same op shares
    /// that input's buffer once made again, as it did before it left (`x + x.transpose()`
    /// with `x` offloaded: one buffer, not two).
    fn remade_in_an_input(&self) -> u64 {
        self.distinct_inputs()
            .filter(|(entry, by_recipe, _)| {
                *by_recipe && !entry.state().on_device() && entry.shared().is_none()
            })
            .map(|(entry, ..)| entry.bytes())
            .sum()
    }

    /// Lists the op's outputs (in `self.op.outputs`), recording each when `record` and
    /// handing each to `on_output`; returns the bytes of those not yet in the books.
    #[inline]
    fn gather_outputs<'a>(
        &mut self,
        outputs: impl Iterator<Item = &'a TensorIr>,
        registered: bool,
        record: bool,
        mut on_output: impl FnMut(&TensorIr),
    ) -> u64 {
        self.op.outputs.clear();
        let mut output_bytes = 0;
        for t in outputs {
            on_output(t);
            let dims = t.shape.as_slice();
            let bytes = bytes_of_dims(dims, t.dtype);
            if !registered {
                output_bytes += bytes;
            }
            if record {
                self.recorder.output(t, bytes);
            }
            self.op
                .outputs
                .push((t.id, Dims::from_slice(dims), t.dtype, bytes));
        }
        output_bytes
    }

    /// Before the op runs: the recipes that will need its inputs keep them (read-only, so
    /// that the handle container keeps them): the plan's recipe for its output, a strided
    /// output's recipe made now, and recipes that already pin an input it consumes. Returns
    /// the op itself when its strided output keeps it for later (`plan::views`).
    #[inline]
    fn keep_what_recipes_need(
        &mut self,
        op: &mut OperationIr,
        strided: bool,
    ) -> Option<Box<OperationIr>> {
        // A dense output, no plan, no strided view waiting on a source, no recipe pinning
        // anything and no buffer of the unwrapped run shared: nothing to keep (every op of
        // an unbudgeted run on dense tensors).
        if !strided
            && self.plans.active.is_none()
            && self.view_sources.is_empty()
            && !self.residency.any_pinned()
            && !self.residency.any_origin()
        {
            debug_assert!(!self.consumes_pinned());
            self.op.view_recipe = false;
            self.op.shared_reads.clear();
            return None;
        }
        self.keep_what_recipes_need_in_full(op, strided)
    }

    #[inline(never)]
    fn keep_what_recipes_need_in_full(
        &mut self,
        op: &mut OperationIr,
        strided: bool,
    ) -> Option<Box<OperationIr>> {
        // Burn lets go of the inputs this op consumes: their strided views get recipes now.
        if !self.view_sources.is_empty() {
            for i in 0..self.op.inputs.len() {
                let (id, status) = self.op.inputs[i];
                if status == TensorStatus::ReadWrite {
                    self.pin_for_views(id);
                }
            }
        }
        let keep = if strided {
            views::keep(&views::ViewFacts {
                budgeted: self.budget().is_some(),
                single_output: self.op.outputs.len() == 1,
                replayable: layout::replayable(op),
                consumes_input: self.consumes_any(),
                inputs_can_leave: &|| self.inputs_can_leave(),
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
        if recipe || self.consumes_pinned() {
            self.keep_inputs(op, recipe);
        }
        self.read_shared_inputs(op);
        view_op
    }

    /// Marks read-only the inputs the op consumes that share their buffer in the unwrapped
    /// run while that buffer is apart under burn-swap (a holder came back from the host on
    /// its own): the unwrapped backend, seeing the buffer shared, would not write into it in
    /// place, and some in-place kernels give other bits (NaN signs). [`Self::book_inputs`]
    /// releases them after the op.
    fn read_shared_inputs(&mut self, op: &mut OperationIr) {
        self.op.shared_reads.clear();
        if !self.residency.any_origin() {
            return;
        }
        for i in 0..self.op.inputs.len() {
            let (id, status) = self.op.inputs[i];
            if status == TensorStatus::ReadWrite && self.read_only_for_sharing(id) {
                self.op.shared_reads.push(id);
            }
        }
        if !self.op.shared_reads.is_empty() {
            op.mark_read_only(&self.op.shared_reads);
        }
    }

    /// Whether an input the op consumes is handed over read-only because it shares its
    /// buffer in the unwrapped run (noted in `shared_reads`, once, unless a recipe keeps it
    /// read-only anyway).
    fn read_only_for_sharing(&self, id: TensorId) -> bool {
        !self.residency.is_pinned(&id)
            && self.residency.shares_origin(&id)
            && !self.op.shared_reads.contains(&id)
    }

    /// The ops' read-only inputs of `shared_reads` after it ran: Burn is done with them, and
    /// their handles go (a recipe that pins one keeps it, as an orphan).
    fn release_shared_reads(&mut self) {
        for i in 0..self.op.shared_reads.len() {
            let id = self.op.shared_reads[i];
            if self.residency.is_pinned(&id) {
                self.release_by_burn(&id);
            } else {
                self.release(id);
            }
        }
        self.op.shared_reads.clear();
    }

    /// After the op ran: inputs read for the last time are gone, the others were used now.
    #[inline]
    fn book_inputs(&mut self) {
        let now = self.now;
        for i in 0..self.op.inputs.len() {
            let (id, status) = self.op.inputs[i];
            if status == TensorStatus::ReadWrite {
                // Kept by the op (read only) because it is shared: released below.
                if !self.op.shared_reads.contains(&id) {
                    self.release_by_burn(&id);
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
    fn book_outputs(
        &mut self,
        registered: bool,
        strided: bool,
        shares: bool,
        inherits: bool,
        view_op: Option<Box<OperationIr>>,
    ) {
        let now = self.now;
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
            let probe = self.probe_entry(id, &entry);
            entry.strided = strided && self.strided_output(probe, &entry, inherits);
            if entry.strided {
                any_strided = true;
                self.strided_live.push(id);
                entry.set_view_source(self.op.view_source);
            }
            entry.restorable =
                entry.strided && probe.is_some_and(|p| layout::restorable(self.teller, &p, dtype));
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
            let shared = match probe
                .filter(|_| shares)
                .and_then(|p| self.shared_with(&self.op.input_buffers, bytes, p))
            {
                Some((source, key, buffer_bytes)) => {
                    self.residency
                        .admit_view(id, entry, source.as_ref(), key, buffer_bytes);
                    true
                }
                None => {
                    self.residency.admit(id, entry);
                    false
                }
            };
            if (shared || stays) && self.tracing() {
                self.recorder.mark_output_shares(k);
            }
        }
        self.op.outputs = outputs;
        let recipe = self.op.pending_recipe.take();
        if !any_strided && strided && self.op.view_recipe {
            // The recipe was made for a layout the output does not have.
            if let Some(recipe) = recipe {
                for input in recipe.inputs {
                    self.unpin(input);
                }
            }
            return;
        }
        if let Some(view_op) = view_op
            && any_strided
        {
            self.keep_view_op(self.op.out_ids[0], view_op);
        }
        if let Some(recipe) = recipe
            && let Some(entry) = self.residency.get_mut(&self.op.out_ids[0])
        {
            entry.recipe = Some(recipe);
        }
    }

    /// Counts the op that ran, then takes the plan's steps for it.
    #[inline]
    fn finish_op(&mut self) {
        #[cfg(debug_assertions)]
        self.assert_within_budget();
        self.counters.ops += 1;
        self.now += 1;
        if self.allocator {
            self.sample_allocator();
        }
        // Without a budget there is nothing to plan, and nothing planned is pending.
        if self.config.policy.planned()
            && self.tracing()
            && (self.budget.is_some() || self.plans.active.is_some() || !self.deferred.is_empty())
        {
            self.follow_plan();
        }
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
                self.now
            );
        }
    }

    /// Whether the op in progress reads an input for the last time.
    fn consumes_any(&self) -> bool {
        self.op
            .inputs
            .iter()
            .any(|(_, status)| *status == TensorStatus::ReadWrite)
    }

    /// Whether every input of the op in progress could leave the device itself (it is
    /// contiguous, has a recipe, or keeps a view op that can still be replayed): a recipe that
    /// pinned an input that can never leave would hold its bytes for nothing.
    fn inputs_can_leave(&self) -> bool {
        self.op.inputs.iter().all(|(id, _)| {
            self.residency
                .get(id)
                .is_none_or(|e| !e.strided || e.recipe.is_some() || self.can_rebuild(e))
        })
    }

    /// Whether the op consumes (reads for the last time) a tensor that a recipe still needs.
    #[inline]
    fn consumes_pinned(&self) -> bool {
        if !self.residency.any_pinned() {
            debug_assert!(
                self.op
                    .inputs
                    .iter()
                    .all(|(id, _)| !self.residency.pinned_uncounted(id)),
                "an input is pinned while the count of pinned entries is zero"
            );
            return false;
        }
        self.op
            .inputs
            .iter()
            .any(|(id, status)| *status == TensorStatus::ReadWrite && self.residency.is_pinned(id))
    }

    /// Burn is done with a tensor (consumed or dropped it): it leaves the books, unless a
    /// recipe still needs it, in which case it stays as an orphan until the recipe is done.
    #[inline]
    fn release_by_burn(&mut self, id: &TensorId) {
        if let Some(gone) = self.residency.release(id) {
            self.let_go(*id, gone.recipe, gone.group);
        }
    }

    /// [`Self::forget`], keeping of the entry only whether the device held it (`None`: it
    /// was not in the books).
    #[inline]
    fn discard(&mut self, id: &TensorId) -> Option<bool> {
        let gone = self.residency.discard(id)?;
        self.let_go(*id, gone.recipe, gone.group);
        Some(gone.on_device)
    }

    /// What a tensor taken out of the books held: its recipe's inputs are unpinned, its
    /// group lets go of it.
    #[inline]
    fn let_go(&mut self, id: TensorId, recipe: Option<Box<Recipe>>, group: Option<Box<Group>>) {
        if let Some(recipe) = recipe {
            for input in recipe.inputs {
                self.unpin(input);
            }
        }
        if group.is_some() {
            self.leave_group(id, group);
        }
    }

    /// Removes a tensor from the books; its recipe, if any, releases the inputs it pinned.
    #[inline]
    fn forget(&mut self, id: &TensorId) -> Option<Entry> {
        let mut entry = self.residency.forget(id)?;
        self.let_go(*id, entry.recipe.take(), entry.take_group());
        Some(entry)
    }

    /// Removes a tensor from the books and from the device.
    fn release(&mut self, id: TensorId) {
        if let Some(entry) = self.forget(&id)
            && entry.state().on_device()
        {
            self.handles.remove(&id);
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
                self.strided_live.push(id);
            }
        }
    }

    fn drop_tensor(&mut self, id: TensorId) {
        self.pin_for_views(id);
        if self.residency.is_pinned(&id) {
            // A recipe still reads it: it stays, as an orphan.
            self.release_by_burn(&id);
            return;
        }
        match self.discard(&id) {
            // Nothing of it is left on the device.
            Some(false) => {}
            _ => {
                self.handles.remove(&id);
            }
        }
    }

    /// Records an op that did not come as IR (reads, moves, native ops).
    fn record_named(&mut self, name: &'static str, inputs: &[TensorIr], outputs: &[TensorIr]) {
        if !self.tracing() {
            return;
        }
        let books = *self.residency.books();
        self.recorder
            .begin(signature::name_key(name), || name.to_string());
        for t in inputs {
            self.recorder.input(t, bytes_of(&t.shape, t.dtype));
        }
        self.recorder.outputs_follow();
        for t in outputs {
            self.recorder.output(t, bytes_of(&t.shape, t.dtype));
        }
        self.record_end(books.resident + books.host, books.resident);
    }

    /// Releases what an op that failed (and so never ran) was handed for its last use: Burn
    /// will never name those tensors again.
    pub fn abandon_op(&mut self) {
        for i in 0..self.op.inputs.len() {
            let (id, status) = self.op.inputs[i];
            if status != TensorStatus::ReadWrite {
                continue;
            }
            if self.residency.is_pinned(&id) {
                self.release_by_burn(&id);
            } else {
                self.release(id);
            }
        }
        self.op.inputs.clear();
    }
}
