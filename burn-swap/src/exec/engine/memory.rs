//! The allocator's pools as the engine follows them (`crate::exec::pools` does the work):
//! their figures read after each op, and the budget kept in what they reserve.

use burn_ir::BackendIr;

use super::Engine;
use crate::exec::temporaries::Temporaries;

impl<B: BackendIr> Engine<B> {
    /// Reads the allocator's figures: every stream burn-swap runs device work on, each pool
    /// set once; cleans them up when they reserve more than the budget (`crate::exec::pools`).
    /// What the op that ran reserved beyond its outputs is learned (`crate::exec::temporaries`).
    pub(super) fn sample_allocator(&mut self) {
        let budget = self.budget();
        let Some((read, left, here)) = self.machine.pools.sample::<B>(
            self.handles.device(),
            self.copies.transfers.pools(),
            budget,
        ) else {
            return;
        };
        let over = budget.map_or(0, |b| read.reserved.saturating_sub(b));
        self.machine.temporaries.end(here, over);
        self.history.counters.allocator = Some(left);
        self.history.counters.allocator_peak = Some(
            self.history
                .counters
                .allocator_peak
                .map_or(read, |peak| peak.max(read)),
        );
    }

    /// Under a budget, on a backend with allocator figures: the op's shape and the
    /// temporaries learned of it, for room to be made for them (`crate::exec::temporaries`).
    /// `kind` (the op's kind key) is computed only then.
    #[inline]
    pub(super) fn expect_temporaries(
        &mut self,
        kind: impl FnOnce() -> u64,
        input_bytes: u64,
        output_bytes: u64,
    ) {
        self.op.shape = None;
        self.op.temporaries = 0;
        if !self.machine.allocator || self.budget().is_none() {
            return;
        }
        let shape = Temporaries::shape(kind(), input_bytes, output_bytes);
        self.op.shape = Some(shape);
        self.op.temporaries = self.machine.temporaries.expected(shape).unwrap_or(0);
    }

    /// What the device holds beyond the books for the op about to run: its temporaries
    /// ([`Engine::expect_temporaries`]) and the buffers in use outside the books when the
    /// allocator was last read (the inner backend's own small buffers).
    pub(super) fn beyond_the_books(&self) -> u64 {
        if self.op.shape.is_none() {
            return 0;
        }
        let uncounted = self.history.counters.allocator.map_or(0, |a| {
            (a.in_use + a.padding).saturating_sub(self.resident())
        });
        self.op.temporaries + uncounted
    }

    /// Just before an op runs, its room made: when the bytes the allocator reserves, with the
    /// op's outputs and temporaries, would pass the budget, the idle buffers kept for reuse
    /// are given back first; then what the op's stream reserves is noted, to learn its
    /// temporaries from after it ran.
    pub(super) fn clear_for_op(&mut self, output_bytes: u64) {
        let (Some(shape), Some(budget)) = (self.op.shape, self.budget()) else {
            return;
        };
        let workers = self.copies.transfers.pools();
        let Some((mut here, total)) = self
            .machine
            .pools
            .read_here::<B>(self.handles.device(), workers)
        else {
            return;
        };
        if total.reserved + output_bytes + self.op.temporaries > budget && total.idle() > 0 {
            let left = self
                .machine
                .pools
                .cleanup_for_budget::<B>(self.handles.device(), workers);
            self.history.counters.allocator = Some(left);
            here = self.machine.pools.here_as_read();
        }
        self.machine.temporaries.start(shape, output_bytes, here);
    }

    /// Names the op that just ran when the allocator reserved more over the budget after it
    /// than after any op before.
    #[inline]
    pub(super) fn name_reserved_over(&mut self, name: impl FnOnce() -> String) {
        if self.op.shape.is_some() {
            self.machine.temporaries.name_over(name);
        }
    }

    /// Puts the allocator's pools in step with a budget that changed from `previous`: exact-size
    /// buffers while a budget is set, and the idle ones given back when it is set or lowered.
    pub(super) fn follow_budget_in_pools(&mut self, previous: Option<u64>) {
        if !self.machine.allocator {
            return;
        }
        let budget = self.budget();
        let device = self.handles.device().clone();
        self.machine
            .pools
            .set_exact::<B>(budget.is_some(), self.copies.transfers.pools(), &device);
        if budget.is_some_and(|b| previous.is_none_or(|p| b < p)) {
            self.allocator_cleanup();
        }
    }

    /// Gives the idle buffers and free pages of every stream burn-swap uses back to the
    /// device (`Backend::memory_cleanup` of `Swap`).
    pub fn allocator_cleanup(&mut self) {
        if !self.machine.allocator {
            return;
        }
        let device = self.handles.device().clone();
        let left = self
            .machine
            .pools
            .cleanup::<B>(&device, self.copies.transfers.pools());
        self.history.counters.allocator = Some(left);
    }
}
