//! The allocator's pools as the engine follows them (`crate::exec::pools` does the work):
//! their figures read after each op, and the budget kept in what they reserve.

use burn_ir::BackendIr;

use super::Engine;

impl<B: BackendIr> Engine<B> {
    /// Reads the allocator's figures: every stream burn-swap runs device work on, each pool
    /// set once; cleans them up when they reserve more than the budget (`crate::exec::pools`).
    pub(super) fn sample_allocator(&mut self) {
        let Some((read, left)) = self.machine.pools.sample::<B>(
            self.handles.device(),
            self.copies.transfers.pools(),
            self.budget(),
        ) else {
            return;
        };
        self.history.counters.allocator = Some(left);
        self.history.counters.allocator_peak = Some(
            self.history
                .counters
                .allocator_peak
                .map_or(read, |peak| peak.max(read)),
        );
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
