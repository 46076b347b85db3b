//! Measuring the copy throughput between the device and host memory (the trial run
//! measures the links too), beside the ops: the probe (`exec::link_probe`) runs on the send
//! worker, its temporary tensors counted in the books until its copies are made. The probe
//! sizes are `plan::profile::probe_sizes`'.

use std::sync::mpsc;

use burn_ir::BackendIr;

use super::Engine;
use super::machine::{self, ProbeReport, RunningProbe};
use crate::exec::link_probe::{self, ProbeFailed, ProbeNews, ProbeRoute};
use crate::exec::transfer::Errand;
use crate::plan::profile::{self, Links};

/// The links as far as they are known now, without waiting ([`Engine::links_beside`]).
pub(super) enum LinksNow {
    /// The probe runs on the send worker: ask again later.
    Measuring,
    /// Measured, pinned, or (where no probe fits or it failed) as the workers' own copies
    /// show them so far; `None` when nothing shows them yet.
    Known(Option<Links>),
}

/// How a request to probe went.
enum Probe {
    /// Queued on the send worker.
    Queued,
    /// Measured on this thread (no send worker): the links are kept.
    Measured,
    /// No probe: too few sizes fit, or the measurement on this thread failed.
    None,
}

impl<B: BackendIr> Engine<B> {
    /// The copy throughput between device and host, measured on first request with
    /// temporary tensors that fit in the budget's headroom, waiting for the probe: what
    /// [`Engine::links_beside`] gives once it has reported. The planners read them; the
    /// reactive policy does not (its choices are the same whatever was measured:
    /// `plan::reactive::LinkModel`).
    pub fn links(&mut self) -> Option<Links> {
        match self.links_beside() {
            LinksNow::Known(links) => links,
            LinksNow::Measuring => {
                self.history.counters.link_probe_waits += 1;
                self.wait_for_link_probe();
                self.machine.known_links()
            }
        }
    }

    /// The links without waiting for them. On first request the probe is queued on the send
    /// worker with temporary tensors that fit in the budget's headroom (the largest counted in
    /// the books until its copies are made: the fallback keeps the budget around it), and
    /// `Measuring` comes back until it has reported (polled before each op). Where too few
    /// probe sizes fit (a budget the fallback keeps nearly full) or the measurement failed,
    /// the links the workers' own copies show so far (not kept: a later request probes
    /// again). Where the send worker cannot run, the probe runs on this thread, without the
    /// op thread's figures (every copy is made here then).
    pub(super) fn links_beside(&mut self) -> LinksNow {
        if let Some(pinned) = machine::pinned_links() {
            return LinksNow::Known(Some(pinned));
        }
        if self.machine.links.is_none() {
            if self.machine.probe.is_some() {
                match self.poll_link_probe() {
                    None => return LinksNow::Measuring,
                    Some(false) => return LinksNow::Known(self.machine.observed.links()),
                    Some(true) => {}
                }
            } else {
                match self.start_link_probe() {
                    Probe::Queued => return LinksNow::Measuring,
                    Probe::None => return LinksNow::Known(self.machine.observed.links()),
                    Probe::Measured => {}
                }
            }
        }
        LinksNow::Known(self.machine.known_links())
    }

    /// Starts measuring the links beside the ops where a plan will cost copies with them and
    /// nothing measured them yet: called at a schedule's iteration ends before one of its
    /// iterations is profiled (from the first on), so that the probe runs while the
    /// iteration the plan is made from is profiled, and the plan is not held back for the
    /// iterations the probe takes afterwards.
    pub(super) fn measure_links_ahead(&mut self) {
        if self.settings.config.policy.moves_by_copy()
            && self.machine.links.is_none()
            && self.machine.probe.is_none()
            && machine::pinned_links().is_none()
        {
            let _ = self.links_beside();
        }
    }

    /// Whether the link probe is running beside the ops (asked by the rooms that wait for
    /// copies in flight).
    pub(super) fn link_probe_running(&self) -> bool {
        self.machine.link_probe_running()
    }

    /// Where the probe's copies go: as planned offloads go.
    fn probe_route(&self) -> ProbeRoute<B> {
        ProbeRoute {
            device: self.handles.device().clone(),
            peers: self.copies.peers.clone(),
            pool: self.copies.transfers.shared_pool(),
        }
    }

    /// The probe of `sizes` as an errand for the send worker, and where it reports.
    fn probe_errand(&self, sizes: Vec<u64>) -> (Errand<B>, ProbeReport) {
        let (news, receive) = mpsc::channel();
        let route = self.probe_route();
        let errand = Errand {
            device: route.device.clone(),
            work: Box::new(move || link_probe::run_on_worker::<B>(&route, &sizes, &news)),
        };
        (errand, receive)
    }

    /// Queues the probe on the send worker with the sizes that fit in half the headroom, the
    /// largest lent from the budget until its copies are made; on this thread where the
    /// worker cannot take it.
    fn start_link_probe(&mut self) -> Probe {
        let headroom = self
            .budget()
            .map_or(u64::MAX, |b| b.saturating_sub(self.resident()));
        let Some(sizes) = profile::probe_sizes(headroom) else {
            return Probe::None;
        };
        self.history.counters.link_probe_op = Some(self.history.recorder.next_index());
        let lent = sizes.iter().copied().max().unwrap_or(0);
        let (errand, receive) = self.probe_errand(sizes.clone());
        if self.copies.transfers.errand(errand).is_ok() {
            self.residency.lend(lent);
            self.machine.probe = Some(RunningProbe {
                report: receive,
                lent,
                queued: std::time::Instant::now(),
            });
            return Probe::Queued;
        }
        // No send worker: here, on the op's thread, the temporaries within the headroom.
        match link_probe::copies::<B>(&self.probe_route(), &sizes) {
            Ok(copies) => {
                self.machine.links = Some(copies.links(None));
                Probe::Measured
            }
            Err(failed) => {
                count_failed_probe(&mut self.history.counters, &failed);
                Probe::None
            }
        }
    }

    /// Takes the probe's news that has come, without waiting: `None` while it runs, else
    /// whether it measured the links (kept). Its lent bytes are taken back once its copies
    /// are made.
    pub(super) fn poll_link_probe(&mut self) -> Option<bool> {
        loop {
            let news = match self.machine.probe.as_ref()?.report.try_recv() {
                Ok(news) => Some(news),
                Err(mpsc::TryRecvError::Empty) => return None,
                Err(mpsc::TryRecvError::Disconnected) => None,
            };
            if let Some(measured) = self.take_probe_news(news) {
                return Some(measured);
            }
        }
    }

    /// Waits for the probe's report, when it runs; whether it measured the links.
    pub(super) fn wait_for_link_probe(&mut self) -> bool {
        loop {
            let Some(probe) = self.machine.probe.as_ref() else {
                return self.machine.links.is_some();
            };
            let news = probe.report.recv().ok();
            if let Some(measured) = self.take_probe_news(news) {
                return measured;
            }
        }
    }

    /// Waits until the probe's temporaries are off the device (its copies made), when it
    /// runs: the books then count only what the device still holds.
    pub(super) fn wait_for_link_probe_copies(&mut self) {
        while let Some(probe) = self.machine.probe.as_ref().filter(|p| p.lent > 0) {
            let news = probe.report.recv().ok();
            self.take_probe_news(news);
        }
    }

    /// Takes one piece of the probe's news (`None`: its worker went away, a panic took it,
    /// before it reported): `Some` when the probe ended, with whether it measured the links.
    fn take_probe_news(&mut self, news: Option<ProbeNews>) -> Option<bool> {
        match news {
            Some(ProbeNews::CopiesMade) => {
                self.take_back_probe_bytes();
                None
            }
            Some(ProbeNews::Done(report)) => Some(self.end_link_probe(Some(report))),
            None => Some(self.end_link_probe(None)),
        }
    }

    /// The probe's copies are made: its temporaries are off the device.
    fn take_back_probe_bytes(&mut self) {
        if let Some(probe) = self.machine.probe.as_mut() {
            self.residency.take_back(std::mem::take(&mut probe.lent));
        }
    }

    /// The probe reported (`None`: its worker went away, a panic took it, before it could):
    /// its bytes taken back, its links kept when it measured them.
    fn end_link_probe(&mut self, report: Option<Result<Links, ProbeFailed>>) -> bool {
        self.take_back_probe_bytes();
        if let Some(probe) = self.machine.probe.take() {
            self.history.counters.link_probe_nanos += probe.queued.elapsed().as_nanos() as u64;
        }
        match report {
            Some(Ok(links)) => {
                self.machine.links = Some(links);
                true
            }
            Some(Err(failed)) => {
                count_failed_probe(&mut self.history.counters, &failed);
                false
            }
            None => {
                tracing::warn!("burn-swap: the link probe ended without a report");
                false
            }
        }
    }

    /// Drops the links measured, once a probe running has reported: the next request
    /// probes again.
    pub fn forget_links(&mut self) {
        self.wait_for_link_probe();
        self.machine.links = None;
    }

    /// The probe's copies for the given sizes (bytes) on the send worker, waited for, the
    /// wake-up of a parked worker included: what a transfer of each size takes there. Outside
    /// the books and not kept (the caller makes sure they fit on the device); `None` when the
    /// send worker is unavailable or a copy failed.
    pub fn measure_transfers(&mut self, sizes: &[u64]) -> Option<Links> {
        self.settle_everything();
        let (errand, receive) = self.probe_errand(sizes.to_vec());
        self.copies.transfers.errand(errand).ok()?;
        receive.iter().find_map(|news| match news {
            ProbeNews::CopiesMade => None,
            ProbeNews::Done(report) => Some(report.ok()),
        })?
    }
}

/// A probe's copy that failed is a failed transfer like any other (its tensors were
/// temporaries, so nothing is lost).
fn count_failed_probe(counters: &mut crate::exec::counters::Counters, failed: &ProbeFailed) {
    tracing::warn!(error = %failed.error, "burn-swap: could not measure copy throughput");
    counters.count_failed_copy(failed.to_device);
}
