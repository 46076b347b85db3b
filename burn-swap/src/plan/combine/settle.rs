//! Settling a plan's ways out ([`settle`]): fitted to the budget (the counted bytes with
//! each op's temporaries), the ways out it does not need dropped, its fetches led into the
//! budget's slack; then judged ([`Settled::judge`]).

use super::*;

/// A plan's ways out settled: fitted to the budget, the ones it does not need dropped, the
/// fetches led into the budget's slack, with its counted bytes at each op. Whether it fits
/// is known here; the pool simulation and the exposed time ([`Settled::judge`]) are left
/// for the plan a planner returns, so that the bisection over a ranking's prefixes simulates
/// the pool once, not once per prefix tried.
pub(super) struct Settled {
    taken: Vec<Taken>,
    actions: Vec<(usize, Action)>,
    used: Vec<usize>,
    held: Vec<usize>,
    copied: Vec<usize>,
    lives: Vec<Lifetime>,
    /// Counted bytes live at each op (the prediction the executor is measured against).
    live_bytes: Vec<u64>,
    /// The most the budget must hold at any op: the counted bytes and the op's temporaries.
    peak_held: u64,
}

/// Settles the ways out `taken`: how long each offload holds its copy, [`fit`] where an op
/// exceeds the budget, the ways out the plan does not need kept resident instead, then
/// each fetch led into the budget's slack. `kept`: the trace's lifetimes when every tensor
/// is kept ([`simulate::lifetimes`]), made once per planner.
pub(super) fn settle(
    trace: &Trace,
    profile: &Profile,
    kept: &[Lifetime],
    taken: &[Taken],
    budget: u64,
) -> Settled {
    let ops = trace.ops.len();
    // One tensor's gaps never overlap: a way out whose gap starts before the previous one
    // of its tensor ended is left out.
    let mut order: Vec<&Taken> = taken.iter().collect();
    order.sort_by_key(|t| (t.tensor, t.action.after(), t.used));
    let mut taken: Vec<Taken> = Vec::with_capacity(order.len());
    for t in order {
        match taken.last() {
            Some(last) if last.tensor == t.tensor && t.action.after() < last.used => {}
            _ => taken.push(*t),
        }
    }
    let fits = link_fits(profile);
    let mut actions: Vec<(usize, Action)> = taken.iter().map(|t| (t.tensor, t.action)).collect();
    let mut used: Vec<usize> = taken.iter().map(|t| t.used).collect();
    let mut copied = held_in_queue(trace, profile, fits, &actions);
    let mut held = copied.clone();
    let live = fit(trace, kept, &mut actions, (&used, &mut held), budget);
    // The ways out the plan does not need stay resident instead.
    let keep = needed(trace, &actions, &held, &taken, (live, budget));
    retain_kept(&mut actions, &keep);
    retain_kept(&mut used, &keep);
    retain_kept(&mut held, &keep);
    retain_kept(&mut copied, &keep);
    retain_kept(&mut taken, &keep);
    if ops > 0 {
        let mut live = held_per_op(trace, &lifetimes_held(trace, kept, &actions, &held));
        lead_into_slack(trace, &mut actions, (&used, &held), (&mut live, budget));
    }
    let lives = lifetimes_held(trace, kept, &actions, &held);
    let live_bytes: Vec<u64> = live_per_op(&lives, ops)
        .into_iter()
        .map(|b| b.max(0) as u64)
        .collect();
    let peak_held = live_bytes
        .iter()
        .zip(&trace.ops)
        .map(|(live, op)| live + op.temporaries)
        .max()
        .unwrap_or(0);
    Settled {
        peak_held,
        taken,
        actions,
        used,
        held,
        copied,
        lives,
        live_bytes,
    }
}

impl Settled {
    /// Its simulated counted peak: the most bytes live at any op (those resident when the
    /// iteration starts, for an iteration without ops).
    pub(super) fn peak_live(&self) -> u64 {
        match self.live_bytes.iter().max() {
            Some(&peak) => peak,
            None => simulate::buffers(&self.lives)
                .iter()
                .filter(|l| l.from.is_none())
                .map(|l| l.bytes)
                .sum(),
        }
    }

    /// The smallest budget it fits: its counted peak, or, where more, the most bytes it
    /// holds at an op with the op's temporaries.
    pub(super) fn smallest_budget(&self) -> u64 {
        self.peak_live().max(self.peak_held)
    }

    /// Whether it fits `budget`: its counted bytes with each op's temporaries.
    pub(super) fn fits(&self, budget: u64) -> bool {
        self.smallest_budget() <= budget
    }

    /// Judges the settled plan: the pool simulation (fragmentation included) and the
    /// exposed, recompute and hand-over time.
    pub(super) fn judge(self, trace: &Trace, profile: &Profile, budget: u64) -> Plan {
        let ops = trace.ops.len();
        let simulation = simulate::simulate_best(&self.lives, ops);
        let peak_live = self.peak_live();
        debug_assert_eq!(
            simulation.peak_live_bytes, peak_live,
            "the pool simulation and the counted bytes per op disagree on the live peak"
        );
        let smallest = self.smallest_budget();
        let fits = link_fits(profile);
        let Settled {
            taken,
            actions,
            used,
            held,
            copied,
            live_bytes,
            ..
        } = self;
        let late = late_in_queue(trace, profile, fits, &actions, &used);
        let here = OnThread::of(profile);
        let (mut exposed, mut recompute, mut handover) = (0.0, 0.0, 0.0);
        for (j, (&(tensor, action), t)) in actions.iter().zip(&taken).enumerate() {
            let bytes = trace.tensors[tensor].bytes;
            match (action, fits) {
                (Action::Offload { inline: true, .. }, _) => {
                    exposed += here.round_trip(bytes).unwrap_or(t.cost);
                }
                (Action::Offload { after, .. }, Some(fits)) => {
                    let waited = (held[j] < copied[j]).then_some(held[j] + 1);
                    exposed +=
                        offload_exposed(profile, fits, bytes, (after, used[j]), (waited, late[j]));
                    handover += 2.0 * here.handover;
                }
                (Action::Offload { .. }, None) => {}
                (Action::Recompute { .. }, _) => recompute += t.cost,
            }
        }
        Plan {
            feasible: smallest <= budget,
            smallest_budget: smallest,
            actions,
            simulation,
            live_bytes,
            exposed_seconds: exposed,
            recompute_seconds: recompute,
            handover_seconds: handover,
        }
    }
}
