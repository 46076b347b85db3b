//! What the engine counts as it works: events, times and the allocator's figures. The bytes
//! on and off the device are the residency's books (`super::residency::Books`), not these.

use serde::{Deserialize, Serialize};

/// Running counters of one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Counters {
    pub offloads: u64,
    pub offloaded_bytes: u64,
    pub offload_nanos: u64,
    pub fetches: u64,
    pub fetched_bytes: u64,
    pub fetch_nanos: u64,
    pub failed_offloads: u64,
    /// Ops whose outputs were larger than the room made for them before they ran.
    pub budget_overshoots: u64,
    pub ops: u64,
    pub largest_op: u64,
    /// The smallest budget the ops counted so far could have run under: the largest of
    /// each op's own bytes plus what could not leave while it ran.
    pub minimum_budget: u64,
    pub evictions: u64,
    pub recomputes: u64,
    pub recompute_nanos: u64,
    /// Time the fallback spent choosing what leaves to make room (listing and ranking the
    /// residents) on the op's thread: neither a wait nor a recomputation, but what a plan
    /// saves besides them.
    pub room_search_nanos: u64,
    /// Times the fallback chose what leaves.
    pub room_searches: u64,
    /// Time the ops waited on transfers, by cause, indexed by [`Wait`].
    pub exposed_by_cause: [u64; 4],
    pub planned_waits: u64,
    /// Reads of a planned prefetch by an op before the wait the cross-queue analysis placed
    /// for it (`Program::fetch_waits`).
    pub unawaited_prefetch_reads: u64,
    /// Fetches that failed (each leaving its copy whole, or, in a backend's own panic, lost),
    /// the link probe's included (its tensors are temporaries).
    pub failed_fetches: u64,
    /// Shared buffers that left as one copy with all their holders (`engine::groups`).
    pub whole_buffer_offloads: u64,
    /// The allocator's figures now and their highest, sampled after each op (all the
    /// device's streams added up); `None` when the backend has none to give.
    pub allocator: Option<AllocatorUsage>,
    pub allocator_peak: Option<AllocatorUsage>,
    pub plans: u64,
    /// Iterations whose last op ran while a plan was followed.
    pub planned_iterations: u64,
    /// Bytes the fallback moved off the device to make room while a plan was followed, from
    /// the plan's first full iteration on.
    pub fallback_bytes_under_plan: u64,
    /// The first [`FALLBACK_ROOMS_KEPT`] of those times, each where it happened.
    pub fallback_rooms: Vec<FallbackRoom>,
    /// The planners' own time (on the planner thread, or on the op's thread when planning
    /// there).
    pub planning_nanos: u64,
    /// The op's thread's time spent planning: the trace handed to the planner, and when
    /// planning runs there, the planning itself and the wait for the link probe.
    pub planning_op_thread_nanos: u64,
    /// The op thread's time inside the engine, one op in every few timed in parts.
    pub op_clock: super::op_clock::OpClock,
    /// The op thread's time handing copies to the transfer workers.
    pub handover_nanos: u64,
    /// The link probes' time from queueing on the send worker to their reports taken.
    pub link_probe_nanos: u64,
    /// Times an op's thread waited for the link probe's report to plan (planning on the op's
    /// thread) or on request; room its temporaries held is waited for as any room is.
    pub link_probe_waits: u64,
    /// The op index the last link probe was started at (queued on the send worker, or made
    /// on the op's thread where no worker takes it).
    pub link_probe_op: Option<u64>,
    /// Plans taken back from those kept for a schedule seen before.
    pub plans_reused: u64,
    /// Plans not followed because they cost more than the fallback (`plan::payoff`).
    pub declines: Declines,
    /// Time waited on transfers, spent recomputing and spent choosing what leaves since the
    /// device began, and, on a backend whose tensors live in host memory, the transfer
    /// workers' copying (it takes the CPU the ops run on), never reset: the clock that
    /// `exec::meter` measures iterations by.
    pub spent_nanos: u64,
    /// When each plan took over, the latest [`TAKEOVERS_KEPT`].
    pub plan_takeovers: Vec<PlanTakeover>,
    pub predicted_peak: Option<u64>,
    pub predicted_pool: Option<u64>,
    /// The period of the schedule the plan in force was made for.
    pub planned_period: Option<usize>,
    /// The candidate plans judged for the plan in force, and which one it is.
    pub plan_choices: Vec<crate::plan::PlanChoice>,
    pub plan_chosen: Option<usize>,
    pub predicted_exposed_nanos: Option<u64>,
    pub raw_bytes: u64,
    pub moved_bytes: u64,
    pub compressed_offloads: u64,
    pub device_compressed: u64,
    pub device_decompressed: u64,
    pub codec_nanos: u64,
    /// Per tensor shape and dtype: offloads, raw bytes, moved bytes (with compression on).
    pub moves: hashbrown::HashMap<(super::dims::Dims, burn_backend::DType), (u64, u64, u64)>,
}

/// Takeovers kept in the counters (the latest).
pub(crate) const TAKEOVERS_KEPT: usize = 32;

/// A plan taking over: where, for which schedule, and what it cost to have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanTakeover {
    /// The op (counted from the device's first) after which the plan took over: the end of an
    /// iteration of its schedule.
    pub op: u64,
    /// The period, in ops, of the schedule it is followed in.
    pub period: usize,
    /// Whether it was a plan kept for this schedule (made when it ran before) rather than a
    /// new one.
    pub reused: bool,
    /// Seconds the planner took to make it (0 for a kept plan).
    pub planning_seconds: f64,
    /// Iterations of its schedule that ran under the fallback while it was made.
    pub waited_iterations: u64,
}

/// Fallback rooms kept in the counters (the first: where a plan first went wrong).
pub(crate) const FALLBACK_ROOMS_KEPT: usize = 16;

/// Room the reactive fallback made while a plan was followed: an op that needed more bytes
/// than the plan predicted for it, where, and by how much.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FallbackRoom {
    /// Ops counted on the device before this one.
    pub op: u64,
    /// The op's place in its iteration (the plan's op numbers).
    pub position: usize,
    /// The counted bytes the plan predicted while the op runs (its simulation).
    pub predicted_bytes: u64,
    /// The counted bytes the op needed: those resident when it asked for room, and what it
    /// asked for.
    pub needed_bytes: u64,
    /// The bytes the fallback moved off the device for it.
    pub freed_bytes: u64,
}

/// The plans not followed under [`crate::Policy::Planned`] because they cost more per
/// iteration (transfers exposed, recomputation; predicted when ready, or measured over their
/// first iterations) than the reactive fallback measured on the same schedule (see
/// [`crate::SwapConfig::with_plans_judged`]): their schedules stay on the fallback. One idea
/// in the report, under the keys it had as three fields (`plans_declined`, `plan_declines`,
/// `declined_in_force`, which reads `plan_declined` too), so that reports written before read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Declines {
    /// How many were declined.
    #[serde(default, rename = "plans_declined")]
    pub count: u64,
    /// Each one declined (the latest 32): the op, its schedule's period, the figures it was
    /// judged by.
    #[serde(default, rename = "plan_declines")]
    pub latest: Vec<PlanDecline>,
    /// The schedule in force runs on the reactive fallback because its plan was declined (the
    /// planned policy's choice, not a failure).
    #[serde(default, rename = "declined_in_force", alias = "plan_declined")]
    pub in_force: bool,
}

impl Declines {
    /// Counts `decline`, keeping the latest `kept`; the schedule in force is on the fallback.
    pub(crate) fn add(&mut self, decline: PlanDecline, kept: usize) {
        self.in_force = true;
        if self.latest.len() >= kept {
            self.latest.remove(0);
        }
        self.count += 1;
        self.latest.push(decline);
    }
}

/// A plan not followed because it did not pay against the reactive fallback measured on its
/// schedule: where, and the figures it was judged by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanDecline {
    /// The op (counted from the device's first) after which it was declined: the end of an
    /// iteration of its schedule.
    pub op: u64,
    /// The period, in ops, of its schedule.
    pub period: usize,
    /// What the plan costs per iteration, in seconds: transfers exposed and recomputation,
    /// as predicted when it was ready, or as measured once it was followed (`measured`).
    pub plan_seconds: f64,
    /// Whether `plan_seconds` was measured (the plan was followed, and cost more than
    /// predicted) rather than predicted.
    pub measured: bool,
    /// What the reactive fallback was measured to cost per iteration on the same schedule.
    pub fallback_seconds: f64,
    /// The fallback's iteration wall time, in seconds (the judgement's slack is a share of
    /// it: `plan::payoff::SLACK`).
    pub iteration_seconds: f64,
}

/// Why an op waited on transfers (the exposed wait's causes, in the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// A copy back made on the op's path: nothing had fetched the tensor ahead of its use.
    Fetch = 0,
    /// A fetch started ahead (planned, or by the fallback) was still in flight at its use
    /// or at its planned wait.
    Prefetch = 1,
    /// Room for the op: offloads in flight waited for (their device bytes go when they are
    /// done).
    Room = 2,
    /// Room for the op: offloads made on the op's path (the fallback's victims).
    Offload = 3,
}

impl Counters {
    /// A copy that failed: a fetch when it was bound for the device, else an offload.
    pub(crate) fn count_failed_copy(&mut self, to_device: bool) {
        if to_device {
            self.failed_fetches += 1;
        } else {
            self.failed_offloads += 1;
        }
    }

    /// Counts `nanos` of exposed wait for `cause`.
    #[inline]
    pub fn add_exposed(&mut self, cause: Wait, nanos: u64) {
        self.exposed_by_cause[cause as usize] += nanos;
        self.spent_nanos += nanos;
    }

    /// Counts `nanos` spent recomputing a tensor.
    #[inline]
    pub fn add_recompute(&mut self, nanos: u64) {
        self.recompute_nanos += nanos;
        self.spent_nanos += nanos;
    }

    /// Counts one search of the fallback for what leaves, which took `nanos`.
    #[inline]
    pub fn add_room_search(&mut self, nanos: u64) {
        self.room_searches += 1;
        self.room_search_nanos += nanos;
        self.spent_nanos += nanos;
    }

    /// Counts `nanos` a transfer worker spent copying on a backend whose tensors live in
    /// host memory: not a wait of the ops, but CPU time taken from them.
    #[inline]
    pub fn add_worker_copy(&mut self, nanos: u64) {
        self.spent_nanos += nanos;
    }

    /// Counts `nanos` the op thread spent handing a copy to a transfer worker (queueing it,
    /// waking the worker): not a wait, but the op thread's time all the same.
    #[inline]
    pub fn add_handover(&mut self, nanos: u64) {
        self.handover_nanos += nanos;
        self.spent_nanos += nanos;
    }

    /// Time the ops waited on transfers, all causes together.
    pub fn exposed_wait_nanos(&self) -> u64 {
        self.exposed_by_cause.iter().sum()
    }

    /// Starts a new measurement: the allocator's peak from its current figures, event counts
    /// from zero; the plan's predictions stay.
    pub fn reset(&mut self) {
        *self = Self {
            predicted_peak: self.predicted_peak,
            predicted_pool: self.predicted_pool,
            planned_period: self.planned_period,
            plan_choices: std::mem::take(&mut self.plan_choices),
            plan_chosen: self.plan_chosen,
            predicted_exposed_nanos: self.predicted_exposed_nanos,
            allocator: self.allocator,
            allocator_peak: self.allocator,
            spent_nanos: self.spent_nanos,
            declines: Declines {
                in_force: self.declines.in_force,
                ..Declines::default()
            },
            ..Self::default()
        };
    }

    /// Clears the figures of the plan in force from the counters (none is in force now).
    pub(crate) fn clear_plan_figures(&mut self) {
        self.declines.in_force = false;
        self.predicted_peak = None;
        self.predicted_pool = None;
        self.planned_period = None;
        self.plan_choices.clear();
        self.plan_chosen = None;
        self.predicted_exposed_nanos = None;
    }
}

/// The inner allocator's own figures for a device, in bytes (CubeCL backends).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatorUsage {
    /// What its pools hand out to live buffers.
    pub in_use: u64,
    /// What its pools hold from the driver (in use, padding, and idle buffers or free
    /// pages).
    pub reserved: u64,
    /// Of what is in use, the bytes buffers were rounded up by (alignment).
    #[serde(default)]
    pub padding: u64,
}

impl AllocatorUsage {
    /// What the pools hold that no live buffer uses: idle buffers and free pages, which a
    /// cleanup gives back.
    pub fn idle(self) -> u64 {
        self.reserved.saturating_sub(self.in_use + self.padding)
    }

    /// The larger of each figure.
    pub fn max(self, other: Self) -> Self {
        Self {
            in_use: self.in_use.max(other.in_use),
            reserved: self.reserved.max(other.reserved),
            padding: self.padding.max(other.padding),
        }
    }
}

impl core::ops::Add for AllocatorUsage {
    type Output = Self;

    /// Both figures added up (the pools of several streams).
    fn add(self, other: Self) -> Self {
        Self {
            in_use: self.in_use + other.in_use,
            reserved: self.reserved + other.reserved,
            padding: self.padding + other.padding,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meters_clock_counts_waits_recomputation_and_the_fallbacks_search() {
        let mut c = Counters::default();
        c.add_exposed(Wait::Fetch, 3);
        c.add_recompute(5);
        c.add_room_search(7);
        assert_eq!(c.spent_nanos, 15);
        assert_eq!(
            (
                c.exposed_wait_nanos(),
                c.recompute_nanos,
                c.room_search_nanos,
                c.room_searches
            ),
            (3, 5, 7, 1)
        );
        // A new measurement starts its counts from zero, never the clock.
        c.reset();
        assert_eq!((c.spent_nanos, c.room_search_nanos), (15, 0));
    }
}
