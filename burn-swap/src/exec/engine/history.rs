//! What happened on a device: the op log the planners read, the moves since the last op was
//! logged, the op clock, and the counts the report gives.

use std::time::Instant;

use crate::config::{Policy, SwapConfig};
use crate::exec::counters::Counters;
use crate::plan::program::Program;
use crate::report::{FALLBACK_ROOMS_KEPT, FallbackRoom};
use crate::trace::OpEvents;
use crate::trace::recorder::{OpCounters, Recorder};
use crate::trace::threads::TrainingThread;

/// The device's history of ops.
#[derive(Default)]
pub(super) struct History {
    pub recorder: Recorder,
    /// Whose ops the recorder records (the training thread's, once judged).
    pub threads: TrainingThread,
    /// What was moved since the last op was recorded (for the trace's per-op events).
    pub events: OpEvents,
    /// Global index of the next op.
    pub now: u64,
    pub counters: Counters,
}

impl History {
    #[inline]
    pub(super) fn recorder_period(&self) -> usize {
        self.recorder.schedule_key().map_or(0, |(p, _)| p)
    }

    /// Counts the op thread's share of planning since `start`.
    pub(super) fn note_op_thread_planning(&mut self, start: Instant) {
        self.counters.planning_op_thread_nanos += start.elapsed().as_nanos() as u64;
    }

    /// Closes the op's record in the trace.
    #[inline]
    pub(super) fn record_end(&mut self, live_before: u64, resident_during: u64, beyond: u64) {
        self.recorder.end(OpCounters {
            nanos: 0,
            live_before,
            events: std::mem::take(&mut self.events),
            resident_during,
            beyond,
        });
    }

    /// Where the fallback made room under a plan: the op, and what the plan predicted there
    /// (the first [`FALLBACK_ROOMS_KEPT`] of the run, where a plan first went wrong).
    pub(super) fn note_fallback_room(
        &mut self,
        program: Option<&Program>,
        needed_bytes: u64,
        freed_bytes: u64,
    ) {
        let counters = &self.counters;
        if counters.fallback_rooms.len() >= FALLBACK_ROOMS_KEPT {
            return;
        }
        let Some(program) = program else {
            return;
        };
        // The op asking for room has not been recorded yet: it comes after the last one.
        let position = self
            .recorder
            .place_of_last()
            .map_or(0, |last| (last.position + 1) % program.period.max(1));
        let room = FallbackRoom {
            op: counters.ops,
            position,
            predicted_bytes: program
                .predicted_live_bytes
                .get(position)
                .copied()
                .unwrap_or(0),
            needed_bytes,
            freed_bytes,
        };
        tracing::debug!(?room, "burn-swap: the fallback made room under a plan");
        self.counters.fallback_rooms.push(room);
    }

    /// What a plan for the schedule in force is kept under: its ops, the budget, the policy
    /// and the planner.
    pub(super) fn plan_content(&self, budget: u64, config: &SwapConfig) -> Option<u64> {
        use core::hash::Hasher;
        let ops = self.recorder.schedule_content()?;
        let mut hasher = crate::trace::signature::FxHasher::default();
        hasher.write_u64(ops);
        hasher.write_u64(budget);
        hasher.write(config.policy.name().as_bytes());
        hasher.write(config.planner.name().as_bytes());
        Some(hasher.finish())
    }

    /// The content of the schedule in force when its plans are judged by what they cost
    /// (the planned policy, plans judged, a budget set); `None` otherwise.
    pub(super) fn judged_content(&self, budget: Option<u64>, config: &SwapConfig) -> Option<u64> {
        if !config.plans_judged || config.policy != Policy::Planned {
            return None;
        }
        budget.and_then(|b| self.plan_content(b, config))
    }
}
