//! Planners: pure functions that decide what to keep and what to move. None touches a device.
//!
//! - [`advisor`]: peer offload's destination choice: which peers (and the host) take how many
//!   of a tensor's bytes, so that its transfer finishes fastest.
//! - [`reactive`]: what leaves the device, how, and in which order, when an op would exceed
//!   the budget.
//! - [`views`]: when a strided view keeps its op to leave later by recomputation.
//! - [`compression`]: the choice of compressing a tensor before it leaves.
//! - [`profile`]: the profiled iteration (op times and bytes, copy throughput), which
//!   planners read.
//! - [`simulate`]: the reference-count memory simulation, which predicts the peak of a
//!   plan, fragmentation included.
//! - [`checkpoint`]: the checkpoint candidates (recompute or swap) and threshold-block
//!   checkpoint selection, judged by the simulator.
//! - [`combine`]: per tensor keep, offload (with its prefetch point) or recompute, so that
//!   the simulated peak fits the budget at the least exposed time.
//! - [`segments`]: the segment plan evolved by a genetic algorithm to migrate as few
//!   bytes as possible; its migrations are one of the candidate plans that [`build`] judges
//!   by simulated cost.
//! - [`program`]: a plan turned into the steps the executor takes after each op.
//! - [`waits`]: the cross-queue waits: which work on the compute, send and receive
//!   queues must wait for which, so that no copy races a kernel and no buffer is freed while
//!   another queue reads it.
//! - [`payoff`]: whether a plan pays against the reactive policy measured on its schedule
//!   (predicted when it is ready, measured once followed).
//!
//! [`build`] is the planners' entry point: a trace, its profile and a budget in, the program
//! the executor follows out: the cheapest of the candidate plans that fits.
//!
//! **Where each mechanism comes from.** burn-swap was built from five patents (their text is
//! beside the design card, `seeds/`; the book's introduction has the same table). The code
//! names the mechanisms by what they do:
//!
//! | source | mechanism | modules |
//! |---|---|---|
//! | 000, CN114860461B (USTC) | peer offload: advisor, memory manager, transmitter, the four tensor states | [`advisor`], `exec::peers`, `exec::transfer`, `exec::residency` |
//! | 001 (Alipay) | the segment plan evolved by a genetic algorithm | [`segments`] |
//! | 002, CN115016937A (NUDT) | zero-value compression before a tensor leaves | [`compression`], `codec` |
//! | 003, CN114035968B (OneFlow) | cross-stream waits | [`waits`], `exec::cubecl_fast_path` |
//! | 004 (Zhejiang University) | the profiled iteration, checkpoint selection, the reference-count simulation | [`profile`], [`checkpoint`], [`simulate`] |

pub mod advisor;
pub mod checkpoint;
pub mod combine;
pub mod compression;
pub mod payoff;
pub mod profile;
pub mod program;
pub mod reactive;
pub mod segments;
pub mod simulate;
pub mod views;
pub mod waits;

use crate::config::{Planner, Policy};
use crate::trace::Trace;
use profile::Profile;
use program::Program;

/// Tensors needed again fewer ops later than this are planned to leave only when no plan
/// fits otherwise.
const MIN_GAP: usize = 3;

/// The shortest gap a tensor can leave in: one op between two of its uses.
const SHORTEST_GAP: usize = 2;

/// The genetic segment search's work limit in [`build`] (accesses walked by its costings; see
/// [`segments::GaConfig::work`]): planning runs once per schedule, on a planner thread by
/// default, and this bounds the search to tens of milliseconds on the suite's models while
/// its plan stays the same on every machine.
const GA_WORK: u64 = 10_000_000;

/// The segment search's work limit where its plan is one candidate among the others (under
/// [`Planner::Cheapest`]): a tenth of [`GA_WORK`]. The search is most of a plan's making,
/// and where every planner is judged its plan has seldom been the one chosen, so it gets the
/// rounds that find most of what it finds, not the last of its gains.
const GA_WORK_AMONG_OTHERS: u64 = GA_WORK / 10;

/// One candidate plan as the simulator judged it, for the report: the planner that made it,
/// whether it fits, its predicted peaks and time, and the smallest budget it reaches.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlanChoice {
    /// The planner: `combined` (the combiner's mix), `offload-only`, `recompute-only`,
    /// `checkpoints` (the profiled checkpoint selection) or `segments` (the segment
    /// plan).
    pub planner: String,
    /// Whether its simulated counted peak fits the budget.
    pub fits: bool,
    /// Its simulated counted peak, in bytes.
    pub peak_bytes: u64,
    /// Its simulated pool peak (fragmentation included), in bytes.
    pub pool_bytes: u64,
    /// Transfer time it leaves exposed per iteration, in seconds.
    pub exposed_seconds: f64,
    /// Recompute time per iteration, in seconds.
    pub recompute_seconds: f64,
    /// The op thread's time handing copies to the transfer workers per iteration, in
    /// seconds.
    #[serde(default)]
    pub handover_seconds: f64,
    /// The smallest budget this planner reaches on the trace, in bytes.
    pub smallest_budget_bytes: u64,
}

impl PlanChoice {
    /// The time it adds to an iteration, as predicted: exposed transfers, recomputation and
    /// the hand-overs of copies to the workers.
    pub fn seconds(&self) -> f64 {
        self.exposed_seconds + self.recompute_seconds + self.handover_seconds
    }
}

/// Plans one iteration for `budget` bytes under `policy` and compiles the plan chosen.
///
/// When keeping every tensor resident fits, that is the plan (`keep-all`, the only choice).
/// Otherwise the candidate plans the policy allows are made and judged by the simulator, each on the
/// same terms (copies held while they run, [`combine`]'s `fit` where an op exceeds the
/// budget): under [`Policy::Planned`] the combiner's mix, its offload-only and
/// recompute-only restrictions, the profiled checkpoint selection and the segment plan;
/// under [`Policy::OffloadOnly`] the offload-only plans, under [`Policy::RecomputeOnly`]
/// the recompute-only ones. The cheapest plan that fits (least exposed, recompute and
/// hand-over time) is compiled. Tensors leave in gaps of at least three ops (`MIN_GAP`)
/// between two uses; when none of the combiner's and checkpoint plans fits so, the same
/// planners are run again with the single-op gaps as well (named `..., single-op gaps`).
/// Every candidate's score is in [`Program::choices`]; when none fits, no plan is followed
/// (`Program::chosen` is past the end) and the reactive fallback keeps the budget alone.
/// Under [`Planner::Cheapest`] the segment plan is searched with a tenth of its work limit,
/// and not at all where a plan that fits costs within `payoff::SLACK` of the iteration
/// already, or where every offload in every gap leaves a peak above the budget (the segment
/// plan's migrations are among those offloads, so it cannot fit). A `planner` other than
/// [`Planner::Cheapest`] limits the candidates to that planner's (keep-all aside).
pub fn build(
    trace: &Trace,
    profile: &Profile,
    budget: u64,
    (policy, planner): (Policy, Planner),
) -> Program {
    let _span = tracing::debug_span!(
        "burn_swap::plan",
        ops = trace.ops.len(),
        budget,
        policy = policy.name(),
        planner = planner.name()
    )
    .entered();
    let keep_all = combine::keep_all(trace, profile, budget);
    if keep_all.feasible {
        return choose(trace, &[("keep-all", keep_all)]);
    }
    // Without a measured link the combiner cannot cost an offload: assume one that the gap
    // always hides, so that offloads are still planned (their prefetch starts right after).
    let mut copying = std::borrow::Cow::Borrowed(profile);
    if copying.links.is_none() {
        copying.to_mut().links = Some(profile::Links::instant());
    }
    let candidates = checkpoint::candidates(trace, profile, MIN_GAP);
    let mut plans = plans_from(
        trace,
        (profile, &copying),
        (&candidates, MIN_GAP),
        budget,
        (policy, PLANNERS),
    );
    plans.retain(|(name, _)| admits(planner, name));
    // None fits with the usual gaps: tensors may also leave for the single op between two of
    // their uses (a convolution's backward between its input's reads), which costs more copy
    // time per byte than a longer gap and is planned only when nothing else fits.
    let shortest_plans = if plans.iter().any(|(_, plan)| plan.feasible)
        || !SHORT_GAP_NAMES.iter().any(|name| admits(planner, name))
    {
        Vec::new()
    } else {
        let shortest = checkpoint::candidates(trace, profile, SHORTEST_GAP);
        plans_from(
            trace,
            (profile, &copying),
            (&shortest, SHORTEST_GAP),
            budget,
            (policy, SHORT_GAP_NAMES),
        )
        .into_iter()
        .filter(|(name, _)| admits(planner, name))
        .collect()
    };
    // The segment search is most of a plan's making (its genetic rounds do not shrink with
    // the trace). Under the cheapest choice it is not run where a plan that fits already
    // costs less than `payoff::SLACK` of the iteration: what a plan may cost more than
    // another and still be followed, so nothing the search finds could be told apart. Nor
    // where it cannot fit: its migrations are offloads in gaps of two ops or more, among the
    // offload-only planner's candidates with the single-op gaps, and where taking every one
    // of those leaves a peak above the budget (that plan's smallest budget), no choice of
    // them fits either.
    let close_enough = planner == Planner::Cheapest
        && plans.iter().any(|(_, plan)| {
            plan.feasible
                && plan.exposed_seconds + plan.recompute_seconds + plan.handover_seconds
                    <= payoff::SLACK * profile.iteration_seconds()
        });
    // (`SHORT_GAP_NAMES[1]`: the offload-only plan with the single-op gaps.)
    let out_of_reach = planner == Planner::Cheapest
        && shortest_plans
            .iter()
            .any(|(name, plan)| *name == SHORT_GAP_NAMES[1] && plan.smallest_budget > budget);
    if policy != Policy::RecomputeOnly
        && admits(planner, "segments")
        && !close_enough
        && !out_of_reach
    {
        // The segments do not depend on the candidates: made once.
        if let Some(plan) = combine::segmented(trace, &copying, budget, &segment_search(planner)) {
            // Listed after the offload plans, before the recomputing ones.
            let at = plans
                .iter()
                .position(|(n, _)| *n == PLANNERS[1])
                .map_or(0, |i| i + 1);
            plans.insert(at, ("segments", plan));
        }
    }
    plans.extend(shortest_plans);
    if plans.is_empty() {
        // The planner named made nothing here: none is followed.
        return compile_none(trace, &combine::Plan::empty(&keep_all), Vec::new());
    }
    choose(trace, &plans)
}

/// The segment search's settings under `planner`: the whole work limit where it is the
/// planner named, a tenth of it where its plan is one candidate among the others.
fn segment_search(planner: Planner) -> segments::GaConfig {
    segments::GaConfig {
        work: if planner == Planner::Segments {
            GA_WORK
        } else {
            GA_WORK_AMONG_OTHERS
        },
        ..Default::default()
    }
}

/// Whether the plan named `name` (one of [`PLANNERS`], [`SHORT_GAP_NAMES`] or `segments`) is
/// `planner`'s: the combiner's mix and its offload-only and recompute-only restrictions are
/// [`Planner::Combined`]'s.
fn admits(planner: Planner, name: &str) -> bool {
    let base = name.split(',').next().unwrap_or(name);
    match planner {
        Planner::Cheapest => true,
        Planner::Combined => matches!(base, "combined" | "offload-only" | "recompute-only"),
        Planner::Checkpoints => base == "checkpoints",
        Planner::Segments => base == "segments",
    }
}

/// The names of the candidate plans made from every gap, the single-op ones included (as
/// [`PLANNERS`]).
const SHORT_GAP_NAMES: [&str; 4] = [
    "combined, single-op gaps",
    "offload-only, single-op gaps",
    "recompute-only, single-op gaps",
    "checkpoints, single-op gaps",
];

/// The names of the plans made from a list of candidates: the combiner's mix, its
/// offload-only and recompute-only restrictions, the profiled checkpoint selection.
const PLANNERS: [&str; 4] = ["combined", "offload-only", "recompute-only", "checkpoints"];

/// The candidate plans the policy allows from one list of candidates (made with gaps of at
/// least `min_gap` ops, as the other gaps the combiner adds), named by `names` (in the order
/// of [`PLANNERS`]).
fn plans_from(
    trace: &Trace,
    (profile, copying): (&Profile, &Profile),
    (candidates, min_gap): (&[checkpoint::Candidate], usize),
    budget: u64,
    (policy, names): (Policy, [&'static str; 4]),
) -> Vec<(&'static str, combine::Plan)> {
    let no_recompute: Vec<checkpoint::Candidate> = candidates
        .iter()
        .map(|c| checkpoint::Candidate {
            recomputable: false,
            ..*c
        })
        .collect();
    let offloads = policy != Policy::RecomputeOnly;
    let recomputes = policy != Policy::OffloadOnly;
    let mut plans: Vec<(&'static str, combine::Plan)> = Vec::new();
    if offloads && recomputes {
        plans.push((
            names[0],
            combine::combine_gaps(trace, copying, candidates, budget, min_gap),
        ));
    }
    if offloads {
        plans.push((
            names[1],
            combine::combine_gaps(trace, copying, &no_recompute, budget, min_gap),
        ));
    }
    if recomputes {
        // Recompute-only plans are costed without a link.
        let recomputing = Profile {
            links: None,
            ..profile.clone()
        };
        plans.push((
            names[2],
            combine::combine_gaps(trace, &recomputing, candidates, budget, min_gap),
        ));
        plans.push((
            names[3],
            combine::checkpointed(trace, &recomputing, candidates, budget, 8),
        ));
    }
    plans
}

/// Compiles the cheapest plan of `plans` that fits (none when none does), with every
/// plan's score.
fn choose(trace: &Trace, plans: &[(&'static str, combine::Plan)]) -> Program {
    let choices: Vec<PlanChoice> = plans
        .iter()
        .map(|(name, plan)| PlanChoice {
            planner: (*name).to_string(),
            fits: plan.feasible,
            peak_bytes: plan.simulation.peak_live_bytes,
            pool_bytes: plan.simulation.peak_pool_bytes,
            exposed_seconds: plan.exposed_seconds,
            recompute_seconds: plan.recompute_seconds,
            handover_seconds: plan.handover_seconds,
            smallest_budget_bytes: plan.smallest_budget,
        })
        .collect();
    let chosen = (0..choices.len())
        .filter(|&i| choices[i].fits)
        .min_by(|&a, &b| {
            choices[a]
                .seconds()
                .total_cmp(&choices[b].seconds())
                .then(plans[a].1.actions.len().cmp(&plans[b].1.actions.len()))
        });
    let Some(chosen) = chosen else {
        // No plan fits: none is followed, and the reactive fallback keeps the budget alone
        // (a plan's moves would come on top of the fallback's: measured slower).
        tracing::debug!("burn-swap: no plan fits");
        return compile_none(trace, &combine::Plan::empty(&plans[0].1), choices);
    };
    tracing::debug!(
        chosen = choices.get(chosen).map(|c| c.planner.as_str()),
        "burn-swap: plan chosen"
    );
    let mut program = compile(trace, &plans[chosen].1);
    program.chosen = chosen;
    program.choices = choices;
    program
}

/// The program of no plan (none fits, or none was made), with the choices judged.
fn compile_none(trace: &Trace, empty: &combine::Plan, choices: Vec<PlanChoice>) -> Program {
    let mut program = compile(trace, empty);
    program.fits = false;
    program.chosen = choices.len();
    program.choices = choices;
    program
}

/// A plan turned into the program the executor follows: its steps
/// ([`program::compile`]), then the cross-stream waits on the compute side
/// ([`waits::fetch_waits`]).
pub fn compile(trace: &Trace, plan: &combine::Plan) -> Program {
    let mut program = program::compile(trace, plan);
    program.fetch_waits = waits::fetch_waits(trace, &program);
    program
}
