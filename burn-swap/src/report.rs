//! The report: what burn-swap did on a device, as counted by the swap layer.

use core::fmt;
use serde::{Deserialize, Serialize};

use crate::config::{Compression, EvictionScore, Policy};
use crate::exec::counters::{Counters, Wait};
use crate::exec::engine::Figures;
pub use crate::exec::{
    AllocatorUsage, PeerStat, PlanDecline, PlanTakeover, StreamRole, StreamUsage,
};
pub use crate::plan::PlanChoice;
use crate::trace::IterationPeak;

/// What burn-swap did on one device since it started (or since [`crate::reset_counters`]).
///
/// All byte figures are counted by burn-swap: the sum of the sizes of the tensors it holds
/// (elements × dtype size), not the inner allocator's reservation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Report {
    /// The inner backend's name.
    pub backend: String,
    /// Whether burn-swap was on.
    pub enabled: bool,
    /// The policy in force (in JSON its name: `planned`).
    #[serde(with = "as_text")]
    pub policy: Policy,
    /// The eviction score in force (in JSON its name: `dtr`).
    #[serde(with = "as_text")]
    pub eviction: EvictionScore,
    /// The budget in bytes, `None` when unlimited.
    pub budget_bytes: Option<u64>,
    /// The budget's bytes: resident on the device and held on the host, and their peaks.
    #[serde(flatten)]
    pub memory: MemoryReport,
    /// What left the device and came back: offloads, fetches, recomputations, and the time
    /// the ops waited on them.
    #[serde(flatten)]
    pub transfers: TransferReport,
    /// What compression did to the offloads.
    #[serde(flatten)]
    pub compression: CompressionReport,
    /// The plans: how many were made, reused, declined and followed, what the one in force
    /// predicts, and the candidates it was chosen from.
    #[serde(flatten)]
    pub plan: PlanReport,
    /// The device under the swap layer: its inner allocator's figures and memory, and the
    /// peers.
    #[serde(flatten)]
    pub device: DeviceReport,
    /// The workload as burn-swap saw it: ops, the smallest budget it runs under, its period
    /// and its iterations' peaks.
    #[serde(flatten)]
    pub workload: WorkloadReport,
}

/// The budget's bytes: resident on the device and held on the host, and their peaks.
///
/// Part of [`Report`]; its fields' JSON keys are the report's own.
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
}

/// What left the device and came back: offloads, fetches, recomputations, and the time
/// the ops waited on them.
///
/// Part of [`Report`]; its fields' JSON keys are the report's own.
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
/// Part of [`Report`]; its fields' JSON keys are the report's own.
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
/// Part of [`Report`]; its fields' JSON keys are the report's own.
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
    /// Seconds the planners took, in total (on the planner thread: see
    /// [`crate::SwapConfig::with_background_planning`]).
    pub planning_seconds: f64,
    /// Of the op threads' time, the seconds spent on planning: handing each plan's trace to
    /// the planner (and the planning itself when it runs on the op's thread).
    #[serde(default)]
    pub planning_op_thread_seconds: f64,
    /// Plans taken back, at once, from those kept for a schedule that ran before (a loop
    /// that alternates schedules plans each once).
    #[serde(default)]
    pub plans_reused: u64,
    /// When each plan took over (the latest 32): the op, its schedule's period, whether it
    /// was kept from before, how long it took to make and how many iterations ran under
    /// the fallback meanwhile.
    #[serde(default)]
    pub plan_takeovers: Vec<PlanTakeover>,
    /// Plans not followed under [`crate::Policy::Planned`] because they cost more per
    /// iteration (transfers exposed, recomputation; predicted when ready, or measured over
    /// their first iterations) than the reactive fallback measured on the same schedule
    /// (see [`crate::SwapConfig::with_plans_judged`]): their schedules stay on the fallback.
    #[serde(default)]
    pub plans_declined: u64,
    /// Each plan declined (the latest 32): the op, its schedule's period, the figures it was
    /// judged by.
    #[serde(default)]
    pub plan_declines: Vec<PlanDecline>,
    /// The schedule in force runs on the reactive fallback because its plan was declined
    /// (the planned policy's choice, not a failure).
    #[serde(default)]
    pub plan_declined: bool,
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
/// Part of [`Report`]; its fields' JSON keys are the report's own.
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
/// Part of [`Report`]; its fields' JSON keys are the report's own.
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
}

/// Counted bytes of a device right now: cheap enough to call every step (unlike [`crate::report()`],
/// which also analyses the trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Memory {
    /// Bytes resident on the device.
    pub resident_bytes: u64,
    /// Highest resident bytes since the last [`crate::reset_counters`].
    pub peak_bytes: u64,
    /// Bytes offloaded to host memory.
    pub host_bytes: u64,
    /// Of `host_bytes`, those in pinned host memory (see [`MemoryReport::pinned_host_bytes`]).
    #[serde(default)]
    pub pinned_host_bytes: u64,
    /// The budget in force, `None` when unlimited.
    pub budget_bytes: Option<u64>,
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

/// The per-shape compression figures, largest raw bytes first, at most 32.
fn compression_by_tensor(c: &Counters) -> Vec<CompressionStat> {
    let mut stats: Vec<CompressionStat> = c
        .moves
        .iter()
        .map(|((dims, dtype), &(offloads, raw, moved))| CompressionStat {
            shape: dims.as_slice().to_vec(),
            dtype: format!("{dtype:?}"),
            offloads,
            raw_bytes: raw,
            moved_bytes: moved,
            ratio: raw as f64 / moved.max(1) as f64,
        })
        .collect();
    stats.sort_by(|a, b| b.raw_bytes.cmp(&a.raw_bytes).then(a.shape.cmp(&b.shape)));
    stats.truncate(32);
    stats
}

impl Report {
    /// The report of a device whose inner backend is named `backend`, from the engine's
    /// figures.
    pub(crate) fn new(backend: String, f: Figures) -> Self {
        let c = &f.counters;
        let seconds = |nanos: u64| nanos as f64 * 1e-9;
        Report {
            backend,
            enabled: f.config.enabled,
            policy: f.config.policy,
            eviction: f.config.eviction,
            budget_bytes: f.budget,
            memory: MemoryReport {
                host_budget_bytes: f.config.host_budget(),
                resident_bytes: f.books.resident,
                peak_bytes: f.books.peak,
                host_bytes: f.books.host,
                peak_host_bytes: f.books.peak_host,
                pinned_host_bytes: f.books.pinned,
                peak_pinned_host_bytes: f.books.peak_pinned,
                budget_overshoots: c.budget_overshoots,
            },
            transfers: TransferReport {
                offloads: c.offloads,
                offloaded_bytes: c.offloaded_bytes,
                offload_seconds: seconds(c.offload_nanos),
                fetches: c.fetches,
                fetched_bytes: c.fetched_bytes,
                fetch_seconds: seconds(c.fetch_nanos),
                failed_offloads: c.failed_offloads,
                failed_fetches: c.failed_fetches,
                whole_buffer_offloads: c.whole_buffer_offloads,
                evictions: c.evictions,
                recomputes: c.recomputes,
                recompute_seconds: seconds(c.recompute_nanos),
                exposed_wait_seconds: seconds(c.exposed_wait_nanos()),
                exposed_wait: ExposedWait {
                    fetch_seconds: seconds(c.exposed_by_cause[Wait::Fetch as usize]),
                    prefetch_seconds: seconds(c.exposed_by_cause[Wait::Prefetch as usize]),
                    room_seconds: seconds(c.exposed_by_cause[Wait::Room as usize]),
                    offload_seconds: seconds(c.exposed_by_cause[Wait::Offload as usize]),
                },
                planned_waits: c.planned_waits,
                unawaited_prefetch_reads: c.unawaited_prefetch_reads,
            },
            compression: CompressionReport {
                mode: f.config.compression,
                raw_bytes: c.raw_bytes,
                moved_bytes: c.moved_bytes,
                ratio: if c.moved_bytes == 0 {
                    1.0
                } else {
                    c.raw_bytes as f64 / c.moved_bytes as f64
                },
                compressed_offloads: c.compressed_offloads,
                device_compressed_offloads: c.device_compressed,
                device_decompressed_fetches: c.device_decompressed,
                codec_seconds: seconds(c.codec_nanos),
                by_tensor: compression_by_tensor(c),
            },
            plan: PlanReport {
                plans: c.plans,
                planned_iterations: c.planned_iterations,
                fallback_bytes_under_plan: c.fallback_bytes_under_plan,
                planning_seconds: seconds(c.planning_nanos),
                planning_op_thread_seconds: seconds(c.planning_op_thread_nanos),
                plans_reused: c.plans_reused,
                plan_takeovers: c.plan_takeovers.clone(),
                plans_declined: c.plans_declined,
                plan_declines: c.plan_declines.clone(),
                plan_declined: c.plan_declined,
                predicted_peak_bytes: c.predicted_peak,
                predicted_pool_bytes: c.predicted_pool,
                planned_period: c.planned_period,
                plan_chosen: c
                    .plan_chosen
                    .and_then(|i| c.plan_choices.get(i))
                    .map(|choice| choice.planner.clone()),
                plan_choices: c.plan_choices.clone(),
                predicted_exposed_seconds: c.predicted_exposed_nanos.map(seconds),
                planned_offloads: f.planned_offloads,
                planned_recomputes: f.planned_recomputes,
            },
            device: DeviceReport {
                device_memory_bytes: f.device_memory,
                allocator: c.allocator,
                allocator_peak: c.allocator_peak,
                allocator_streams: f.streams.clone(),
                allocator_cleanups: f.allocator_cleanups,
                peers: f.peers,
                peer_fallbacks: f.peer_fallbacks,
            },
            workload: WorkloadReport {
                ops: c.ops,
                largest_op_bytes: c.largest_op,
                minimum_budget_bytes: c.minimum_budget,
                period: f.period,
                iteration_peaks: f.iteration_peaks,
            },
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report is plain data and always serialises")
    }
}

/// Formats bytes with a binary unit, e.g. `12.0 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "burn-swap report ({})", self.backend)?;
        let mut rows = Vec::new();
        self.memory_rows(&mut rows);
        self.transfer_rows(&mut rows);
        self.plan_rows(&mut rows);
        self.device_rows(&mut rows);
        // The names as wide as the widest (at least 16 characters: a planner's name can be
        // longer); values in 32, a longer one overflowing its row only.
        let keys = rows
            .iter()
            .map(|(k, _)| k.chars().count())
            .fold(16, usize::max);
        writeln!(f, "|{:-<w$}|{:-<34}|", "", "", w = keys + 2)?;
        for (k, v) in rows {
            writeln!(f, "| {k:<keys$} | {v:>32} |")?;
        }
        Ok(())
    }
}

/// The rows of the report's table, in order.
type Rows = Vec<(String, String)>;

impl Report {
    /// Policy, budget and the counted bytes.
    fn memory_rows(&self, rows: &mut Rows) {
        let budget = self
            .budget_bytes
            .map(format_bytes)
            .unwrap_or_else(|| "unlimited".into());
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        row("enabled", self.enabled.to_string());
        row("policy", format!("{} / {}", self.policy, self.eviction));
        row("budget", budget);
        row("peak resident", format_bytes(self.memory.peak_bytes));
        row("resident now", format_bytes(self.memory.resident_bytes));
        let host_budget = self
            .memory
            .host_budget_bytes
            .map_or(String::new(), |b| format!(" of {}", format_bytes(b)));
        let pinned = if self.memory.peak_pinned_host_bytes > 0 {
            format!(
                " ({} pinned)",
                format_bytes(self.memory.peak_pinned_host_bytes)
            )
        } else {
            String::new()
        };
        row(
            "peak on host",
            format!(
                "{}{host_budget}{pinned}",
                format_bytes(self.memory.peak_host_bytes)
            ),
        );
    }

    /// Offloads, fetches, compression, recomputation and the time they left exposed.
    fn transfer_rows(&self, rows: &mut Rows) {
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        let moved = |n: u64, bytes: u64| format!("{n} ({})", format_bytes(bytes));
        row(
            "offloads",
            moved(self.transfers.offloads, self.transfers.offloaded_bytes),
        );
        row(
            "fetches",
            moved(self.transfers.fetches, self.transfers.fetched_bytes),
        );
        row(
            "transfer time",
            format!(
                "{:.3} s out, {:.3} s in",
                self.transfers.offload_seconds, self.transfers.fetch_seconds
            ),
        );
        row(
            "failed transfers",
            format!(
                "{} out, {} in",
                self.transfers.failed_offloads, self.transfers.failed_fetches
            ),
        );
        if self.memory.budget_overshoots > 0 {
            row(
                "budget overshoots",
                self.memory.budget_overshoots.to_string(),
            );
        }
        if self.compression.mode != Compression::Off {
            row(
                "compression",
                format!(
                    "{} -> {} ({:.2}x)",
                    format_bytes(self.compression.raw_bytes),
                    format_bytes(self.compression.moved_bytes),
                    self.compression.ratio
                ),
            );
            row(
                "compressed",
                format!(
                    "{} offloads, codec {:.3} s",
                    self.compression.compressed_offloads, self.compression.codec_seconds
                ),
            );
        }
        row(
            "recomputes",
            format!(
                "{} ({:.3} s), {} evicted",
                self.transfers.recomputes,
                self.transfers.recompute_seconds,
                self.transfers.evictions
            ),
        );
        let w = &self.transfers.exposed_wait;
        row(
            "exposed wait",
            format!(
                "{:.3} s (fetches on the op's path {:.3} s, fetches still in flight {:.3} s, \
                 offloads in flight {:.3} s, offloads on the op's path {:.3} s)",
                self.transfers.exposed_wait_seconds,
                w.fetch_seconds,
                w.prefetch_seconds,
                w.room_seconds,
                w.offload_seconds
            ),
        );
    }

    /// The plan followed and the candidates it was chosen from: the predicted time of each
    /// that fits (the chosen one marked), the smallest budget of each that does not.
    fn plan_rows(&self, rows: &mut Rows) {
        if let Some(last) = self.plan.plan_declines.last() {
            rows.push((
                "declined".into(),
                format!(
                    "{} plans; the latest {:.2} ms {} vs the fallback's {:.2} ms per \
                     iteration",
                    self.plan.plans_declined,
                    last.plan_seconds * 1e3,
                    if last.measured {
                        "measured"
                    } else {
                        "predicted"
                    },
                    last.fallback_seconds * 1e3
                ),
            ));
        }
        let Some(predicted) = self.plan.predicted_peak_bytes else {
            return;
        };
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        row(
            "plan",
            format!(
                "{} off + {} rec, {:.1} ms planning ({:.1} ms of it on the op thread)",
                self.plan.planned_offloads,
                self.plan.planned_recomputes,
                self.plan.planning_seconds * 1e3,
                self.plan.planning_op_thread_seconds * 1e3
            ),
        );
        row(
            "followed",
            format!(
                "{} iterations of {} plans made, {} kept plans reused; the fallback made room \
                 of {} under them",
                self.plan.planned_iterations,
                self.plan.plans,
                self.plan.plans_reused,
                format_bytes(self.plan.fallback_bytes_under_plan)
            ),
        );
        let pool = self
            .plan
            .predicted_pool_bytes
            .map_or(String::new(), |p| format!(" (pool {})", format_bytes(p)));
        row(
            "predicted peak",
            format!("{}{pool}", format_bytes(predicted)),
        );
        for choice in &self.plan.plan_choices {
            let chosen = self.plan.plan_chosen.as_deref() == Some(choice.planner.as_str());
            let verdict = if choice.fits {
                format!("{:.2} ms/iter", choice.seconds() * 1e3)
            } else {
                format!("needs {}", format_bytes(choice.smallest_budget_bytes))
            };
            let mark = if chosen { "chosen, " } else { "" };
            row(&format!("  {}", choice.planner), format!("{mark}{verdict}"));
        }
    }

    /// The allocator, the device, the peers, and the workload's figures.
    fn device_rows(&self, rows: &mut Rows) {
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        if let Some(peak) = self.device.allocator_peak {
            row(
                "allocator peak",
                format!(
                    "{} in use, {} reserved",
                    format_bytes(peak.in_use),
                    format_bytes(peak.reserved)
                ),
            );
        }
        for s in &self.device.allocator_streams {
            row(
                &format!("  {:?} stream {}", s.role, s.stream),
                format!(
                    "{} in use, {} reserved ({} padding, {} idle){}",
                    format_bytes(s.usage.in_use),
                    format_bytes(s.usage.reserved),
                    format_bytes(s.usage.padding),
                    format_bytes(s.usage.idle()),
                    if s.shared {
                        "; pools shared, counted once"
                    } else {
                        ""
                    }
                ),
            );
        }
        if self.device.allocator_cleanups > 0 {
            row(
                "allocator cleanups",
                self.device.allocator_cleanups.to_string(),
            );
        }
        if let Some(total) = self.device.device_memory_bytes {
            row("device memory", format_bytes(total));
        }
        for peer in &self.device.peers {
            row(
                &peer.name,
                format!(
                    "{} out, {:.2} GB/s",
                    format_bytes(peer.sent_bytes),
                    peer.bandwidth / 1e9
                ),
            );
        }
        if !self.device.peers.is_empty() {
            row("peer fallbacks", self.device.peer_fallbacks.to_string());
        }
        row("ops", self.workload.ops.to_string());
        row("largest op", format_bytes(self.workload.largest_op_bytes));
        row(
            "minimum budget",
            format_bytes(self.workload.minimum_budget_bytes),
        );
        row(
            "period",
            self.workload
                .period
                .map(|p| format!("{p} ops"))
                .unwrap_or_else(|| "not detected".into()),
        );
        if let Some(last) = self.workload.iteration_peaks.last() {
            row(
                "last iter. peak",
                format!("#{}: {}", last.iteration, format_bytes(last.peak_bytes)),
            );
        }
    }
}

/// Serde of a configuration enum as its text (`planned`, `lru`, `on:0.7`), so that the
/// report's JSON keeps the strings it has always had while the report holds the enum.
mod as_text {
    use core::fmt::Display;
    use core::str::FromStr;

    pub fn serialize<T: Display, S: serde::Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: serde::Deserializer<'de>,
    {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
