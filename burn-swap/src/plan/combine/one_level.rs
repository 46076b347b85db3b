//! Recomputation one level deep, and the replays' inputs present: which ranked ways out a
//! plan may take together.

use super::{Action, Ranked};
use crate::plan::profile::Profile;
use crate::trace::Trace;

/// Keeps recomputation one level deep: walking the ranking, a recomputation whose producer
/// reads a tensor that is itself recomputed (or whose tensor a recomputed producer reads)
/// is turned into its offload, or dropped when it cannot be offloaded. Recomputing then
/// replays one op whose inputs are present, never a chain (whose transient the simulator
/// does not model). A recomputation whose replay (the producer's inputs and output) together
/// with the working set of the op that needs it would not fit the budget is treated the
/// same way. Then the replays' inputs are made present: an offload of one across a replay
/// comes back for it instead (the executor would fetch it on the op's path, and keep it),
/// and is dropped when that leaves it no gap.
pub(super) fn one_level(trace: &Trace, profile: &Profile, budget: u64, ranked: &mut Vec<Ranked>) {
    let index_of = trace.tensor_indices();
    let n = trace.tensors.len();
    let (mut recomputed, mut read_by_recompute) = (vec![false; n], vec![false; n]);
    // The ops before which each tensor is read by a kept recomputation's replay.
    let mut replays: hashbrown::HashMap<usize, Vec<usize>> = hashbrown::HashMap::new();
    ranked.retain_mut(|r| {
        let Action::Recompute { before, .. } = r.action else {
            return true;
        };
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
        let user = profile.op_bytes.get(before).copied();
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
            replays.entry(i).or_default().push(before);
        }
        true
    });
    if replays.is_empty() {
        return;
    }
    let ops = trace.ops.len();
    ranked.retain_mut(|r| match replays.get(&r.tensor) {
        Some(befores) => back_for_replays(r, befores, ops),
        None => true,
    });
}

/// Shortens an offload (`r`) so that its tensor is back on the device for the first replay
/// (before one of the ops `befores`) that falls in its gap, its fetch started as far ahead of
/// that op as it was of its use; `false` when no gap is left.
fn back_for_replays(r: &mut Ranked, befores: &[usize], ops: usize) -> bool {
    let Action::Offload {
        after,
        prefetch_at,
        inline,
    } = r.action
    else {
        return true;
    };
    // The replays in the gap, numbered on into the next iteration where it crosses.
    let first = befores
        .iter()
        .flat_map(|&b| [b, b + ops])
        .filter(|&b| after < b && b < r.used)
        .min();
    let Some(before) = first else {
        return true;
    };
    if before < after + 2 {
        return false;
    }
    let lead = r.used - prefetch_at;
    r.action = Action::Offload {
        after,
        prefetch_at: if inline {
            before
        } else {
            before.saturating_sub(lead).clamp(after + 1, before - 1)
        },
        inline,
    };
    r.used = before;
    true
}
