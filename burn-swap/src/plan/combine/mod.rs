//! The combiner: per tensor, keep it, offload it to host memory during its gap, or drop it and
//! recompute it, so that the simulated peak fits the budget at the least exposed time.
//!
//! Each candidate ([`super::checkpoint::candidates`]) gets its cheaper way to leave the device
//! during its gap: an offload costs the part of its round trip that the gap's compute does not
//! hide; a recomputation costs its producer's time (and is impossible for impure ops). The
//! candidates are ranked by bytes freed for longer per second of cost, offloads whose copies
//! the gap cannot hide last, and the shortest prefix of that ranking whose simulated peak fits
//! the budget is taken (found by bisection over the prefix length, so planning settles
//! `O(log n)` prefixes and simulates the pool once, for the prefix taken). When even the
//! whole ranking does not fit, the plan takes every recomputation and hidden offload and
//! leaves the rest to the executor's reactive fallback: an exposed planned offload would
//! stall the op just as a reactive one does.
//!
//! Recomputation stays one level deep (a recomputed tensor's producer reads no recomputed
//! tensor) and only where the replay fits beside the op that needs it, so that a
//! recomputation is one op whose inputs are at hand.
//!
//! An offload starts after the access that opens the gap; its prefetch starts at the latest op
//! from which the compute left before the next use hides the fetch at the profiled bandwidth
//! (or right after the offload, when nothing can hide it); once the plan is fitted to the
//! budget, each fetch starts sooner where the budget has room for its bytes at every op up to
//! that start, in the order of the uses (copies made while the compute runs can take longer
//! than the link measured alone). The other destinations (peers) and compression come in as
//! further actions here.

use super::checkpoint::Candidate;
use super::profile::{LinkFit, Profile};
use super::simulate::{self, Lifetime, Simulation, live_per_op};
use crate::trace::Trace;

mod fit;
mod one_level;
mod range_max;
mod settle;

pub use fit::lifetimes;
use fit::{
    fit, held_in_queue, held_per_op, late_in_queue, lead_into_slack, lifetimes_held, needed,
};
use one_level::one_level;
use settle::{Settled, settle};

/// What the plan does with a tensor during its gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Offload after op `after`; start the fetch at op `prefetch_at`.
    Offload {
        /// The op after which the offload starts.
        after: usize,
        /// The op at which the prefetch starts.
        prefetch_at: usize,
        /// Both copies made on the op thread (the offload right after op `after`, the fetch
        /// right before the use, `prefetch_at` being the use): for a tensor whose copies
        /// cost the op thread less than handing them to the transfer workers does.
        inline: bool,
    },
    /// Drop after op `after`; recompute before op `before`.
    Recompute {
        /// The op after which it is dropped.
        after: usize,
        /// The op before which it is recomputed.
        before: usize,
    },
}

impl Plan {
    /// No action: every tensor kept (the executor's reactive fallback alone keeps the
    /// budget), with `like`'s figures for what was judged.
    pub fn empty(like: &Plan) -> Plan {
        Plan {
            actions: Vec::new(),
            live_bytes: Vec::new(),
            ..like.clone()
        }
    }
}

impl Action {
    /// The op after which the tensor leaves.
    pub fn after(&self) -> usize {
        match *self {
            Action::Offload { after, .. } | Action::Recompute { after, .. } => after,
        }
    }
}

/// A plan: the tensors that leave the device, and what it is predicted to cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `(index into Trace::tensors, action)` for every tensor that leaves; the rest are kept.
    pub actions: Vec<(usize, Action)>,
    /// The simulated memory of the plan.
    pub simulation: Simulation,
    /// The simulated counted bytes at each op of the iteration (its inputs and outputs
    /// together, as the executor counts them): the simulation's live peak is their largest.
    pub live_bytes: Vec<u64>,
    /// Whether the simulated counted peak fits the budget.
    pub feasible: bool,
    /// Transfer time not hidden behind compute, per iteration.
    pub exposed_seconds: f64,
    /// Recompute time, per iteration.
    pub recompute_seconds: f64,
    /// The op thread's time handing the offloads' copies to the transfer workers, per
    /// iteration.
    pub handover_seconds: f64,
    /// The smallest budget this planner's plans reach on the trace: the simulated counted
    /// peak of its plan that takes every way out it found (the plan's own peak when it fits).
    pub smallest_budget: u64,
}

/// The share of a hidden copy's time that the ranking counts as its cost (see `combine`).
const CONTENTION: f64 = 0.1;

/// The ways for one candidate to leave, offload and recompute, each with its cost in
/// seconds (`None` where impossible).
type Ways = (Option<(Action, f64)>, Option<(Action, f64)>);

/// The ways for one candidate to leave. An offload's cost is the part of its round trip
/// the gap's compute does not hide plus the op thread's two hand-overs to the workers, or,
/// where that is cheaper, its two copies made on the op thread (`inline`).
fn ways(
    c: &Candidate,
    profile: &Profile,
    fits: Option<(LinkFit, LinkFit)>,
    here: &OnThread,
) -> Ways {
    let offload = fits.filter(|_| c.offloadable).map(|(out, back)| {
        let (out_s, back_s) = (out.seconds(c.bytes), back.seconds(c.bytes));
        let exposed = (out_s + back_s - c.gap_seconds).max(0.0) + 2.0 * here.handover;
        if let Some(inline) = here.round_trip(c.bytes)
            && inline < exposed
        {
            let action = Action::Offload {
                after: c.gap.0,
                prefetch_at: c.gap.1,
                inline: true,
            };
            return (action, inline);
        }
        // The latest op from which the compute before the next use hides the fetch.
        let ops = profile.op_nanos.len().max(1);
        let mut prefetch_at = c.gap.1 - 1;
        let mut hidden = 0.0;
        while prefetch_at > c.gap.0 + 1 && hidden < back_s {
            hidden += profile.op_nanos[prefetch_at % ops] as f64 * 1e-9;
            prefetch_at -= 1;
        }
        let action = Action::Offload {
            after: c.gap.0,
            prefetch_at: prefetch_at.max(c.gap.0 + 1).min(c.gap.1 - 1),
            inline: false,
        };
        (action, exposed)
    });
    let recompute = c.recomputable.then_some((
        Action::Recompute {
            after: c.gap.0,
            before: c.gap.1,
        },
        c.recompute_seconds,
    ));
    (offload, recompute)
}

/// The op thread's share of copies, as measured ([`super::profile::OnThread`]): the
/// hand-over of one copy to a worker, and the fitted copies made on the op thread (`None`
/// where not measured: then no copy is planned there).
#[derive(Debug, Clone, Copy)]
struct OnThread {
    handover: f64,
    fits: Option<(LinkFit, LinkFit)>,
}

impl OnThread {
    fn of(profile: &Profile) -> Self {
        let measured = profile.links.as_ref().and_then(|l| l.on_thread.as_ref());
        Self {
            handover: measured.map_or(0.0, |m| m.handover_seconds),
            fits: measured.and_then(|m| m.fits()),
        }
    }

    /// Seconds both copies of `bytes` take made on the op thread.
    fn round_trip(&self, bytes: u64) -> Option<f64> {
        self.fits
            .map(|(out, back)| out.seconds(bytes) + back.seconds(bytes))
    }
}

/// The cheaper of the ways.
fn cheaper((offload, recompute): Ways) -> Option<(Action, f64)> {
    match (offload, recompute) {
        (Some(o), Some(r)) => Some(if r.1 < o.1 { r } else { o }),
        (o, r) => o.or(r),
    }
}

/// One tensor's way out in a plan under evaluation: its action, the use that ends its gap,
/// and its cost in seconds (an offload's is recomputed from where it ends up).
#[derive(Debug, Clone, Copy)]
struct Taken {
    tensor: usize,
    action: Action,
    used: usize,
    cost: f64,
    /// Its place in the planner's ranking (0 is the most worth taking).
    rank: usize,
}

/// Judges a plan: [`settle`]s its ways out, then [`Settled::judge`]s it.
fn evaluate(trace: &Trace, profile: &Profile, taken: &[Taken], budget: u64) -> Plan {
    let kept = simulate::lifetimes(trace);
    settle(trace, profile, &kept, taken, budget).judge(trace, profile, budget)
}

/// The plan that keeps every tensor resident, judged as the others are.
pub fn keep_all(trace: &Trace, profile: &Profile, budget: u64) -> Plan {
    evaluate(trace, profile, &[], budget)
}

/// Keeps the items of `v` whose `keep` is set (`keep` is as long as `v`).
fn retain_kept<T>(v: &mut Vec<T>, keep: &[bool]) {
    let mut i = 0;
    v.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

/// The fitted copy models of the profile's links, both ways; `None` when not measured.
fn link_fits(profile: &Profile) -> Option<(LinkFit, LinkFit)> {
    profile.links.as_ref().and_then(|l| match l.fits() {
        (Some(out), Some(back)) => Some((out, back)),
        _ => None,
    })
}

/// The profiled checkpoint selection judged as a plan: the tensors it drops are recomputed
/// (one level deep, as the combiner's; a drop that would chain is offloaded instead, where
/// it can be), the rest kept.
pub fn checkpointed(
    trace: &Trace,
    profile: &Profile,
    candidates: &[Candidate],
    budget: u64,
    rounds: usize,
) -> Plan {
    let selected = super::checkpoint::select(trace, candidates, rounds);
    let (fits, here) = (link_fits(profile), OnThread::of(profile));
    let by_tensor: hashbrown::HashMap<usize, &Candidate> =
        candidates.iter().map(|c| (c.tensor, c)).collect();
    let mut ranked: Vec<Ranked> = selected
        .recomputed
        .iter()
        .filter_map(|t| by_tensor.get(t))
        .filter_map(|c| {
            let (offload, recompute) = ways(c, profile, fits, &here);
            let (action, cost) = recompute?;
            Some(Ranked {
                score: c.score(),
                tensor: c.tensor,
                used: c.gap.1,
                action,
                cost,
                offload,
                handover: 2.0 * here.handover,
            })
        })
        .collect();
    one_level(trace, profile, budget, &mut ranked);
    let taken: Vec<Taken> = ranked
        .iter()
        .enumerate()
        .map(|(rank, r)| r.taken(rank))
        .collect();
    evaluate(trace, profile, &taken, budget)
}

/// The segment plan judged as a plan: the migrations its segments imply become
/// offloads (each gap's fetch timed as the combiner times it, then fitted to the budget as
/// the combiner's own plans are); `None` when the largest tensor alone exceeds the budget.
pub fn segmented(
    trace: &Trace,
    profile: &Profile,
    budget: u64,
    config: &super::segments::GaConfig,
) -> Option<Plan> {
    use super::segments;
    let objects = segments::objects(trace, config.small_object_bytes);
    let plan = segments::plan(&objects, budget, config)?;
    let (fits, here) = (link_fits(profile), OnThread::of(profile));
    let taken: Vec<Taken> = segments::migrations(trace, &objects, &plan)
        .into_iter()
        .filter(|&(_, (a, n))| n > a + 1)
        .filter_map(|(tensor, gap)| {
            let c = Candidate {
                tensor,
                bytes: trace.tensors[tensor].bytes,
                gap,
                recompute_seconds: 0.0,
                gap_seconds: profile.gap_seconds(gap.0, gap.1),
                recomputable: false,
                offloadable: !trace.tensors[tensor].shares_buffer,
                swappable: true,
            };
            let (action, cost) = ways(&c, profile, fits, &here).0?;
            Some(Taken {
                tensor,
                action,
                used: gap.1,
                cost,
                rank: 0,
            })
        })
        .collect();
    Some(evaluate(trace, profile, &taken, budget))
}

/// One ranked candidate.
struct Ranked {
    score: f64,
    tensor: usize,
    /// The op that ends its gap (its next use).
    used: usize,
    action: Action,
    cost: f64,
    offload: Option<(Action, f64)>,
    /// The op thread's time handing a worker both copies of an offload.
    handover: f64,
}

impl Ranked {
    /// Whether its way out costs the op's path more than the hand-overs: an offload whose
    /// copies its gap does not hide, or whose copies are made on the op thread.
    fn exposed(&self) -> bool {
        match self.action {
            Action::Offload { inline: true, .. } => true,
            Action::Offload { .. } => self.cost > self.handover,
            Action::Recompute { .. } => false,
        }
    }

    fn taken(&self, rank: usize) -> Taken {
        Taken {
            tensor: self.tensor,
            action: self.action,
            used: self.used,
            cost: self.cost,
            rank,
        }
    }
}

/// The other gaps of each candidate's tensor (its candidate has the longest): gaps between
/// two of its uses at least `min_gap` ops apart (the candidates' own minimum), and the one
/// across the iteration boundary for a carried tensor. They can leave by offload only (a tensor is recomputed in one gap at
/// most), so that a tensor used at many points of the iteration need not stay resident
/// between all the others.
fn other_gaps(
    trace: &Trace,
    profile: &Profile,
    candidates: &[Candidate],
    min_gap: usize,
) -> Vec<Candidate> {
    let period = trace.ops.len();
    let link = profile.links.as_ref().and_then(|l| l.link_model());
    let lives = simulate::lifetimes(trace);
    let holders = simulate::buffer_holders(&lives);
    let mut out = Vec::new();
    for c in candidates {
        let t = &trace.tensors[c.tensor];
        let mut times: Vec<usize> = t.producer.into_iter().collect();
        times.extend(t.accesses.iter().map(|a| a.op));
        let wrap = t.wraps_to.and_then(|w| {
            let last = *times.last()?;
            Some((last, period + trace.tensors[w].accesses.first()?.op))
        });
        let gaps = times.windows(2).map(|w| (w[0], w[1])).chain(wrap);
        for gap in gaps {
            if gap == c.gap
                || gap.1 - gap.0 < min_gap
                || simulate::kept_by_others(&lives, &holders, c.tensor, gap, period)
            {
                continue;
            }
            let gap_seconds = profile.gap_seconds(gap.0, gap.1);
            out.push(Candidate {
                tensor: c.tensor,
                bytes: c.bytes,
                gap,
                recompute_seconds: 0.0,
                gap_seconds,
                recomputable: false,
                offloadable: c.offloadable,
                swappable: link.is_some_and(|l| l.round_trip(c.bytes) <= gap_seconds),
            });
        }
    }
    out
}

/// The time an offload after op `after`, used again at op `used` (and waited for before op
/// `waited`, when the budget needs its bytes there), whose fetch lands `late` seconds after
/// its use starts (see `late_in_queue`), leaves exposed: its round trip beyond the compute of
/// its gap, or the part of its copy out that the ops before the wait do not hide plus its
/// fetch's lateness, whichever is more.
fn offload_exposed(
    profile: &Profile,
    (out, back): (LinkFit, LinkFit),
    bytes: u64,
    (after, used): (usize, usize),
    (waited, late): (Option<usize>, f64),
) -> f64 {
    let (out_s, back_s) = (out.seconds(bytes), back.seconds(bytes));
    let round_trip = out_s + back_s - profile.gap_seconds(after, used);
    let copy_out = waited.map_or(0.0, |w| (out_s - profile.gap_seconds(after, w)).max(0.0));
    round_trip.max(copy_out + late).max(0.0)
}

/// The candidates (and their other gaps) ranked with their cheaper way out, one level deep:
/// hidden offloads and recomputations first, by benefit per cost, then the offloads whose
/// copies their gap cannot hide; with the count of the first group.
fn rank(
    trace: &Trace,
    profile: &Profile,
    candidates: &[Candidate],
    (budget, min_gap): (u64, usize),
) -> (Vec<Ranked>, usize) {
    let fits = link_fits(profile);
    let here = OnThread::of(profile);
    let others = if fits.is_some() {
        other_gaps(trace, profile, candidates, min_gap)
    } else {
        Vec::new()
    };
    let mut ranked: Vec<Ranked> = candidates
        .iter()
        .chain(&others)
        .filter_map(|c| {
            let ways = ways(c, profile, fits, &here);
            let (action, cost) = cheaper(ways)?;
            let benefit = c.bytes as f64 * (c.gap.1 - c.gap.0) as f64;
            // A copy the gap hides still takes a share of the machine (memory bandwidth; on a
            // CPU device, a core): among hidden offloads, the gaps that free the most
            // byte-time per byte moved, the longest, come first.
            let copy = match (action, fits) {
                (Action::Offload { inline: false, .. }, Some((out, back))) => {
                    out.seconds(c.bytes) + back.seconds(c.bytes)
                }
                _ => 0.0,
            };
            Some(Ranked {
                score: benefit / (cost + CONTENTION * copy + 1e-9),
                tensor: c.tensor,
                used: c.gap.1,
                action,
                cost,
                handover: 2.0 * here.handover,
                offload: ways.0,
            })
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.tensor.cmp(&b.tensor))
            .then(a.used.cmp(&b.used))
    });
    one_level(trace, profile, budget, &mut ranked);
    // Ways that cost compute time (recomputation) or nothing (offloads the gap hides) come
    // first; offloads whose copies the gap cannot hide come last, taken only where the plan
    // needs them to fit.
    ranked.sort_by_key(Ranked::exposed);
    let hidden = ranked.iter().take_while(|r| !r.exposed()).count();
    (ranked, hidden)
}

/// Plans for `budget` bytes, judged on the simulated counted bytes (what the budget bounds;
/// the pool peak, fragmentation included, is reported beside it). A tensor leaves in its
/// candidate's gap and in its other gaps of at least the planner's usual three ops.
pub fn combine(trace: &Trace, profile: &Profile, candidates: &[Candidate], budget: u64) -> Plan {
    combine_gaps(trace, profile, candidates, budget, super::MIN_GAP)
}

/// [`combine`], a tensor's other gaps taken down to `min_gap` ops (`candidates` made with
/// the same `min_gap`: two lets a tensor leave for the single op between two of its uses).
pub fn combine_gaps(
    trace: &Trace,
    profile: &Profile,
    candidates: &[Candidate],
    budget: u64,
    min_gap: usize,
) -> Plan {
    let ops = trace.ops.len();
    let (ranked, hidden) = rank(trace, profile, candidates, (budget, min_gap));
    let kept = simulate::lifetimes(trace);
    let settled = |k: usize| -> Settled {
        let recomputed: hashbrown::HashSet<usize> = ranked[..k]
            .iter()
            .filter(|r| matches!(r.action, Action::Recompute { .. }))
            .map(|r| r.tensor)
            .collect();
        // A tensor recomputed in one gap leaves in no other (its recipe is its way back).
        let taken: Vec<Taken> = ranked[..k]
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                matches!(r.action, Action::Recompute { .. }) || !recomputed.contains(&r.tensor)
            })
            .map(|(rank, r)| r.taken(rank))
            .collect();
        settle(trace, profile, &kept, &taken, budget)
    };
    let judged = |s: Settled| s.judge(trace, profile, budget);
    let _span =
        tracing::debug_span!("burn_swap::combine", ops, candidates = ranked.len()).entered();
    let keep_all = settled(0);
    if keep_all.fits(budget) {
        return judged(keep_all);
    }
    let everything = settled(ranked.len());
    if !everything.fits(budget) {
        // No plan fits: the executor's reactive fallback keeps the budget for the rest, and
        // it moves what it must on the op's path anyway, so exposed offloads gain nothing.
        return Plan {
            smallest_budget: everything.smallest_budget(),
            ..judged(settled(hidden))
        };
    }
    // The shortest feasible prefix, by bisection (more actions never raise the peak); only
    // the prefix taken is judged.
    let (mut lo, mut hi, mut fitting) = (0, ranked.len(), everything);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let plan = settled(mid);
        if plan.fits(budget) {
            (hi, fitting) = (mid, plan);
        } else {
            lo = mid;
        }
    }
    judged(fitting)
}

#[cfg(test)]
mod tests;
