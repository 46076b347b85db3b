//! Profiled checkpoint selection: which tensors to drop and recompute, and which may be
//! swapped, chosen from the profiled iteration and judged by the memory simulator.
//!
//! - **Candidates**. A tensor made in the iteration and needed again after a *gap*
//!   (the longest stretch between two of its accesses; in training, the gap between forward
//!   and backward) may be dropped during the gap. For recomputation it is judged by its
//!   lifetime (the gap), its compute cost (its producer's time) and its size; only pure ops
//!   that travel as Burn's IR may be re-run (not random ops, data reads, arrivals, or native
//!   ops, which have no IR to replay). For swapping, the compute
//!   time of the gap must hide a round trip to host memory at the profiled bandwidth.
//! - **Selection**. With a threshold starting at 0, tensors are walked in the
//!   order they are made; the iteration's first tensor is the first checkpoint and opens the
//!   first block; tensors made before the iteration (parameters) join no block; a tensor that
//!   is not a candidate joins the current block; a candidate joins it too unless the block
//!   already exceeds the threshold, in which case it becomes a checkpoint and opens a new
//!   block. Candidates that are not checkpoints are dropped during their gap and recomputed
//!   before their next use. The plan's memory is simulated ([`super::simulate`]); the threshold
//!   is updated and the walk repeated `rounds` times; the plan with the least simulated memory
//!   wins. The seed's update formula did not survive in its text: this uses the rule of Chen
//!   et al. (2016), which this scheme follows, `threshold = sqrt(x · y)`, with `x` the bytes kept
//!   at checkpoints and `y` the largest block's bytes.
//!
//! The simulated memory of a plan counts each recomputed tensor again from the op before its
//! next use; the transient of recomputing a whole block at once is not modelled (the combiner
//! keeps recomputation one level deep, so the executor never replays a block at once).

use super::profile::Profile;
use super::simulate::{self, Lifetime, Simulation};
use crate::trace::Trace;

/// Whether an op may be re-run to recompute its output: only ops that travel as Burn's IR
/// (named `Family.Op`), which the executor can replay, and only pure ones. Native ops (named
/// after their method, such as `relu`) have no IR to replay, and random ops, data reads and
/// arrivals would not give the same values.
fn replayable(kind: &str) -> bool {
    let lower = kind.to_ascii_lowercase();
    kind.contains('.')
        && !lower.contains("random")
        && !lower.contains("dropout")
        && !lower.contains("bernoulli")
}

/// One candidate for dropping during its gap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Index into `Trace::tensors`.
    pub tensor: usize,
    /// Bytes.
    pub bytes: u64,
    /// The access after which the gap starts, and the one it ends with.
    pub gap: (usize, usize),
    /// Seconds to recompute it (its producer's time).
    pub recompute_seconds: f64,
    /// Compute seconds within the gap.
    pub gap_seconds: f64,
    /// Whether its producer may be re-run.
    pub recomputable: bool,
    /// Whether it may leave by an offload of its own (not a holder of a shared buffer; see
    /// [`crate::trace::TensorTrace::shares_buffer`]).
    pub offloadable: bool,
    /// Whether the gap hides an offload and a fetch at the profiled bandwidth.
    pub swappable: bool,
}

impl Candidate {
    /// The candidates' judgement as one score, higher is better to drop: bytes freed for longer, per
    /// second of recompute.
    pub fn score(&self) -> f64 {
        self.bytes as f64 * (self.gap.1 - self.gap.0) as f64 / self.recompute_seconds.max(1e-9)
    }
}

/// Tensors worth dropping during a gap: needed again at least `min_gap` ops later. The gap
/// is the longest stretch between two of a tensor's uses (its making counts as a use):
/// within the iteration, or, for a tensor carried to the next iteration (a parameter or an
/// optimizer state, see [`crate::trace::TensorTrace::wraps_to`]), from its last use to its
/// first use in the next iteration, whose ops are numbered on from `ops.len()`. Tensors made
/// before the iteration are candidates for their gaps within it; only tensors made in the
/// iteration, within it, may be recomputed, and only when the recipe would not pin more
/// bytes than it frees (the producer's inputs that die before the replay stay resident for
/// it). A gap during which another holder of the tensor's buffer (a view of it, or the tensor
/// it views) lives throughout is no candidate: leaving would free nothing.
pub fn candidates(trace: &Trace, profile: &Profile, min_gap: usize) -> Vec<Candidate> {
    let link = profile.links.as_ref().and_then(|l| l.link_model());
    let period = trace.ops.len();
    let lives = super::simulate::lifetimes(trace);
    let holders = simulate::buffer_holders(&lives);
    let index_of = trace.tensor_indices();
    // The bytes a recipe would pin beyond their lives: the producer's inputs that would be
    // freed before the replay (the op before the use), which the recipe keeps resident.
    let pinned = |producer: usize, use_at: usize| -> u64 {
        trace.ops[producer]
            .inputs
            .iter()
            .filter_map(|id| index_of.get(id))
            .filter(|&&i| lives[i].until.is_some_and(|u| u + 1 < use_at))
            .map(|&i| trace.tensors[i].bytes)
            .sum()
    };
    trace
        .tensors
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let mut times: Vec<usize> = t.producer.into_iter().collect();
            times.extend(t.accesses.iter().map(|a| a.op));
            // A gap during which another holder of its buffer lives throughout frees nothing.
            let frees = |gap| !simulate::kept_by_others(&lives, &holders, i, gap, period);
            let inner = times
                .windows(2)
                .map(|w| (w[0], w[1]))
                .filter(|&gap| frees(gap))
                .max_by_key(|&(a, b)| (b - a, std::cmp::Reverse(a)));
            let wrap = t
                .wraps_to
                .and_then(|w| {
                    let last = *times.last()?;
                    let next = trace.tensors[w].accesses.first()?.op;
                    Some((last, period + next))
                })
                .filter(|&gap| frees(gap));
            let (gap, wrapped) = match (inner, wrap) {
                (Some(i), Some(w)) if w.1 - w.0 > i.1 - i.0 => (w, true),
                (Some(i), _) => (i, false),
                (None, Some(w)) => (w, true),
                (None, None) => return None,
            };
            let (from, to) = gap;
            if to - from < min_gap {
                return None;
            }
            let gap_seconds = profile.gap_seconds(from, to);
            // A recomputation frees the tensor's bytes during its gap but pins the inputs
            // that would die in it: worth it only when that pins fewer bytes.
            let recomputable = !wrapped
                && t.producer
                    .is_some_and(|p| replayable(&trace.ops[p].kind) && pinned(p, to) < t.bytes);
            // A tensor that shares its buffer leaves by recomputation or not at all.
            if t.shares_buffer && !recomputable {
                return None;
            }
            Some(Candidate {
                tensor: i,
                bytes: t.bytes,
                gap: (from, to),
                recompute_seconds: t
                    .producer
                    .map_or(0.0, |p| profile.op_nanos[p] as f64 * 1e-9),
                gap_seconds,
                recomputable,
                offloadable: !t.shares_buffer,
                swappable: link.is_some_and(|l| l.round_trip(t.bytes) <= gap_seconds),
            })
        })
        .collect()
}

/// A checkpoint plan.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointPlan {
    /// Tensors kept through their gap as checkpoints (indices into `Trace::tensors`).
    pub checkpoints: Vec<usize>,
    /// Tensors dropped during their gap and recomputed before their next use.
    pub recomputed: Vec<usize>,
    /// The threshold that gave this plan.
    pub threshold: f64,
    /// Its simulated memory.
    pub simulation: Simulation,
    /// Seconds spent recomputing per iteration.
    pub recompute_seconds: f64,
}

/// The lifetimes of a plan that drops `dropped` candidates during their gaps: each lives
/// from its producer to the start of its gap, then again from just before the end of its gap
/// (recomputed) to its end.
pub fn lifetimes_with_drops(trace: &Trace, dropped: &[&Candidate]) -> Vec<Lifetime> {
    let mut lifetimes = simulate::lifetimes(trace);
    for c in dropped {
        let whole = lifetimes[c.tensor];
        lifetimes[c.tensor].until = Some(c.gap.0);
        let from = c.gap.1.saturating_sub(1);
        lifetimes.push(simulate::back(trace, c.tensor, whole, from, true));
    }
    lifetimes
}

/// Selects checkpoints by the threshold walk, `rounds` times, and returns the plan with the
/// least simulated memory (pool peak; fewer recompute seconds on ties).
pub fn select(trace: &Trace, candidates: &[Candidate], rounds: usize) -> CheckpointPlan {
    let mut by_tensor: Vec<Option<&Candidate>> = vec![None; trace.tensors.len()];
    for c in candidates.iter().filter(|c| c.recomputable) {
        by_tensor[c.tensor] = Some(c);
    }
    // Tensors made in the iteration, in the order they are made.
    let mut made: Vec<usize> = (0..trace.tensors.len())
        .filter(|&i| trace.tensors[i].producer.is_some())
        .collect();
    made.sort_by_key(|&i| trace.tensors[i].producer);

    let mut best: Option<CheckpointPlan> = None;
    let mut threshold = 0.0f64;
    for _ in 0..rounds.max(1) {
        let mut checkpoints = Vec::new();
        let mut dropped: Vec<&Candidate> = Vec::new();
        let (mut block, mut largest_block, mut kept) = (0u64, 0u64, 0u64);
        for (n, &i) in made.iter().enumerate() {
            let bytes = trace.tensors[i].bytes;
            match by_tensor[i] {
                // The first tensor is the first checkpoint and block.
                _ if n == 0 => {
                    checkpoints.push(i);
                    kept += bytes;
                    block = bytes;
                }
                Some(c) if block as f64 > threshold => {
                    largest_block = largest_block.max(block);
                    checkpoints.push(i);
                    kept += c.bytes;
                    block = bytes;
                }
                Some(c) => {
                    dropped.push(c);
                    block += bytes;
                }
                None => block += bytes,
            }
        }
        largest_block = largest_block.max(block);
        let simulation =
            simulate::simulate_best(&lifetimes_with_drops(trace, &dropped), trace.ops.len());
        let plan = CheckpointPlan {
            recomputed: dropped.iter().map(|c| c.tensor).collect(),
            recompute_seconds: dropped.iter().map(|c| c.recompute_seconds).sum(),
            checkpoints,
            threshold,
            simulation,
        };
        let better = best.as_ref().is_none_or(|b| {
            (plan.simulation.peak_pool_bytes, plan.recompute_seconds)
                < (b.simulation.peak_pool_bytes, b.recompute_seconds)
        });
        let next = ((kept as f64) * (largest_block as f64)).sqrt();
        if better {
            best = Some(plan);
        }
        if (next - threshold).abs() < 1.0 {
            break;
        }
        threshold = next;
    }
    best.expect("at least one round")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chain of `trace::synthetic`, 1000-byte activations, 1 µs per op, its first op a
    /// random one.
    fn chain(layers: usize) -> Trace {
        let mut trace = crate::trace::synthetic::chain(layers, |_| 1000, |_| 1000);
        trace.ops[0].kind = "Float.Random".into();
        trace
    }

    fn profile(trace: &Trace, bandwidth: Option<f64>) -> Profile {
        use crate::plan::profile::{CopySample, Links};
        let samples = |bw: f64| {
            [1u64 << 10, 1 << 20]
                .iter()
                .map(|&b| CopySample {
                    bytes: b,
                    seconds: b as f64 / bw,
                })
                .collect::<Vec<_>>()
        };
        Profile::new(
            trace,
            bandwidth.map(|bw| Links {
                to_host: samples(bw),
                to_device: samples(bw),
                on_thread: None,
            }),
        )
    }

    #[test]
    fn a_recipe_pins_the_inputs_that_would_die_before_its_replay() {
        use crate::plan::combine::{Action, lifetimes};
        use crate::trace::{Access, AccessKind, End, EndKind};
        // Activation 1 dies at op 2 (no backward read): recomputing activation 2 (op 2 reads
        // activation 1) for its backward read at op 10 keeps activation 1 until op 9.
        let mut trace = chain(6);
        trace.tensors[1].accesses = vec![Access {
            op: 2,
            kind: AccessKind::LastUse,
        }];
        trace.tensors[1].end = Some(End {
            op: 2,
            kind: EndKind::LastUse,
        });
        let p = profile(&trace, Some(1e9));
        let two = |trace: &Trace| {
            candidates(trace, &p, 3)
                .into_iter()
                .find(|c| c.tensor == 2)
                .expect("a candidate")
        };
        let c = two(&trace);
        assert_eq!(c.gap, (3, 10));
        // As large as what it frees: not worth a recipe; smaller: worth it.
        assert!(!c.recomputable, "{c:?}");
        trace.tensors[1].bytes = 400;
        assert!(two(&trace).recomputable);
        let plan = [(
            2,
            Action::Recompute {
                after: 3,
                before: 10,
            },
        )];
        let lives = lifetimes(&trace, &plan);
        assert_eq!(lives[1].until, Some(9), "pinned to the replay");
        assert_eq!(lives[0].until, Some(12), "alive past it anyway");
    }

    #[test]
    fn a_tensor_that_shares_its_buffer_leaves_by_recomputation_only() {
        let mut trace = chain(6);
        let all = candidates(&trace, &profile(&trace, Some(1e9)), 3);
        assert!(all.iter().all(|c| c.offloadable));
        // Activation 2 is a view sharing a buffer; activation 0 too, and its producer (a
        // random op) cannot be replayed.
        trace.tensors[2].shares_buffer = true;
        trace.tensors[0].shares_buffer = true;
        let p = profile(&trace, Some(1e9));
        let shared = candidates(&trace, &p, 3);
        assert!(
            shared.iter().all(|c| c.tensor != 0),
            "no way out for tensor 0"
        );
        let two = shared.iter().find(|c| c.tensor == 2).expect("recomputable");
        assert!(two.recomputable && !two.offloadable);
        // No plan offloads it, whatever the budget.
        for budget in [1000, 2000, 3000, 4000] {
            let plan = crate::plan::combine::combine(&trace, &p, &shared, budget);
            assert!(
                !plan
                    .actions
                    .iter()
                    .any(|(t, a)| *t == 2
                        && matches!(a, crate::plan::combine::Action::Offload { .. })),
                "budget {budget}: {:?}",
                plan.actions
            );
        }
    }

    #[test]
    fn only_pure_ir_ops_are_replayable() {
        assert!(replayable("Float.Matmul"));
        assert!(replayable("NumericFloat.Add"));
        assert!(!replayable("Float.Random"));
        assert!(!replayable("relu"));
        assert!(!replayable("Init"));
        assert!(!replayable("Read"));
        assert!(!replayable("Arrive"));
    }

    #[test]
    fn candidates_are_judged_by_gap_cost_and_purity() {
        let trace = chain(8);
        let fast = candidates(&trace, &profile(&trace, Some(1e9)), 3);
        // Activation 7 is read by the loss op right away and by its backward op next: no gap.
        assert!(fast.iter().all(|c| c.tensor != 7));
        // Activation 0's gap runs from op 1 to its backward op 16; it was made by a random op.
        let a0 = fast.iter().find(|c| c.tensor == 0).unwrap();
        assert_eq!(a0.gap, (1, 16));
        assert!(!a0.recomputable);
        assert!(
            fast.iter()
                .filter(|c| c.tensor != 0)
                .all(|c| c.recomputable)
        );
        // 14 µs of compute in activation 0's gap hides 2 µs of copies at 1 GB/s, not 2 ms at 1 MB/s.
        assert!(a0.swappable);
        let slow = candidates(&trace, &profile(&trace, Some(1e6)), 3);
        assert!(slow.iter().all(|c| !c.swappable));
        assert!((a0.recompute_seconds - 1e-6).abs() < 1e-12);
    }

    #[test]
    fn selection_lowers_the_simulated_peak_of_a_chain() {
        let trace = chain(16);
        let profile = profile(&trace, None);
        let keep_all = simulate::simulate_trace(&trace);
        // Keeping everything, all 16 activations are live at the turn.
        assert_eq!(keep_all.peak_live_bytes, 16_000);
        let cands = candidates(&trace, &profile, 3);
        let plan = select(&trace, &cands, 8);
        assert!(
            plan.simulation.peak_pool_bytes < keep_all.peak_pool_bytes,
            "{plan:?} vs {keep_all:?}"
        );
        assert!(!plan.recomputed.is_empty());
        assert!(
            plan.checkpoints.contains(&0),
            "the first tensor is a checkpoint"
        );
        // Nothing is both kept and recomputed, and the random op's output is never recomputed.
        assert!(
            plan.recomputed
                .iter()
                .all(|r| !plan.checkpoints.contains(r))
        );
        assert!(!plan.recomputed.contains(&0));
        assert!((plan.recompute_seconds - plan.recomputed.len() as f64 * 1e-6).abs() < 1e-12);
    }

    #[test]
    fn threshold_zero_keeps_every_candidate() {
        let trace = chain(6);
        let cands = candidates(&trace, &profile(&trace, None), 3);
        let plan = select(&trace, &cands, 1);
        assert_eq!(plan.threshold, 0.0);
        assert!(plan.recomputed.is_empty());
        assert_eq!(plan.simulation, simulate::simulate_trace(&trace));
    }

    #[test]
    fn a_gap_that_a_view_holds_through_is_no_candidate() {
        // chain(6) (ops 0-12): tensor l is read at op l + 1 and again at op 12 - l.
        let mut trace = chain(6);
        let p = profile(&trace, Some(1e9));
        let tensors = |trace: &Trace| -> Vec<usize> {
            candidates(trace, &p, 3).iter().map(|c| c.tensor).collect()
        };
        assert_eq!(tensors(&trace), [0, 1, 2, 3, 4]);
        // Tensor 2 a view of tensor 1 (it lives from op 2 to op 10): tensor 1, away from op 3
        // to op 10, frees nothing; tensor 2, away from op 4 to op 9, neither.
        trace.tensors[2].view_of = Some(1);
        assert_eq!(tensors(&trace), [0, 3, 4]);
    }
}
