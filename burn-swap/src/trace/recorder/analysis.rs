//! The analysis: the period found over the log, and adopted when it closes iterations.

use burn_ir::TensorId;
use hashbrown::HashMap;

use super::{RECALLED, Recalled, Recorder, Schedule, same_ops};
use crate::trace::period;

impl Recorder {
    /// Finds the period and the iteration boundaries over the current window, keeping the
    /// schedule in force unless a longer periodic stretch is found.
    pub(crate) fn analyse(&mut self) {
        if self.healthy() {
            return;
        }
        self.analysed_at = self.next_index();
        self.analysed_len = self.ops.len();
        // The signatures twice (exact and around the movable ops), each searched at a
        // logarithmic number of lengths.
        let n = self.ops.len();
        self.read(2 * n * (n.max(2).ilog2() as usize + 1));
        let signatures: Vec<u64> = self.ops.iter().map(|o| o.signature).collect();
        let exact = period::detect_recent(&signatures);
        let loose = self.detect_around_movable(&signatures);
        let found = match (exact, loose) {
            (Some(e), Some(l)) if l.cover() > e.cover() => l,
            (Some(e), _) => e,
            (None, Some(l)) => l,
            (None, None) => return,
        };
        let (start, end) = (self.base + found.start as u64, self.base + found.end as u64);
        if let Some(s) = self.schedule {
            if s.period == found.period && start <= s.verified_end && end >= s.verified_end {
                // The same period, continuing the stretch in force: keep its numbering.
                if let Some(s) = self.schedule.as_mut() {
                    s.verified_end = end;
                }
                return;
            }
            if found.cover() as u64 <= s.cover(self.base) && !self.loop_inside(s, found) {
                return;
            }
        }
        self.read(self.ops.len());
        let live: Vec<u64> = self.ops.iter().map(|o| o.live_before).collect();
        self.adopt(found, &live);
    }

    /// Whether the schedule `s` in force is a loop inside the iterations of `found`, a longer
    /// period holding over the window: the last iteration of `s` begins inside the last of
    /// `found` (see `begins_inside`). A loop inside the step (a time step, a few ops repeated
    /// in the backward pass) that breaks and is taken up again a few hundred times per step
    /// stays in force across its breaks, its cover the whole window; the step's period,
    /// found once two steps are in the window, replaces it all the same.
    fn loop_inside(&self, s: super::Schedule, found: period::Stretch) -> bool {
        if s.period >= found.period || found.end > self.ops.len() {
            return false;
        }
        let end = (s.verified_end.min(self.next_index()) - self.base) as usize;
        let Some(start) = end.checked_sub(s.period) else {
            return false;
        };
        self.read(s.period + found.period);
        let inner: Vec<u64> = self.ops[start..end].iter().map(|o| o.signature).collect();
        let outer: Vec<u64> = self.ops[found.end - found.period..found.end]
            .iter()
            .map(|o| o.signature)
            .collect();
        super::schedule::begins_inside(&inner, &outer)
    }

    /// Takes `found` (a stretch of the window) as the schedule in force, its first boundary
    /// where the fewest bytes are live, unless it computes nothing or is a loop inside the
    /// iteration.
    pub(super) fn adopt(&mut self, found: period::Stretch, live: &[u64]) {
        let start = self.base + found.start as u64;
        let end = self.base + found.end as u64;
        // A stretch that only moves data (a model's tensors let go one layer after another
        // once training is done, a loader's uploads) computes nothing: not a training loop.
        let movable = self.kinds.movable();
        let one = found.start..(found.start + found.period).min(self.ops.len());
        if self.ops[one].iter().all(|o| movable[o.kind as usize]) {
            tracing::debug!(
                period = found.period,
                "burn-swap: a periodic stretch that computes nothing passed over"
            );
            return;
        }
        let since = self
            .schedule
            .map_or(self.base, |s| s.verified_end.max(self.base));
        if !period::explains_enough(found.cover() as u64, self.next_index() - since) {
            tracing::debug!(
                period = found.period,
                cover = found.cover(),
                "burn-swap: a short periodic stretch among other ops passed over"
            );
            return;
        }
        let boundary = period::phase(
            period::Periodicity {
                period: found.period,
                start: found.start,
            },
            live,
        );
        if !self.closes_iterations(found, boundary, live) {
            // A loop inside the iteration: the schedule in force (if any) stays, and the
            // iteration's own period is found once two of them are in the window.
            tracing::debug!(
                period = found.period,
                "burn-swap: a period inside the training iteration passed over"
            );
            return;
        }
        let schedule = Schedule {
            period: found.period,
            anchor: self.base + boundary as u64,
            first_iteration: 0,
            periodic_from: start,
            verified_end: end,
        };
        tracing::debug!(
            period = found.period,
            anchor = schedule.anchor,
            "burn-swap: training loop period found"
        );
        self.summarised_to = schedule.anchor;
        self.peaks.clear();
        self.reset_timing(found.period);
        // A stretch that ends before the window does (the loose detection's last movable ops)
        // is a break whose matching run starts now: it resumes as any short difference does.
        self.run_start = if found.end < self.ops.len() {
            self.next_index()
        } else {
            start
        };
        self.schedule = Some(schedule);
        self.recognised = None;
        self.candidate = None;
        if !self.recalled.iter().any(|r| r.period == found.period) {
            if self.recalled.len() >= RECALLED {
                self.recalled.remove(0);
            }
            self.recalled.push(Recalled {
                period: found.period,
                matched: 0,
                last: 0,
            });
        }
    }

    /// Whether `found`, with its first boundary before window op `boundary`, is the training
    /// loop's iteration and not a loop inside it ([`period::closes_iterations`]).
    pub(super) fn closes_iterations(
        &self,
        found: period::Stretch,
        boundary: usize,
        live: &[u64],
    ) -> bool {
        let end = found.end.min(self.ops.len());
        let lean = self.ops[..end].iter().any(|o| o.lean);
        let lives = (!lean).then(|| self.lives(end));
        period::closes_iterations(found.period, boundary, end, live, lives.as_deref())
    }

    /// The lives of the tensors the window's first `end` ops touch, by op index in the
    /// window; uploads (`Init`, `Read`) count as made before it.
    pub(super) fn lives(&self, end: usize) -> Vec<period::Life> {
        self.read(end);
        let kind = |name: &str| self.kinds.names.iter().position(|n| n == name);
        let drop = kind("Drop");
        let uploads = [kind("Init"), kind("Read")];
        let mut lives: Vec<period::Life> = Vec::new();
        let mut index_of: HashMap<TensorId, usize> = HashMap::new();
        for (i, op) in self.ops[..end].iter().enumerate() {
            let kind = Some(op.kind as usize);
            let is_drop = drop == kind;
            for t in &self.tensors[op.inputs.start as usize..op.inputs.end as usize] {
                let at = *index_of.entry(t.id).or_insert_with(|| {
                    lives.push(period::Life {
                        bytes: t.bytes,
                        made: None,
                        ended: None,
                    });
                    lives.len() - 1
                });
                if t.last_use || is_drop {
                    lives[at].ended = Some(i);
                }
            }
            let made = (!uploads.contains(&kind)).then_some(i);
            for t in &self.tensors[op.outputs.start as usize..op.outputs.end as usize] {
                index_of.insert(t.id, lives.len());
                lives.push(period::Life {
                    bytes: t.bytes,
                    made,
                    ended: None,
                });
            }
        }
        lives
    }

    /// The period of the window's ops without the ones that move data rather than compute
    /// (`Read`, `Init`, `Drop`), mapped back onto the whole window: a loop whose every
    /// iteration also holds another thread's reads or uploads (a metrics thread, a data
    /// loader's workers) at places that vary has no exact period, but its own ops do. Taken
    /// only where the iterations so found hold as many ops each and the last two are the same
    /// ops; the schedule's checks then allow their reordering (`reordered`).
    pub(super) fn detect_around_movable(&self, signatures: &[u64]) -> Option<period::Stretch> {
        let movable = self.kinds.movable();
        let kept: Vec<usize> = (0..self.ops.len())
            .filter(|&i| !movable[self.ops[i].kind as usize])
            .collect();
        if kept.len() == self.ops.len() {
            return None;
        }
        let reduced: Vec<u64> = kept.iter().map(|&i| signatures[i]).collect();
        let found = period::detect_recent(&reduced)?;
        let q = found.period;
        // Iterations are measured between kept ops a period apart; another thread's op at the
        // edge can fall on either side, so a few alignments are tried.
        let last = found.end.checked_sub(1)?;
        let lowest = (found.start + 2 * q).max(last.saturating_sub(q.min(64)));
        for at in (lowest..=last).rev() {
            let p = kept[at] - kept[at - q];
            if p != kept[at - q] - kept[at - 2 * q] {
                continue;
            }
            let end = kept[at] + 1;
            let (last_two, first) = (&signatures[end - p..end], &signatures[end - 2 * p..end - p]);
            if !same_ops(last_two.iter().copied(), first.iter().copied()) {
                return None;
            }
            return Some(period::Stretch {
                period: p,
                start: kept[found.start],
                end,
            });
        }
        None
    }
}
