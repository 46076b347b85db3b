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

/// One tensor's life in a log of ops, by op index in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Life {
    /// Its bytes.
    pub bytes: u64,
    /// The op that computed it; `None`: made before the log, or uploaded (a data loader's
    /// batch may be uploaded long before the iteration that reads it).
    pub made: Option<usize>,
    /// The op that ended it (its last use, or its drop); `None`: alive past the log.
    pub ended: Option<usize>,
}

/// Bytes by which the live bytes at consecutive boundaries may differ, or tensors live at a
/// boundary may outlive the next, without counting against a period: a part in this many of
/// the bytes live at the boundary, plus [`SLACK_BYTES`] (a loss kept every step).
const SLACK_PARTS: u64 = 1024;
/// See [`SLACK_PARTS`].
const SLACK_BYTES: u64 = 256;
/// Boundaries judged: the last of the stretch.
const JUDGED_BOUNDARIES: usize = 9;
/// A new period must explain at least a part in this many of the ops since the schedule in
/// force stopped holding (or of the log, without one): see [`explains_enough`].
const COVER_PARTS: u64 = 4;

/// Whether a periodic stretch covering `cover` ops explains enough of the `unexplained` ops
/// recorded since the schedule in force stopped holding to be taken as the loop's period:
/// an expression's few ops repeated inside one pass (a derivative's chain rule over two
/// operands of one shape) form short stretches among many other ops, and their tensors can
/// be too small for [`closes_iterations`] to tell; a training loop's two iterations are most
/// of what ran since it began.
pub fn explains_enough(cover: u64, unexplained: u64) -> bool {
    cover * COVER_PARTS >= unexplained
}

/// Whether the iterations that `period` places on a stretch of a log, from the boundary
/// `first` to `end`, are whole iterations of the training loop rather than a loop inside one
/// (an RNN's time steps, identical layers, an optimizer's per-parameter updates), which
/// repeat just as exactly while they run.
///
/// A training iteration ends with everything it computed for itself dead: what lives across
/// its boundary is what the next iteration reads and replaces (parameters, optimizer state),
/// so no tensor it computed and left live at a boundary outlives the next one, and the bytes
/// live at each boundary stay level. A loop inside the iteration breaks one or the other:
/// the forward pass's steps keep their activations for the backward pass (the bytes at each
/// boundary grow, and the activations outlive many boundaries), the backward pass's steps
/// free them (the bytes shrink), and an optimizer's steps leave the parameters not yet
/// updated live across many boundaries. A period is refused when the live bytes move the
/// same way at every pair of judged boundaries by more than the slack, or when at one of them
/// the computed tensors live there that end after the next hold more than the slack. (A
/// data loader's batches are uploads, not counted: one may be uploaded iterations ahead.)
///
/// `live_before[i]` is the bytes live before op `i` of the log; `lives` the tensors seen in
/// it (`None` skips the second test: the stretch was recorded without its tensors). The last
/// few boundaries `first`, `first + period`, ... before `end` are judged; with fewer than
/// two the period stands.
pub fn closes_iterations(
    period: usize,
    first: usize,
    end: usize,
    live_before: &[u64],
    lives: Option<&[Life]>,
) -> bool {
    if period == 0 {
        return true;
    }
    let all: Vec<usize> = (first..end.min(live_before.len()))
        .step_by(period)
        .collect();
    // The last few boundaries: what the loop does now, in time linear in the log.
    let boundaries = &all[all.len().saturating_sub(JUDGED_BOUNDARIES)..];
    if boundaries.len() < 2 {
        return true;
    }
    let slack = |b: usize| live_before[b] / SLACK_PARTS + SLACK_BYTES;
    let pairs = boundaries.windows(2);
    let grows = pairs
        .clone()
        .all(|w| live_before[w[1]] > live_before[w[0]] + slack(w[0]));
    let shrinks = pairs
        .clone()
        .all(|w| live_before[w[1]] + slack(w[0]) < live_before[w[0]]);
    if grows || shrinks {
        return false;
    }
    let Some(lives) = lives else {
        return true;
    };
    // Computed bytes live at each judged boundary (before its op) that end after the next.
    let judged = &boundaries[..boundaries.len() - 1];
    let mut outliving = vec![0u64; judged.len()];
    for life in lives {
        let (Some(made), Some(ended)) = (life.made, life.ended) else {
            continue;
        };
        for (k, &b) in judged.iter().enumerate() {
            if made < b && ended >= b + period {
                outliving[k] += life.bytes;
            }
        }
    }
    judged
        .iter()
        .zip(&outliving)
        .all(|(&b, &bytes)| bytes <= slack(b))
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

    /// Boundaries every `period` ops from 0 with the given live bytes at each (the ops
    /// between them at the level of the boundary before).
    fn levels(period: usize, at_boundaries: &[u64]) -> Vec<u64> {
        at_boundaries
            .iter()
            .flat_map(|&l| std::iter::repeat_n(l, period))
            .collect()
    }

    #[test]
    fn a_training_iteration_closes_and_loops_inside_it_do_not() {
        // Parameters (1,000 bytes) made by one iteration's update, read and replaced by the
        // next: live across one boundary each.
        let period = 8;
        let params = |k: usize| Life {
            bytes: 1000,
            made: Some(k * period + 3),
            ended: Some((k + 1) * period + 3),
        };
        let lives: Vec<Life> = (0..3).map(params).collect();
        let live = levels(period, &[1000, 1000, 1000, 1000]);
        assert!(closes_iterations(
            period,
            0,
            live.len(),
            &live,
            Some(&lives)
        ));
        // A loss kept every step: within the slack; a data loader's batch on either side of
        // the boundary: the bytes do not move one way.
        let live = levels(period, &[1000, 1004, 1008, 1012, 1016]);
        assert!(closes_iterations(
            period,
            0,
            live.len(),
            &live,
            Some(&lives)
        ));
        let live = levels(period, &[1000, 1200, 1000, 1200, 1000]);
        assert!(closes_iterations(
            period,
            0,
            live.len(),
            &live,
            Some(&lives)
        ));
        // The forward pass's steps: each keeps its activations (the bytes grow).
        let live = levels(period, &[1000, 1400, 1800, 2200]);
        assert!(!closes_iterations(period, 0, live.len(), &live, None));
        // The backward pass's steps free them (the bytes shrink).
        let live = levels(period, &[2200, 1800, 1400, 1000]);
        assert!(!closes_iterations(period, 0, live.len(), &live, None));
        // An optimizer's per-parameter steps with the bytes level: each updates one of
        // several parameters; the others stay live across many boundaries.
        // (The first iteration's ops made them; the loop starts at op 8.)
        let live = levels(period, &[3000, 3000, 3000, 3000, 3000]);
        let parameters: Vec<Life> = (0..3)
            .map(|j| Life {
                bytes: 1000,
                made: Some(j),
                ended: Some(8 + j * period + 1),
            })
            .collect();
        assert!(!closes_iterations(
            period,
            8,
            live.len(),
            &live,
            Some(&parameters)
        ));
        // The same without the tensors: only the level is judged.
        assert!(closes_iterations(period, 8, live.len(), &live, None));
    }

    #[test]
    fn a_short_stretch_among_many_ops_explains_too_little() {
        // Two iterations of a two-op loop among the 64 ops of a first training step.
        assert!(!explains_enough(4, 64));
        // Two training iterations and the start of a third since the loop began.
        assert!(explains_enough(400, 500));
        assert!(explains_enough(16, 64));
    }
}
