//! Measuring the copy throughput between the device and host memory (the trial run
//! measures the links too), beside the ops: the probe (`exec::link_probe`) runs on the send
//! worker, its temporary tensors counted in the books until its copies are made. The probe
//! sizes are `plan::profile::probe_sizes`'.

use burn_ir::BackendIr;

use super::Engine;
use super::copies::Copies;
use super::machine::Machine;
use super::machine::{self, RunningProbe, count_failed_probe};
use crate::exec::counters::Counters;
use crate::exec::link_probe::{self, ProbeNews};
use crate::exec::residency::Residency;
use crate::plan::profile::{self, Links};

/// The links as far as they are known now, without waiting ([`LinkMeter::links_beside`]).
pub(super) enum LinksNow {
    /// The probe runs on the send worker: ask again later.
    Measuring,
    /// Measured, pinned, or (where no probe fits or it failed) as the workers' own copies
    /// show them so far; `None` when nothing shows them yet.
    Known(Option<Links>),
}

/// How a request to probe went.
enum ProbeStart {
    /// Queued on the send worker.
    Queued,
    /// Measured on this thread (no send worker): the links are kept.
    Measured,
    /// No probe: too few sizes fit, or the measurement on this thread failed.
    None,
}

/// What measuring the links needs of a device: the machine (the links kept, the probe
/// running, the copies observed), the books (the probe's largest temporary tensor is lent
/// from the budget until its copies are made), the counters, where the probe's copies go,
/// and, as they are when asked, the budget's headroom and the ops recorded
/// ([`Engine::link_meter`]).
pub(crate) struct LinkMeter<'a, B: BackendIr> {
    machine: &'a mut Machine,
    books: &'a mut Residency,
    counters: &'a mut Counters,
    copies: &'a mut Copies<B>,
    device: &'a B::Device,
    headroom: u64,
    now: u64,
}

impl<B: BackendIr> Engine<B> {
    /// The device's link meter, as the engine stands now.
    #[inline]
    pub(crate) fn link_meter(&mut self) -> LinkMeter<'_, B> {
        let headroom = self
            .budget()
            .map_or(u64::MAX, |b| b.saturating_sub(self.resident()));
        LinkMeter {
            machine: &mut self.machine,
            books: &mut self.residency,
            counters: &mut self.history.counters,
            copies: &mut self.copies,
            device: self.handles.device(),
            headroom,
            now: self.history.recorder.next_index(),
        }
    }

    /// Whether the link probe is running beside the ops (asked by the rooms that wait for
    /// copies in flight).
    pub(super) fn link_probe_running(&self) -> bool {
        self.machine.link_probe_running()
    }

    /// Drops the links measured, once a probe running has reported: the next request
    /// probes again.
    pub fn forget_links(&mut self) {
        self.machine
            .wait_for_link_probe(&mut self.residency, &mut self.history.counters);
        self.machine.links = None;
    }

    /// The probe's copies for the given sizes (bytes) on the send worker, waited for, the
    /// wake-up of a parked worker included: what a transfer of each size takes there. Outside
    /// the books and not kept (the caller makes sure they fit on the device); `None` when the
    /// send worker is unavailable or a copy failed.
    pub fn measure_transfers(&mut self, sizes: &[u64]) -> Option<Links> {
        self.settle_everything();
        let (errand, receive) = link_probe::errand(
            self.copies.probe_route(self.handles.device()),
            sizes.to_vec(),
        );
        self.copies.transfers.errand(errand).ok()?;
        receive.iter().find_map(|news| match news {
            ProbeNews::CopiesMade => None,
            ProbeNews::Done(report) => Some(report.ok()),
        })?
    }
}

impl<B: BackendIr> LinkMeter<'_, B> {
    /// The copy throughput between device and host, measured on first request with
    /// temporary tensors that fit in the budget's headroom, waiting for the probe: what
    /// [`LinkMeter::links_beside`] gives once it has reported. The planners read them; the
    /// reactive policy does not (its choices are the same whatever was measured:
    /// `plan::reactive::LinkModel`).
    pub(crate) fn links(&mut self) -> Option<Links> {
        match self.links_beside() {
            LinksNow::Known(links) => links,
            LinksNow::Measuring => {
                self.counters.link_probe_waits += 1;
                self.machine.wait_for_link_probe(self.books, self.counters);
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
                match self.machine.poll_link_probe(self.books, self.counters) {
                    None => return LinksNow::Measuring,
                    Some(false) => return LinksNow::Known(self.machine.observed.links()),
                    Some(true) => {}
                }
            } else {
                match self.start_link_probe() {
                    ProbeStart::Queued => return LinksNow::Measuring,
                    ProbeStart::None => return LinksNow::Known(self.machine.observed.links()),
                    ProbeStart::Measured => {}
                }
            }
        }
        LinksNow::Known(self.machine.known_links())
    }

    /// Starts measuring the links beside the ops where a plan will cost copies with them
    /// (`moves_by_copy`: the policy moves tensors by copy) and
    /// nothing measured them yet: called at a schedule's iteration ends before one of its
    /// iterations is profiled (from the first on), so that the probe runs while the
    /// iteration the plan is made from is profiled, and the plan is not held back for the
    /// iterations the probe takes afterwards.
    pub(super) fn measure_ahead(&mut self, moves_by_copy: bool) {
        if moves_by_copy
            && self.machine.links.is_none()
            && self.machine.probe.is_none()
            && machine::pinned_links().is_none()
        {
            let _ = self.links_beside();
        }
    }

    /// Queues the probe on the send worker with the sizes that fit in half the headroom, the
    /// largest lent from the budget until its copies are made; on this thread where the
    /// worker cannot take it.
    fn start_link_probe(&mut self) -> ProbeStart {
        let Some(sizes) = profile::probe_sizes(self.headroom) else {
            return ProbeStart::None;
        };
        self.counters.link_probe_op = Some(self.now);
        let lent = sizes.iter().copied().max().unwrap_or(0);
        let (errand, receive) =
            link_probe::errand(self.copies.probe_route(self.device), sizes.clone());
        if self.copies.transfers.errand(errand).is_ok() {
            self.books.lend(lent);
            self.machine.probe = Some(RunningProbe {
                report: receive,
                lent,
                queued: std::time::Instant::now(),
            });
            return ProbeStart::Queued;
        }
        // No send worker: here, on the op's thread, the temporaries within the headroom.
        match link_probe::copies::<B>(&self.copies.probe_route(self.device), &sizes) {
            Ok(copies) => {
                self.machine.links = Some(copies.links(None));
                ProbeStart::Measured
            }
            Err(failed) => {
                count_failed_probe(self.counters, &failed);
                ProbeStart::None
            }
        }
    }

    /// The links a plan is made with (none for a policy that moves nothing by copy), once
    /// they are known: `None` while the probe measures them beside the ops (the plan is made
    /// at a later iteration's end; the fallback keeps the budget meanwhile). Planning on the
    /// op's thread waits for the probe instead, as it waits for the plan.
    pub(super) fn for_plan(
        &mut self,
        moves_by_copy: bool,
        background_planning: bool,
    ) -> Option<Option<Links>> {
        if !moves_by_copy {
            return Some(None);
        }
        if !background_planning {
            return Some(self.links());
        }
        match self.links_beside() {
            LinksNow::Known(links) => Some(links),
            LinksNow::Measuring => None,
        }
    }
}
