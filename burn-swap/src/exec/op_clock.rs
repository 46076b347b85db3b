//! The op thread's time inside the engine, sampled: one op in [`SAMPLE_EVERY`] (by its count,
//! so that which ops are timed does not depend on timing) is timed whole and in parts, and
//! the report scales the sums by the ops run over the ops timed. Timing every op would cost
//! two clock reads per part on a path of a few hundred nanoseconds.

use std::time::Instant;

/// One op in this many is timed.
pub(crate) const SAMPLE_EVERY: u64 = 32;

/// The sampled ops' times, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OpClock {
    /// Ops timed.
    pub sampled: u64,
    /// The whole of each timed op inside the engine, its inner op included.
    pub engine_nanos: u64,
    /// The inner backend's op (its launch, on an asynchronous backend).
    pub inner_nanos: u64,
    /// Closing the op's record in the trace (the schedule's checks, analyses, compaction).
    pub trace_nanos: u64,
    /// Following the plan after the op (its steps, the iteration's end, planning's hand-off).
    pub follow_nanos: u64,
}

/// An op being timed: when it began.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timed(Instant);

impl OpClock {
    /// Starts timing the op whose count is `op`, when it is one of the sampled.
    #[inline]
    pub(crate) fn start(op: u64) -> Option<Timed> {
        op.is_multiple_of(SAMPLE_EVERY)
            .then(|| Timed(Instant::now()))
    }

    /// Ends the op started as `timed`.
    #[inline]
    pub(crate) fn end(&mut self, timed: Option<Timed>) {
        if let Some(Timed(start)) = timed {
            self.sampled += 1;
            self.engine_nanos += start.elapsed().as_nanos() as u64;
        }
    }

    /// Where the op is timed, the start of one of its parts.
    #[inline]
    pub(crate) fn lap(timed: Option<Timed>) -> Option<Instant> {
        timed.map(|_| Instant::now())
    }

    /// Adds the time since `lap` (a part of a timed op) to the field `into` picks.
    #[inline]
    pub(crate) fn add(&mut self, into: fn(&mut Self) -> &mut u64, lap: Option<Instant>) {
        if let Some(start) = lap {
            *into(self) += start.elapsed().as_nanos() as u64;
        }
    }

    /// `nanos` of the sampled ops scaled to all `ops`, in seconds.
    pub(crate) fn scaled(&self, nanos: u64, ops: u64) -> f64 {
        if self.sampled == 0 {
            return 0.0;
        }
        nanos as f64 * 1e-9 * ops as f64 / self.sampled as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_op_in_every_few_by_its_count_is_timed_and_scaled_to_all() {
        let mut clock = OpClock::default();
        for op in 0..(4 * SAMPLE_EVERY) {
            let timed = OpClock::start(op);
            assert_eq!(timed.is_some(), op % SAMPLE_EVERY == 0);
            let lap = OpClock::lap(timed);
            std::thread::sleep(std::time::Duration::from_micros(50));
            clock.add(|c| &mut c.trace_nanos, lap);
            clock.end(timed);
        }
        assert_eq!(clock.sampled, 4);
        assert!(clock.trace_nanos >= 4 * 50_000 && clock.engine_nanos >= clock.trace_nanos);
        let all = clock.scaled(clock.trace_nanos, 4 * SAMPLE_EVERY);
        assert!((all - clock.trace_nanos as f64 * 1e-9 * SAMPLE_EVERY as f64).abs() < 1e-12);
        assert_eq!(OpClock::default().scaled(10, 10), 0.0);
    }
}
