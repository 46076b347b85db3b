//! What the engine counts as it works: events, times and the allocator's figures. The bytes
//! on and off the device are the residency's books (`super::residency::Books`), not these.

use crate::report::{AllocatorUsage, Declines, FallbackRoom, PlanTakeover};

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
    /// The first [`crate::report::FALLBACK_ROOMS_KEPT`] of those times, each where it happened.
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
    /// When each plan took over, the latest [`crate::report::TAKEOVERS_KEPT`].
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
