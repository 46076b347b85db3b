//! Keeping the schedule in force: each op checked against the one a period before, a break
//! healed or resynchronised, an earlier schedule taken up again when it comes back.

use std::ops::Range;

use super::{
    FIRST_ANALYSIS, Iteration, RECALLED, RECOGNISED_AFTER, REORDER_FRACTION, Recognition, Recorder,
    SWAP_OPS, SWAP_RESUME, Schedule, same_ops,
};
use crate::trace::period;

impl Recorder {
    /// Extends the schedule's verified stretch by the op just recorded when it keeps the
    /// period (one comparison per op). After a break (an op inserted once, such as a
    /// periodic log read), the schedule resynchronises as soon as one full period matches
    /// again: the boundary moves with the inserted ops and the numbering continues.
    #[inline]
    pub(super) fn verify_last(&mut self) {
        if self.recognised.is_some() {
            self.verify_recognised();
            return;
        }
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
        self.watch_kept();
        self.recognise();
    }

    /// Checks the op just recorded against the iteration the schedule in force was
    /// recognised by, while its first iteration runs; from its second on (or at the first
    /// op that differs) the ops are checked against the ones a period before again.
    #[inline(never)]
    fn verify_recognised(&mut self) {
        let (Some(s), Some(recognised)) = (self.schedule, self.recognised.as_ref()) else {
            self.recognised = None;
            return;
        };
        let last = self.next_index() - 1;
        let at = (last - recognised.from) as usize;
        let signatures = &recognised.iteration.signatures;
        let matches = at < signatures.len()
            && s.verified_end == last
            && self.ops[(last - self.base) as usize].signature == signatures[at];
        if matches {
            if let Some(s) = self.schedule.as_mut() {
                s.verified_end = last + 1;
            }
            return;
        }
        self.recognised = None;
        self.verify_last_slow();
    }

    /// Keeps the last complete iteration of the schedule in force, which has just broken,
    /// among the iterations schedules are recognised by (the latest [`RECALLED`], one per
    /// content), when each of its ops was the one a period before: an iteration the schedule
    /// held through a few swapped or reordered ops is a variant of it, not a schedule.
    fn keep_iteration(&mut self) {
        let (Some((_, _, range)), Some(content)) = (self.last_complete(), self.schedule_content())
        else {
            return;
        };
        if self.run_start > range.start {
            return;
        }
        if self.iterations.last().is_some_and(|i| i.content == content) {
            return;
        }
        let local = (range.start - self.base) as usize..(range.end - self.base) as usize;
        self.read(local.len() * (1 + self.iterations.len()));
        let signatures: Vec<u64> = self.ops[local].iter().map(|o| o.signature).collect();
        // An inner loop is not a schedule to recognise: a block of identical layers found
        // (and broken) before the iteration that holds it. Whichever of the two was kept
        // first, the one whose first ops come inside the other's iteration goes.
        if self
            .iterations
            .iter()
            .any(|i| i.content != content && begins_inside(&signatures, &i.signatures))
        {
            return;
        }
        self.iterations
            .retain(|i| i.content != content && !begins_inside(&i.signatures, &signatures));
        if self.iterations.len() >= RECALLED {
            self.iterations.remove(0);
        }
        self.iterations.push(Iteration {
            signatures,
            content,
        });
    }

    /// While the schedule in force does not hold (and none is being recognised), watches for
    /// the first ops of an iteration kept before: an op that begins one is a candidate
    /// boundary, as a departure among an iteration's first ops is (`verify_schedule`), and a
    /// candidate whose ops so far begin none is dropped at once, so that the next op may be
    /// one. A schedule that comes back after an iteration of none kept (a length seen once,
    /// an evaluation pass) is so recognised too, not only one that follows a schedule that
    /// held up to its boundary.
    fn watch_kept(&mut self) {
        if self.recognised.is_some() || self.iterations.is_empty() || self.healthy() {
            return;
        }
        if let Some(boundary) = self.candidate
            && self.kept_begun_at(boundary).is_none()
        {
            self.candidate = None;
        }
        let last = self.next_index() - 1;
        if self.candidate.is_none() && self.kept_begun_at(last).is_some() {
            self.candidate = Some(last);
        }
    }

    /// The iteration kept, the latest first, whose first ops are the ops from the global
    /// index `from` to the last recorded: of another schedule than the one in force, or of
    /// that one where it had not held for a period's ops or more before `from` (it comes
    /// back after an iteration of another length). Not sooner: a schedule that breaks for a
    /// few inserted ops resumes or heals (`verify_schedule`), and a block of identical
    /// layers that broke at its iteration's own ops gives way to the iteration's period.
    fn kept_begun_at(&self, from: u64) -> Option<&Iteration> {
        if from < self.base {
            return None;
        }
        let so_far = &self.ops[(from - self.base) as usize..];
        self.read(so_far.len() * self.iterations.len());
        let current = self.schedule_content();
        let away = self
            .schedule
            .map_or(0, |s| from.saturating_sub(s.verified_end));
        let own_back = self.schedule.is_some_and(|s| away >= s.period as u64);
        self.iterations.iter().rev().find(|i| {
            (Some(i.content) != current || own_back)
                && i.signatures.len() >= so_far.len()
                && so_far
                    .iter()
                    .zip(&i.signatures)
                    .all(|(o, &signature)| o.signature == signature)
        })
    }

    /// Once the iteration that begins at the `candidate` boundary (where the schedule in force
    /// broke, or where the first ops of a kept iteration came while it did not hold) has run
    /// [`RECOGNISED_AFTER`] ops (fewer when the schedule is shorter), and the schedule has not
    /// resumed meanwhile (a few swapped or inserted ops), the iteration kept whose first ops
    /// these are ([`Recorder::kept_begun_at`]) becomes the schedule in force from that
    /// boundary: its ops are checked against that iteration until its own first is complete.
    /// A loop fed batches of a few lengths at random (each length a schedule of its own,
    /// seldom twice in a row) so takes up each length's schedule, and its plan, in the
    /// iteration it comes back in.
    fn recognise(&mut self) {
        let Some(boundary) = self.candidate else {
            return;
        };
        let (Some(s), false) = (self.schedule, self.healthy()) else {
            self.candidate = None;
            return;
        };
        let last = self.next_index() - 1;
        let seen = (last + 1).saturating_sub(boundary) as usize;
        if seen < RECOGNISED_AFTER.min(s.period) {
            return;
        }
        self.candidate = None;
        if boundary < self.base || self.iterations.is_empty() {
            return;
        }
        let current = self.schedule_content();
        let Some(found) = self.kept_begun_at(boundary).cloned() else {
            return;
        };
        let period = found.signatures.len();
        let own = Some(found.content) == current;
        if own && self.analyse_if_due() {
            // The schedule's own iteration come back is a heal: the window analysed first,
            // when due, in case a longer period explains it (see `heal`).
            return;
        }
        tracing::debug!(
            period,
            anchor = boundary,
            "burn-swap: a schedule held before recognised by its first ops"
        );
        self.recognised = Some(Recognition {
            iteration: found,
            at: last,
            from: boundary,
        });
        // A candidate set where the schedule in force broke is at one of its boundaries; one
        // watched for (`watch_kept`), wherever the kept iteration's first ops came.
        if period == s.period && boundary >= s.anchor && (boundary - s.anchor) % period as u64 == 0
        {
            // Iterations as long, at the same boundaries: the schedule's place and numbering
            // stay (so does its key: the executor tells the plans apart by their content).
            // Its periodic stretch starts again at the boundary: what it covers without a
            // break is what an analysis weighs a longer period against (`analyse`), and a
            // loop inside the step, broken and recognised again a few hundred times per
            // step, would otherwise claim to cover the whole window and keep the step's
            // period from being taken.
            self.schedule = Some(Schedule {
                verified_end: last + 1,
                ..s
            });
        } else {
            // Its own iteration come back elsewhere (after one of another length) goes on
            // with its numbering, as a schedule resynchronised does.
            let first_iteration = if own && s.verified_end >= s.anchor + s.period as u64 {
                s.first_iteration + (s.verified_end - s.anchor) / s.period as u64
            } else {
                0
            };
            self.schedule = Some(Schedule {
                period,
                anchor: boundary,
                first_iteration,
                periodic_from: boundary,
                verified_end: last + 1,
            });
            self.summarised_to = boundary;
            self.reset_timing(period);
        }
        self.run_start = boundary;
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
            && index >= self.recall_after
        {
            let end = local + 1;
            let found = period::Stretch {
                period: p,
                start: end - 2 * p,
                end,
            };
            let before = self.schedule_key();
            self.read(self.ops.len());
            let live: Vec<u64> = self.ops.iter().map(|o| o.live_before).collect();
            self.adopt(found, &live);
            if self.schedule_key() == before {
                // Refused (a loop inside the iteration, a stretch that computes nothing): the
                // try read the whole window, so the next waits a quarter of it.
                self.recall_after = index + (self.ops.len() / 4).max(1) as u64;
            }
        }
    }

    /// Once the schedule in force has held a complete iteration, forgets the schedules kept
    /// or recalled before it that are loops inside that iteration (a time step, a layer, an
    /// optimizer's per-parameter update, found while the first iterations ran): an inner
    /// loop is never the training step when a longer repeat holds, and one recognised again
    /// after a break would be followed, and planned for, in place of the step. A kept
    /// iteration is such a loop when its first ops come inside the step's iteration and it is
    /// shorter; a recalled period is forgotten with its kept iteration, or, shorter than the
    /// step's, when none of its length is kept. Once per schedule, `O(period)`.
    pub(super) fn forget_inner_loops(&mut self) {
        let Some((s, _, range)) = self.last_complete() else {
            return;
        };
        self.cleared_for = Some((s.period, s.anchor));
        if range.start < self.base {
            return;
        }
        let local = (range.start - self.base) as usize..(range.end - self.base) as usize;
        self.read(local.len() * (1 + self.iterations.len()));
        let step: Vec<u64> = self.ops[local].iter().map(|o| o.signature).collect();
        let before = self.iterations.len();
        self.iterations
            .retain(|i| i.signatures.len() >= step.len() || !begins_inside(&i.signatures, &step));
        let kept = &self.iterations;
        self.recalled.retain(|r| {
            r.period >= s.period || kept.iter().any(|i| i.signatures.len() == r.period)
        });
        if self.iterations.len() < before {
            tracing::debug!(
                period = s.period,
                forgotten = before - self.iterations.len(),
                "burn-swap: schedules that are loops inside the training step forgotten"
            );
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
            if s.verified_end == last {
                // The schedule held up to here: keep its last iteration and, where this
                // iteration departs from it among its first ops (another schedule's differ
                // there: a batch of another length is uploaded first), watch whether it is a
                // schedule kept before (`recognise`). Ops swapped or reordered later in the
                // iteration are left to the checks above.
                self.keep_iteration();
                let position = last.saturating_sub(s.anchor) % s.period as u64;
                if last >= s.anchor && position < RECOGNISED_AFTER as u64 {
                    self.candidate = Some(last - position);
                }
            }
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
        self.read(2 * len);
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
        if !self.analyse_if_due() {
            self.resync(end);
        }
    }

    /// Analyses the window when an analysis is a quarter due; whether that changed the
    /// schedule in force (its period or its place).
    fn analyse_if_due(&mut self) -> bool {
        let due = self.analysed_len.max(FIRST_ANALYSIS) as u64 / 4;
        if self.next_index() - self.analysed_at < due {
            return false;
        }
        let before = self.schedule.map(|s| (s.period, s.anchor));
        self.analyse();
        self.schedule.map(|s| (s.period, s.anchor)) != before
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
        self.read(p);
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
        self.recognised = None;
        self.candidate = None;
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

/// Whether the first ops of `inner` (as many as a schedule is recognised by) come in
/// `outer` past its first op: `inner` is a loop inside `outer`'s iteration.
pub(super) fn begins_inside(inner: &[u64], outer: &[u64]) -> bool {
    let head = &inner[..inner.len().min(RECOGNISED_AFTER)];
    !head.is_empty() && outer.windows(head.len()).skip(1).any(|w| w == head)
}
