//! What was measured of the machine: the copy links (probed, or learned from the copies
//! made), the CPU codec's throughput, and the allocator's pools and the device's memory.

use std::sync::mpsc;

use super::observed_copies::ObservedCopies;
use crate::exec::link_probe::ProbeNews;
use crate::exec::pools::Pools;
use crate::exec::temporaries::Temporaries;
use crate::plan::profile::Links;

/// The hand-over time that the links report instead of the one measured
/// (`unstable::set_handover_seconds`), in nanoseconds; `u64::MAX` for none.
pub(crate) static HANDOVER_OVERRIDE: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(u64::MAX);

/// The links that every engine plans with instead of measuring them
/// (`unstable::set_links`): tests pin them so that a plan does not depend on how fast the
/// machine copied when the links were measured.
pub(crate) static PINNED_LINKS: std::sync::Mutex<Option<Links>> = std::sync::Mutex::new(None);

/// The measured figures of a device and its links.
#[derive(Default)]
pub(super) struct Machine {
    /// The measured copy throughput, once measured.
    pub links: Option<Links>,
    /// The link probe running on the send worker, beside the ops.
    pub probe: Option<RunningProbe>,
    /// The transfer workers' copies, timed: the links where none could be measured.
    pub observed: ObservedCopies,
    /// The CPU codec's measured throughput (raw bytes per second), once measured.
    pub codec_bandwidth: Option<f64>,
    /// Whether the inner backend gives its allocator's figures (sampled after each op).
    pub allocator: bool,
    /// The allocator's pools on the compute streams (what the device reserves).
    pub pools: Pools,
    /// What ops reserve beyond their outputs, learned from the allocator.
    pub temporaries: Temporaries,
    /// The device's total memory, when the backend can tell it.
    pub device_memory: Option<u64>,
}

impl Machine {
    /// The links kept (pinned ones first), with the hand-over override; else those the
    /// workers' copies show.
    pub fn known_links(&self) -> Option<Links> {
        if let Some(pinned) = pinned_links() {
            return Some(pinned);
        }
        let Some(mut links) = self.links.clone() else {
            return self.observed.links();
        };
        let handover = HANDOVER_OVERRIDE.load(std::sync::atomic::Ordering::Relaxed);
        if handover != u64::MAX
            && let Some(here) = links.on_thread.as_mut()
        {
            here.handover_seconds = handover as f64 * 1e-9;
        }
        Some(links)
    }

    /// Whether the link probe is running beside the ops.
    pub fn link_probe_running(&self) -> bool {
        self.probe.is_some()
    }
}

/// The links pinned for every engine, if any.
pub(super) fn pinned_links() -> Option<Links> {
    PINNED_LINKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// The link probe while it runs on the send worker: where it reports, and the bytes the books
/// count for its temporary tensors until its copies are made.
pub(super) struct RunningProbe {
    pub report: ProbeReport,
    /// Bytes lent from the budget (zero once the copies are made).
    pub lent: u64,
    /// When it was queued.
    pub queued: std::time::Instant,
}

/// Where the link probe reports.
pub(super) type ProbeReport = mpsc::Receiver<ProbeNews>;
