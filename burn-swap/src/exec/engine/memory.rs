//! The allocator's pools as the engine follows them (`crate::exec::pools` does the work):
//! their figures read after each op, and the budget kept in what they reserve. The machine's
//! pools and the temporaries learned are [`Machine`]'s; an op's expected temporaries are its
//! scratch's ([`OpScratch`]). Each is handed the device, the workers' pools and the counters
//! it reads or changes.

use burn_ir::BackendIr;

use super::OpScratch;
use super::machine::Machine;
use crate::exec::counters::Counters;
use crate::exec::pools::WorkerPools;
use crate::exec::temporaries::Temporaries;
use crate::report::AllocatorUsage;

impl Machine {
    /// Reads the allocator's figures: every stream burn-swap runs device work on, each pool
    /// set once; cleans them up when they reserve more than the budget (`crate::exec::pools`).
    /// What the op that ran reserved beyond its outputs is learned (`crate::exec::temporaries`).
    pub(super) fn sample_allocator<B: BackendIr>(
        &mut self,
        device: &B::Device,
        workers: &WorkerPools,
        budget: Option<u64>,
        counters: &mut Counters,
    ) {
        let Some((read, left, here)) = self.pools.sample::<B>(device, workers, budget) else {
            return;
        };
        let over = budget.map_or(0, |b| read.reserved.saturating_sub(b));
        self.temporaries.end(here, over);
        counters.allocator = Some(left);
        counters.allocator_peak = Some(counters.allocator_peak.map_or(read, |peak| peak.max(read)));
    }

    /// Just before an op runs, its room made: when the bytes the allocator reserves, with the
    /// op's outputs and temporaries, would pass the budget, the idle buffers kept for reuse
    /// are given back first; then what the op's stream reserves is noted, to learn its
    /// temporaries from after it ran.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn clear_for_op<B: BackendIr>(
        &mut self,
        op: &OpScratch,
        budget: Option<u64>,
        output_bytes: u64,
        device: &B::Device,
        workers: &WorkerPools,
        counters: &mut Counters,
    ) {
        let (Some(shape), Some(budget)) = (op.shape, budget) else {
            return;
        };
        let Some((mut here, total)) = self.pools.read_here::<B>(device, workers) else {
            return;
        };
        if total.reserved + output_bytes + op.temporaries > budget && total.idle() > 0 {
            let left = self.pools.cleanup_for_budget::<B>(device, workers);
            counters.allocator = Some(left);
            here = self.pools.here_as_read();
        }
        self.temporaries.start(shape, output_bytes, here);
    }

    /// Names the op that just ran (of shape `op_shape`, when its temporaries were followed)
    /// when the allocator reserved more over the budget after it than after any op before.
    #[inline]
    pub(super) fn name_reserved_over(
        &mut self,
        op_shape: Option<u64>,
        name: impl FnOnce() -> String,
    ) {
        if op_shape.is_some() {
            self.temporaries.name_over(name);
        }
    }

    /// Puts the allocator's pools in step with a budget that changed from `previous`: exact-size
    /// buffers while a budget is set, and the idle ones given back when it is set or lowered.
    pub(super) fn follow_budget_in_pools<B: BackendIr>(
        &mut self,
        budget: Option<u64>,
        previous: Option<u64>,
        device: &B::Device,
        workers: &WorkerPools,
        counters: &mut Counters,
    ) {
        if !self.allocator {
            return;
        }
        self.pools.set_exact::<B>(budget.is_some(), workers, device);
        if budget.is_some_and(|b| previous.is_none_or(|p| b < p)) {
            self.cleanup_pools::<B>(device, workers, counters);
        }
    }

    /// Gives the idle buffers and free pages of every stream burn-swap uses back to the
    /// device.
    pub(super) fn cleanup_pools<B: BackendIr>(
        &mut self,
        device: &B::Device,
        workers: &WorkerPools,
        counters: &mut Counters,
    ) {
        if !self.allocator {
            return;
        }
        let left = self.pools.cleanup::<B>(device, workers);
        counters.allocator = Some(left);
    }
}

impl OpScratch {
    /// Under a budget (`budgeted`), on a backend with allocator figures: the op's shape and
    /// the temporaries learned of it, for room to be made for them
    /// (`crate::exec::temporaries`). `kind` (the op's kind key) is computed only then.
    #[inline]
    pub(super) fn expect_temporaries(
        &mut self,
        machine: &Machine,
        budgeted: bool,
        kind: impl FnOnce() -> u64,
        input_bytes: u64,
        output_bytes: u64,
    ) {
        self.shape = None;
        self.temporaries = 0;
        if !machine.allocator || !budgeted {
            return;
        }
        let shape = Temporaries::shape(kind(), input_bytes, output_bytes);
        self.shape = Some(shape);
        self.temporaries = machine.temporaries.expected(shape).unwrap_or(0);
    }

    /// What the device holds beyond the books for the op about to run: its temporaries
    /// ([`OpScratch::expect_temporaries`]) and the buffers in use outside the books (with
    /// `resident` bytes in them) when the allocator was last read (`allocator`: the inner
    /// backend's own small buffers).
    pub(super) fn beyond_the_books(&self, allocator: Option<AllocatorUsage>, resident: u64) -> u64 {
        if self.shape.is_none() {
            return 0;
        }
        let uncounted = allocator.map_or(0, |a| (a.in_use + a.padding).saturating_sub(resident));
        self.temporaries + uncounted
    }
}
