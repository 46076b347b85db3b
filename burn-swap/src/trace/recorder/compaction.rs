//! Bounding the log: complete iterations summarised, and the log compacted to the last few.

use std::ops::Range;

use super::{KEPT_ITERATION_PEAKS, Recorder, Schedule};
use crate::trace::model::IterationPeak;

impl Recorder {
    /// The period and the global range of the last complete iteration in the window.
    pub(super) fn last_complete(&self) -> Option<(Schedule, u64, Range<u64>)> {
        let s = self.schedule?;
        let end = s.verified_end;
        if end < s.anchor + s.period as u64 {
            return None;
        }
        let k = (end - s.anchor) / s.period as u64 - 1;
        let start = s.anchor + k * s.period as u64;
        if start < self.base {
            return None;
        }
        Some((s, s.first_iteration + k, start..start + s.period as u64))
    }

    /// The last complete iteration whose ops, and those of the iteration before it when the
    /// window holds that one, were recorded with their tensors (see [`Recorder::set_lean`]):
    /// the last complete iteration itself unless iterations were recorded lean. Same as
    /// [`Recorder::last_complete`]'s result otherwise.
    pub(super) fn last_full(&self) -> Option<(Schedule, u64, Range<u64>)> {
        let (s, iteration, last) = self.last_complete()?;
        let p = s.period as u64;
        let full = |r: Range<u64>| {
            let local = (r.start - self.base) as usize..(r.end - self.base) as usize;
            self.ops[local].iter().all(|o| !o.lean)
        };
        let mut candidate = last;
        for back in 0..=iteration - s.first_iteration {
            let before = candidate.start.saturating_sub(p);
            if full(candidate.clone()) && (before < self.base || full(before..candidate.start)) {
                return Some((s, iteration - back, candidate));
            }
            if before < self.base || before < s.anchor {
                return None;
            }
            candidate = before..candidate.start;
        }
        None
    }

    /// The period in force, in ops (0 without one).
    pub(super) fn period_len(&self) -> u64 {
        self.schedule.map_or(0, |s| s.period as u64)
    }

    /// Summarises into the per-iteration peaks every complete iteration not yet summarised.
    pub(super) fn summarise(&mut self) {
        let Some(s) = self.schedule else {
            return;
        };
        let p = s.period as u64;
        let end = s.verified_end;
        let mut start = self.summarised_to.max(s.anchor);
        // Align to a boundary.
        let offset = (start - s.anchor) % p;
        if offset != 0 {
            start += p - offset;
        }
        while start + p <= end {
            if start >= self.base {
                let local = (start - self.base) as usize..(start + p - self.base) as usize;
                let peak = self.ops[local]
                    .iter()
                    .map(|o| o.resident_during)
                    .max()
                    .unwrap_or(0);
                self.peaks.push(IterationPeak {
                    iteration: s.first_iteration + (start - s.anchor) / p,
                    peak_bytes: peak,
                });
            }
            start += p;
        }
        self.summarised_to = start;
        if self.peaks.len() > KEPT_ITERATION_PEAKS {
            let excess = self.peaks.len() - KEPT_ITERATION_PEAKS;
            self.peaks.drain(..excess);
        }
    }

    /// Drops old ops, keeping the last two complete iterations and the current one when the
    /// period is known, else the newer half of the window.
    pub(super) fn compact(&mut self) {
        self.read(self.ops.len());
        self.analyse();
        self.summarise();
        let newer_half = self.base + (self.ops.len() / 2) as u64;
        let keep_from = match self.last_complete() {
            Some((s, _, _)) if 3 * s.period > self.window => {
                // Grow the window so that it always holds three periods.
                self.window = 4 * s.period;
                return;
            }
            // Keep the last two complete iterations (and at least the newer half), unless
            // the stream left the period long ago: then the schedule is stale and only the
            // newer half is kept.
            Some((s, _, last)) => match last.start.saturating_sub(s.period as u64) {
                from if from > self.base => from.min(newer_half),
                _ => newer_half,
            },
            None => newer_half,
        };
        // Under lean recording, never the last iterations a trace can be made of (see
        // `last_full`): they lie in the newer half of the window by the choice of which are
        // recorded in full, unless the schedule broke long ago (then they go: what can still
        // be cut must be at least a quarter of the window, so that compaction stays rare).
        let keep_from = match self.last_full() {
            Some((_, _, full)) if self.lean => {
                let from = full.start.saturating_sub(self.period_len());
                if from >= self.base + (self.ops.len() / 4) as u64 {
                    keep_from.min(from)
                } else {
                    keep_from
                }
            }
            _ => keep_from,
        };
        let cut = (keep_from - self.base) as usize;
        let tensor_cut = self.ops[cut].inputs.start;
        let dims_cut = self
            .tensors
            .get(tensor_cut as usize)
            .map(|t| t.dims.start)
            .unwrap_or(self.dims.len() as u32);
        self.ops.drain(..cut);
        self.tensors.drain(..tensor_cut as usize);
        self.dims.drain(..dims_cut as usize);
        for op in &mut self.ops {
            op.inputs = op.inputs.start - tensor_cut..op.inputs.end - tensor_cut;
            op.outputs = op.outputs.start - tensor_cut..op.outputs.end - tensor_cut;
        }
        for t in &mut self.tensors {
            t.dims = t.dims.start - dims_cut..t.dims.end - dims_cut;
        }
        self.base = keep_from;
    }

    /// Analyses when the schedule does not hold; queries call this.
    pub(super) fn refresh(&mut self) {
        if !self.healthy() {
            self.analyse();
        }
    }
}
