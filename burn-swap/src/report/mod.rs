//! The report: what burn-swap did on a device, as counted by the swap layer.

mod allocator;
mod as_text;
mod parts;
mod plan_events;
mod table;

use serde::{Deserialize, Serialize};

use crate::config::{EvictionScore, Policy};
pub use crate::plan::PlanChoice;
pub use allocator::{AllocatorUsage, ReservedOver, StreamRole, StreamUsage};
pub use parts::{
    CompressionReport, CompressionStat, DeviceReport, ExposedWait, LayerTime, MemoryReport,
    PeerStat, PlanReport, TransferReport, WorkloadReport,
};
pub use plan_events::{Declines, FallbackRoom, PlanDecline, PlanTakeover};
pub(crate) use plan_events::{FALLBACK_ROOMS_KEPT, TAKEOVERS_KEPT};
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

impl Report {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report is plain data and always serialises")
    }
}
