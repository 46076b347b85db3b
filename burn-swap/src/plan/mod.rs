//! Planners: pure functions that decide what to keep and what to move. None touches a device.
//!
//! - [`advisor`]: seed 000's destination choice: which peers (and the host) take how many of
//!   a tensor's bytes, so that its transfer finishes fastest.
//! - [`reactive`]: what leaves the device, how, and in which order, when an op would exceed
//!   the budget.
//! - [`views`]: when a strided view keeps its op to leave later by recomputation.
//! - [`codec`]: seed 002's choice of compressing a tensor before it leaves.
//! - [`simulate`]: seed 004's reference-count memory simulation, which predicts the peak of a
//!   plan, fragmentation included.
//! - [`checkpoint`]: seed 004's candidates (recompute or swap) and threshold-block checkpoint
//!   selection, judged by the simulator.
//! - [`combine`]: per tensor keep, offload (with its prefetch point) or recompute, so that
//!   the simulated peak fits the budget at the least exposed time.
//! - [`segments`]: seed 001's segment plan evolved by a genetic algorithm to migrate as few
//!   bytes as possible. **Experimental**: built and tested, but no execution path follows
//!   its plans yet; the performance issue turns it into one of the candidate plans that
//!   [`build`] scores by simulated cost. Until then it is a planner to study and benchmark.
//! - [`program`]: a plan turned into the steps the executor takes after each op.
//!
//! [`build`] is the planners' entry point: a trace, its profile and a budget in, the program
//! the executor follows out.
//! - [`waits`]: seed 003's cross-queue waits: which work on the compute, send and receive
//!   queues must wait for which, so that no copy races a kernel and no buffer is freed while
//!   another queue reads it.
//! - [`profile`]: seed 004's profiled iteration (op times and bytes, copy throughput), which
//!   planners read.

pub mod advisor;
pub mod checkpoint;
pub mod codec;
pub mod combine;
pub mod profile;
pub mod program;
pub mod reactive;
pub mod segments;
pub mod simulate;
pub mod views;
pub mod waits;

use crate::config::Policy;
use crate::trace::Trace;
use profile::Profile;
use program::Program;

/// Tensors needed again fewer ops later than this are never planned to leave.
const MIN_GAP: usize = 3;

/// Plans one iteration for `budget` bytes under `policy` and compiles the plan: candidates
/// from the checkpoint planner, the combiner's choice per tensor, then [`compile`]. Under
/// [`Policy::OffloadOnly`] nothing is recomputed; under [`Policy::RecomputeOnly`] nothing is
/// offloaded by plan.
pub fn build(trace: &Trace, profile: &Profile, budget: u64, policy: Policy) -> Program {
    let _span = tracing::debug_span!(
        "burn_swap::plan",
        ops = trace.ops.len(),
        budget,
        policy = policy.name()
    )
    .entered();
    let mut candidates = checkpoint::candidates(trace, profile, MIN_GAP);
    let mut profile = std::borrow::Cow::Borrowed(profile);
    match policy {
        Policy::OffloadOnly => candidates.iter_mut().for_each(|c| c.recomputable = false),
        Policy::RecomputeOnly => profile.to_mut().links = None,
        Policy::Reactive | Policy::Planned => {}
    }
    // Without a measured link the combiner cannot cost an offload: assume one that the gap
    // always hides, so that offloads are still planned (their prefetch starts right after).
    if policy.moves_by_copy() && profile.links.is_none() {
        profile.to_mut().links = Some(profile::Links::instant());
    }
    let plan = combine::combine(trace, &profile, &candidates, budget);
    compile(trace, &plan)
}

/// A plan turned into the program the executor follows: its steps
/// ([`program::compile`]), then seed 003's waits on the compute side
/// ([`waits::fetch_waits`]).
pub fn compile(trace: &Trace, plan: &combine::Plan) -> Program {
    let mut program = program::compile(trace, plan);
    program.fetch_waits = waits::fetch_waits(trace, &program);
    program
}
