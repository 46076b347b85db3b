//! What happened to plans, as the report lists it: when each took over, where the fallback
//! made room under one, and the plans declined.

use serde::{Deserialize, Serialize};

/// Takeovers the counters keep (the latest).
pub(crate) const TAKEOVERS_KEPT: usize = 32;

/// A plan taking over: where, for which schedule, and what it cost to have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanTakeover {
    /// The op (counted from the device's first) after which the plan took over: the end of an
    /// iteration of its schedule.
    pub op: u64,
    /// The period, in ops, of the schedule it is followed in.
    pub period: usize,
    /// Whether it was a plan kept for this schedule (made when it ran before) rather than a
    /// new one.
    pub reused: bool,
    /// Seconds the planner took to make it (0 for a kept plan).
    pub planning_seconds: f64,
    /// Iterations of its schedule that ran under the fallback while it was made.
    pub waited_iterations: u64,
}

/// Fallback rooms the counters keep (the first: where a plan first went wrong).
pub(crate) const FALLBACK_ROOMS_KEPT: usize = 16;

/// Room the reactive fallback made while a plan was followed: an op that needed more bytes
/// than the plan predicted for it, where, and by how much.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FallbackRoom {
    /// Ops counted on the device before this one.
    pub op: u64,
    /// The op's place in its iteration (the plan's op numbers).
    pub position: usize,
    /// The counted bytes the plan predicted while the op runs (its simulation).
    pub predicted_bytes: u64,
    /// The counted bytes the op needed: those resident when it asked for room, and what it
    /// asked for.
    pub needed_bytes: u64,
    /// The bytes the fallback moved off the device for it.
    pub freed_bytes: u64,
}

/// The plans not followed under [`crate::Policy::Planned`] because they cost more per
/// iteration (transfers exposed, recomputation; predicted when ready, or measured over their
/// first iterations) than the reactive fallback measured on the same schedule (see
/// [`crate::SwapConfig::with_plans_judged`]): their schedules stay on the fallback. One idea
/// in the report, under the keys it had as three fields (`plans_declined`, `plan_declines`,
/// `declined_in_force`, which reads `plan_declined` too), so that reports written before read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Declines {
    /// How many were declined.
    #[serde(default, rename = "plans_declined")]
    pub count: u64,
    /// Each one declined (the latest 32): the op, its schedule's period, the figures it was
    /// judged by.
    #[serde(default, rename = "plan_declines")]
    pub latest: Vec<PlanDecline>,
    /// The schedule in force runs on the reactive fallback because its plan was declined (the
    /// planned policy's choice, not a failure).
    #[serde(default, rename = "declined_in_force", alias = "plan_declined")]
    pub in_force: bool,
}

impl Declines {
    /// Counts `decline`, keeping the latest `kept`; the schedule in force is on the fallback.
    pub(crate) fn add(&mut self, decline: PlanDecline, kept: usize) {
        self.in_force = true;
        if self.latest.len() >= kept {
            self.latest.remove(0);
        }
        self.count += 1;
        self.latest.push(decline);
    }
}

/// A plan not followed because it did not pay against the reactive fallback measured on its
/// schedule: where, and the figures it was judged by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanDecline {
    /// The op (counted from the device's first) after which it was declined: the end of an
    /// iteration of its schedule.
    pub op: u64,
    /// The period, in ops, of its schedule.
    pub period: usize,
    /// What the plan costs per iteration, in seconds: transfers exposed and recomputation,
    /// as predicted when it was ready, or as measured once it was followed (`measured`).
    pub plan_seconds: f64,
    /// Whether `plan_seconds` was measured (the plan was followed, and cost more than
    /// predicted) rather than predicted.
    pub measured: bool,
    /// What the reactive fallback was measured to cost per iteration on the same schedule.
    pub fallback_seconds: f64,
    /// The fallback's iteration wall time, in seconds (the judgement's slack is a share of
    /// it: `plan::payoff::SLACK`).
    pub iteration_seconds: f64,
}
