//! The combiner: per tensor, keep it, offload it to host memory during its gap, or drop it and
//! recompute it, so that the simulated peak fits the budget at the least exposed time.
//!
//! Each candidate ([`super::checkpoint::candidates`]) gets its cheaper way to leave the device
//! during its gap: an offload costs the part of its round trip that the gap's compute does not
//! hide; a recomputation costs its producer's time (and is impossible for impure ops). The
//! candidates are ranked by bytes freed for longer per second of cost, offloads whose copies
//! the gap cannot hide last, and the shortest prefix of that ranking whose simulated peak fits
//! the budget is taken (found by bisection over the prefix length, so planning costs
//! `O(log n)` simulations). When even the whole ranking does not fit, the plan takes every
//! recomputation and hidden offload and leaves the rest to the executor's reactive fallback:
//! an exposed planned offload would stall the op just as a reactive one does.
//!
//! Recomputation stays one level deep (a recomputed tensor's producer reads no recomputed
//! tensor) and only where the replay fits beside the op that needs it, so that a
//! recomputation is one op whose inputs are at hand.
//!
//! An offload starts after the access that opens the gap; its prefetch starts at the latest op
//! from which the compute left before the next use hides the fetch at the profiled bandwidth
//! (or right after the offload, when nothing can hide it). The other destinations (peers) and
//! compression come in as further actions here.

use super::checkpoint::Candidate;
use super::profile::{LinkFit, Profile};
use super::simulate::{self, Lifetime, Simulation};
use crate::trace::Trace;

/// What the plan does with a tensor during its gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Offload after op `after`; start the fetch at op `prefetch_at`.
    Offload {
        /// The op after which the offload starts.
        after: usize,
        /// The op at which the prefetch starts.
        prefetch_at: usize,
    },
    /// Drop after op `after`; recompute before op `before`.
    Recompute {
        /// The op after which it is dropped.
        after: usize,
        /// The op before which it is recomputed.
        before: usize,
    },
}

/// A plan: the tensors that leave the device, and what it is predicted to cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `(index into Trace::tensors, action)` for every tensor that leaves; the rest are kept.
    pub actions: Vec<(usize, Action)>,
    /// The simulated memory of the plan.
    pub simulation: Simulation,
    /// Whether the simulated pool peak fits the budget.
    pub feasible: bool,
    /// Transfer time not hidden behind compute, per iteration.
    pub exposed_seconds: f64,
    /// Recompute time, per iteration.
    pub recompute_seconds: f64,
}

/// The ways for one candidate to leave, offload and recompute, each with its cost in
/// seconds (`None` where impossible).
type Ways = (Option<(Action, f64)>, Option<(Action, f64)>);

/// The ways for one candidate to leave.
fn ways(c: &Candidate, profile: &Profile, fits: Option<(LinkFit, LinkFit)>) -> Ways {
    let offload = fits.map(|(out, back)| {
        let (out_s, back_s) = (out.seconds(c.bytes), back.seconds(c.bytes));
        let exposed = (out_s + back_s - c.gap_seconds).max(0.0);
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

/// The cheaper of the ways.
fn cheaper((offload, recompute): Ways) -> Option<(Action, f64)> {
    match (offload, recompute) {
        (Some(o), Some(r)) => Some(if r.1 < o.1 { r } else { o }),
        (o, r) => o.or(r),
    }
}

/// Keeps recomputation one level deep: walking the ranking, a recomputation whose producer
/// reads a tensor that is itself recomputed (or whose tensor a recomputed producer reads)
/// is turned into its offload, or dropped when it cannot be offloaded. Recomputing then
/// replays one op whose inputs are present, never a chain (whose transient the simulator
/// does not model). A recomputation whose replay (the producer's inputs and output) together
/// with the working set of the op that needs it would not fit the budget is treated the
/// same way.
fn one_level(trace: &Trace, profile: &Profile, budget: u64, ranked: &mut Vec<Ranked>) {
    let index_of: hashbrown::HashMap<u64, usize> = trace
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id, i))
        .collect();
    let n = trace.tensors.len();
    let (mut recomputed, mut read_by_recompute) = (vec![false; n], vec![false; n]);
    ranked.retain_mut(|r| {
        if !matches!(r.action, Action::Recompute { .. }) {
            return true;
        }
        let inputs: Vec<usize> = trace.tensors[r.tensor]
            .producer
            .map(|p| {
                trace.ops[p]
                    .inputs
                    .iter()
                    .filter_map(|id| index_of.get(id).copied())
                    .collect()
            })
            .unwrap_or_default();
        let replay: u64 = inputs.iter().map(|&i| trace.tensors[i].bytes).sum::<u64>()
            + trace.tensors[r.tensor].bytes;
        let user = match r.action {
            Action::Recompute { before, .. } => profile.op_bytes.get(before).copied(),
            Action::Offload { .. } => None,
        };
        let too_big = replay + user.unwrap_or(0) > budget;
        if too_big || read_by_recompute[r.tensor] || inputs.iter().any(|&i| recomputed[i]) {
            return match r.offload {
                Some((action, cost)) => {
                    r.action = action;
                    r.cost = cost;
                    true
                }
                None => false,
            };
        }
        recomputed[r.tensor] = true;
        for i in inputs {
            read_by_recompute[i] = true;
        }
        true
    });
}

/// One ranked candidate.
struct Ranked {
    score: f64,
    tensor: usize,
    action: Action,
    cost: f64,
    offload: Option<(Action, f64)>,
}

/// The lifetimes of a plan: a tensor that leaves lives until its gap opens, then again from
/// its prefetch (or the op before its recomputed use) to its end.
pub fn lifetimes(trace: &Trace, actions: &[(usize, Action)]) -> Vec<Lifetime> {
    let mut lifetimes = simulate::lifetimes(trace);
    let ops = trace.ops.len();
    for &(tensor, action) in actions {
        let whole = lifetimes[tensor];
        let (after, back) = match action {
            Action::Offload { after, prefetch_at } => (after, prefetch_at),
            Action::Recompute { after, before } => (after, before.saturating_sub(1)),
        };
        lifetimes[tensor].until = Some(after);
        match trace.tensors[tensor].wraps_to {
            // Fetched back in the next iteration: there, it is the tensor this iteration
            // received in its slot, which now lives from the prefetch on.
            Some(carried) if back >= ops => {
                let from = lifetimes[carried].from;
                lifetimes[carried].from = Some(from.map_or(back - ops, |f| f.max(back - ops)));
            }
            _ => lifetimes.push(Lifetime {
                bytes: whole.bytes,
                from: Some(back),
                until: whole.until,
            }),
        }
    }
    lifetimes
}

/// Plans for `budget` bytes (judged on the simulated pool peak).
pub fn combine(trace: &Trace, profile: &Profile, candidates: &[Candidate], budget: u64) -> Plan {
    let ops = trace.ops.len();
    let fits = profile.links.as_ref().and_then(|l| match l.fits() {
        (Some(out), Some(back)) => Some((out, back)),
        _ => None,
    });
    let mut ranked: Vec<Ranked> = candidates
        .iter()
        .filter_map(|c| {
            let ways = ways(c, profile, fits);
            let (action, cost) = cheaper(ways)?;
            let benefit = c.bytes as f64 * (c.gap.1 - c.gap.0) as f64;
            Some(Ranked {
                score: benefit / (cost + 1e-9),
                tensor: c.tensor,
                action,
                cost,
                offload: ways.0,
            })
        })
        .collect();
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.tensor.cmp(&b.tensor)));
    one_level(trace, profile, budget, &mut ranked);
    // Ways that cost compute time (recomputation) or nothing (offloads the gap hides) come
    // first; offloads whose copies the gap cannot hide come last, taken only where the plan
    // needs them to fit.
    ranked.sort_by_key(|r| matches!(r.action, Action::Offload { .. }) && r.cost > 0.0);
    let hidden = ranked
        .iter()
        .take_while(|r| !(matches!(r.action, Action::Offload { .. }) && r.cost > 0.0))
        .count();

    // Probes simulate with one ratio (the keep-everything plan's best); the chosen plan is
    // then simulated with every ratio. `O(log n)` probes.
    let keep_all = simulate::simulate_best(&simulate::lifetimes(trace), ops);
    let probe_ratio = keep_all.ratio;
    let plan_of = |k: usize, ratio: Option<u32>| -> Plan {
        let actions: Vec<(usize, Action)> =
            ranked[..k].iter().map(|r| (r.tensor, r.action)).collect();
        let lifetimes = lifetimes(trace, &actions);
        let simulation = match ratio {
            Some(r) => simulate::simulate(&lifetimes, ops, r),
            None => simulate::simulate_best(&lifetimes, ops),
        };
        let (mut exposed, mut recompute) = (0.0, 0.0);
        for r in &ranked[..k] {
            match r.action {
                Action::Offload { .. } => exposed += r.cost,
                Action::Recompute { .. } => recompute += r.cost,
            }
        }
        Plan {
            feasible: simulation.peak_pool_bytes <= budget,
            actions,
            simulation,
            exposed_seconds: exposed,
            recompute_seconds: recompute,
        }
    };
    let _span =
        tracing::debug_span!("burn_swap::combine", ops, candidates = ranked.len()).entered();
    if keep_all.peak_pool_bytes <= budget {
        return plan_of(0, None);
    }
    if !plan_of(ranked.len(), Some(probe_ratio)).feasible {
        // No plan fits: the executor's reactive fallback keeps the budget for the rest, and
        // it moves what it must on the op's path anyway, so exposed offloads gain nothing.
        return plan_of(hidden, None);
    }
    // The shortest feasible prefix, by bisection (more drops never raise the peak here).
    let (mut lo, mut hi) = (0, ranked.len());
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if plan_of(mid, Some(probe_ratio)).feasible {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // The best ratio's pool peak is never above the probe ratio's: still feasible.
    plan_of(hi, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::checkpoint::candidates;
    use crate::plan::profile::{CopySample, Links};

    /// The chain of `trace::synthetic` with 1000-byte activations, whose forward ops take
    /// `forward_ns` each and the rest 1 µs.
    fn chain(layers: usize, forward_ns: u64) -> Trace {
        crate::trace::synthetic::chain(
            layers,
            |_| 1000,
            |i| if i < layers { forward_ns } else { 1000 },
        )
    }

    fn profile(trace: &Trace, bandwidth: f64) -> Profile {
        let samples = [1u64 << 10, 1 << 20]
            .iter()
            .map(|&b| CopySample {
                bytes: b,
                seconds: b as f64 / bandwidth,
            })
            .collect::<Vec<_>>();
        Profile::new(
            trace,
            Some(Links {
                to_host: samples.clone(),
                to_device: samples,
            }),
        )
    }

    #[test]
    fn a_roomy_budget_keeps_everything() {
        let trace = chain(8, 1000);
        let p = profile(&trace, 1e9);
        let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 1 << 20);
        assert!(plan.feasible && plan.actions.is_empty());
    }

    #[test]
    fn recompute_beats_a_slow_link_and_offload_beats_an_expensive_producer() {
        // Cheap producers (1 µs) and a slow link (1 MB/s: 2 ms per round trip): recompute.
        let trace = chain(12, 1000);
        let p = profile(&trace, 1e6);
        let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 8000);
        assert!(plan.feasible, "{plan:?}");
        let recomputed: Vec<usize> = plan
            .actions
            .iter()
            .filter(|(_, a)| matches!(a, Action::Recompute { .. }))
            .map(|&(t, _)| t)
            .collect();
        assert!(!recomputed.is_empty());
        // Recomputation stays one level deep: activation l + 1 is made from activation l,
        // so no two neighbours are both recomputed; a neighbour of a recomputed tensor that
        // must leave too is offloaded instead.
        for &t in &recomputed {
            assert!(!recomputed.contains(&(t + 1)), "{recomputed:?}");
        }
        for &(t, a) in &plan.actions {
            if matches!(a, Action::Offload { .. }) {
                assert!(
                    recomputed.contains(&(t + 1)) || (t > 0 && recomputed.contains(&(t - 1))),
                    "tensor {t} offloaded over a slow link without need: {plan:?}"
                );
            }
        }

        // Expensive producers (1 ms) and a fast link (1 GB/s: 2 µs, hidden by the gap): offload.
        let trace = chain(12, 1_000_000);
        let p = profile(&trace, 1e9);
        let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 8000);
        assert!(plan.feasible, "{plan:?}");
        assert!(
            plan.actions
                .iter()
                .all(|(_, a)| matches!(a, Action::Offload { .. }))
        );
        assert_eq!(plan.recompute_seconds, 0.0);
        assert_eq!(plan.exposed_seconds, 0.0, "the gaps hide the copies");
        assert!(plan.simulation.peak_pool_bytes <= 8000);
    }

    #[test]
    fn prefetch_starts_late_enough_to_land_just_in_time() {
        // Backward ops take 1 µs; a fetch of 1000 bytes at 250 MB/s takes 4 µs, so the
        // prefetch starts about four ops before the use.
        let trace = chain(12, 1_000_000);
        let p = profile(&trace, 2.5e8);
        let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 8000);
        for &(tensor, action) in &plan.actions {
            let Action::Offload { after, prefetch_at } = action else {
                panic!("expected offloads");
            };
            let (_, next_use) = (after, trace.tensors[tensor].accesses[1].op);
            let hidden =
                p.gap_seconds(prefetch_at, next_use) + p.op_nanos[prefetch_at] as f64 * 1e-9;
            assert!(
                hidden >= 4e-6 - 1e-12,
                "tensor {tensor}: {hidden} s before its use"
            );
            assert!(
                next_use - prefetch_at <= 6,
                "not needlessly early: {prefetch_at} for {next_use}"
            );
        }
    }

    #[test]
    fn an_impossible_budget_is_reported_infeasible() {
        let trace = chain(6, 1000);
        let p = profile(&trace, 1e9);
        let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 1000);
        assert!(!plan.feasible);
        assert!(plan.simulation.peak_pool_bytes > 1000);
    }
}
