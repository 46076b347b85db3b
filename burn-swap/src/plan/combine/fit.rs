//! Fitting a plan into its budget: the lifetimes a plan leaves, the counted bytes per op,
//! the waits and later fetches that bring an op under the budget (`fit`), how long an
//! offload's device copy is held while it is copied (`held_in_queue`), how late each fetch
//! lands behind the fetches before it (`late_in_queue`), and which ways out a fitted plan does
//! not need (`needed`).

use super::range_max::{RangeMax, wrapped};
use super::{Action, Taken};
use crate::plan::profile::{LinkFit, Profile};
use crate::plan::simulate::{self, Lifetime, live_per_op};
use crate::trace::Trace;

/// What the budget must hold at each op under these lifetimes: the counted bytes live
/// ([`live_per_op`]: inputs and outputs of an op together) and the op's temporaries
/// ([`crate::trace::OpTrace::temporaries`]), which the device holds beside them while the
/// op runs.
pub(super) fn held_per_op(trace: &Trace, lifetimes: &[Lifetime]) -> Vec<i64> {
    let mut held = live_per_op(lifetimes, trace.ops.len());
    for (bytes, op) in held.iter_mut().zip(&trace.ops) {
        *bytes += op.temporaries as i64;
    }
    held
}

/// Which ways out a plan needs: walking them from the least worth taking (the last ranked)
/// to the most, one whose tensor fits back beside the counted bytes of every op of its
/// absence (`live`, as [`fit`] left them) stays resident instead (`false`). A plan that
/// does not fit keeps them all.
pub(super) fn needed(
    trace: &Trace,
    actions: &[(usize, Action)],
    held: &[usize],
    taken: &[Taken],
    (live, budget): (Vec<i64>, u64),
) -> Vec<bool> {
    let ops = trace.ops.len();
    let mut keep = vec![true; actions.len()];
    if ops == 0 {
        return keep;
    }
    let budget = budget as i64;
    if live.iter().any(|&l| l > budget) {
        return keep;
    }
    let mut live = RangeMax::new(&live);
    let mut order: Vec<usize> = (0..actions.len()).collect();
    order.sort_by_key(|&j| std::cmp::Reverse(taken[j].rank));
    for j in order {
        let (tensor, action) = actions[j];
        // The ops it is away from the device, numbered on into the next iteration.
        let away = match action {
            Action::Offload { prefetch_at, .. } => held[j] + 1..prefetch_at,
            Action::Recompute { after, before } => after + 1..before.saturating_sub(1),
        };
        let bytes = trace.tensors[tensor].bytes as i64;
        let away = wrapped(away, ops);
        if away
            .clone()
            .all(|r| live.max(r).is_none_or(|peak| peak + bytes <= budget))
        {
            for r in away {
                live.add(r, bytes);
            }
            keep[j] = false;
        }
    }
    keep
}

/// The lifetimes of a plan: a tensor that leaves lives until its gap opens, then again from
/// its prefetch (or the op before its recomputed use); a tensor may leave in several of its
/// gaps (which never overlap).
pub fn lifetimes(trace: &Trace, actions: &[(usize, Action)]) -> Vec<Lifetime> {
    let held: Vec<usize> = actions.iter().map(|(_, a)| a.after()).collect();
    lifetimes_held(trace, &simulate::lifetimes(trace), actions, &held)
}

/// [`lifetimes`] where the device copy of the tensor of action `j` is held until op
/// `held[j]` (an offload's copy takes time; the device bytes go when it is done), from the
/// trace's lifetimes when every tensor is kept (`kept`, [`simulate::lifetimes`]).
pub(super) fn lifetimes_held(
    trace: &Trace,
    kept: &[Lifetime],
    actions: &[(usize, Action)],
    held: &[usize],
) -> Vec<Lifetime> {
    let mut lifetimes = kept.to_vec();
    let ops = trace.ops.len();
    let mut order: Vec<(usize, usize, usize, usize, bool)> = actions
        .iter()
        .zip(held)
        .map(|(&(tensor, action), &held)| match action {
            Action::Offload {
                after, prefetch_at, ..
            } => (tensor, after, prefetch_at, held, false),
            Action::Recompute { after, before } => {
                (tensor, after, before.saturating_sub(1), held, true)
            }
        })
        .collect();
    order.sort_unstable();
    let mut i = 0;
    while i < order.len() {
        let tensor = order[i].0;
        let whole = lifetimes[tensor];
        // The stretch of residency the next gap ends.
        let mut open = tensor;
        while i < order.len() && order[i].0 == tensor {
            let (_, after, back, held, recomputed) = order[i];
            lifetimes[open].until = Some(held.max(after));
            match trace.tensors[tensor].wraps_to {
                // Fetched back in the next iteration: there, it is the tensor this iteration
                // received in its slot, which now lives from the prefetch on.
                Some(carried) if back >= ops => {
                    let from = lifetimes[carried].from;
                    lifetimes[carried].from = Some(from.map_or(back - ops, |f| f.max(back - ops)));
                }
                _ => {
                    lifetimes.push(simulate::back(trace, tensor, whole, back, recomputed));
                    open = lifetimes.len() - 1;
                }
            }
            i += 1;
        }
    }
    pin_recipe_inputs(trace, actions, &mut lifetimes);
    lifetimes
}

/// A recomputed tensor's recipe pins its producer's inputs from the producer's run until the
/// replay (the executor keeps them resident for it): an input whose life would end sooner
/// lives on to the op before the recomputed use. (An input that leaves by a plan's action of
/// its own keeps its stretches.)
fn pin_recipe_inputs(trace: &Trace, actions: &[(usize, Action)], lifetimes: &mut [Lifetime]) {
    let recomputes = actions
        .iter()
        .filter(|(_, a)| matches!(a, Action::Recompute { .. }));
    if recomputes.clone().next().is_none() {
        return;
    }
    let leaving: hashbrown::HashSet<usize> = actions.iter().map(|&(t, _)| t).collect();
    let index_of = trace.tensor_indices();
    for &(tensor, action) in recomputes {
        let Action::Recompute { before, .. } = action else {
            continue;
        };
        let Some(producer) = trace.tensors[tensor].producer else {
            continue;
        };
        let replay = before.saturating_sub(1);
        for id in &trace.ops[producer].inputs {
            let Some(&input) = index_of.get(id) else {
                continue;
            };
            if leaving.contains(&input) {
                continue;
            }
            let life = &mut lifetimes[input];
            if let Some(until) = life.until
                && until < replay
            {
                life.until = Some(replay);
            }
        }
    }
}

/// What [`fit`] can shorten where an op exceeds the budget: one planned offload's device
/// copy still held while its copy to the host runs (the executor waits for the copy
/// instead), or its return ahead of its use (the fetch starts later instead). Op numbers run
/// on into the next iteration for a gap across the boundary.
#[derive(Debug, Clone, Copy)]
enum Stretch {
    /// Held from the op after `after` to `held`.
    Held {
        action: usize,
        bytes: u64,
        after: usize,
        held: usize,
    },
    /// Resident again from `prefetch_at` until its use at `used`.
    Return {
        action: usize,
        bytes: u64,
        prefetch_at: usize,
        used: usize,
    },
}

impl Stretch {
    fn bytes(&self) -> u64 {
        match *self {
            Stretch::Held { bytes, .. } | Stretch::Return { bytes, .. } => bytes,
        }
    }
}

/// The stretches [`fit`] may shorten: each planned offload's copy still held after the op
/// that opens its gap, and its return ahead of its use.
fn stretches(
    trace: &Trace,
    actions: &[(usize, Action)],
    used: &[usize],
    held: &[usize],
) -> Vec<Stretch> {
    let mut stretches = Vec::new();
    for (action, (&(tensor, a), &used)) in actions.iter().zip(used).enumerate() {
        let Action::Offload {
            after, prefetch_at, ..
        } = a
        else {
            continue;
        };
        let bytes = trace.tensors[tensor].bytes;
        if held[action] > after {
            stretches.push(Stretch::Held {
                action,
                bytes,
                after,
                held: held[action],
            });
        }
        if prefetch_at < used {
            stretches.push(Stretch::Return {
                action,
                bytes,
                prefetch_at,
                used,
            });
        }
    }
    stretches
}

/// Plans that fit: where the counted bytes at an op exceed the budget, the planned
/// offloads resident there but not needed by it give way, the largest first, until the op
/// fits or none is left: an offload whose copy is still running is waited for before the op
/// (`held` shortens), a fetch due before the op starts after it instead (down to just before
/// its use, which exposes the fetch). Returns the counted bytes at each op after that.
pub(super) fn fit(
    trace: &Trace,
    kept: &[Lifetime],
    actions: &mut [(usize, Action)],
    (used, held): (&[usize], &mut [usize]),
    budget: u64,
) -> Vec<i64> {
    let ops = trace.ops.len();
    if ops == 0 {
        return Vec::new();
    }
    let mut live = held_per_op(trace, &lifetimes_held(trace, kept, actions, held));
    let mut stretches = stretches(trace, actions, used, held);
    // Largest first, so that each op needs the fewest changes.
    stretches.sort_by_key(|s| std::cmp::Reverse(s.bytes()));
    let budget = budget as i64;
    for op in 0..ops {
        if live[op] <= budget {
            continue;
        }
        for stretch in stretches.iter_mut() {
            if live[op] <= budget {
                break;
            }
            match stretch {
                Stretch::Held {
                    action,
                    bytes,
                    after,
                    held: until,
                } => {
                    if !(*after < op && op <= *until) {
                        continue;
                    }
                    for held_live in &mut live[op..=*until] {
                        *held_live -= *bytes as i64;
                    }
                    *until = op - 1;
                    held[*action] = op - 1;
                }
                Stretch::Return {
                    action,
                    bytes,
                    prefetch_at,
                    used,
                } => {
                    // The op in the return's own numbering: this iteration's, or the next.
                    let Some(at) = [op, op + ops]
                        .into_iter()
                        .find(|&at| *prefetch_at <= at && at < *used)
                    else {
                        continue;
                    };
                    for x in *prefetch_at..=at {
                        live[x % ops] -= *bytes as i64;
                    }
                    *prefetch_at = at + 1;
                    if let Action::Offload { prefetch_at, .. } = &mut actions[*action].1 {
                        *prefetch_at = at + 1;
                    }
                }
            }
        }
    }
    live
}

/// Fetches started into the budget's slack: the planned fetches, taken in the order of their
/// uses, each start at the earliest op before its planned start where its bytes fit beside
/// the counted bytes (`live`) of every op up to that start, but not before its copy out is
/// done (`held`) nor before the fetch of an earlier use starts (the receive side takes
/// fetches one after another, in the order they are started: a fetch started ahead of one
/// needed sooner would delay it). The planned start hides a fetch at the link's measured
/// speed; copies made while the compute runs can take longer than that, and a fetch started
/// sooner in room the budget leaves free costs no budget. Updates `live`.
pub(super) fn lead_into_slack(
    trace: &Trace,
    actions: &mut [(usize, Action)],
    (used, held): (&[usize], &[usize]),
    (live, budget): (&mut [i64], u64),
) {
    let ops = trace.ops.len();
    if ops == 0 || live.len() != ops {
        return;
    }
    let budget = budget as i64;
    let mut fetches = by_workers(actions);
    fetches.sort_by_key(|c| (used[c.j], c.prefetch_at));
    // The start of the fetch taken before, in the ops numbered on into the next iteration.
    let mut floor = 0;
    for ByWorkers {
        j,
        tensor,
        after,
        prefetch_at,
    } in fetches
    {
        let bytes = trace.tensors[tensor].bytes as i64;
        // A fetch planned in the next iteration stays there (the executor starts it after
        // the op before `prefetch_at`, the offload's tag carried across the boundary).
        let boundary = if prefetch_at >= ops { ops } else { 0 };
        let lowest = (held[j].max(after) + 1).max(floor).max(boundary);
        let mut at = prefetch_at;
        while at > lowest && live[(at - 1) % ops] + bytes <= budget {
            at -= 1;
            live[at % ops] += bytes;
        }
        if let Action::Offload { prefetch_at, .. } = &mut actions[j].1 {
            *prefetch_at = at;
        }
        floor = floor.max(at);
    }
}

/// The last op during which each offload's device copy is still held: its copy to the host
/// starts when op `after` is done, or when the copy before it is (the send worker, or the
/// device's copy stream, makes them one after another), and takes the link's time for its
/// bytes while the next ops run; the engine sees it done at the start of the op after that.
/// A recomputed tensor, or one copied on the op thread, is gone at once.
pub(super) fn held_in_queue(
    trace: &Trace,
    profile: &Profile,
    fits: Option<(LinkFit, LinkFit)>,
    actions: &[(usize, Action)],
) -> Vec<usize> {
    let mut held: Vec<usize> = actions.iter().map(|(_, a)| a.after()).collect();
    let Some((out, _)) = fits else {
        return held;
    };
    let ops = profile.op_nanos.len();
    let (done_at, clock) = done_times(profile);
    let mut queued = by_workers(actions);
    queued.sort_by_key(|c| c.after);
    let mut free_from = 0.0_f64;
    for ByWorkers {
        j,
        tensor,
        after,
        prefetch_at,
    } in queued
    {
        let start = done_at.get(after).copied().unwrap_or(clock).max(free_from);
        let copied = start + out.seconds(trace.tensors[tensor].bytes);
        free_from = copied;
        // Held at most until the iteration's last op, or the op before its return.
        let last = prefetch_at.min(ops).saturating_sub(1).max(after);
        let mut op = after;
        while op < last && done_at.get(op).is_some_and(|&d| d < copied) {
            op += 1;
        }
        held[j] = op;
    }
    held
}

/// How late each planned fetch lands, in seconds after the start of the op that uses it
/// (zero when in time): a fetch starts when the op before its `prefetch_at` is done, as the
/// program starts it, or when the fetch started before it is done, whichever is later (the
/// receive worker, or the device's copy stream, makes them one after another, in the order
/// the program starts them: by op, then the one needed sooner first, a use in the next
/// iteration last), and takes the link's time for its bytes. Zero for a recomputation or a copy made on the op thread. Op numbers run on into the
/// next iteration for a gap across the boundary.
pub(super) fn late_in_queue(
    trace: &Trace,
    profile: &Profile,
    fits: Option<(LinkFit, LinkFit)>,
    actions: &[(usize, Action)],
    used: &[usize],
) -> Vec<f64> {
    let mut late = vec![0.0; actions.len()];
    let Some((_, back)) = fits else {
        return late;
    };
    let ops = profile.op_nanos.len();
    if ops == 0 {
        return late;
    }
    let (done_at, clock) = done_times(profile);
    // When op `k` is done, ops numbered on into the following iterations.
    let done = |k: usize| (k / ops) as f64 * clock + done_at[k % ops];
    // The program's order (`program::compile`): by the op that starts them, then by use.
    let mut queued: Vec<(usize, usize, ByWorkers)> = by_workers(actions)
        .into_iter()
        .map(|c| {
            let next = if used[c.j] < ops {
                used[c.j]
            } else {
                usize::MAX
            };
            (c.prefetch_at.saturating_sub(1).max(c.after), next, c)
        })
        .collect();
    queued.sort_unstable_by_key(|&(at, next, c)| (at, next, c.j));
    let mut free_from = 0.0_f64;
    for (at, _, ByWorkers { j, tensor, .. }) in queued {
        let bytes = trace.tensors[tensor].bytes;
        let landed = done(at).max(free_from) + back.seconds(bytes);
        free_from = landed;
        let needed = if used[j] == 0 { 0.0 } else { done(used[j] - 1) };
        late[j] = (landed - needed).max(0.0);
    }
    late
}

/// When each op of the profiled iteration is done, in seconds from the iteration's start, and
/// the iteration's length.
fn done_times(profile: &Profile) -> (Vec<f64>, f64) {
    let mut done_at = Vec::with_capacity(profile.op_nanos.len());
    let mut clock = 0.0;
    for &nanos in &profile.op_nanos {
        clock += nanos as f64 * 1e-9;
        done_at.push(clock);
    }
    (done_at, clock)
}

/// A planned offload whose copies the transfer workers make (not the op thread): its place in
/// the plan, its tensor, and its op numbers.
#[derive(Debug, Clone, Copy)]
struct ByWorkers {
    j: usize,
    tensor: usize,
    after: usize,
    prefetch_at: usize,
}

/// The plan's offloads copied by the transfer workers, in the plan's order.
fn by_workers(actions: &[(usize, Action)]) -> Vec<ByWorkers> {
    actions
        .iter()
        .enumerate()
        .filter_map(|(j, &(tensor, action))| match action {
            Action::Offload {
                after,
                prefetch_at,
                inline: false,
            } => Some(ByWorkers {
                j,
                tensor,
                after,
                prefetch_at,
            }),
            _ => None,
        })
        .collect()
}
