//! The report's parts, grouped as its table prints them, and the figures they hold.

use serde::{Deserialize, Serialize};

use super::as_text;
use super::{
    AllocatorUsage, Declines, FallbackRoom, PlanChoice, PlanTakeover, ReservedOver, StreamUsage,
};
use crate::config::Compression;
use crate::trace::IterationPeak;

/// The budget's bytes: resident on the device and held on the host, and their peaks.
///
/// Part of [`Report`](super::Report); its fields' JSON keys are the report's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemoryReport {
    /// Bytes resident on the device now (as [`crate::Memory::resident_bytes`]).
    pub resident_bytes: u64,
    /// Highest resident bytes while any op ran (its inputs and outputs included).
    pub peak_bytes: u64,
    /// Bytes in the host store now.
    pub host_bytes: u64,
    /// Highest bytes in the host store.
    pub peak_host_bytes: u64,
    /// Of `host_bytes`, those in pinned (page-locked) host memory: raw copies the backend
    /// read into its pinned pool (CubeCL). Pinned memory is taken from the OS's unswappable
    /// pages, so it is the part of the host store that can starve the machine.
    #[serde(default)]
    pub pinned_host_bytes: u64,
    /// Highest pinned bytes in the host store.
    #[serde(default)]
    pub peak_pinned_host_bytes: u64,
    /// The bound on the host store (`SwapConfig::host_budget`), if any.
    #[serde(default)]
    pub host_budget_bytes: Option<u64>,
    /// Ops whose outputs turned out larger than the room made for them before they ran (a
    /// native op whose output size is not known beforehand): room was made right after, but
    /// the device held more than the budget for the length of the op. A failure to fix;
    /// 0 for every op burn-swap predicts.
    pub budget_overshoots: u64,
    /// Tensors in the books now: those Burn holds, and those it let go of that a recipe still
    /// reads (`kept_for_recipes`). Over steady training steps both stay level: a count that
    /// grows with the steps is a leak of the layer's.
    #[serde(default)]
    pub tracked_tensors: u64,
    /// Of `tracked_tensors`, those Burn let go of that are kept because a recipe (a planned
    /// recomputation or a strided view's op) still reads them.
    #[serde(default)]
    pub kept_for_recipes: u64,
    /// Device handles the layer holds for the inner backend now.
    #[serde(default)]
    pub device_handles: u64,
}

/// What left the device and came back: offloads, fetches, recomputations, and the time
/// the ops waited on them.
///
/// Part of [`Report`](super::Report); its fields' JSON keys are the report's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TransferReport {
    /// Offloads to host.
    pub offloads: u64,
    /// Bytes offloaded to host.
    pub offloaded_bytes: u64,
    /// Seconds spent offloading (on the op's path).
    pub offload_seconds: f64,
    /// Fetches back from host.
    pub fetches: u64,
    /// Bytes fetched back.
    pub fetched_bytes: u64,
    /// Seconds spent fetching (on the op's path).
    pub fetch_seconds: f64,
    /// Offloads that failed (the tensor stayed resident).
    pub failed_offloads: u64,
    /// Fetches that failed: each left the tensor offloaded with its copy whole, and its
    /// next use fetched it again.
    #[serde(default)]
    pub failed_fetches: u64,
    /// Shared buffers that left the device as one copy with every tensor viewing them (one
    /// of those views could not be made again by its op): each came back whole, its views
    /// made again over it. Counted in `offloads` once each.
    #[serde(default)]
    pub whole_buffer_offloads: u64,
    /// Tensors dropped by the plan to be recomputed.
    pub evictions: u64,
    /// Tensors recomputed (by replaying their producing op) before a use.
    pub recomputes: u64,
    /// Seconds spent recomputing (on the op's path).
    pub recompute_seconds: f64,
    /// Seconds the fallback spent on the op's path choosing what leaves to make room
    /// (listing the residents that may leave and ranking them): neither a wait nor a
    /// recomputation, and none under a plan that makes its room itself.
    #[serde(default)]
    pub room_search_seconds: f64,
    /// Seconds the op threads spent handing copies to the transfer workers (queueing each,
    /// waking the worker): neither a wait nor a recomputation, but the ops' time. A plan is
    /// judged with it (predicted, then measured) against the fallback, whose copies are made
    /// on the op thread and counted as waits.
    #[serde(default)]
    pub handover_seconds: f64,
    /// How many times the fallback chose what leaves (each a pass over the tensors that may
    /// leave; room made for an op frees some headroom beyond its need, so that the next ops
    /// rarely make room again).
    #[serde(default)]
    pub room_searches: u64,
    /// Seconds the ops waited on transfers: offloads and fetches made on the op's path, and
    /// waits for transfers in flight (the time transfers were not hidden).
    pub exposed_wait_seconds: f64,
    /// `exposed_wait_seconds` by cause.
    #[serde(default)]
    pub exposed_wait: ExposedWait,
    /// Planned fetches that compute had to wait for before an op (the cross-stream waits that
    /// found the fetch still in flight); their time is part of `exposed_wait_seconds`.
    pub planned_waits: u64,
    /// Reads of a planned prefetch by an op before the wait that the cross-queue
    /// analysis placed for it: 0 when the analysis puts a wait before every op that reads a
    /// planned fetch (`tests/budget/waits.rs` holds it at 0 on jittered runs). The values are
    /// right either way: an op that finds its input still in flight waits for it itself.
    #[serde(default)]
    pub unawaited_prefetch_reads: u64,
}

/// What compression did to the offloads.
///
/// Part of [`Report`](super::Report); its fields' JSON keys are the report's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompressionReport {
    /// The compression mode in force (in JSON as `BURN_SWAP_COMPRESS` takes it: `off`, `on`,
    /// `auto`, `on:0.7`).
    #[serde(with = "as_text")]
    #[serde(rename = "compression")]
    pub mode: Compression,
    /// Raw bytes of every offload (what moved before compression).
    pub raw_bytes: u64,
    /// Bytes that offloads moved to host memory (compressed where it paid).
    pub moved_bytes: u64,
    /// `raw_bytes / moved_bytes` (1 without compression).
    #[serde(rename = "compression_ratio")]
    pub ratio: f64,
    /// Offloads that were compressed.
    pub compressed_offloads: u64,
    /// Offloads compressed by the device's kernels before the copy (CubeCL backends).
    pub device_compressed_offloads: u64,
    /// Fetches decompressed by the device's kernels after the copy (CubeCL backends).
    pub device_decompressed_fetches: u64,
    /// Seconds spent compressing and decompressing (on workers or on the op's path).
    pub codec_seconds: f64,
    /// Per tensor shape and dtype, the offloads, raw and moved bytes (with compression on),
    /// largest raw bytes first, at most 32.
    #[serde(rename = "compression_by_tensor")]
    pub by_tensor: Vec<CompressionStat>,
}

/// The plans: how many were made, reused, declined and followed, what the one in force
/// predicts, and the candidates it was chosen from.
///
/// Part of [`Report`](super::Report); its fields' JSON keys are the report's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PlanReport {
    /// Plans made (one per profiled schedule, under a planned policy).
    pub plans: u64,
    /// Iterations of the training loop that ended under a plan followed since its schedule
    /// was found: how much of the run the plans steered (the others ran on the fallback).
    pub planned_iterations: u64,
    /// Bytes the reactive fallback still had to move off the device to keep the budget while
    /// a plan was followed, from each plan's first full iteration on: zero when the plans
    /// steered alone.
    #[serde(default)]
    pub fallback_bytes_under_plan: u64,
    /// Where that room was made (the first 16 times): each op's place in its iteration, the
    /// bytes the plan predicted there, the bytes the op needed and the bytes moved. An op
    /// that needed more than predicted is where the plan and the run part.
    #[serde(default)]
    pub fallback_rooms: Vec<FallbackRoom>,
    /// Seconds the planners took, in total (on the planner thread: see
    /// [`crate::SwapConfig::with_background_planning`]).
    pub planning_seconds: f64,
    /// Of the op threads' time, the seconds spent on planning: handing each plan's trace to
    /// the planner, and where planning runs on the op's thread, the planning itself and the
    /// wait for the link probe.
    #[serde(default)]
    pub planning_op_thread_seconds: f64,
    /// Seconds the link probe took, from its queueing on the send worker to its report
    /// (copies of temporary tensors off the device and back, measured once, before the
    /// first plan, beside the ops).
    #[serde(default)]
    pub link_probe_seconds: f64,
    /// Times an op's thread waited for the link probe to plan (where planning runs on the
    /// op's thread) or on request (a profile asked for); zero when planning beside the ops.
    /// (An op that needs the room the probe's temporary tensors hold waits for its report
    /// as it waits for any transfer that holds room: exposed time.)
    #[serde(default)]
    pub link_probe_waits: u64,
    /// The op (as in [`PlanTakeover::op`]) the link probe was started at, since the counters
    /// were reset: the end of a schedule's first iteration, so that it runs while the
    /// iteration its plan is made from is profiled. `None` where none was started (links
    /// kept from before, pinned, or no policy that copies).
    #[serde(default)]
    pub link_probe_started_op: Option<u64>,
    /// Plans taken back, at once, from those kept for a schedule that ran before (a loop
    /// that alternates schedules plans each once).
    #[serde(default)]
    pub plans_reused: u64,
    /// When each plan took over (the latest 32): the op, its schedule's period, whether it
    /// was kept from before, how long it took to make and how many iterations ran under
    /// the fallback meanwhile.
    #[serde(default)]
    pub plan_takeovers: Vec<PlanTakeover>,
    /// Plans not followed because they cost more than the reactive fallback: how many, the
    /// latest, and whether the schedule in force is on the fallback for it.
    #[serde(flatten)]
    pub declines: Declines,
    /// The simulated peak of counted bytes of the plan in force (what the budget bounds): a
    /// plan that fits has it within the budget.
    pub predicted_peak_bytes: Option<u64>,
    /// The simulated peak of the allocator's pool under the plan in force (the profiled planner's
    /// block reuse, fragmentation included): what a caching allocator would reserve.
    #[serde(default)]
    pub predicted_pool_bytes: Option<u64>,
    /// The period (ops per iteration) of the schedule the plan in force was made for: the
    /// loop's period when one is reported (a plan made for an earlier schedule is dropped
    /// when the schedule changes).
    #[serde(default)]
    pub planned_period: Option<usize>,
    /// The candidate plans judged by the simulator for the plan in force (see
    /// [`crate::plan::build`]): each planner's fit, peaks and predicted time.
    #[serde(default)]
    pub plan_choices: Vec<PlanChoice>,
    /// The planner whose plan is in force: the cheapest that fits; `None` when none fits
    /// (no plan is followed then, and the reactive fallback keeps the budget alone).
    #[serde(default)]
    pub plan_chosen: Option<String>,
    /// The transfer time per iteration the plan in force expects not to hide, in seconds.
    pub predicted_exposed_seconds: Option<f64>,
    /// Offloads and recomputations per iteration in the plan in force.
    pub planned_offloads: usize,
    /// Recomputations per iteration in the plan in force.
    pub planned_recomputes: usize,
}

/// The device under the swap layer: its inner allocator's figures and memory, and the
/// peers.
///
/// Part of [`Report`](super::Report); its fields' JSON keys are the report's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeviceReport {
    /// The device's total memory, when the backend can tell it (CUDA).
    pub device_memory_bytes: Option<u64>,
    /// The inner allocator's figures now (CubeCL backends: every stream burn-swap uses on the
    /// device added up); `None` on backends without them.
    pub allocator: Option<AllocatorUsage>,
    /// The highest allocator figures, sampled after every op and transfer. Unlike
    /// `peak_bytes` (what burn-swap counts), these include the allocator's padding, its
    /// free pages and buffers outside burn-swap's books.
    pub allocator_peak: Option<AllocatorUsage>,
    /// The streams burn-swap runs device work on (the op threads', the send and receive
    /// workers'), each with the allocator's figures of its pools as last read; a stream whose
    /// pools are another's (`shared`) is not added again to `allocator`.
    #[serde(default)]
    pub allocator_streams: Vec<StreamUsage>,
    /// Times every stream's idle buffers and free pages were given back because the
    /// allocator reserved more than the budget.
    #[serde(default)]
    pub allocator_cleanups: u64,
    /// The op after which the allocator reserved the most over the budget (every stream,
    /// before any cleanup), and whether its temporaries were known then; `None` when it
    /// never did. An op's temporaries (the buffers it reserves beyond its outputs) are
    /// learned the first time an op of its shape runs; room is made for them after.
    #[serde(default)]
    pub reserved_over: Option<ReservedOver>,
    /// Op shapes whose temporaries were learned from the allocator, and the largest
    /// temporaries of any (bytes).
    #[serde(default)]
    pub temporaries: (usize, u64),
    /// Per peer (empty without peers): capacity, bytes held, sent and fetched, and
    /// the achieved bandwidth of its link.
    pub peers: Vec<PeerStat>,
    /// Offloads that put some or all of their bytes on the host because the peers had no
    /// room for them.
    pub peer_fallbacks: u64,
}

/// The workload as burn-swap saw it: ops, the smallest budget it runs under, its period
/// and its iterations' peaks.
///
/// Part of [`Report`](super::Report); its fields' JSON keys are the report's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkloadReport {
    /// Ops run, drops and reads included.
    pub ops: u64,
    /// The largest working set of one op (its inputs and outputs): the smallest budget under
    /// which this workload can run.
    pub largest_op_bytes: u64,
    /// The smallest budget the ops since the counters were reset could have run under: for
    /// each op, its inputs and outputs plus the resident bytes that could not have left while
    /// it ran (strided views without a way back), the largest of these. A run of the same
    /// workload under this budget fits (tested); `largest_op_bytes` alone may not.
    pub minimum_budget_bytes: u64,
    /// The training loop's period in ops, once detected.
    pub period: Option<usize>,
    /// Counted peak of each of the last complete iterations.
    pub iteration_peaks: Vec<IterationPeak>,
    /// Ops the trace recorded since it began (`restart_trace`, or the training thread
    /// judged): the training thread's, or every thread's before one is judged.
    #[serde(default)]
    pub traced_ops: u64,
    /// Ops of other threads (a data loader's, a metrics thread's) that ran and were counted
    /// but left out of the trace since it began: where they fall among the step's ops
    /// depends on thread timing, so they take no place in the iteration.
    #[serde(default)]
    pub untraced_ops: u64,
    /// Entries of the op log the recorder read off the per-op fast path since the trace
    /// began (finding the period, checking a broken schedule, recognising one kept before):
    /// over `traced_ops`, the trace's work per op, which stays bounded however long the
    /// iteration is.
    #[serde(default)]
    pub trace_reads: u64,
    /// The op thread's time inside burn-swap's engine, estimated from one op in 32 timed in
    /// parts.
    #[serde(default)]
    pub layer_time: LayerTime,
}

/// The op thread's time inside burn-swap's engine since the counters were reset, estimated
/// from one op in 32 timed whole and in parts (chosen by count, not by time) and scaled to
/// every op. burn-router's route before each op reaches the engine (building its
/// `OperationIr`) is not in it: on an op-bound model that is most of what the layer costs
/// (the book's *Measurements*).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerTime {
    /// Ops timed.
    pub timed_ops: u64,
    /// The engine's own time on the op thread, the inner backend's ops left out.
    pub engine_seconds: f64,
    /// Of it, closing each op's record in the trace (the schedule's checks, analyses).
    pub trace_seconds: f64,
    /// Of it, following the plan after each op (its steps and copies handed over, the
    /// iteration's end, the hand-off to the planner).
    pub follow_seconds: f64,
    /// The inner backend's ops (their launch, on an asynchronous backend).
    pub inner_seconds: f64,
}

/// Where the ops' exposed wait went (the parts add up to
/// [`TransferReport::exposed_wait_seconds`]): what a plan that predicts its transfers hidden but
/// waits anyway got wrong.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ExposedWait {
    /// Copies back made on the op's path: nothing fetched the tensor ahead of its use.
    pub fetch_seconds: f64,
    /// Fetches started ahead (planned, or by the fallback) still in flight at their use or
    /// at their planned wait: started too late, or slower than the link predicted.
    pub prefetch_seconds: f64,
    /// Room for an op: offloads in flight waited for (a planned offload's device bytes go
    /// when its copy is done).
    pub room_seconds: f64,
    /// Room for an op: offloads made on the op's path (the fallback's victims, when what
    /// was planned did not make room).
    #[serde(default)]
    pub offload_seconds: f64,
}

/// Offloads of tensors of one shape and dtype, and what compression did to them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompressionStat {
    /// Shape.
    pub shape: Vec<usize>,
    /// Data type, as Burn names it.
    pub dtype: String,
    /// Offloads of such tensors.
    pub offloads: u64,
    /// Their raw bytes.
    pub raw_bytes: u64,
    /// The bytes they moved.
    pub moved_bytes: u64,
    /// `raw_bytes / moved_bytes`.
    pub ratio: f64,
}

/// One peer's figures in the report.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PeerStat {
    /// Its name.
    pub name: String,
    /// Its capacity for offloaded bytes.
    pub capacity_bytes: u64,
    /// Bytes it holds now.
    pub held_bytes: u64,
    /// The most bytes it held.
    pub peak_held_bytes: u64,
    /// Bytes sent to it.
    pub sent_bytes: u64,
    /// Bytes fetched back from it.
    pub fetched_bytes: u64,
    /// Pieces sent to it.
    pub pieces: u64,
    /// Achieved bandwidth of the link (bytes moved over the time its pieces took), bytes per
    /// second; 0 before anything moved.
    pub bandwidth: f64,
}
