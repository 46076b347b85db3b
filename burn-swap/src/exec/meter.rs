//! What the iterations of each schedule cost beyond their ops, measured on the op's thread:
//! the time the ops waited on transfers, spent recomputing and (the fallback) spent choosing
//! what leaves, from one iteration end to the next, with the iteration's wall time. The
//! reactive fallback's figure is kept per schedule for `plan::payoff` to judge each plan
//! against; a plan's own is handed back to the caller.
//!
//! Both sides are judged by the same figure: the least an iteration cost among the latest
//! few ([`lowest`]). What an iteration costs beyond its ops is a steady part plus one-off
//! stretches, all of them positive: a host buffer of a size not copied before (its pages
//! faulted in on the first copy), a worker's thread descheduled, a page of the trace grown.
//! A new plan copies other tensors than the fallback did, so its first iterations pay such
//! stretches that later ones do not (measured on the conv net at half its peak, in the debug
//! build: 0.62, 0.18, 0.14, 0.10, 0.09 ms over its first five iterations against the
//! fallback's steady 0.08-0.11 ms), and a mean over its first iterations declined a plan
//! that pays in one run of two. The least of a few iterations is their steady part.
//!
//! An iteration is measured only between two ends of the same schedule under the same
//! steering (a plan followed throughout, or none): one whose schedule or plan changed in
//! its course cannot be told apart from its neighbours.

use std::time::Instant;

use crate::plan::payoff::IterationCost;

/// Schedules whose fallback cost is kept (the least recently measured goes first).
const KEPT: usize = 16;

/// Iterations a fallback's figure is the least of (the latest ones).
pub(crate) const WINDOW: usize = 4;

/// An iteration end, as the meter saw it.
#[derive(Debug, Clone, Copy)]
struct Mark {
    content: u64,
    spent_nanos: u64,
    at: Instant,
    /// Whether a plan steers the iteration that starts here.
    planned: bool,
}

/// The fallback's latest iterations on one schedule.
#[derive(Debug, Clone, Copy)]
struct Measured {
    content: u64,
    /// The latest [`WINDOW`] iterations, the oldest overwritten first.
    latest: [IterationCost; WINDOW],
    /// Iterations measured (the first `min(iterations, WINDOW)` of `latest` are filled).
    iterations: usize,
    used: u64,
}

/// One iteration, measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Iteration {
    pub cost: IterationCost,
    /// Whether a plan steered it from its start to its end.
    pub planned: bool,
}

/// The iteration costs of one device.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    mark: Option<Mark>,
    fallback: Vec<Measured>,
    clock: u64,
}

impl Meter {
    /// Closes the iteration of schedule `content` that ends now: `spent_nanos` is the
    /// device's running total of time waited and recomputed, `planned` whether a plan
    /// steers it now. Returns it when it began at an end of the same schedule under the
    /// same steering, and keeps it as the schedule's fallback figure when no plan steered it.
    pub fn close(&mut self, content: u64, spent_nanos: u64, planned: bool) -> Option<Iteration> {
        let mark = self.mark.take()?;
        if mark.content != content || mark.planned != planned || spent_nanos < mark.spent_nanos {
            return None;
        }
        let cost = IterationCost {
            seconds: (spent_nanos - mark.spent_nanos) as f64 * 1e-9,
            iteration_seconds: mark.at.elapsed().as_secs_f64(),
        };
        if !planned {
            self.keep_fallback(content, cost);
        }
        Some(Iteration { cost, planned })
    }

    /// Marks the start of the next iteration of schedule `content`, at `spent_nanos` of the
    /// running total; `planned`: whether a plan steers it.
    pub fn open(&mut self, content: u64, spent_nanos: u64, planned: bool) {
        self.mark = Some(Mark {
            content,
            spent_nanos,
            at: Instant::now(),
            planned,
        });
    }

    /// Forgets the iteration under way (its schedule or steering changed in its course).
    pub fn interrupt(&mut self) {
        self.mark = None;
    }

    /// The reactive fallback's measured cost per iteration on schedule `content` (the
    /// least of its latest [`WINDOW`] iterations), if any of its iterations was measured.
    pub fn fallback(&self, content: u64) -> Option<IterationCost> {
        self.fallback
            .iter()
            .find(|m| m.content == content)
            .and_then(|m| lowest(&m.latest[..m.iterations.min(WINDOW)]))
    }

    /// Adds a fallback iteration to the schedule's latest ones.
    fn keep_fallback(&mut self, content: u64, cost: IterationCost) {
        self.clock += 1;
        if let Some(measured) = self.fallback.iter_mut().find(|m| m.content == content) {
            measured.latest[measured.iterations % WINDOW] = cost;
            measured.iterations += 1;
            measured.used = self.clock;
            return;
        }
        if self.fallback.len() >= KEPT
            && let Some(oldest) = (0..self.fallback.len()).min_by_key(|&i| self.fallback[i].used)
        {
            self.fallback.swap_remove(oldest);
        }
        self.fallback.push(Measured {
            content,
            latest: [cost; WINDOW],
            iterations: 1,
            used: self.clock,
        });
    }
}

/// The iteration that cost least beyond its ops among `iterations` (a cost that is not a
/// number counts as the most), `None` for none.
pub(crate) fn lowest(iterations: &[IterationCost]) -> Option<IterationCost> {
    iterations.iter().copied().min_by(|a, b| {
        let key = |c: &IterationCost| {
            if c.seconds.is_nan() {
                f64::INFINITY
            } else {
                c.seconds
            }
        };
        key(a).total_cmp(&key(b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_iteration_is_measured_between_two_ends_of_its_schedule() {
        let mut meter = Meter::default();
        assert_eq!(meter.close(7, 0, false), None, "no end seen before");
        meter.open(7, 100, false);
        let iteration = meter.close(7, 2_100, false).expect("measured");
        assert!(!iteration.planned);
        assert!((iteration.cost.seconds - 2e-6).abs() < 1e-12);
        assert!(iteration.cost.iteration_seconds >= 0.0);
        assert_eq!(
            meter.fallback(7).map(|c| c.seconds),
            Some(iteration.cost.seconds)
        );
        assert_eq!(meter.fallback(8), None);
    }

    #[test]
    fn a_changed_schedule_or_steering_or_a_reset_total_is_not_measured() {
        let mut meter = Meter::default();
        meter.open(7, 100, false);
        assert_eq!(meter.close(8, 200, false), None, "another schedule");
        meter.open(7, 100, false);
        assert_eq!(
            meter.close(7, 200, true),
            None,
            "a plan took over in its course"
        );
        meter.open(7, 100, false);
        assert_eq!(meter.close(7, 50, false), None, "the total went back");
        meter.open(7, 100, false);
        meter.interrupt();
        assert_eq!(meter.close(7, 200, false), None, "interrupted");
        assert_eq!(meter.fallback(7), None);
    }

    #[test]
    fn a_planned_iteration_is_handed_back_not_kept_as_the_fallback() {
        let mut meter = Meter::default();
        meter.open(7, 0, true);
        let iteration = meter.close(7, 5_000, true).expect("measured");
        assert!(iteration.planned);
        assert_eq!(meter.fallback(7), None);
    }

    #[test]
    fn the_fallback_figure_is_the_least_of_its_latest_iterations() {
        let mut meter = Meter::default();
        let mut total = 0;
        let mut seconds = Vec::new();
        for nanos in [3_000, 1_000, 2_000, 2_000, 4_000, 5_000, 6_000] {
            meter.open(7, total, false);
            total += nanos;
            meter.close(7, total, false);
            seconds.push(meter.fallback(7).unwrap().seconds);
        }
        // The least of the latest four: the 1 us iteration until four came after it.
        let expected = [3e-6, 1e-6, 1e-6, 1e-6, 1e-6, 2e-6, 2e-6];
        for (got, want) in seconds.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12, "{seconds:?}");
        }
    }

    #[test]
    fn the_lowest_cost_ignores_figures_that_are_not_numbers() {
        let cost = |seconds| IterationCost {
            seconds,
            iteration_seconds: 1.0,
        };
        assert_eq!(lowest(&[]), None);
        assert_eq!(
            lowest(&[cost(2.0), cost(f64::NAN), cost(1.0)]),
            Some(cost(1.0))
        );
        assert!(lowest(&[cost(f64::NAN)]).unwrap().seconds.is_nan());
    }

    #[test]
    fn the_least_recently_measured_schedule_goes_first() {
        let mut meter = Meter::default();
        for content in 0..KEPT as u64 + 1 {
            meter.open(content, 0, false);
            meter.close(content, 10, false);
        }
        assert_eq!(meter.fallback(0), None);
        assert!(meter.fallback(1).is_some());
        assert!(meter.fallback(KEPT as u64).is_some());
    }
}
