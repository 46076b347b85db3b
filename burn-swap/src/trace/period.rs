//! Finding the period of a training loop in its op signature stream.
//!
//! Training repeats one iteration. Its ops, identified by a signature (kind, dtypes and shapes;
//! never tensor ids, which are new every iteration), form a stream that becomes periodic once
//! the warm-up is over (the first iteration often differs: an optimizer creates its state in
//! its first step). [`detect`] finds the period that explains the longest periodic suffix of the
//! stream, in linear time, and [`phase`] places the iteration boundary where the fewest bytes
//! are live (between the optimizer's last update and the next batch), so that an iteration
//! carries in only what truly lives across iterations (parameters, optimizer state).

/// A periodic suffix of a signature stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Periodicity {
    /// The period, in ops.
    pub period: usize,
    /// The first index from which `s[i] == s[i + period]` holds to the end of the stream.
    pub start: usize,
}

/// Finds the period that makes the longest suffix of `signatures` periodic, requiring at least
/// two full repetitions (the last `period` signatures equal the `period` before them).
///
/// Among periods explaining equally long suffixes (a period and its multiples) the smallest
/// wins. A shorter repetition inside one iteration (identical layers) explains a shorter suffix
/// than the iteration itself once two iterations have been seen, so it loses.
///
/// Runs in `O(n)`: the run of trailing matches at shift `p` is the Z-function of the reversed
/// stream at `p`.
pub fn detect(signatures: &[u64]) -> Option<Periodicity> {
    let n = signatures.len();
    if n < 2 {
        return None;
    }
    let reversed: Vec<u64> = signatures.iter().rev().copied().collect();
    let z = z_function(&reversed);
    let mut best: Option<Periodicity> = None;
    let mut best_cover = 0;
    for (p, &run) in z.iter().enumerate().skip(1) {
        if run < p {
            continue;
        }
        let cover = run + p;
        if cover > best_cover {
            best_cover = cover;
            best = Some(Periodicity {
                period: p,
                start: n - cover,
            });
        }
    }
    best
}

/// A periodic stretch of a signature stream: `s[i] == s[i + period]` for `start <= i` and
/// `i + period < end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stretch {
    /// The period, in ops.
    pub period: usize,
    /// First index of the stretch.
    pub start: usize,
    /// One past its last index.
    pub end: usize,
}

impl Stretch {
    /// Ops the stretch covers.
    pub fn cover(&self) -> usize {
        self.end - self.start
    }
}

/// Finds the longest periodic stretch that ends at or near the end of the stream: the stream
/// may end with ops that break the period (the end of training frees the optimizer's state;
/// an evaluation pass follows), so [`detect`] is tried on the stream without its last `t` ops
/// for `t` = 0, 1, 2, 4, ... while two ops are left (or until a stretch covers 90% of the
/// stream), each stretch is extended as far as it
/// still holds, and the one that covers the most ops wins (the shortest period on ties).
///
/// Runs in `O(n log n)`.
pub fn detect_recent(signatures: &[u64]) -> Option<Stretch> {
    let n = signatures.len();
    let mut best: Option<Stretch> = None;
    let mut trim = 0;
    while trim + 2 <= n {
        if let Some(found) = detect(&signatures[..n - trim]) {
            let p = found.period;
            let mut end = n - trim;
            while end < n && signatures[end] == signatures[end - p] {
                end += 1;
            }
            let stretch = Stretch {
                period: p,
                start: found.start,
                end,
            };
            let better = match best {
                None => true,
                Some(b) => {
                    stretch.cover() > b.cover() || (stretch.cover() == b.cover() && p < b.period)
                }
            };
            if better {
                best = Some(stretch);
            }
        }
        // A stretch over 90% of the stream: shorter streams cannot do meaningfully better.
        if best.is_some_and(|b| b.cover() * 10 >= n * 9) {
            break;
        }
        trim = if trim == 0 { 1 } else { trim * 2 };
    }
    best
}

/// `z[i]` is the length of the longest common prefix of `s` and `s[i..]` (`z[0] = n`).
fn z_function(s: &[u64]) -> Vec<usize> {
    let n = s.len();
    let mut z = vec![0; n];
    if n == 0 {
        return z;
    }
    z[0] = n;
    let (mut left, mut right) = (0, 0);
    for i in 1..n {
        if i < right {
            z[i] = z[i - left].min(right - i);
        }
        while i + z[i] < n && s[z[i]] == s[i + z[i]] {
            z[i] += 1;
        }
        if i + z[i] > right {
            left = i;
            right = i + z[i];
        }
    }
    z
}

/// The iteration boundary: the index `b` in `[start, start + period)` before whose op the
/// fewest bytes are live (`live_before[b]`), the earliest on ties.
///
/// `live_before[i]` is the number of bytes live just before op `i` runs.
pub fn phase(periodicity: Periodicity, live_before: &[u64]) -> usize {
    let Periodicity { period, start } = periodicity;
    let end = (start + period).min(live_before.len());
    (start..end)
        .min_by_key(|&i| (live_before[i], i))
        .unwrap_or(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(s: &[u64]) -> Option<Periodicity> {
        let n = s.len();
        let mut best: Option<Periodicity> = None;
        let mut best_cover = 0;
        for p in 1..n {
            let mut run = 0;
            while run + p < n && s[n - 1 - run] == s[n - 1 - run - p] {
                run += 1;
            }
            if run >= p && run + p > best_cover {
                best_cover = run + p;
                best = Some(Periodicity {
                    period: p,
                    start: n - best_cover,
                });
            }
        }
        best
    }

    #[test]
    fn finds_iteration_length_with_warm_up_and_repeated_layers() {
        // warm-up ops, then an iteration of 3 identical "layers" (1,2) plus a loss and an
        // optimizer step, repeated 4 times, ending mid-iteration.
        let warm_up = [9u64, 8, 7];
        let iteration = [1u64, 2, 1, 2, 1, 2, 5, 6, 6, 6];
        let mut s: Vec<u64> = warm_up.to_vec();
        for _ in 0..4 {
            s.extend_from_slice(&iteration);
        }
        s.extend_from_slice(&iteration[..4]);
        let found = detect(&s).unwrap();
        assert_eq!(found.period, iteration.len());
        assert_eq!(found.start, warm_up.len());
        assert_eq!(Some(found), naive(&s));
    }

    #[test]
    fn first_iteration_with_extra_ops_is_excluded() {
        // The first iteration creates optimizer state (extra op 42) and so differs.
        let first = [1u64, 2, 3, 42, 42, 4];
        let rest = [1u64, 2, 3, 4];
        let mut s = first.to_vec();
        for _ in 0..3 {
            s.extend_from_slice(&rest);
        }
        let found = detect(&s).unwrap();
        assert_eq!(found.period, 4);
        assert_eq!(found.start, 5); // the trailing `4` of the first iteration already matches
    }

    #[test]
    fn no_period_in_a_stream_that_never_repeats() {
        let s: Vec<u64> = (0..100).collect();
        assert_eq!(detect(&s), None);
        assert_eq!(detect(&[]), None);
        assert_eq!(detect(&[3]), None);
    }

    #[test]
    fn matches_naive_search_on_pseudo_random_streams() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for case in 0..200 {
            let alphabet = 1 + case % 4;
            let len = 1 + case % 40;
            let s: Vec<u64> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state % alphabet as u64
                })
                .collect();
            assert_eq!(detect(&s), naive(&s), "{s:?}");
        }
    }

    #[test]
    fn a_tail_that_breaks_the_period_is_left_out() {
        // Four iterations, then the end of training frees state: a run of identical drops.
        let iteration = [1u64, 2, 3, 4, 5, 6, 7];
        let mut s = vec![0u64, 0];
        for _ in 0..4 {
            s.extend_from_slice(&iteration);
        }
        let periodic_end = s.len();
        s.extend(std::iter::repeat_n(99u64, 20));
        // The plain suffix detector sees only the drops.
        assert_eq!(detect(&s).map(|p| p.period), Some(1));
        let stretch = detect_recent(&s).unwrap();
        assert_eq!(stretch.period, iteration.len());
        assert_eq!(stretch.end, periodic_end);
        assert_eq!(stretch.start, 2);
        // Without a tail it is the suffix.
        let stretch = detect_recent(&s[..periodic_end]).unwrap();
        assert_eq!(
            (stretch.period, stretch.start, stretch.end),
            (7, 2, periodic_end)
        );
    }

    #[test]
    fn phase_is_where_fewest_bytes_live() {
        let p = Periodicity {
            period: 4,
            start: 2,
        };
        let live = [0, 0, 50, 70, 10, 60, 50, 70, 10, 60];
        assert_eq!(phase(p, &live), 4);
    }
}
