//! The plans of one device as the executor holds them: the program followed and the schedule
//! it was made for, the plans kept for schedules seen before, and the plan being made on a
//! thread of its own.
//!
//! The plans themselves are made by `crate::plan::build`, a pure function of a trace; this
//! type only keeps them and runs that function where the op's thread does not wait for it.
//!
//! - **Kept per schedule.** A plan is kept under its schedule's content (the op signatures of
//!   one iteration, the budget and the policy): a loop whose schedule changes and comes back
//!   (evaluation between epochs, a few sequence lengths, a GAN's two steps, a resync after a
//!   one-off op) gets its plan back at once instead of planning again. At most [`KEPT`]
//!   plans are kept; the least recently used goes first.
//! - **Made off the op's path.** The op's thread hands the trace to a planner thread and goes
//!   on under the reactive fallback; the plan takes over at the first iteration end of the
//!   schedule it was made for after it is ready (a plan made for a schedule that is no longer
//!   in force is kept for when it comes back).
//! - **Followed while it pays.** Under the planned policy a plan that costs more than the
//!   reactive fallback measured on its schedule (`plan::payoff`; the figures from
//!   `exec::meter`) is declined: kept as declined, so that its schedule stays on the
//!   fallback when it comes back, without planning again.

use std::thread::JoinHandle;
use std::time::Instant;

use burn_ir::TensorId;

use crate::exec::meter::Meter;
use crate::plan::payoff::IterationCost;
use crate::plan::program::Program;

/// Plans made again, at the end of each following iteration, while a schedule's plan does
/// not fit its budget and each predicts a lower peak than the one before ([`Plans::keep`]):
/// at most this many over the life of the plan kept for the schedule, however often the
/// schedule comes back.
pub(crate) const REPLANS: u8 = 2;

/// Plans kept for schedules seen before.
pub(crate) const KEPT: usize = 8;

/// A schedule in force, as the recorder numbers it: `(period, anchor)`.
pub(crate) type ScheduleKey = (usize, u64);

/// Planned iterations measured before a plan is judged by what it cost (after its first,
/// which starts from the fallback's residency): the fallback's window, so that both sides
/// are judged by the least of as many iterations (`exec::meter`).
pub(crate) const JUDGED_AFTER: usize = crate::exec::meter::WINDOW;

/// A program in force: its steps, and the tensors it offloaded this iteration, by tag.
pub(crate) struct Active {
    pub program: Program,
    /// The content of the schedule it was made for (see [`Plans::keep`]).
    pub content: u64,
    /// Iterations that ended under this program since it took over.
    pub iterations: u64,
    /// The iterations measured so far (up to [`JUDGED_AFTER`], when the plan is judged by
    /// the least of them).
    pub measured: Vec<IterationCost>,
    pub tags: hashbrown::HashMap<u32, TensorId>,
    /// The planned prefetches in the order the program queues them on the receive worker,
    /// by tag, with the tensor where one was fetched (`None` where the tensor had not left),
    /// until an op waited for them or for one queued after them.
    pub fetching: Vec<(u32, Option<TensorId>)>,
    /// Whether the program takes a step or waits anywhere (one made where no plan fits
    /// does neither: between iteration ends there is nothing to follow).
    pub steps: bool,
    /// Per position, whether the program takes steps after its op ([`STEPS_AFTER`]) or
    /// waits for fetches before it ([`WAITS_BEFORE`]): a byte per op read after every op,
    /// where the step and wait lists are three words each. Most ops have neither, and the
    /// lists, a cache line for every op or so, are out of the cache by the next op on a
    /// long iteration (the 12-block transformer's 4,706 ops spent about 100 ns per op in
    /// those reads).
    work: Vec<u8>,
}

/// [`Active::work`]: the program takes steps after the op at this position.
const STEPS_AFTER: u8 = 1;
/// [`Active::work`]: the program waits for fetches before the op at this position.
const WAITS_BEFORE: u8 = 2;

impl Active {
    fn new(program: Program, content: u64) -> Self {
        let work: Vec<u8> = (0..program.period)
            .map(|pos| {
                let steps = program.after.get(pos).is_some_and(|s| !s.is_empty());
                let waits = program.fetch_waits.get(pos).is_some_and(|w| !w.is_empty());
                (if steps { STEPS_AFTER } else { 0 }) | (if waits { WAITS_BEFORE } else { 0 })
            })
            .collect();
        let steps = work.iter().any(|&w| w != 0);
        Self {
            steps,
            work,
            program,
            content,
            iterations: 0,
            measured: Vec::new(),
            tags: Default::default(),
            fetching: Default::default(),
        }
    }

    /// Whether the program takes steps after the op at `pos`.
    #[inline]
    pub fn steps_after(&self, pos: usize) -> bool {
        self.work.get(pos).is_some_and(|&w| w & STEPS_AFTER != 0)
    }

    /// Whether the program waits for fetches before the op at `pos`.
    #[inline]
    pub fn waits_before(&self, pos: usize) -> bool {
        self.work.get(pos).is_some_and(|&w| w & WAITS_BEFORE != 0)
    }
}

/// A plan kept for a schedule's content.
struct Kept {
    content: u64,
    program: Program,
    /// When it was last made or handed out, on [`Plans`]'s clock.
    used: u64,
    /// It did not pay against the fallback (`plan::payoff`): its schedule stays there.
    declined: bool,
    /// Plans still to be made for its content while its plan does not fit ([`REPLANS`]):
    /// kept with the plan, so that a schedule that comes back (after each validation, each
    /// time a length bucket is drawn) does not get them anew.
    replans: u8,
}

/// A plan being made.
struct Making {
    key: ScheduleKey,
    content: u64,
    /// Iteration ends of the schedule it is made for seen while it was being made.
    waited: u64,
    /// The planner thread, or the plan already made (on the op's thread).
    job: Job,
}

enum Job {
    Thread(JoinHandle<Option<Made>>),
    Done(Box<Made>),
}

/// A plan and the time it took to make.
pub(crate) struct Made {
    pub program: Program,
    pub nanos: u64,
}

/// A plan that is ready, for the schedule and content it was made for.
pub(crate) struct Ready {
    pub key: ScheduleKey,
    pub content: u64,
    /// Iteration ends that passed under the fallback while it was made.
    pub waited: u64,
    /// `None` when the planner panicked.
    pub made: Option<Made>,
}

/// The plans of one device.
#[derive(Default)]
pub(crate) struct Plans {
    /// The plan being followed.
    pub active: Option<Active>,
    /// The schedule last planned for, as `(period, anchor)` (planned once per schedule, and
    /// again at the end of the next iterations while its plan does not fit: see
    /// [`REPLANS`]).
    pub planned_for: Option<ScheduleKey>,
    /// What iterations cost under the fallback and under the plans.
    pub meter: Meter,
    kept: Vec<Kept>,
    making: Option<Making>,
    clock: u64,
}

impl Plans {
    /// The program in force, if any.
    pub fn program(&self) -> Option<&Program> {
        self.active.as_ref().map(|a| &a.program)
    }

    /// Whether the plan in force has a prefetch of `id` in flight.
    #[inline]
    pub fn prefetching(&self, id: TensorId) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| a.fetching.iter().any(|(_, f)| *f == Some(id)))
    }

    /// Forgets the plan in force and the schedule it was made for (the kept plans and the
    /// one being made stay: each is for a content of its own).
    pub fn forget(&mut self) {
        self.active = None;
        self.planned_for = None;
        self.meter.interrupt();
    }

    /// Follows `program`, made for schedule content `content`, from now on.
    pub fn follow(&mut self, program: Program, content: u64) {
        self.active = Some(Active::new(program, content));
    }

    /// The plan kept for `content`, if any (declined or not: see [`Plans::declined`]).
    pub fn kept(&mut self, content: u64) -> Option<Program> {
        self.clock += 1;
        let clock = self.clock;
        let kept = self.kept.iter_mut().find(|k| k.content == content)?;
        kept.used = clock;
        Some(kept.program.clone())
    }

    /// Whether the plan kept for `content` was declined.
    pub fn declined(&self, content: u64) -> bool {
        self.kept.iter().any(|k| k.content == content && k.declined)
    }

    /// Plans still to be made for `content` while its kept plan does not fit (none where no
    /// plan is kept for it).
    pub fn replans_left(&self, content: u64) -> u8 {
        self.kept
            .iter()
            .find(|k| k.content == content)
            .map_or(0, |k| k.replans)
    }

    /// Declines the plan for `content`: kept as declined, not followed (the plan in force
    /// goes when it is that one), and not made again while its schedule is the one planned
    /// for.
    pub fn decline(&mut self, content: u64) {
        if let Some(kept) = self.kept.iter_mut().find(|k| k.content == content) {
            kept.declined = true;
            kept.replans = 0;
        }
        if self.active.as_ref().is_some_and(|a| a.content == content) {
            self.active = None;
        }
    }

    /// Forgets what the fallback and the plans were measured to cost, and which plans were
    /// declined for it (the configuration changed): each plan is judged anew.
    pub fn clear_verdicts(&mut self) {
        self.meter = Meter::default();
        for kept in &mut self.kept {
            kept.declined = false;
        }
    }

    /// Forgets the plans kept, with the verdicts and the figures (the trace they were made
    /// from is gone).
    pub fn clear_kept(&mut self) {
        self.kept.clear();
        self.meter = Meter::default();
    }

    /// Keeps `program` for `content`, in place of any plan kept for it; past [`KEPT`] plans
    /// the least recently used goes.
    ///
    /// A plan for a content already kept is one made again because the kept one did not fit
    /// (the only way a plan is made for a kept content): it uses up one of the content's
    /// [`REPLANS`]. One that does not fit either and predicts no lower peak ends them: the
    /// later iterations' traces told the planner nothing that helps, and the next would not
    /// either (a budget at the smallest an op needs, where what lives across iterations
    /// cannot also leave, never fits).
    pub fn keep(&mut self, content: u64, program: &Program) {
        self.clock += 1;
        if let Some(kept) = self.kept.iter_mut().find(|k| k.content == content) {
            kept.replans = if !kept.program.fits
                && !program.fits
                && program.predicted_peak_bytes >= kept.program.predicted_peak_bytes
            {
                0
            } else {
                kept.replans.saturating_sub(1)
            };
            kept.program = program.clone();
            kept.used = self.clock;
            kept.declined = false;
            return;
        }
        if self.kept.len() >= KEPT
            && let Some(oldest) = (0..self.kept.len()).min_by_key(|&i| self.kept[i].used)
        {
            self.kept.swap_remove(oldest);
        }
        self.kept.push(Kept {
            content,
            program: program.clone(),
            used: self.clock,
            declined: false,
            replans: REPLANS,
        });
    }

    /// Gives up the plan being made (its budget or policy, or the trace it was made from, is
    /// no longer the one in force): a planner thread still at work finishes alone and its
    /// plan is lost, and the next plan can start at once.
    pub fn abandon(&mut self) {
        self.making = None;
    }

    /// Whether a plan is being made.
    pub fn making(&self) -> bool {
        self.making.is_some()
    }

    /// Makes a plan with `plan` for the schedule `key` of `content`: on a planner thread
    /// when `background` is set (and a thread can be started), else here and now.
    pub fn start(
        &mut self,
        key: ScheduleKey,
        content: u64,
        background: bool,
        plan: impl FnOnce() -> Program + Send + 'static,
    ) {
        let timed = move || {
            let start = Instant::now();
            let program = plan();
            Made {
                program,
                nanos: start.elapsed().as_nanos() as u64,
            }
        };
        let job = if background {
            // The job goes to the thread once it runs, so that it is still here to run
            // should no thread start.
            let (send, receive) = std::sync::mpsc::channel::<Box<dyn FnOnce() -> Made + Send>>();
            let spawned = std::thread::Builder::new()
                .name("burn-swap-planner".into())
                .spawn(move || receive.recv().ok().map(|job| job()));
            match spawned {
                Ok(handle) => match send.send(Box::new(timed)) {
                    Ok(()) => Job::Thread(handle),
                    Err(returned) => Job::Done(Box::new((returned.0)())),
                },
                Err(error) => {
                    tracing::warn!(%error, "burn-swap: no planner thread; planning on the op's thread");
                    Job::Done(Box::new(timed()))
                }
            }
        } else {
            Job::Done(Box::new(timed()))
        };
        self.making = Some(Making {
            key,
            content,
            waited: 0,
            job,
        });
    }

    /// Counts an iteration end of `key`'s schedule passed while its plan is being made.
    pub fn note_iteration(&mut self, key: ScheduleKey) {
        if let Some(making) = self.making.as_mut()
            && making.key == key
        {
            making.waited += 1;
        }
    }

    /// The plan being made, once it is ready (taken out).
    pub fn ready(&mut self) -> Option<Ready> {
        let done = match &self.making.as_ref()?.job {
            Job::Thread(handle) => handle.is_finished(),
            Job::Done(_) => true,
        };
        if !done {
            return None;
        }
        let making = self.making.take()?;
        let made = match making.job {
            Job::Done(made) => Some(*made),
            Job::Thread(handle) => handle.join().ok().flatten(),
        };
        Some(Ready {
            key: making.key,
            content: making.content,
            waited: making.waited,
            made,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(period: usize) -> Program {
        Program {
            period,
            recipes: vec![Vec::new(); period],
            after: vec![Vec::new(); period],
            fetch_waits: vec![Vec::new(); period],
            fits: true,
            predicted_peak_bytes: 0,
            predicted_pool_bytes: 0,
            predicted_live_bytes: Vec::new(),
            predicted_exposed_seconds: 0.0,
            predicted_recompute_seconds: 0.0,
            predicted_handover_seconds: 0.0,
            choices: Vec::new(),
            chosen: 0,
            tagged: Vec::new(),
            offloads: 0,
            recomputes: 0,
        }
    }

    /// A plan of period 5 that does not fit, predicting a peak of `peak` bytes.
    fn unfit(peak: u64) -> Program {
        Program {
            fits: false,
            predicted_peak_bytes: peak,
            ..program(5)
        }
    }

    fn wait_ready(plans: &mut Plans) -> Ready {
        loop {
            if let Some(ready) = plans.ready() {
                return ready;
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_schedule_seen_before_gets_its_plan_back_and_the_least_used_goes() {
        let mut plans = Plans::default();
        for content in 0..KEPT as u64 {
            plans.keep(content, &program(content as usize + 1));
        }
        // Content 0 is used again: the least recently used is now 1.
        assert_eq!(plans.kept(0).map(|p| p.period), Some(1));
        plans.keep(100, &program(100));
        assert_eq!(plans.kept.len(), KEPT);
        assert!(plans.kept(1).is_none(), "the least used plan stays");
        assert_eq!(plans.kept(0).map(|p| p.period), Some(1));
        assert_eq!(plans.kept(100).map(|p| p.period), Some(100));
        // A plan made again for a content replaces the one kept.
        plans.keep(100, &program(7));
        assert_eq!(plans.kept(100).map(|p| p.period), Some(7));
        assert_eq!(plans.kept.len(), KEPT);
    }

    #[test]
    fn a_program_with_neither_step_nor_wait_is_followed_without_steps() {
        let mut plans = Plans::default();
        plans.follow(program(5), 1);
        assert!(!plans.active.as_ref().unwrap().steps);
        let mut offloads = program(5);
        offloads.after[3].push(crate::plan::program::Step::Evict {
            port: crate::plan::program::Port::Output(0),
        });
        plans.follow(offloads, 2);
        assert!(plans.active.as_ref().unwrap().steps);
        let mut waits = program(5);
        waits.fetch_waits[2].push(7);
        plans.follow(waits, 3);
        assert!(plans.active.as_ref().unwrap().steps);
    }

    #[test]
    fn a_plan_made_again_that_fits_no_better_ends_the_replans() {
        let mut plans = Plans::default();
        plans.keep(5, &unfit(900));
        assert_eq!(plans.replans_left(5), REPLANS);
        // A lower peak: the next iteration's trace helped; the replans go on, one used.
        plans.keep(5, &unfit(800));
        assert_eq!(plans.replans_left(5), REPLANS - 1);
        // No lower: the next would not help either.
        plans.keep(5, &unfit(800));
        assert_eq!(plans.replans_left(5), 0);
        // A first plan for another content has its own; none is left for a content not kept.
        plans.keep(6, &unfit(900));
        assert_eq!(plans.replans_left(6), REPLANS);
        assert_eq!(plans.replans_left(7), 0);
    }

    #[test]
    fn a_schedule_that_comes_back_does_not_get_its_replans_anew() {
        let mut plans = Plans::default();
        plans.keep(5, &unfit(900));
        plans.keep(5, &unfit(800));
        // The schedule leaves (a validation) and comes back: its plan is handed out, with
        // the replans it had left, and once they are used up none comes back.
        plans.forget();
        assert!(plans.kept(5).is_some());
        assert_eq!(plans.replans_left(5), REPLANS - 1);
        plans.keep(5, &unfit(700));
        plans.forget();
        assert!(plans.kept(5).is_some());
        assert_eq!(plans.replans_left(5), 0);
    }

    #[test]
    fn a_declined_plan_is_marked_until_made_anew() {
        let mut plans = Plans::default();
        plans.keep(5, &program(5));
        plans.keep(6, &program(6));
        plans.follow(program(5), 5);
        plans.decline(5);
        assert!(plans.active.is_none(), "the plan in force goes");
        assert_eq!(plans.replans_left(5), 0, "and is not made again");
        assert!(plans.declined(5) && !plans.declined(6));
        // Still kept, for a run that follows every plan.
        assert_eq!(plans.kept(5).map(|p| p.period), Some(5));
        assert_eq!(plans.kept(6).map(|p| p.period), Some(6));
        // Another schedule's plan in force stays.
        plans.follow(program(6), 6);
        plans.decline(5);
        assert!(plans.active.is_some());
        // A plan made again for the content is judged anew, and so is every plan once the
        // configuration changes.
        plans.keep(5, &program(5));
        assert!(!plans.declined(5));
        plans.decline(5);
        plans.clear_verdicts();
        assert!(!plans.declined(5));
        assert!(plans.kept(5).is_some());
        plans.clear_kept();
        assert!(plans.kept(5).is_none() && plans.kept(6).is_none());
    }

    #[test]
    fn a_plan_made_in_the_background_is_ready_later_with_its_schedule() {
        let mut plans = Plans::default();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        plans.start((5, 40), 9, true, move || {
            wait.recv().unwrap();
            program(5)
        });
        assert!(plans.making());
        // Not ready while the planner works: the op's thread does not wait for it.
        assert!(plans.ready().is_none());
        plans.note_iteration((5, 40));
        plans.note_iteration((6, 0));
        go.send(()).unwrap();
        let ready = wait_ready(&mut plans);
        assert_eq!((ready.key, ready.content, ready.waited), ((5, 40), 9, 1));
        assert_eq!(ready.made.map(|m| m.program.period), Some(5));
        assert!(!plans.making());
    }

    #[test]
    fn a_plan_abandoned_while_made_leaves_room_for_the_next_at_once() {
        let mut plans = Plans::default();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        plans.start((5, 40), 9, true, move || {
            let _ = wait.recv();
            program(5)
        });
        plans.abandon();
        assert!(!plans.making());
        assert!(plans.ready().is_none(), "an abandoned plan never arrives");
        // The next plan (here on the op's thread) is made and ready before the abandoned
        // one's thread is done.
        plans.start((7, 0), 11, false, || program(7));
        let ready = plans.ready().expect("made at once");
        assert_eq!((ready.key, ready.content), ((7, 0), 11));
        assert_eq!(ready.made.map(|m| m.program.period), Some(7));
        let _ = go.send(());
    }

    #[test]
    fn a_plan_made_on_the_op_thread_is_ready_at_once_and_a_panic_is_no_plan() {
        let mut plans = Plans::default();
        plans.start((3, 0), 1, false, || program(3));
        assert!(plans.ready().is_some_and(|r| r.made.is_some()));
        plans.start((3, 0), 1, true, || panic!("a planner bug"));
        let ready = wait_ready(&mut plans);
        assert!(ready.made.is_none());
    }
}
