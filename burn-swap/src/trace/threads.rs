//! Whose ops the trace records: the training thread's.
//!
//! A training loop runs on one thread, but other threads reach the device too: a data
//! loader's workers build each batch there (uploads, reshapes, a stack, a padding mask: tens
//! to hundreds of ops per batch), a metrics thread reads the step's outputs. Where their ops
//! fall among the step's depends on thread timing, so a stream that holds them is not periodic
//! (the step's period is found late, or an inner loop of the step is taken for it, or none),
//! and what the layer decides would change from run to run. The trace therefore records the
//! ops of one thread, the one that issues most of them; the others' ops still run, and their
//! tensors are still in the books and under the budget, but they take no place in the
//! iteration: a tensor they made enters the trace at its first use by the training thread, as
//! an upload does.
//!
//! The training thread is judged at the end of each epoch of [`EPOCH`] ops of the device: a
//! thread that issued three quarters of them or more becomes it; one that issued less than a
//! quarter stops being it. Where ops of another thread were recorded before a thread was
//! judged to train, the trace starts anew (`Engine::trace_anew`), and until then no plan is
//! made from it ([`TrainingThread::mixed`]): a loader's few ops per item (an upload, a
//! reshape) repeat like a short loop, and a plan made for them would be followed in place of
//! the step. The epoch is long enough that a loader running a few batches ahead of the first
//! step does not pass for the training thread.
//! Until a thread has been judged so (and where several threads share the work evenly, as
//! data-parallel workers on one device do), every op is recorded. The judgement counts ops,
//! not time: it does not move with the load, and costs a few compares per op.

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering};

/// Ops of the device between two judgements.
pub(crate) const EPOCH: u32 = 4096;
/// Threads counted per epoch; the ops of any further thread are counted together.
const COUNTED: usize = 4;
/// The tag no thread has (an empty slot).
const NONE: u32 = 0;
/// The tag the ops of threads past [`COUNTED`] are counted under.
const OTHERS: u32 = u32::MAX;

static NEXT_TAG: AtomicU32 = AtomicU32::new(1);

thread_local! {
    static TAG: Cell<u32> = const { Cell::new(NONE) };
}

/// The calling thread's tag: a number no other thread of the process has.
#[inline]
pub(crate) fn current() -> u32 {
    TAG.with(|tag| match tag.get() {
        NONE => {
            let fresh = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
            tag.set(fresh);
            fresh
        }
        known => known,
    })
}

/// Which thread's ops are recorded, judged from the ops each thread issued.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrainingThread {
    /// The thread judged to train; `None`: every op is recorded.
    training: Option<u32>,
    /// Ops per thread in the epoch so far, by tag.
    counts: [(u32, u32); COUNTED],
    /// Ops in the epoch so far.
    seen: u32,
    /// The thread of the first op recorded since the training thread last changed, and
    /// whether an op of another thread was recorded since.
    first_recorded: u32,
    others_recorded: bool,
    /// Ops of other threads than the training thread left out of the trace.
    left_out: u64,
    /// Whether the training thread changed at the last judgement, until taken.
    changed: bool,
}

impl TrainingThread {
    /// Counts an op of `thread`; whether the trace records it.
    #[inline]
    pub(crate) fn records(&mut self, thread: u32) -> bool {
        self.count(thread);
        let recorded = self.training.is_none_or(|t| t == thread);
        if !recorded {
            self.left_out += 1;
        } else if self.first_recorded == NONE {
            self.first_recorded = thread;
        } else if thread != self.first_recorded {
            self.others_recorded = true;
        }
        recorded
    }

    /// Whether the trace mixes the ops of several threads with no thread judged to train yet:
    /// what repeats in it may be another thread's (a loader's per-item ops), so no plan is
    /// made from it.
    #[inline]
    pub(crate) fn mixed(&self) -> bool {
        self.training.is_none() && self.others_recorded
    }

    /// Whether a thread was judged to train, at the last judgement, while the ops recorded
    /// before it were not all its own (until taken): the trace recorded so far holds other
    /// ops than it will from now on.
    #[inline]
    pub(crate) fn take_change(&mut self) -> bool {
        core::mem::take(&mut self.changed)
    }

    /// The thread judged to train, if any.
    #[cfg(test)]
    pub(crate) fn training(&self) -> Option<u32> {
        self.training
    }

    /// Ops left out of the trace because another thread issued them.
    pub(crate) fn left_out(&self) -> u64 {
        self.left_out
    }

    #[inline]
    fn count(&mut self, thread: u32) {
        let slot = match self.counts.iter().position(|&(t, _)| t == thread) {
            Some(slot) => slot,
            None => match self.counts.iter().position(|&(t, _)| t == NONE) {
                Some(empty) => {
                    self.counts[empty].0 = thread;
                    empty
                }
                None => {
                    let last = COUNTED - 1;
                    self.counts[last].0 = OTHERS;
                    last
                }
            },
        };
        self.counts[slot].1 += 1;
        self.seen += 1;
        if self.seen >= EPOCH {
            self.judge();
        }
    }

    /// The epoch's judgement: the thread of three quarters of its ops trains; the thread that
    /// trained and issued less than a quarter of them no longer does.
    #[cold]
    fn judge(&mut self) {
        let ops = |thread: u32| {
            self.counts
                .iter()
                .find(|&&(t, _)| t == thread)
                .map_or(0, |&(_, n)| n)
        };
        let (top, most) = self
            .counts
            .iter()
            .copied()
            .filter(|&(t, _)| t != NONE && t != OTHERS)
            .max_by_key(|&(_, n)| n)
            .unwrap_or((NONE, 0));
        if most * 4 >= self.seen * 3 {
            if self.training != Some(top) {
                tracing::debug!(
                    thread = top,
                    "burn-swap: the training thread's ops are traced"
                );
                self.changed = self.others_recorded || self.first_recorded != top;
                self.first_recorded = top;
                self.others_recorded = false;
            }
            self.training = Some(top);
        } else if let Some(training) = self.training
            && ops(training) * 4 < self.seen
        {
            // What was recorded stays: the ops of every thread are recorded from now on.
            tracing::debug!("burn-swap: no training thread; every thread's ops are traced");
            self.training = None;
        }
        self.counts = [(NONE, 0); COUNTED];
        self.seen = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: &mut TrainingThread, threads: &[u32], times: usize) -> usize {
        (0..times)
            .flat_map(|_| threads.iter())
            .filter(|&&thread| t.records(thread))
            .count()
    }

    #[test]
    fn every_op_is_recorded_until_a_thread_is_judged_to_train() {
        let mut t = TrainingThread::default();
        let recorded = run(&mut t, &[1, 1, 1, 2], EPOCH as usize / 4 - 1);
        assert_eq!(recorded, EPOCH as usize - 4);
        assert_eq!(t.training(), None);
        assert!(t.mixed());
    }

    #[test]
    fn a_single_thread_judged_to_train_does_not_start_the_trace_anew() {
        let mut t = TrainingThread::default();
        assert!(!t.mixed());
        run(&mut t, &[3], EPOCH as usize);
        assert_eq!(t.training(), Some(3));
        assert!(!t.take_change() && !t.mixed());
    }

    #[test]
    fn a_loader_threads_ops_are_left_out_once_the_training_thread_is_judged() {
        let mut t = TrainingThread::default();
        // Thirty training ops for each two of a loader's.
        let pattern: Vec<u32> = (0..32).map(|i| if i % 16 == 3 { 7 } else { 5 }).collect();
        run(&mut t, &pattern, EPOCH as usize / 32);
        assert_eq!(t.training(), Some(5));
        assert!(t.take_change() && !t.take_change() && !t.mixed());
        let recorded = run(&mut t, &pattern, 10);
        assert_eq!(recorded, 300);
        assert_eq!(t.left_out(), 20);
    }

    #[test]
    fn threads_that_share_the_work_evenly_are_all_recorded() {
        let mut t = TrainingThread::default();
        run(&mut t, &[1, 2], EPOCH as usize * 3);
        assert_eq!(t.training(), None);
        assert!(!t.take_change());
        assert_eq!(t.left_out(), 0);
    }

    #[test]
    fn training_moves_to_a_new_thread_within_an_epoch_or_two() {
        let mut t = TrainingThread::default();
        run(&mut t, &[1], EPOCH as usize);
        assert_eq!(t.training(), Some(1));
        // A new thread takes over the training (a test after another): judged by the ops of
        // the epochs after.
        run(&mut t, &[2], 2 * EPOCH as usize);
        assert!(t.take_change(), "thread 1's ops were recorded");
        assert_eq!(t.training(), Some(2));
        assert!(t.records(2) && !t.records(1));
    }

    #[test]
    fn more_threads_than_counted_are_counted_together_and_never_train() {
        let mut t = TrainingThread::default();
        let many: Vec<u32> = (10..30).collect();
        run(&mut t, &many, EPOCH as usize);
        assert_eq!(t.training(), None);
    }

    #[test]
    fn each_thread_has_its_own_tag() {
        let here = current();
        assert_eq!(here, current());
        let there = std::thread::spawn(current).join().unwrap();
        assert_ne!(here, there);
        assert_ne!(here, NONE);
    }
}
