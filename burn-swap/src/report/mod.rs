//! The report: what burn-swap did on a device, as counted by the swap layer.

mod as_text;
mod parts;
mod table;

use serde::{Deserialize, Serialize};

use crate::config::{EvictionScore, Policy};
use crate::exec::counters::{Counters, Wait};
use crate::exec::engine::Figures;
pub use crate::exec::{
    AllocatorUsage, Declines, FallbackRoom, PeerStat, PlanDecline, PlanTakeover, ReservedOver,
    StreamRole, StreamUsage,
};
pub use crate::plan::PlanChoice;
pub use parts::{
    CompressionReport, CompressionStat, DeviceReport, ExposedWait, LayerTime, MemoryReport,
    PlanReport, TransferReport, WorkloadReport,
};
pub use table::format_bytes;

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
                tracked_tensors: f.tracked.tensors,
                kept_for_recipes: f.tracked.kept_for_recipes,
                device_handles: f.tracked.handles,
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
                room_search_seconds: seconds(c.room_search_nanos),
                handover_seconds: seconds(c.handover_nanos),
                room_searches: c.room_searches,
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
                fallback_rooms: c.fallback_rooms.clone(),
                planning_seconds: seconds(c.planning_nanos),
                planning_op_thread_seconds: seconds(c.planning_op_thread_nanos),
                link_probe_seconds: seconds(c.link_probe_nanos),
                link_probe_waits: c.link_probe_waits,
                link_probe_started_op: c.link_probe_op,
                plans_reused: c.plans_reused,
                plan_takeovers: c.plan_takeovers.clone(),
                declines: c.declines.clone(),
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
                reserved_over: f.reserved_over.clone(),
                temporaries: f.temporaries,
                peers: f.peers,
                peer_fallbacks: f.peer_fallbacks,
            },
            workload: WorkloadReport {
                ops: c.ops,
                largest_op_bytes: c.largest_op,
                minimum_budget_bytes: c.minimum_budget,
                period: f.period,
                iteration_peaks: f.iteration_peaks,
                layer_time: {
                    let clock = &c.op_clock;
                    let scaled = |nanos: u64| clock.scaled(nanos, c.ops);
                    LayerTime {
                        timed_ops: clock.sampled,
                        engine_seconds: scaled(
                            clock.engine_nanos.saturating_sub(clock.inner_nanos),
                        ),
                        trace_seconds: scaled(clock.trace_nanos),
                        follow_seconds: scaled(clock.follow_nanos),
                        inner_seconds: scaled(clock.inner_nanos),
                    }
                },
                traced_ops: f.traced_ops,
                untraced_ops: f.untraced_ops,
                trace_reads: f.trace_reads,
            },
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report is plain data and always serialises")
    }
}
