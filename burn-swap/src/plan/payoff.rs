//! Whether a plan pays: under [`crate::Policy::Planned`] a plan is followed only where what
//! it costs per iteration beyond the ops (the transfers it leaves exposed, the recomputation
//! it adds, the hand-overs of its copies) is below what the reactive policy was measured to
//! cost on the same schedule. The reactive policy's cost counts, besides its waits and
//! recomputations, its search for what leaves each time it makes room: on the op's thread,
//! and what a plan saves.
//!
//! A plan is judged twice, each time with [`SLACK`] of an iteration for what the figure
//! cannot tell:
//!
//! - when it is ready, by its *predicted* cost (the simulator's exposed transfer time, the
//!   profile's recomputation time, the hand-overs), which must be below the fallback's by at
//!   least the slack ([`predicted_to_pay`]). Following a plan has costs the prediction does
//!   not hold: the executor's walk of the plan after every op, and its prefetches' bytes
//!   allocated earlier than the fallback's (on a host-memory backend, fresh pages to fault
//!   in). A plan predicted to cost about what the fallback costs runs slower than it;
//! - after its first full iterations, by its *measured* cost (the same clock the fallback
//!   was measured by), which may exceed the fallback's by up to the slack
//!   ([`measured_to_pay`]), so that a simulator wrong about a machine cannot keep a losing
//!   plan. The measurement charges a transfer worker's copies on a host-memory backend at
//!   their CPU time, also where they overlap the ops and cost them nothing, so a paying plan
//!   can measure as a tie.
//!
//! Pure: the executor measures (`exec::meter`), this judges.

/// The share of an iteration's wall time that tells a plan's cost from the fallback's:
/// about what one step's time varies by between runs, so that the judgement follows the
/// figures, not their noise.
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

/// Whether a plan predicted to cost `predicted_seconds` per iteration pays against the
/// reactive policy's measured `fallback` on its schedule: it saves at least [`SLACK`] of the
/// fallback's iteration. A cost that is not a number never pays; a fallback that is not one
/// cannot judge (the plan is followed).
pub fn predicted_to_pay(predicted_seconds: f64, fallback: IterationCost) -> bool {
    within(predicted_seconds, fallback, -SLACK)
}

/// Whether a plan measured to cost `measured_seconds` per iteration while it was followed
/// still pays against the reactive policy's measured `fallback`: it costs at most [`SLACK`]
/// of the fallback's iteration more. Figures that are not numbers as in
/// [`predicted_to_pay`].
pub fn measured_to_pay(measured_seconds: f64, fallback: IterationCost) -> bool {
    within(measured_seconds, fallback, SLACK)
}

/// Whether `plan_seconds` is at most the fallback's cost plus `share` of its iteration.
fn within(plan_seconds: f64, fallback: IterationCost, share: f64) -> bool {
    let bound = fallback.seconds + share * fallback.iteration_seconds.max(0.0);
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
    fn a_predicted_plan_pays_when_it_saves_the_slack() {
        // 3 ms of waits in a 100 ms iteration: a plan may be predicted to cost up to 2 ms.
        let reactive = fallback(3e-3, 0.1);
        assert!(predicted_to_pay(0.0, reactive));
        assert!(predicted_to_pay(1.999e-3, reactive));
        assert!(!predicted_to_pay(2.001e-3, reactive));
        // About what the fallback costs: no saving to tell from the noise.
        assert!(!predicted_to_pay(2.5e-3, reactive));
        assert!(!predicted_to_pay(3e-3, reactive));
        assert!(!predicted_to_pay(0.05, reactive));
    }

    #[test]
    fn a_measured_plan_pays_up_to_the_fallback_and_its_slack() {
        // 1 ms of waits in a 100 ms iteration: a plan may be measured at up to 2 ms.
        let reactive = fallback(1e-3, 0.1);
        assert!(measured_to_pay(0.0, reactive));
        assert!(measured_to_pay(1e-3, reactive));
        assert!(measured_to_pay(1.999e-3, reactive));
        assert!(!measured_to_pay(2.001e-3, reactive));
        assert!(!measured_to_pay(0.05, reactive));
    }

    #[test]
    fn against_a_fallback_that_costs_less_than_the_slack_no_plan_is_predicted_to_pay() {
        assert!(!predicted_to_pay(0.0, fallback(0.0, 0.01)));
        assert!(!predicted_to_pay(0.0, fallback(0.9e-3, 0.1)));
        assert!(predicted_to_pay(0.0, fallback(1.1e-3, 0.1)));
        // Measured, a plan that costs nothing keeps paying against one.
        assert!(measured_to_pay(0.0, fallback(0.0, 0.01)));
        assert!(measured_to_pay(1e-4, fallback(0.0, 0.01)));
        assert!(!measured_to_pay(1.01e-4, fallback(0.0, 0.01)));
    }

    #[test]
    fn figures_that_are_not_numbers_are_judged_safely() {
        for pays in [predicted_to_pay, measured_to_pay] {
            assert!(!pays(f64::NAN, fallback(3e-3, 0.1)));
            assert!(!pays(f64::INFINITY, fallback(3e-3, 0.1)));
            assert!(pays(1.0, fallback(f64::NAN, 0.1)));
            assert!(pays(1.0, fallback(1e-3, f64::INFINITY)));
            // A negative wall time (a clock that went back) gives no slack either way.
            assert!(pays(1e-3, fallback(1e-3, -1.0)));
            assert!(!pays(1.1e-3, fallback(1e-3, -1.0)));
        }
    }
}
