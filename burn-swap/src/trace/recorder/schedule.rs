//! Keeping the schedule in force: each op checked against the one a period before, a break
//! healed or resynchronised, an earlier schedule taken up again when it comes back.

use std::ops::Range;

use super::{
    FIRST_ANALYSIS, REORDER_FRACTION, Recorder, SWAP_OPS, SWAP_RESUME, Schedule, same_ops,
};
use crate::trace::period;

impl Recorder {
    /// Extends the schedule's verified stretch by the op just recorded when it keeps the
    /// period (one comparison per op). After a break (an op inserted once, such as a
    /// periodic log read), the schedule resynchronises as soon as one full period matches
    /// again: the boundary moves with the inserted ops and the numbering continues.
    #[inline]
    pub(super) fn verify_last(&mut self) {
        // The common case inline: the schedule holds up to the op before, and this op is the
        // one a period before.
        if let Some(s) = self.schedule.as_mut() {
            let local = self.ops.len() - 1;
            let last = self.base + local as u64;
            if s.verified_end == last
                && local >= s.period
                && self.ops[local].signature == self.ops[local - s.period].signature
            {
                s.verified_end = last + 1;
                return;
            }
        }
        self.verify_last_slow();
    }

    #[inline(never)]
    pub(super) fn verify_last_slow(&mut self) {
        self.verify_schedule();
        self.recall();
    }

    /// Counts, for each period of an earlier schedule, the ops in a row that match the op a
    /// period before while the schedule in force does not hold; when one period has matched
    /// a full iteration, takes it up again (if it closes iterations).
    pub(super) fn recall(&mut self) {
        let healthy = self.healthy();
        let local = self.ops.len() - 1;
        let index = self.base + local as u64;
        let mut due = None;
        for r in &mut self.recalled {
            let p = r.period;
            if r.last + 1 != index {
                r.matched = 0;
            }
            r.last = index;
            if !healthy && local >= p && self.ops[local].signature == self.ops[local - p].signature
            {
                r.matched += 1;
                if r.matched == p && due.is_none() {
                    due = Some(p);
                }
            } else {
                r.matched = 0;
            }
        }
        if let Some(p) = due
            && self.schedule.map(|s| s.period) != Some(p)
            && local + 1 >= 2 * p
        {
            let end = local + 1;
            let found = period::Stretch {
                period: p,
                start: end - 2 * p,
                end,
            };
            let live: Vec<u64> = self.ops.iter().map(|o| o.live_before).collect();
            self.adopt(found, &live);
        }
    }

    pub(super) fn verify_schedule(&mut self) {
        let Some(s) = self.schedule else {
            return;
        };
        let last = self.base + self.ops.len() as u64 - 1;
        let local = self.ops.len() - 1;
        let p = s.period;
        if local >= p && self.ops[local].signature == self.ops[local - p].signature {
            let differed = self.run_start.saturating_sub(s.verified_end);
            // The matching run has just reached the length that resumes the schedule (the
            // only op at which the differing stretch is judged: it does not change after).
            let resumed = last + 1 - self.run_start == SWAP_RESUME as u64 && p > 2 * SWAP_RESUME;
            if s.verified_end == last
                || resumed
                    && (differed <= SWAP_OPS as u64
                        || self.reordered(s.verified_end..self.run_start, p))
            {
                // A few ops that differed from the op a period before (two swapped, such as
                // an old batch's drop and the next batch's upload; or another thread's reads,
                // such as a metrics thread's, landing among the step's ops at another place
                // each iteration), then a run that matches again at the same alignment: the
                // schedule holds on, its anchor, numbering and op times kept (and so the
                // plan made for it), instead of waiting a full period to be found again.
                if let Some(s) = self.schedule.as_mut() {
                    s.verified_end = last + 1;
                }
            } else if last + 1 - self.run_start >= p as u64 {
                self.heal(last + 1);
            }
        } else {
            self.run_start = last + 1;
        }
    }

    /// Whether the ops of the global range `stretch` are those of the range a period `p`
    /// before, in another order, and the stretch is short beside the period: the iteration
    /// did the same work, with ops of other threads interleaved differently. Runs once per
    /// break, when the matching run after it reaches [`SWAP_RESUME`] ops.
    pub(super) fn reordered(&self, stretch: Range<u64>, p: usize) -> bool {
        let len = stretch.end.saturating_sub(stretch.start) as usize;
        if len == 0 || len > p / REORDER_FRACTION || stretch.start < self.base + p as u64 {
            return false;
        }
        let from = (stretch.start - self.base) as usize;
        let signatures = |at: usize| self.ops[at..at + len].iter().map(|o| o.signature);
        same_ops(signatures(from), signatures(from - p))
    }

    /// A broken schedule whose period has matched again up to `end`: the window is analysed
    /// first when an analysis is a quarter due, and the schedule resynchronises only if none
    /// explains more of it. A period inside the iteration (identical layers) breaks at every
    /// iteration's own ops and heals a block later, so it would otherwise look healthy
    /// whenever a periodic analysis came due, and the iteration's period would wait for the
    /// next doubling of the window (the benches' GPT preset: its 1,731 ops found at op 8,515
    /// instead of 6,315, after a 208-op block).
    pub(super) fn heal(&mut self, end: u64) {
        let due = self.analysed_len.max(FIRST_ANALYSIS) as u64 / 4;
        if self.next_index() - self.analysed_at >= due {
            let before = self.schedule.map(|s| (s.period, s.anchor));
            self.analyse();
            if self.schedule.map(|s| (s.period, s.anchor)) != before {
                return;
            }
        }
        self.resync(end);
    }

    /// Re-anchors a broken schedule on the period that has matched again up to `end`.
    pub(super) fn resync(&mut self, end: u64) {
        let Some(s) = self.schedule else {
            return;
        };
        let p = s.period;
        if end < self.base + p as u64 {
            return;
        }
        let start = (end - self.base) as usize - p;
        let live: Vec<u64> = self.ops[start..start + p]
            .iter()
            .map(|o| o.live_before)
            .collect();
        let boundary = period::phase(
            period::Periodicity {
                period: p,
                start: 0,
            },
            &live,
        );
        let done = if s.verified_end >= s.anchor + p as u64 {
            (s.verified_end - s.anchor) / p as u64
        } else {
            0
        };
        let anchor = self.base + (start + boundary) as u64;
        tracing::debug!(
            period = p,
            anchor,
            "burn-swap: training loop period resumed"
        );
        self.schedule = Some(Schedule {
            period: p,
            anchor,
            first_iteration: s.first_iteration + done,
            periodic_from: self.run_start,
            verified_end: end,
        });
        self.summarised_to = anchor;
        self.reset_timing(p);
    }

    /// Whether a full analysis is due on the per-op path: while the schedule does not hold
    /// (none yet, or broken: a one-off break resynchronises by itself, a wrong period found too
    /// early is replaced here), and at least as many ops have passed since the last analysis as
    /// the window held then, so that analyses cost `O(log n)` per op amortised.
    #[inline]
    pub(super) fn needs_analysis(&self) -> bool {
        !self.healthy()
            && self.next_index() - self.analysed_at >= self.analysed_len.max(FIRST_ANALYSIS) as u64
    }

    /// Whether the schedule still holds up to the last op.
    pub(super) fn healthy(&self) -> bool {
        self.schedule
            .is_some_and(|s| s.verified_end == self.next_index())
    }
}
