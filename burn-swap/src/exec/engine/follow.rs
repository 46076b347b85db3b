//! Following the plan: a plan is made once per profiled schedule (the planners are pure
//! functions of the trace; `exec::plans` keeps the plans and runs them on a planner
//! thread), and after each op the engine takes the program's steps for it
//! (offload, evict, prefetch) and, before the next op, the compute-side cross-stream waits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn_ir::{BackendIr, TensorId};

use super::Engine;
use crate::exec::counters::Wait;
use crate::exec::meter;
use crate::exec::plans::JUDGED_AFTER;
use crate::exec::residency::State;
use crate::plan::payoff::{self, IterationCost};
use crate::plan::profile::Links;
use crate::plan::program::{Program, Step};
use crate::report::{PlanDecline, PlanTakeover, TAKEOVERS_KEPT};

/// The planned prefetches listed as started before those no longer in flight are let go.
const FETCHING_KEPT: usize = 1024;

/// A defect planted by the tests of the wait analysis (`unstable::skip_fetch_waits`): every
/// cross-stream wait the analysis placed is skipped, so that the reads it covered come
/// before their fetches land and `unawaited_prefetch_reads` counts them.
pub(crate) static SKIP_FETCH_WAITS: AtomicBool = AtomicBool::new(false);

impl<B: BackendIr> Engine<B> {
    /// Takes the plan's steps after the op that ran last, plans when a new schedule was
    /// profiled, and retries deferred prefetches.
    pub(super) fn follow_plan(&mut self) {
        if !self.copies.deferred.is_empty() {
            let mut deferred = std::mem::take(&mut self.copies.deferred);
            deferred.retain(|&id| !self.start_prefetch(id));
            self.copies.deferred = deferred;
        }
        let recognised = self.history.recorder.recognised_at_last();
        if self.plans.active.as_ref().is_none_or(|a| !a.steps)
            && !recognised
            && !self.history.recorder.may_end_iteration()
        {
            // No plan in force, or one with no step (made where none fits): nothing to do
            // before the iteration's end (the op's place in its iteration, a division, and
            // the schedule's checks per op otherwise).
            return;
        }
        self.drop_stale_plan();
        if recognised {
            self.take_back_recognised();
        }
        let Some(place) = self.history.recorder.place_of_last() else {
            return;
        };
        let pos = place.position;
        // An iteration ends only where the schedule holds up to its last op.
        if place.verified && pos + 1 == self.history.recorder_period() {
            if let Some(active) = self.plans.active.as_mut() {
                active.iterations += 1;
                self.history.counters.planned_iterations += 1;
            }
            let judged = self
                .history
                .judged_content(self.budget(), &self.settings.config);
            if let Some(content) = judged {
                self.close_iteration(content);
            }
            self.maybe_plan();
            if let Some(content) = judged {
                let planned = self.plans.active.is_some();
                self.plans
                    .meter
                    .open(content, self.history.counters.spent_nanos, planned);
            }
        }
        let Some(active) = self.plans.active.as_mut() else {
            return;
        };
        if pos >= active.program.period {
            return;
        }
        if active.steps_after(pos) {
            let steps = std::mem::take(&mut active.program.after[pos]);
            for &step in &steps {
                self.take_step(step);
            }
            if let Some(active) = self.plans.active.as_mut() {
                active.program.after[pos] = steps;
            }
        }
        // The waits before the next op (of the program in force after the steps).
        let next = self.plans.active.as_ref().and_then(|a| {
            let next = match a.program.period {
                p if pos + 1 < p => pos + 1,
                p => (pos + 1).checked_rem(p)?,
            };
            a.waits_before(next).then_some(next)
        });
        if let Some(next) = next {
            self.await_fetches(next);
        }
    }

    /// Drops the plan when the loop's schedule changed since it was made (a longer period
    /// found, a resync after a one-off op): it speaks of another schedule's ops, and is
    /// neither followed nor reported until one is made for the schedule in force.
    pub(super) fn drop_stale_plan(&mut self) {
        if self.plans.planned_for.is_some()
            && self.history.recorder.schedule_key() != self.plans.planned_for
        {
            self.forget_plan();
        }
    }

    /// One step of the program.
    fn take_step(&mut self, step: Step) {
        match step {
            Step::Offload { port, tag, inline } => {
                let Some(id) = self.op.port(port) else {
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
                if let Some(id) = self.op.port(port) {
                    self.evict(id);
                }
            }
            Step::Prefetch { tag, inline } => {
                let Some(active) = self.plans.active.as_mut() else {
                    return;
                };
                let id = active.tags.remove(&tag);
                if inline {
                    if let Some(id) = id {
                        self.fetch_here(id);
                    }
                    return;
                }
                if active.fetching.len() >= FETCHING_KEPT {
                    // A program with no wait for them (none is made so): those landed, and
                    // the places of fetches not made, need no list.
                    let residency = &self.residency;
                    active.fetching.retain(|(_, id)| {
                        id.is_some_and(|id| {
                            matches!(residency.get(&id).map(|e| e.state()), Some(State::Fetching))
                        })
                    });
                }
                // Its place in the receive queue, made or not (the tensor did not leave: the
                // plan took over after its offload's op): a wait for it still covers the
                // fetches queued before it.
                active.fetching.push((tag, id));
                if let Some(id) = id
                    && !self.start_prefetch(id)
                {
                    self.copies.deferred.push(id);
                }
            }
        }
    }

    /// The cross-stream waits on the compute side: before the op at `pos`, the planned fetches it
    /// reads must have landed (`Program::fetch_waits`). The analysis leaves out a wait that a
    /// later one implies: the receive queue runs in order, so a wait for a fetch covers every
    /// fetch queued before it, and those are waited for here too (their copies have finished;
    /// only their reports may lag, held back by the jitter stress). A fetch that failed
    /// surfaces at the op's own use of the tensor.
    fn await_fetches(&mut self, pos: usize) {
        let Some(active) = self.plans.active.as_mut() else {
            return;
        };
        let Some(tags) = active.program.fetch_waits.get(pos) else {
            return;
        };
        // Most ops have no wait: the planted defect is read only where one is placed.
        if tags.is_empty() || SKIP_FETCH_WAITS.load(Ordering::Relaxed) {
            return;
        }
        // Everything queued up to the last fetch waited for.
        let Some(last) = active
            .fetching
            .iter()
            .rposition(|(tag, _)| tags.contains(tag))
        else {
            return;
        };
        let covered: Vec<TensorId> = active
            .fetching
            .drain(..=last)
            .filter_map(|(_, id)| id)
            .collect();
        for id in covered {
            if matches!(
                self.residency.get(&id).map(|e| e.state()),
                Some(State::Fetching)
            ) {
                let _ = self.exposed(Wait::Prefetch, |e| e.wait_for(id));
                self.history.counters.planned_waits += 1;
            }
        }
    }

    /// At each iteration end of a profiled schedule: takes over with a plan that is ready,
    /// and plans when the schedule has none yet (or again while its plan does not fit). A
    /// schedule that ran before gets its kept plan back at once; a new one hands its last
    /// complete iteration's trace to the planner (`exec::plans`), and the fallback keeps the
    /// budget until the plan is ready.
    fn maybe_plan(&mut self) {
        let Some(key) = self.history.recorder.schedule_key() else {
            return;
        };
        if self.history.threads.mixed() {
            // No plan from a trace of several threads' ops before one is judged to train.
            return;
        }
        self.plans.note_iteration(key);
        self.take_ready_plan(key);
        let Some(budget) = self.budget() else {
            return;
        };
        let profiled_now = self.history.recorder.profiled_schedule() == Some(key);
        if !profiled_now {
            // The next iteration is the one a plan will be made from: the links are measured
            // beside it, not after it.
            let moves_by_copy = self.settings.config.policy.moves_by_copy();
            self.link_meter().measure_ahead(moves_by_copy);
        }
        // One plan is made at a time; a kept plan is taken back meanwhile. A plan that will
        // be judged is made once the fallback was measured on its schedule (one iteration
        // more on the fallback where the plan is made on the op's thread; made beside the
        // ops, the fallback runs while it is made anyway).
        let unmeasured = self
            .history
            .judged_content(self.budget(), &self.settings.config)
            .is_some_and(|c| self.plans.meter.fallback(c).is_none());
        let profiled = profiled_now && !self.plans.making() && !unmeasured;
        if self.plans.planned_for == Some(key) {
            // A plan that does not fit is made again from the next iteration's trace, which
            // knows more: the first periodic iteration follows one that was not (a warm-up,
            // an optimizer's first step), so which tensors it carries to the next is unknown
            // there, and those cannot be planned to leave across the boundary. A few times
            // in the plan's life (`exec::plans::REPLANS`), not each time its schedule
            // comes back.
            let fits = self.plans.program().is_some_and(|p| p.fits);
            let replans = self
                .history
                .plan_content(budget, &self.settings.config)
                .map_or(0, |c| self.plans.replans_left(c));
            if fits || replans == 0 || !profiled {
                return;
            }
        } else {
            // A schedule that ran before takes its plan back as soon as it holds again, its
            // iterations not timed anew; one whose plan was declined stays on the fallback.
            if let Some(content) = self.history.plan_content(budget, &self.settings.config)
                && self.take_kept(key, content)
            {
                return;
            }
            if !profiled {
                return;
            }
        }
        let start = Instant::now();
        let config = &self.settings.config;
        let (moves_by_copy, background) =
            (config.policy.moves_by_copy(), config.background_planning);
        let Some(links) = self.link_meter().for_plan(moves_by_copy, background) else {
            self.history.note_op_thread_planning(start);
            return;
        };
        self.make_plan(key, budget, links, start);
    }

    /// Makes the plan of schedule `key` from its last complete iteration, with `links`: on
    /// the planner thread, or on this one (`start`: when this thread began on it).
    fn make_plan(&mut self, key: (usize, u64), budget: u64, links: Option<Links>, start: Instant) {
        self.plans.planned_for = Some(key);
        // The op's thread copies the iterations the trace reads; the trace is derived where
        // the plan is made.
        let (Some(content), Some(excerpt)) = (
            self.history.plan_content(budget, &self.settings.config),
            self.history.recorder.excerpt(),
        ) else {
            return;
        };
        let choice = (self.settings.config.policy, self.settings.config.planner);
        self.plans.start(
            key,
            content,
            self.settings.config.background_planning,
            move || {
                let trace = excerpt.trace();
                let profile = crate::plan::profile::Profile::new(&trace, links);
                crate::plan::build(&trace, &profile, budget, choice)
            },
        );
        self.history.note_op_thread_planning(start);
        // Made here (planning on the op's thread), or already done.
        self.take_ready_plan(key);
    }

    /// At the op a schedule that ran before was recognised at (by the first ops of its
    /// iteration: `trace/recorder/`), its kept plan takes over there and then, its steps
    /// taken from this op on (those of the ops before it in the iteration have run): a loop
    /// whose schedules come back in no order (batches of a few lengths drawn at random)
    /// follows each one's plan in the iteration it comes back in. One declined stays on the
    /// fallback; one with no kept plan is planned at its iteration's end as any other.
    fn take_back_recognised(&mut self) {
        let (Some(key), Some(budget)) = (self.history.recorder.schedule_key(), self.budget())
        else {
            return;
        };
        let Some(content) = self.history.plan_content(budget, &self.settings.config) else {
            return;
        };
        // A plan finished since the last iteration end is kept first: it may be this
        // schedule's, made while another ran (the planner started near an epoch's end).
        self.take_ready_plan(key);
        if self
            .plans
            .active
            .as_ref()
            .is_some_and(|a| a.content == content)
        {
            // The plan in force is this schedule's (one as long, whose key stayed).
            return;
        }
        // Another schedule's plan (one as long keeps the key) goes, and this one's comes
        // back, or is made at its iteration's end.
        self.forget_plan();
        self.take_kept(key, content);
    }

    /// The plan kept for schedule `key` of `content`, if any: followed from now on, or, where
    /// it was declined, the schedule left on the fallback. Whether one was kept.
    fn take_kept(&mut self, key: (usize, u64), content: u64) -> bool {
        if self
            .history
            .judged_content(self.budget(), &self.settings.config)
            .is_some()
            && self.plans.declined(content)
        {
            self.plans.planned_for = Some(key);
            self.history.counters.declines.in_force = true;
            return true;
        }
        let Some(program) = self.plans.kept(content) else {
            return false;
        };
        self.plans.planned_for = Some(key);
        self.take_over(program, key, content, None, 0);
        true
    }

    /// Takes the plan being made once it is ready: kept for its schedule's content, and
    /// followed from now on when that schedule (`key`) is the one in force and its content
    /// unchanged (the budget and policy included).
    fn take_ready_plan(&mut self, key: (usize, u64)) {
        let Some(ready) = self.plans.ready() else {
            return;
        };
        let Some(made) = ready.made else {
            tracing::warn!("burn-swap: the planner failed; the fallback keeps the budget");
            return;
        };
        self.history.counters.plans += 1;
        self.history.counters.planning_nanos += made.nanos;
        self.plans.keep(ready.content, &made.program);
        let in_force = ready.key == key
            && self.plans.planned_for == Some(key)
            && self
                .budget()
                .and_then(|b| self.history.plan_content(b, &self.settings.config))
                .is_some_and(|c| c == ready.content);
        if in_force {
            self.take_over(
                made.program,
                key,
                ready.content,
                Some(made.nanos),
                ready.waited,
            );
        }
    }

    /// Measures the iteration of schedule `content` that ended now (`exec::meter`), and
    /// judges the plan in force by what it cost once its first iterations are measured.
    fn close_iteration(&mut self, content: u64) {
        let planned = self.plans.active.is_some();
        let Some(iteration) =
            self.plans
                .meter
                .close(content, self.history.counters.spent_nanos, planned)
        else {
            return;
        };
        let Some(active) = self.plans.active.as_mut() else {
            return;
        };
        // The first planned iteration starts from the fallback's residency: not the plan's
        // own cost.
        if active.content != content
            || active.iterations < 2
            || active.measured.len() >= JUDGED_AFTER
        {
            return;
        }
        active.measured.push(iteration.cost);
        if active.measured.len() < JUDGED_AFTER {
            return;
        }
        // The least of its iterations against the least of the fallback's (`exec::meter`).
        let Some(measured) = meter::lowest(&active.measured).map(|c| c.seconds) else {
            return;
        };
        if let Some(fallback) = self.plans.meter.fallback(content)
            && !payoff::pays(measured, fallback)
        {
            self.decline(content, measured, true, fallback);
        }
    }

    /// Declines the plan for `content`: its schedule stays on the reactive fallback, and
    /// the report says why.
    fn decline(
        &mut self,
        content: u64,
        plan_seconds: f64,
        measured: bool,
        fallback: IterationCost,
    ) {
        tracing::info!(
            plan_ms = plan_seconds * 1e3,
            measured,
            fallback_ms = fallback.seconds * 1e3,
            iteration_ms = fallback.iteration_seconds * 1e3,
            "burn-swap: a plan does not pay against the fallback; declined"
        );
        let following = self
            .plans
            .active
            .as_ref()
            .is_some_and(|a| a.content == content);
        self.plans.decline(content);
        if following {
            self.history.counters.clear_plan_figures();
        }
        let decline = PlanDecline {
            op: self.history.recorder.next_index(),
            period: self.history.recorder_period(),
            plan_seconds,
            measured,
            fallback_seconds: fallback.seconds,
            iteration_seconds: fallback.iteration_seconds,
        };
        self.history.counters.declines.add(decline, TAKEOVERS_KEPT);
    }

    /// Follows `program`, made for schedule `key` of content `content`, from the next op on;
    /// under a judged policy only when its predicted cost pays against the fallback measured
    /// on that schedule (else it is declined).
    fn take_over(
        &mut self,
        program: Program,
        key: (usize, u64),
        content: u64,
        made_nanos: Option<u64>,
        waited: u64,
    ) {
        if self
            .history
            .judged_content(self.budget(), &self.settings.config)
            == Some(content)
            && let Some(fallback) = self.plans.meter.fallback(content)
        {
            // What the ops pay for the plan: its waits, its recomputation, and the op thread's
            // hand-overs of its copies to the workers (the fallback's own copies, made on
            // the op thread, are in its measured waits).
            let predicted = program.predicted_exposed_seconds
                + program.predicted_recompute_seconds
                + program.predicted_handover_seconds;
            if !payoff::pays(predicted, fallback) {
                self.decline(content, predicted, false, fallback);
                return;
            }
        }
        if made_nanos.is_none() {
            self.history.counters.plans_reused += 1;
        }
        self.history.counters.declines.in_force = false;
        tracing::debug!(
            period = program.period,
            offloads = program.offloads,
            recomputes = program.recomputes,
            predicted_peak = program.predicted_peak_bytes,
            reused = made_nanos.is_none(),
            waited,
            "burn-swap: a plan takes over"
        );
        if self.history.counters.plan_takeovers.len() >= TAKEOVERS_KEPT {
            self.history.counters.plan_takeovers.remove(0);
        }
        self.history.counters.plan_takeovers.push(PlanTakeover {
            op: self.history.recorder.next_index(),
            period: key.0,
            reused: made_nanos.is_none(),
            planning_seconds: made_nanos.unwrap_or(0) as f64 * 1e-9,
            waited_iterations: waited,
        });
        self.history.counters.predicted_peak = Some(program.predicted_peak_bytes);
        self.history.counters.predicted_pool = Some(program.predicted_pool_bytes);
        self.history.counters.planned_period = Some(program.period);
        self.history.counters.plan_choices = program.choices.clone();
        self.history.counters.plan_chosen = (!program.choices.is_empty()).then_some(program.chosen);
        self.history.counters.predicted_exposed_nanos =
            Some((program.predicted_exposed_seconds * 1e9) as u64);
        self.plans.follow(program, content);
    }
}
