//! Whether a plan pays: under [`crate::Policy::Planned`] a plan is followed only while what
//! it costs per iteration beyond the ops (the transfers it leaves exposed, the recomputation
//! it adds) is no more than what the reactive policy was measured to cost on the same
//! schedule, give or take [`SLACK`] of an iteration. The reactive policy's cost counts,
//! besides its waits and recomputations, its search for what leaves each time it makes
//! room: on the op's thread, and what a plan saves.
//!
//! A plan is judged twice: when it is ready, by its *predicted* cost (the simulator's
//! exposed transfer time and the profile's recomputation time), and after its first full
//! iterations, by its *measured* cost (the same clock the fallback was measured by), so that
//! a simulator wrong about a machine cannot keep a losing plan. Pure: the executor measures
//! (`exec::payoff`), this judges.

/// The share of an iteration's wall time by which a plan may cost more than the fallback
/// and still be followed: below what one step's time varies by between runs, so that the
/// judgement follows the figures, not their noise.
pub const SLACK: f64 = 0.01;

/// What the iterations of one schedule cost beyond their ops, measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IterationCost {
    /// Seconds per iteration the ops waited on transfers, spent recomputing, or (the
    /// fallback) spent choosing what leaves.
    pub seconds: f64,
    /// An iteration's wall time, in seconds.
    pub iteration_seconds: f64,
}

/// Whether a plan that costs `plan_seconds` per iteration (predicted, or measured while it
/// was followed) pays against the reactive policy's measured `fallback` on its schedule.
/// A cost that is not a number never pays; a fallback that is not one cannot judge (the
/// plan is followed).
pub fn pays(plan_seconds: f64, fallback: IterationCost) -> bool {
    let bound = fallback.seconds + SLACK * fallback.iteration_seconds.max(0.0);
    if !bound.is_finite() {
        return true;
    }
    plan_seconds.is_finite() && plan_seconds <= bound
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fallback(seconds: f64, iteration_seconds: f64) -> IterationCost {
        IterationCost {
            seconds,
            iteration_seconds,
        }
    }

    #[test]
    fn a_plan_pays_up_to_the_fallback_and_its_slack() {
        // 1 ms of waits in a 100 ms iteration: a plan may cost up to 2 ms.
        let reactive = fallback(1e-3, 0.1);
        assert!(pays(0.0, reactive));
        assert!(pays(1e-3, reactive));
        assert!(pays(1.999e-3, reactive));
        assert!(!pays(2.001e-3, reactive));
        assert!(!pays(0.05, reactive));
    }

    #[test]
    fn a_fallback_that_costs_nothing_leaves_only_the_slack() {
        let reactive = fallback(0.0, 0.01);
        assert!(pays(0.0, reactive));
        assert!(pays(1e-4, reactive));
        assert!(!pays(1.01e-4, reactive));
    }

    #[test]
    fn figures_that_are_not_numbers_are_judged_safely() {
        assert!(!pays(f64::NAN, fallback(1e-3, 0.1)));
        assert!(!pays(f64::INFINITY, fallback(1e-3, 0.1)));
        assert!(pays(1.0, fallback(f64::NAN, 0.1)));
        assert!(pays(1.0, fallback(1e-3, f64::INFINITY)));
        // A negative wall time (a clock that went back) gives no slack, not a negative one.
        assert!(pays(1e-3, fallback(1e-3, -1.0)));
        assert!(!pays(1.1e-3, fallback(1e-3, -1.0)));
    }
}
