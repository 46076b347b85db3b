//! Following the plan: a plan is made once per profiled schedule (the planners are pure
//! functions of the trace), and after each op the engine takes the program's steps for it
//! (offload, evict, prefetch) and, before the next op, seed 003's compute-side waits.

use std::time::Instant;

use burn_ir::{BackendIr, TensorId};

use super::Engine;
use crate::exec::counters::Wait;
use crate::exec::plans::{Active, REPLANS};
use crate::exec::residency::State;
use crate::plan::program::{Port, Step};

impl<B: BackendIr> Engine<B> {
    /// Takes the plan's steps after the op that ran last, plans when a new schedule was
    /// profiled, and retries deferred prefetches.
    pub(super) fn follow_plan(&mut self) {
        if !self.deferred.is_empty() {
            let mut deferred = std::mem::take(&mut self.deferred);
            deferred.retain(|&id| !self.start_prefetch(id));
            self.deferred = deferred;
        }
        self.drop_stale_plan();
        let Some(pos) = self.recorder.position_of_last() else {
            return;
        };
        if pos + 1 == self.recorder_period() {
            if self.plans.active.is_some() {
                self.counters.planned_iterations += 1;
            }
            self.maybe_plan();
        }
        let Some(active) = self.plans.active.as_mut() else {
            return;
        };
        if pos >= active.program.period {
            return;
        }
        let steps = std::mem::take(&mut active.program.after[pos]);
        for &step in &steps {
            self.take_step(step);
        }
        if let Some(active) = self.plans.active.as_mut() {
            active.program.after[pos] = steps;
        }
        self.await_fetches((pos + 1) % self.plans.active.as_ref().map_or(1, |a| a.program.period));
    }

    /// Drops the plan when the loop's schedule changed since it was made (a longer period
    /// found, a resync after a one-off op): it speaks of another schedule's ops, and is
    /// neither followed nor reported until one is made for the schedule in force.
    pub(super) fn drop_stale_plan(&mut self) {
        if self.plans.planned_for.is_some()
            && self.recorder.schedule_key() != self.plans.planned_for
        {
            self.forget_plan();
        }
    }

    /// One step of the program.
    fn take_step(&mut self, step: Step) {
        match step {
            Step::Offload { port, tag, inline } => {
                let Some(id) = self.port(port) else {
                    return;
                };
                let started = if inline {
                    self.offload_here(id)
                } else {
                    self.start_offload(id)
                };
                if started && let Some(active) = self.plans.active.as_mut() {
                    active.tags.insert(tag, id);
                }
            }
            Step::Evict { port } => {
                if let Some(id) = self.port(port) {
                    self.evict(id);
                }
            }
            Step::Prefetch { tag, inline } => {
                let Some(active) = self.plans.active.as_mut() else {
                    return;
                };
                let Some(id) = active.tags.remove(&tag) else {
                    return;
                };
                if inline {
                    self.fetch_here(id);
                } else {
                    active.fetching.insert(tag, id);
                    if !self.start_prefetch(id) {
                        self.deferred.push(id);
                    }
                }
            }
        }
    }

    /// Seed 003's waits on the compute side: before the op at `pos`, the planned fetches it
    /// reads must have landed (`Program::fetch_waits`). A fetch that failed surfaces at the
    /// op's own use of the tensor.
    fn await_fetches(&mut self, pos: usize) {
        let Some(active) = self.plans.active.as_mut() else {
            return;
        };
        let Some(tags) = active.program.fetch_waits.get(pos) else {
            return;
        };
        if tags.is_empty() {
            return;
        }
        let ids: Vec<TensorId> = tags
            .iter()
            .filter_map(|tag| active.fetching.remove(tag))
            .collect();
        for id in ids {
            if matches!(
                self.residency.get(&id).map(|e| e.state()),
                Some(State::Fetching)
            ) {
                let _ = self.exposed(Wait::Prefetch, |e| e.wait_for(id));
                self.counters.planned_waits += 1;
            }
        }
    }

    fn recorder_period(&self) -> usize {
        self.recorder.profiled_schedule().map_or(0, |(p, _)| p)
    }

    /// The id of the tensor at `port` of the op that ran last.
    fn port(&self, port: Port) -> Option<TensorId> {
        match port {
            Port::Input(i) => self.op.inputs.get(i as usize).map(|(id, _)| *id),
            Port::Output(i) => self.op.out_ids.get(i as usize).copied(),
        }
    }

    /// Plans once per profiled schedule: the last complete iteration's trace and profile go
    /// to the planner, whose program is followed from the next iteration on.
    fn maybe_plan(&mut self) {
        let Some(key) = self.recorder.profiled_schedule() else {
            return;
        };
        let Some(budget) = self.budget() else {
            return;
        };
        if self.plans.planned_for == Some(key) {
            // A plan that does not fit is made again from the next iteration's trace, which
            // knows more: the first periodic iteration follows one that was not (a warm-up,
            // an optimizer's first step), so which tensors it carries to the next is unknown
            // there, and those cannot be planned to leave across the boundary.
            let fits = self.plans.active.as_ref().is_some_and(|a| a.program.fits);
            if fits || self.plans.replans == 0 {
                return;
            }
            self.plans.replans -= 1;
        } else {
            self.plans.replans = REPLANS;
        }
        self.plans.planned_for = Some(key);
        let start = Instant::now();
        let Some(trace) = self.recorder.trace() else {
            return;
        };
        let links = if self.config.policy.moves_by_copy() {
            self.links()
        } else {
            None
        };
        let profile = crate::plan::profile::Profile::new(&trace, links);
        let program = crate::plan::build(&trace, &profile, budget, self.config.policy);
        tracing::debug!(
            period = program.period,
            offloads = program.offloads,
            recomputes = program.recomputes,
            predicted_peak = program.predicted_peak_bytes,
            "burn-swap: planned the iteration"
        );
        self.counters.plans += 1;
        self.counters.planning_nanos += start.elapsed().as_nanos() as u64;
        self.counters.predicted_peak = Some(program.predicted_peak_bytes);
        self.counters.predicted_pool = Some(program.predicted_pool_bytes);
        self.counters.planned_period = Some(program.period);
        self.counters.plan_choices = program.choices.clone();
        self.counters.plan_chosen = (!program.choices.is_empty()).then_some(program.chosen);
        self.counters.predicted_exposed_nanos =
            Some((program.predicted_exposed_seconds * 1e9) as u64);
        self.plans.active = Some(Active {
            program,
            tags: Default::default(),
            fetching: Default::default(),
        });
    }
}
