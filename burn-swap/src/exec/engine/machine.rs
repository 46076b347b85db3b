//! What was measured of the machine: the copy links (probed, or learned from the copies
//! made), the CPU codec's throughput, and the allocator's pools and the device's memory.

use std::sync::mpsc;

use super::observed_copies::ObservedCopies;
use crate::exec::link_probe::ProbeNews;
use crate::exec::pools::Pools;
use crate::exec::temporaries::Temporaries;
use crate::plan::profile::Links;

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
