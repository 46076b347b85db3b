//! What an op reserves on the device beyond its outputs while it runs: a convolution's
//! unfolded input, a reduction's partial sums, an input copied to a contiguous layout. Burn
//! does not name these buffers (they never become tensors), so the books cannot count them;
//! the allocator shows them. They are learned per op shape from what the op's stream reserved
//! while it ran, and room is made for them before the op runs again, so that what the device
//! reserves stays within the budget, not only what burn-swap counts.
//!
//! An op's shape here is its kind with the bytes it reads and writes: the ops of one layer
//! in every iteration share it, and a shape seen once is known from then on. The first time
//! a shape runs its temporaries are unknown: room is made for none, and what it reserved
//! over the budget is told in the report ([`Temporaries::over`]).

use crate::report::ReservedOver;
use hashbrown::HashMap;

/// The temporaries learned, and the op being measured.
#[derive(Default)]
pub(crate) struct Temporaries {
    /// The most bytes each op shape reserved beyond its outputs.
    learned: HashMap<u64, u64>,
    /// The op running now: its shape, its outputs' bytes, and what its stream reserved
    /// before it ran.
    running: Option<Running>,
    /// The largest excess of reserved bytes over the budget after an op, and that op.
    over: Option<ReservedOver>,
    /// An excess larger than `over`'s, seen after the op that just ran, until the op is
    /// named (`name_over`): its bytes and the temporaries room had been made for.
    unnamed: Option<(u64, Option<u64>)>,
}

#[derive(Clone, Copy)]
struct Running {
    shape: u64,
    output_bytes: u64,
    reserved_before: u64,
    expected: Option<u64>,
}

impl Temporaries {
    /// The shape of an op: its kind (`trace::signature::kind_key`) and the bytes it reads and
    /// writes.
    #[inline]
    pub fn shape(kind: u64, input_bytes: u64, output_bytes: u64) -> u64 {
        use core::hash::Hasher;
        let mut h = crate::trace::signature::FxHasher::default();
        h.write_u64(kind);
        h.write_u64(input_bytes);
        h.write_u64(output_bytes);
        h.finish()
    }

    /// The temporaries an op of `shape` reserved at most, when it ran before.
    #[inline]
    pub fn expected(&self, shape: u64) -> Option<u64> {
        self.learned.get(&shape).copied()
    }

    /// An op of `shape` writing `output_bytes` new bytes starts, its stream having reserved
    /// `reserved_before`.
    #[inline]
    pub fn start(&mut self, shape: u64, output_bytes: u64, reserved_before: u64) {
        self.running = Some(Running {
            shape,
            output_bytes,
            reserved_before,
            expected: self.expected(shape),
        });
    }

    /// The op started last ended, its stream reserving `reserved_after`, every stream
    /// `over_budget` bytes over the budget: what it reserved beyond its outputs is learned
    /// (the most of every run of its shape), and an excess larger than any before is kept
    /// until [`Temporaries::name_over`] names the op.
    #[inline]
    pub fn end(&mut self, reserved_after: u64, over_budget: u64) {
        let Some(running) = self.running.take() else {
            return;
        };
        let beyond = reserved_after
            .saturating_sub(running.reserved_before)
            .saturating_sub(running.output_bytes);
        let learned = self.learned.entry(running.shape).or_insert(0);
        *learned = (*learned).max(beyond);
        if over_budget > self.over.as_ref().map_or(0, |o| o.bytes) {
            self.unnamed = Some((over_budget, running.expected));
        }
    }

    /// Names the op that ended last when it left the largest excess yet (`op` is called
    /// only then).
    #[inline]
    pub fn name_over(&mut self, op: impl FnOnce() -> String) {
        if let Some((bytes, expected)) = self.unnamed.take() {
            self.over = Some(ReservedOver {
                op: op(),
                bytes,
                expected,
            });
        }
    }

    /// The op after which the device reserved the most over the budget, since the last reset.
    pub fn over(&self) -> Option<&ReservedOver> {
        self.over.as_ref()
    }

    /// Forgets the excess seen (a new measurement starts); what was learned stays.
    pub fn reset_over(&mut self) {
        self.over = None;
        self.unnamed = None;
    }

    /// Op shapes learned so far.
    pub fn shapes(&self) -> usize {
        self.learned.len()
    }

    /// The largest temporaries learned of any op shape.
    pub fn largest(&self) -> u64 {
        self.learned.values().copied().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_an_op_reserved_beyond_its_outputs_is_learned_per_shape() {
        let mut t = Temporaries::default();
        let conv = Temporaries::shape(7, 1000, 200);
        let other = Temporaries::shape(7, 1000, 300);
        assert_ne!(conv, other);
        assert_eq!(t.expected(conv), None);
        t.start(conv, 200, 5_000);
        // 200 output bytes and 800 of its own.
        t.end(6_000, 0);
        assert_eq!(t.expected(conv), Some(800));
        // A run that reused idle buffers reserved less: the most is kept.
        t.start(conv, 200, 6_000);
        t.end(6_100, 0);
        assert_eq!(t.expected(conv), Some(800));
        // An op that wrote in place or freed more than it made learns nothing negative.
        t.start(other, 300, 6_000);
        t.end(5_000, 0);
        assert_eq!(t.expected(other), Some(0));
        assert_eq!((t.shapes(), t.largest()), (2, 800));
        // Nothing is learned without an op started.
        t.end(10_000, 0);
        assert_eq!(t.shapes(), 2);
    }

    #[test]
    fn the_largest_excess_is_kept_with_its_op_until_reset() {
        let mut t = Temporaries::default();
        let shape = Temporaries::shape(1, 2, 3);
        let run = |t: &mut Temporaries, over: u64, name: &str| {
            t.start(shape, 3, 0);
            t.end(0, over);
            t.name_over(|| name.to_string());
        };
        run(&mut t, 10, "a");
        run(&mut t, 5, "b");
        run(&mut t, 0, "c");
        assert_eq!(
            t.over(),
            Some(&ReservedOver {
                op: "a".into(),
                bytes: 10,
                // The first run of its shape: unknown.
                expected: None
            })
        );
        run(&mut t, 20, "d");
        assert_eq!(
            t.over(),
            Some(&ReservedOver {
                op: "d".into(),
                bytes: 20,
                expected: Some(0)
            })
        );
        t.reset_over();
        assert_eq!(t.over(), None);
    }
}
