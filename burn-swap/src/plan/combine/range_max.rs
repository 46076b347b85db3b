//! Counted bytes per op that a planner raises over ranges of ops and asks the largest of:
//! each in `O(log n)` instead of a walk over the range.

use std::ops::Range;

/// Values over `0..n` with two operations, both over a range: add a constant, and the
/// largest value. A segment tree whose nodes hold their range's largest value, every add
/// that covers a node whole recorded at that node.
pub(super) struct RangeMax {
    /// Leaves start here (a power of two, at least one).
    leaves: usize,
    /// Node `i`'s largest value, the adds recorded at it and below included (padding
    /// leaves past `n` hold `i64::MIN`).
    max: Vec<i64>,
    /// What was added to node `i`'s range whole.
    added: Vec<i64>,
}

impl RangeMax {
    /// The values `values`, indexed from 0.
    pub(super) fn new(values: &[i64]) -> Self {
        let leaves = values.len().next_power_of_two().max(1);
        let mut max = vec![i64::MIN; 2 * leaves];
        max[leaves..leaves + values.len()].copy_from_slice(values);
        for i in (1..leaves).rev() {
            max[i] = max[2 * i].max(max[2 * i + 1]);
        }
        Self {
            leaves,
            max,
            added: vec![0; 2 * leaves],
        }
    }

    /// Adds `value` to every index of `range`.
    pub(super) fn add(&mut self, range: Range<usize>, value: i64) {
        if !range.is_empty() {
            self.add_at(1, 0..self.leaves, &range, value);
        }
    }

    /// The largest value over `range`; `None` for an empty range.
    pub(super) fn max(&self, range: Range<usize>) -> Option<i64> {
        (!range.is_empty()).then(|| self.max_at(1, 0..self.leaves, &range))
    }

    fn add_at(&mut self, node: usize, span: Range<usize>, range: &Range<usize>, value: i64) {
        if range.end <= span.start || span.end <= range.start {
            return;
        }
        if range.start <= span.start && span.end <= range.end {
            self.max[node] = self.max[node].saturating_add(value);
            self.added[node] += value;
            return;
        }
        let mid = span.start + (span.end - span.start) / 2;
        self.add_at(2 * node, span.start..mid, range, value);
        self.add_at(2 * node + 1, mid..span.end, range, value);
        self.max[node] = self.max[2 * node]
            .max(self.max[2 * node + 1])
            .saturating_add(self.added[node]);
    }

    fn max_at(&self, node: usize, span: Range<usize>, range: &Range<usize>) -> i64 {
        if range.end <= span.start || span.end <= range.start {
            return i64::MIN;
        }
        if range.start <= span.start && span.end <= range.end {
            return self.max[node];
        }
        let mid = span.start + (span.end - span.start) / 2;
        self.max_at(2 * node, span.start..mid, range)
            .max(self.max_at(2 * node + 1, mid..span.end, range))
            .saturating_add(self.added[node])
    }
}

/// `range` of ops numbered on into the following iterations, as ranges of this
/// iteration's ops (`ops` of them): split where it crosses an iteration's end.
pub(super) fn wrapped(
    range: Range<usize>,
    ops: usize,
) -> impl Iterator<Item = Range<usize>> + Clone {
    let (mut start, end) = (range.start, range.end);
    std::iter::from_fn(move || {
        if start >= end || ops == 0 {
            return None;
        }
        let first = start % ops;
        let len = (ops - first).min(end - start);
        start += len;
        Some(first..first + len)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn adds_and_maxima_over_ranges_match_a_walk_over_the_values() {
        let mut rng = SplitMix64::new(7);
        for n in [1, 2, 3, 7, 64, 100] {
            let mut values: Vec<i64> = (0..n).map(|_| rng.below(1000) as i64 - 500).collect();
            let mut tree = RangeMax::new(&values);
            for _ in 0..2000 {
                let (a, b) = (rng.below(n + 1), rng.below(n + 1));
                let range = a.min(b)..a.max(b);
                if rng.chance(0.5) {
                    let value = rng.below(200) as i64 - 100;
                    tree.add(range.clone(), value);
                    values[range].iter_mut().for_each(|v| *v += value);
                } else {
                    assert_eq!(
                        tree.max(range.clone()),
                        values[range.clone()].iter().copied().max(),
                        "n {n}, range {range:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_range_past_the_iteration_wraps_into_its_ops() {
        let split = |r, ops| wrapped(r, ops).collect::<Vec<_>>();
        assert_eq!(split(2..5, 10), vec![2..5]);
        assert_eq!(split(8..13, 10), vec![8..10, 0..3]);
        assert_eq!(split(12..15, 10), vec![2..5]);
        assert_eq!(split(5..5, 10), Vec::<Range<usize>>::new());
        assert_eq!(split(3..26, 10), vec![3..10, 0..10, 0..6]);
    }
}
