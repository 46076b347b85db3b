//! A plan turned into what the executor does at each op of the iteration: the plan's
//! per-tensor actions (by trace index) become per-position steps that name tensors by their
//! place in an op (input or output number), which is the same in every iteration while the
//! tensor ids are new each time.
//!
//! Pure: a function of the trace and the plan. The executor follows the steps and decides
//! nothing; when the running iteration departs from the trace it stops following them.

use super::combine::{Action, Plan};
use crate::trace::Trace;

/// Where a tensor sits in an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// Input number `n` of the op.
    Input(u16),
    /// Output number `n` of the op.
    Output(u16),
}

/// What to do right after an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Start offloading the tensor at `port` (to the host) on the send worker, or copy it
    /// out on the op thread when `inline`; `tag` names it for its prefetch.
    Offload {
        /// The tensor.
        port: Port,
        /// Its name within the iteration (its index in the trace).
        tag: u32,
        /// Copied on the op thread (the plan found the hand-over to a worker dearer).
        inline: bool,
    },
    /// Drop the tensor at `port`; it is recomputed from its recipe before its next use.
    Evict {
        /// The tensor.
        port: Port,
    },
    /// Start fetching the tensor offloaded under `tag` on the receive worker, or fetch it on
    /// the op thread when `inline` (then right before its use).
    Prefetch {
        /// The tag of its offload.
        tag: u32,
        /// Copied on the op thread.
        inline: bool,
    },
}

/// The steps of one iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// Ops per iteration.
    pub period: usize,
    /// Per op position: outputs to keep a recipe for (the op will be replayed to recompute
    /// them). Applied before the op runs: the recipe keeps the op's inputs alive.
    pub recipes: Vec<Vec<u16>>,
    /// Per op position: the steps to take right after it.
    pub after: Vec<Vec<Step>>,
    /// Per op position: the planned fetches (by tag) to wait for before the op runs, from
    /// the cross-stream wait analysis (`super::waits::fetch_waits`, added by `super::compile`).
    pub fetch_waits: Vec<Vec<u32>>,
    /// Whether the plan's simulated counted bytes fit the budget it was made for.
    pub fits: bool,
    /// The simulated peak of counted bytes of the plan (what the budget bounds).
    pub predicted_peak_bytes: u64,
    /// The simulated peak of the allocator's pool, fragmentation included.
    pub predicted_pool_bytes: u64,
    /// Per op position: the simulated counted bytes while the op runs (inputs and outputs
    /// together); empty for no plan. Where the executor holds more, the fallback makes the
    /// room the plan did not (the report's `fallback_rooms`).
    pub predicted_live_bytes: Vec<u64>,
    /// Transfer time the plan expects not to hide, per iteration.
    pub predicted_exposed_seconds: f64,
    /// Recompute time the plan expects, per iteration.
    pub predicted_recompute_seconds: f64,
    /// Op-thread time the plan expects to spend handing its copies to the transfer
    /// workers, per iteration.
    pub predicted_handover_seconds: f64,
    /// The candidate plans judged when this one was chosen (empty for a plan compiled
    /// directly), and which of them it is.
    pub choices: Vec<super::PlanChoice>,
    /// The index of this plan in `choices`.
    pub chosen: usize,
    /// The trace tensor (index into `Trace::tensors`) of each offload, by tag: a tensor may
    /// leave in several gaps, each offload with its own tag.
    pub tagged: Vec<usize>,
    /// Planned offloads and recomputations per iteration.
    pub offloads: usize,
    /// Planned recomputations per iteration.
    pub recomputes: usize,
}

fn port_of(trace: &Trace, op: usize, id: u64) -> Option<Port> {
    let o = &trace.ops[op];
    if let Some(i) = o.inputs.iter().position(|&x| x == id) {
        return Some(Port::Input(i as u16));
    }
    o.outputs
        .iter()
        .position(|&x| x == id)
        .map(|i| Port::Output(i as u16))
}

/// The program of `plan` over `trace` (one iteration), without its compute-side waits
/// (`super::compile` adds them). A recomputation whose producer makes
/// more than one tensor is left out (its other outputs would be made twice): that tensor is
/// kept.
pub fn compile(trace: &Trace, plan: &Plan) -> Program {
    let period = trace.ops.len();
    let mut program = Program {
        period,
        recipes: vec![Vec::new(); period],
        after: vec![Vec::new(); period],
        fetch_waits: vec![Vec::new(); period],
        fits: plan.feasible,
        predicted_peak_bytes: plan.simulation.peak_live_bytes,
        predicted_pool_bytes: plan.simulation.peak_pool_bytes,
        predicted_live_bytes: plan.live_bytes.clone(),
        predicted_exposed_seconds: plan.exposed_seconds,
        predicted_recompute_seconds: plan.recompute_seconds,
        predicted_handover_seconds: plan.handover_seconds,
        choices: Vec::new(),
        chosen: 0,
        tagged: Vec::new(),
        offloads: 0,
        recomputes: 0,
    };
    // By tag: the op that next uses the tensor each offload takes away.
    let mut uses = Vec::new();
    for &(index, action) in &plan.actions {
        let tensor = &trace.tensors[index];
        match action {
            Action::Offload {
                after,
                prefetch_at,
                inline,
            } => {
                let Some(port) = port_of(trace, after, tensor.id) else {
                    continue;
                };
                // A tensor may leave in several gaps: the tag names this offload.
                let tag = program.tagged.len() as u32;
                program.tagged.push(index);
                uses.push(next_use(trace, index, after));
                program.after[after].push(Step::Offload { port, tag, inline });
                // Started right after the op before `prefetch_at`, which lies in the next
                // iteration for a tensor carried across the boundary.
                let at = prefetch_at.saturating_sub(1).max(after) % period;
                program.after[at].push(Step::Prefetch { tag, inline });
                program.offloads += 1;
            }
            Action::Recompute { after, .. } => {
                let Some(producer) = tensor.producer else {
                    continue;
                };
                if trace.ops[producer].outputs.len() != 1 {
                    continue;
                }
                let Some(port) = port_of(trace, after, tensor.id) else {
                    continue;
                };
                program.recipes[producer].push(0);
                program.after[after].push(Step::Evict { port });
                program.recomputes += 1;
            }
        }
    }
    // Within one op, offloads and evictions come before prefetches (a prefetch due right
    // after its own offload's op must find it queued), and prefetches go in the order of the
    // uses they are for: the receive side makes them one after another, and the one needed
    // sooner goes first.
    for steps in &mut program.after {
        steps.sort_by_key(|s| match *s {
            Step::Prefetch { tag, .. } => (1, uses[tag as usize]),
            _ => (0, 0),
        });
    }
    program
}

/// The op of the tensor's first access after op `after` in the iteration; `usize::MAX` when
/// its next use is in the next iteration (a tensor carried across the boundary). The same
/// order as the combiner's `late_in_queue` takes for fetches started after one op.
fn next_use(trace: &Trace, index: usize, after: usize) -> usize {
    trace.tensors[index]
        .accesses
        .iter()
        .map(|a| a.op)
        .find(|&op| op > after)
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::simulate::Simulation;

    fn plan(actions: Vec<(usize, Action)>) -> Plan {
        Plan {
            actions,
            simulation: Simulation {
                ratio: 1,
                peak_pool_bytes: 0,
                peak_live_bytes: 0,
                blocks: 0,
                peak_op: None,
            },
            live_bytes: Vec::new(),
            feasible: true,
            exposed_seconds: 0.0,
            recompute_seconds: 0.0,
            handover_seconds: 0.0,
            smallest_budget: 0,
        }
    }

    #[test]
    fn actions_become_steps_at_their_ops() {
        // The synthetic chain: forward op i makes activation i from activation i - 1.
        let trace = crate::trace::synthetic::chain(6, |_| 100, |_| 1000);
        let a2 = trace
            .tensors
            .iter()
            .position(|t| t.producer == Some(2))
            .unwrap();
        let a3 = trace
            .tensors
            .iter()
            .position(|t| t.producer == Some(3))
            .unwrap();
        let next3 = trace.tensors[a3].accesses[0].op;
        let program = compile(
            &trace,
            &plan(vec![
                (
                    a2,
                    Action::Offload {
                        after: 2,
                        prefetch_at: 9,
                        inline: false,
                    },
                ),
                (
                    a3,
                    Action::Recompute {
                        after: next3,
                        before: 10,
                    },
                ),
            ]),
        );
        assert_eq!(program.period, trace.ops.len());
        assert_eq!(
            program.after[2],
            vec![Step::Offload {
                port: Port::Output(0),
                tag: 0,
                inline: false
            }]
        );
        assert_eq!(
            program.after[8],
            vec![Step::Prefetch {
                tag: 0,
                inline: false
            }]
        );
        assert_eq!(program.recipes[3], vec![0]);
        assert_eq!(
            program.after[next3],
            vec![Step::Evict {
                port: Port::Input(0)
            }]
        );
        assert_eq!((program.offloads, program.recomputes), (1, 1));
    }

    #[test]
    fn a_prefetch_due_at_once_follows_its_offload() {
        let trace = crate::trace::synthetic::chain(4, |_| 100, |_| 1000);
        let a1 = trace
            .tensors
            .iter()
            .position(|t| t.producer == Some(1))
            .unwrap();
        let program = compile(
            &trace,
            &plan(vec![(
                a1,
                Action::Offload {
                    after: 1,
                    prefetch_at: 2,
                    inline: false,
                },
            )]),
        );
        assert_eq!(
            program.after[1],
            vec![
                Step::Offload {
                    port: Port::Output(0),
                    tag: 0,
                    inline: false
                },
                Step::Prefetch {
                    tag: 0,
                    inline: false
                }
            ]
        );
    }

    #[test]
    fn prefetches_after_one_op_go_in_the_order_of_their_uses() {
        // Activations 1 and 2 of a chain of 6 are read again at ops 11 and 10; both fetches
        // start after op 7, listed in the plan activation 1 first.
        let trace = crate::trace::synthetic::chain(6, |_| 100, |_| 1000);
        let made_by = |op| {
            trace
                .tensors
                .iter()
                .position(|t| t.producer == Some(op))
                .unwrap()
        };
        let offload = |after| Action::Offload {
            after,
            prefetch_at: 8,
            inline: false,
        };
        let program = compile(
            &trace,
            &plan(vec![(made_by(1), offload(2)), (made_by(2), offload(3))]),
        );
        assert_eq!(program.tagged, vec![made_by(1), made_by(2)]);
        // Activation 2 (tag 1) is needed first: its fetch is started first.
        assert_eq!(
            program.after[7],
            vec![
                Step::Prefetch {
                    tag: 1,
                    inline: false
                },
                Step::Prefetch {
                    tag: 0,
                    inline: false
                }
            ]
        );
        assert_eq!(next_use(&trace, made_by(2), 3), 10);
        assert_eq!(next_use(&trace, made_by(2), 10), usize::MAX);
    }

    #[test]
    fn a_carried_tensor_is_prefetched_in_the_next_iteration() {
        // Tensor 0 is carried to the next iteration (made at op 0, last used at op 2); its
        // counterpart of the previous iteration (tensor 1, made before the iteration) is first
        // used at op 1. An offload after op 2 whose prefetch starts at op 5 + 1 (op 1 of the
        // next iteration) compiles to a prefetch after op 0 of the iteration.
        use crate::trace::{Access, AccessKind, OpTrace, Slot, TensorTrace, Trace};
        let op = |i: usize, inputs: Vec<u64>, outputs: Vec<u64>| OpTrace {
            index: i,
            kind: "Float.Add".into(),
            signature: i as u64,
            inputs,
            outputs,
            nanos: 1000,
            resident_bytes: 0,
            temporaries: 0,
            events: Default::default(),
        };
        let tensor = |id: u64, slot, producer, accesses: Vec<usize>, wraps_to| TensorTrace {
            id,
            slot,
            shape: vec![250],
            dtype: "F32".into(),
            bytes: 1000,
            producer,
            accesses: accesses
                .into_iter()
                .map(|op| Access {
                    op,
                    kind: AccessKind::Read,
                })
                .collect(),
            end: None,
            wraps_to,
            shares_buffer: false,
            view_of: None,
        };
        let trace = Trace {
            period: Some(5),
            iteration: 0,
            first_op: 0,
            periodic_from: 0,
            peak_bytes: 0,
            ops: vec![
                op(0, vec![], vec![10]),
                op(1, vec![20], vec![]),
                op(2, vec![10], vec![]),
                op(3, vec![], vec![]),
                op(4, vec![], vec![]),
            ],
            tensors: vec![
                tensor(
                    10,
                    Slot::Output { op: 0, index: 0 },
                    Some(0),
                    vec![2],
                    Some(1),
                ),
                tensor(20, Slot::Input { op: 1, index: 0 }, None, vec![1], None),
            ],
        };
        let program = compile(
            &trace,
            &plan(vec![(
                0,
                Action::Offload {
                    after: 2,
                    prefetch_at: 6,
                    inline: false,
                },
            )]),
        );
        assert_eq!(
            program.after[2],
            vec![Step::Offload {
                port: Port::Input(0),
                tag: 0,
                inline: false
            }]
        );
        assert_eq!(
            program.after[0],
            vec![Step::Prefetch {
                tag: 0,
                inline: false
            }]
        );

        // The simulated lifetimes: the carried tensor leaves after op 2, and its counterpart
        // of the previous iteration lives from the prefetch (op 1) instead of from the start.
        let lifetimes = crate::plan::combine::lifetimes(
            &trace,
            &[(
                0,
                Action::Offload {
                    after: 2,
                    prefetch_at: 6,
                    inline: false,
                },
            )],
        );
        assert_eq!(lifetimes[0].until, Some(2));
        assert_eq!(lifetimes[1].from, Some(1));
        assert_eq!(lifetimes.len(), 2);

        // The candidate's gap runs across the boundary: from its last use (op 2) to its
        // counterpart's first use in the next iteration (op 5 + 1); it is not recomputable.
        let profile = crate::plan::profile::Profile::new(&trace, None);
        let candidates = crate::plan::checkpoint::candidates(&trace, &profile, 1);
        let carried = candidates.iter().find(|c| c.tensor == 0).unwrap();
        assert_eq!(carried.gap, (2, 6));
        assert!(!carried.recomputable);
        assert!(
            (carried.gap_seconds - 3e-6).abs() < 1e-12,
            "{}",
            carried.gap_seconds
        );
    }
}
