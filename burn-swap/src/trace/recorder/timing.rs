//! Which ops are timed: every op until the period holds, then one iteration in every few.

use super::{LEAN_EVERY, Recorder, TIMED_ITERATION_EVERY};

impl Recorder {
    /// Whether the op about to be recorded should be timed: every op until the period is
    /// known and holds, then the ops of one iteration in [`TIMED_ITERATION_EVERY`].
    #[inline]
    pub(crate) fn timing(&self) -> bool {
        !self.healthy() || self.next_index() < self.timed_until
    }

    /// Sets the wall time of the op recorded last.
    pub(crate) fn set_last_nanos(&mut self, nanos: u64) {
        let index = self.next_index().saturating_sub(1);
        if let Some(op) = self.ops.last_mut() {
            op.nanos = nanos;
        }
        if let Some(s) = self.schedule
            && index >= s.anchor
            && self.slot_nanos.len() == s.period
        {
            self.slot_nanos[((index - s.anchor) % s.period as u64) as usize] = nanos;
        }
    }

    /// At each iteration boundary, decides whether the next iteration is timed: until one
    /// full iteration has been timed under the current schedule, then one in
    /// [`TIMED_ITERATION_EVERY`].
    #[inline]
    pub(super) fn track_boundary(&mut self) {
        let index = self.next_index();
        if index < self.next_boundary {
            return;
        }
        let Some(s) = self.schedule else {
            return;
        };
        let p = s.period as u64;
        if index < s.anchor {
            self.next_boundary = s.anchor;
            return;
        }
        let k = (index - s.anchor) / p;
        let boundary = s.anchor + k * p;
        self.next_boundary = boundary + p;
        if k >= 1 && self.healthy() && self.cleared_for != Some((s.period, s.anchor)) {
            self.forget_inner_loops();
        }
        if self.timed_until == boundary
            && self.timing_from.checked_add(p) == Some(boundary)
            && self.healthy()
        {
            self.profiled = true;
        }
        if self.lean {
            // Two iterations in a row in `every` in full (a trace links the tensors an
            // iteration carries to the one before it), so that the last pair recorded so
            // stays in the newer half of the window that compaction keeps.
            let every = (self.window / (2 * s.period))
                .saturating_sub(2)
                .clamp(1, LEAN_EVERY);
            if (k + 1) % every as u64 <= 1 || !self.profiled {
                self.full_until = boundary + p;
            }
        }
        if k.is_multiple_of(TIMED_ITERATION_EVERY) || !self.profiled {
            // An iteration counts as timed only when timing covered it from its first op
            // (a schedule found mid-iteration times the rest of it, but that is partial).
            self.timing_from = if index == boundary {
                boundary
            } else {
                u64::MAX
            };
            self.timed_until = boundary + p;
        }
    }

    /// Forgets the op times of a schedule that no longer holds.
    pub(super) fn reset_timing(&mut self, period: usize) {
        self.slot_nanos.clear();
        self.slot_nanos.resize(period, 0);
        self.next_boundary = 0;
        self.profiled = false;
    }
}
