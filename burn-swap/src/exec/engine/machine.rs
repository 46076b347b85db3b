//! What was measured of the machine: the copy links (probed, or learned from the copies
//! made) and the link probe's news while it runs, the CPU codec's throughput, and the
//! allocator's pools and the device's memory.

use std::sync::mpsc;

use super::observed_copies::ObservedCopies;
use crate::exec::counters::Counters;
use crate::exec::link_probe::{ProbeFailed, ProbeNews};
use crate::exec::pools::Pools;
use crate::exec::residency::Residency;
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

    /// Takes the probe's news that has come, without waiting: `None` while it runs, else
    /// whether it measured the links (kept). Its lent bytes are taken back once its copies
    /// are made.
    pub fn poll_link_probe(
        &mut self,
        books: &mut Residency,
        counters: &mut Counters,
    ) -> Option<bool> {
        loop {
            let news = match self.probe.as_ref()?.report.try_recv() {
                Ok(news) => Some(news),
                Err(mpsc::TryRecvError::Empty) => return None,
                Err(mpsc::TryRecvError::Disconnected) => None,
            };
            if let Some(measured) = self.take_probe_news(news, books, counters) {
                return Some(measured);
            }
        }
    }

    /// Waits for the probe's report, when it runs; whether it measured the links.
    pub fn wait_for_link_probe(&mut self, books: &mut Residency, counters: &mut Counters) -> bool {
        loop {
            let Some(probe) = self.probe.as_ref() else {
                return self.links.is_some();
            };
            let news = probe.report.recv().ok();
            if let Some(measured) = self.take_probe_news(news, books, counters) {
                return measured;
            }
        }
    }

    /// Waits until the probe's temporaries are off the device (its copies made), when it
    /// runs: the books then count only what the device still holds.
    pub fn wait_for_link_probe_copies(&mut self, books: &mut Residency, counters: &mut Counters) {
        while let Some(probe) = self.probe.as_ref().filter(|p| p.lent > 0) {
            let news = probe.report.recv().ok();
            self.take_probe_news(news, books, counters);
        }
    }

    /// Takes one piece of the probe's news (`None`: its worker went away, a panic took it,
    /// before it reported): `Some` when the probe ended, with whether it measured the links.
    fn take_probe_news(
        &mut self,
        news: Option<ProbeNews>,
        books: &mut Residency,
        counters: &mut Counters,
    ) -> Option<bool> {
        match news {
            Some(ProbeNews::CopiesMade) => {
                self.take_back_probe_bytes(books);
                None
            }
            Some(ProbeNews::Done(report)) => {
                Some(self.end_link_probe(Some(report), books, counters))
            }
            None => Some(self.end_link_probe(None, books, counters)),
        }
    }

    /// The probe's copies are made: its temporaries are off the device.
    fn take_back_probe_bytes(&mut self, books: &mut Residency) {
        if let Some(probe) = self.probe.as_mut() {
            books.take_back(std::mem::take(&mut probe.lent));
        }
    }

    /// The probe reported (`None`: its worker went away, a panic took it, before it could):
    /// its bytes taken back, its links kept when it measured them.
    fn end_link_probe(
        &mut self,
        report: Option<Result<Links, ProbeFailed>>,
        books: &mut Residency,
        counters: &mut Counters,
    ) -> bool {
        self.take_back_probe_bytes(books);
        if let Some(probe) = self.probe.take() {
            counters.link_probe_nanos += probe.queued.elapsed().as_nanos() as u64;
        }
        match report {
            Some(Ok(links)) => {
                self.links = Some(links);
                true
            }
            Some(Err(failed)) => {
                count_failed_probe(counters, &failed);
                false
            }
            None => {
                tracing::warn!("burn-swap: the link probe ended without a report");
                false
            }
        }
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

/// A probe's copy that failed is a failed transfer like any other (its tensors were
/// temporaries, so nothing is lost).
pub(super) fn count_failed_probe(counters: &mut Counters, failed: &ProbeFailed) {
    tracing::warn!(error = %failed.error, "burn-swap: could not measure copy throughput");
    counters.count_failed_copy(failed.to_device);
}
