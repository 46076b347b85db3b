//! The reactive policy: what leaves the device, and how, when an op would exceed the budget.
//!
//! Pure functions of what the executor knows (the candidates, the bytes to free, the current
//! op index); none touches a device:
//!
//! - [`leaves`]: whether a resident tensor may leave now, and how (offload or recompute);
//! - [`choose_victims`]: which of them go first;
//! - [`room_goal`]: how much room made for an op frees;
//! - [`RoomStep`]: the order in which room is made (transfers in flight first).

use std::collections::BinaryHeap;

use crate::config::EvictionScore;

/// How a tensor leaves the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// Copied off the device, and fetched back before its next use.
    Offload,
    /// Dropped, and recomputed from its recipe before its next use.
    Recompute,
}

/// What the executor knows of a tensor when room is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VictimFacts {
    /// It is resident and no transfer of it is in flight.
    pub resident: bool,
    /// The op being made room for uses it, or it is being brought back for that op.
    pub in_use: bool,
    /// Its layout may be strided, so that a fetch would not restore it bit for bit.
    pub strided: bool,
    /// Strided, but its buffer is its own and the backend makes the same view of it again
    /// after an offload.
    pub restorable: bool,
    /// It has a recipe.
    pub has_recipe: bool,
    /// It has no recipe yet, but the op that made it can still be replayed.
    pub rebuildable: bool,
    /// Host memory can take its bytes under the host budget.
    pub host_has_room: bool,
}

/// Whether a tensor may leave now to make room, and how: a contiguous one (or a strided one
/// whose layout comes back with its buffer) by offload while the host has room for it, else
/// (and any other strided one) by recomputation when it has (or can get) a recipe; never
/// one in use or in flight.
pub fn leaves(facts: &VictimFacts) -> Option<Leave> {
    if !facts.resident || facts.in_use {
        None
    } else if (!facts.strided || facts.restorable) && facts.host_has_room {
        Some(Leave::Offload)
    } else if facts.has_recipe || facts.rebuildable {
        Some(Leave::Recompute)
    } else {
        None
    }
}

/// The steps of making room, in order: each is taken only while the room is still short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomStep {
    /// Wait for the offloads in flight: they free their bytes when they land.
    AwaitOffloads,
    /// Move the victims [`choose_victims`] picks off the device, on the op's thread.
    Evict,
    /// Wait for every transfer in flight: fetches hold room that only they give back.
    AwaitEverything,
    /// Choose and move victims again, among what the transfers left.
    EvictAgain,
}

impl RoomStep {
    /// The first step.
    pub const FIRST: RoomStep = RoomStep::AwaitOffloads;

    /// The step after this one, given whether its eviction succeeded and whether transfers
    /// are still in flight; `None` when there is nothing more to try.
    pub fn next(self, evicted: bool, in_flight: bool) -> Option<RoomStep> {
        match self {
            RoomStep::AwaitOffloads => Some(RoomStep::Evict),
            RoomStep::Evict if !evicted && in_flight => Some(RoomStep::AwaitEverything),
            RoomStep::AwaitEverything => Some(RoomStep::EvictAgain),
            RoomStep::Evict | RoomStep::EvictAgain => None,
        }
    }
}

/// Room made for an op frees at least this share of the budget (its inverse) when more than
/// the op's deficit can leave: see [`room_goal`].
pub const HEADROOM_DIVISOR: u64 = 16;

/// How many bytes room made for an op aims to free: the op's `deficit`, and at least a
/// [`HEADROOM_DIVISOR`]th of the `budget` when more can leave (only the deficit must).
///
/// Each room made lists and ranks every tensor that may leave, so ops in a row each a few
/// bytes short would pay that pass each; the victims taken beyond the deficit are the
/// stalest ones, which the next ops would have sent away anyway. Measured on `swap-bench`'s
/// 12-block transformer at a third of its peak: the fallback's search 4.5 times shorter, for
/// 2% more bytes moved; on the MLP, LSTM, GPT and BatchNorm CNN at a half and a quarter,
/// the bytes moved within -6% and +3% (the book's *Results*).
pub fn room_goal(deficit: u64, budget: u64) -> u64 {
    if deficit == 0 {
        0
    } else {
        deficit.max(budget / HEADROOM_DIVISOR)
    }
}

/// A resident tensor that may leave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Caller's key for the tensor.
    pub key: u64,
    /// Its size.
    pub bytes: u64,
    /// Global index of the last op that used (or made) it.
    pub last_use: u64,
    /// How it leaves ([`leaves`]).
    pub leave: Leave,
}

/// The cost model of one offload: a copy out now and a copy back later.
///
/// The reactive policy scores with the [`Default`] model, never with links measured: the
/// planned policy falls back on the reactive policy where no plan is followed (before the
/// first plan, where a plan is declined or none fits), and its plans are judged against
/// that fallback as measured before the links were. Scoring with the measured model would
/// make the fallback another policy from then on, judged by figures it did not earn: on
/// `swap-bench`'s LSTM at a quarter of its peak, the model fitted on a host-memory backend
/// (54 µs a copy, where a worker's hand-over dominates; 26 GB/s) sent larger tensors
/// (75 KB a copy on average, against 33 KB) and moved 2.4 times the bytes per step of the
/// reactive policy (the book's *Results*).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkModel {
    /// Bytes per second of one copy.
    pub bandwidth: f64,
    /// Fixed seconds per copy.
    pub latency: f64,
}

impl Default for LinkModel {
    /// A PCIe-class host link: 10 GB/s and 10 µs per copy. Only the ratio of latency to
    /// bandwidth matters to the scores.
    fn default() -> Self {
        Self {
            bandwidth: 10e9,
            latency: 10e-6,
        }
    }
}

impl LinkModel {
    /// Seconds for a round trip (offload and fetch) of `bytes`.
    pub fn round_trip(&self, bytes: u64) -> f64 {
        2.0 * (self.latency + bytes as f64 / self.bandwidth)
    }
}

/// The score of a candidate: higher is offloaded first.
///
/// - DTR ([`EvictionScore::Dtr`]) scores `staleness × bytes / round_trip(bytes)`, DTR's
///   `cost / (memory × staleness)` inverted, with the round-trip copy as the cost. For large
///   tensors it tends to `staleness × bandwidth / 2` (least recently used first); tiny
///   tensors, whose copies are mostly latency, go last.
/// - LRU ([`EvictionScore::Lru`]) scores `staleness`.
/// - Largest ([`EvictionScore::Largest`]) scores `bytes`, then staleness.
pub fn score(c: &Candidate, now: u64, policy: EvictionScore, link: &LinkModel) -> (f64, f64) {
    let staleness = (now.saturating_sub(c.last_use) + 1) as f64;
    match policy {
        EvictionScore::Dtr => (staleness * c.bytes as f64 / link.round_trip(c.bytes), 0.0),
        EvictionScore::Lru => (staleness, c.bytes as f64),
        EvictionScore::Largest => (c.bytes as f64, staleness),
    }
}

/// The candidates in the order they leave, victims first, or `None` when all of them
/// together free less than `deficit` bytes. The caller takes them one by one until it has
/// freed the deficit (a victim may free less than its size, or fail to leave; the next one
/// is then taken).
///
/// Deterministic: higher scores first ([`score`]), ties broken by the smaller key; a score
/// that is not a number goes last. Only the victims taken are ordered: the scores are
/// computed once, heaped in linear time, and each victim costs a logarithmic step, so that
/// room made for one op among thousands of residents does not sort them all.
pub fn choose_victims(
    candidates: &[Candidate],
    deficit: u64,
    now: u64,
    policy: EvictionScore,
    link: &LinkModel,
) -> Option<Victims> {
    let total: u64 = candidates.iter().map(|c| c.bytes).sum();
    if total < deficit {
        return None;
    }
    let ranked: Vec<Ranked> = if deficit == 0 {
        Vec::new()
    } else {
        candidates
            .iter()
            .map(|c| {
                let (first, second) = score(c, now, policy, link);
                let sane = |v: f64| if v.is_nan() { f64::NEG_INFINITY } else { v };
                Ranked {
                    score: (sane(first), sane(second)),
                    candidate: *c,
                }
            })
            .collect()
    };
    Some(Victims {
        heap: BinaryHeap::from(ranked),
    })
}

/// The candidates in the order they leave ([`choose_victims`]).
#[derive(Debug)]
pub struct Victims {
    heap: BinaryHeap<Ranked>,
}

impl Iterator for Victims {
    type Item = Candidate;

    fn next(&mut self) -> Option<Candidate> {
        self.heap.pop().map(|r| r.candidate)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.heap.len(), Some(self.heap.len()))
    }
}

/// A candidate and its score, ordered as victims leave: the greater leaves first.
#[derive(Debug)]
struct Ranked {
    /// Never a NaN ([`choose_victims`] maps one to minus infinity).
    score: (f64, f64),
    candidate: Candidate,
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.score
            .0
            .total_cmp(&other.score.0)
            .then(self.score.1.total_cmp(&other.score.1))
            // The smaller key is the greater: it leaves first.
            .then(other.candidate.key.cmp(&self.candidate.key))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Ranked {}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(key: u64, bytes: u64, last_use: u64) -> Candidate {
        Candidate {
            key,
            bytes,
            last_use,
            leave: Leave::Offload,
        }
    }

    fn facts() -> VictimFacts {
        VictimFacts {
            resident: true,
            in_use: false,
            strided: false,
            restorable: false,
            has_recipe: false,
            rebuildable: false,
            host_has_room: true,
        }
    }

    #[test]
    fn contiguous_tensors_offload_and_strided_ones_recompute_when_they_can() {
        assert_eq!(leaves(&facts()), Some(Leave::Offload));
        let strided = VictimFacts {
            strided: true,
            ..facts()
        };
        assert_eq!(leaves(&strided), None, "no recipe, nothing to replay");
        for f in [
            VictimFacts {
                has_recipe: true,
                ..strided
            },
            VictimFacts {
                rebuildable: true,
                ..strided
            },
        ] {
            assert_eq!(leaves(&f), Some(Leave::Recompute));
        }
        let restorable = VictimFacts {
            restorable: true,
            has_recipe: true,
            ..strided
        };
        assert_eq!(
            leaves(&restorable),
            Some(Leave::Offload),
            "its layout comes back"
        );
        let full = VictimFacts {
            host_has_room: false,
            ..restorable
        };
        assert_eq!(leaves(&full), Some(Leave::Recompute));
        for f in [
            VictimFacts {
                in_use: true,
                ..facts()
            },
            VictimFacts {
                resident: false,
                ..facts()
            },
        ] {
            assert_eq!(leaves(&f), None);
        }
    }

    #[test]
    fn a_full_host_leaves_recomputation_only() {
        let full = VictimFacts {
            host_has_room: false,
            ..facts()
        };
        assert_eq!(leaves(&full), None, "no recipe and no room on the host");
        let with_recipe = VictimFacts {
            has_recipe: true,
            ..full
        };
        assert_eq!(leaves(&with_recipe), Some(Leave::Recompute));
    }

    #[test]
    fn room_for_an_op_leaves_headroom_of_a_sixteenth_of_the_budget() {
        assert_eq!(room_goal(0, 1600), 0, "nothing short, nothing freed");
        assert_eq!(room_goal(1, 1600), 100);
        assert_eq!(room_goal(100, 1600), 100);
        assert_eq!(
            room_goal(700, 1600),
            700,
            "a deficit above the headroom is freed whole"
        );
        assert_eq!(
            room_goal(5, 10),
            5,
            "a budget under 16 bytes leaves no headroom"
        );
    }

    #[test]
    fn room_is_made_by_waiting_first_and_evicting_again_only_after_transfers_land() {
        let first = RoomStep::FIRST;
        assert_eq!(first, RoomStep::AwaitOffloads);
        assert_eq!(first.next(true, true), Some(RoomStep::Evict));
        assert_eq!(RoomStep::Evict.next(true, true), None);
        assert_eq!(RoomStep::Evict.next(false, false), None);
        assert_eq!(
            RoomStep::Evict.next(false, true),
            Some(RoomStep::AwaitEverything)
        );
        assert_eq!(
            RoomStep::AwaitEverything.next(true, false),
            Some(RoomStep::EvictAgain)
        );
        assert_eq!(RoomStep::EvictAgain.next(false, true), None);
    }

    /// The first victims that free `deficit`, as keys.
    fn taken(cands: &[Candidate], deficit: u64, policy: EvictionScore) -> Option<Vec<u64>> {
        let mut freed = 0;
        let victims = choose_victims(cands, deficit, 10, policy, &LinkModel::default())?;
        Some(
            victims
                .take_while(|c| {
                    let more = freed < deficit;
                    freed += c.bytes;
                    more
                })
                .map(|c| c.key)
                .collect(),
        )
    }

    #[test]
    fn frees_at_least_the_deficit_or_reports_impossible() {
        let cands = vec![c(1, 100, 5), c(2, 300, 1), c(3, 50, 9)];
        assert_eq!(
            taken(&cands, 350, EvictionScore::Lru),
            Some(vec![2, 1]),
            "least recently used first"
        );
        assert_eq!(taken(&cands, 451, EvictionScore::Lru), None);
        assert_eq!(taken(&cands, 0, EvictionScore::Lru), Some(vec![]));
        assert_eq!(taken(&[], 0, EvictionScore::Lru), Some(vec![]));
    }

    #[test]
    fn dtr_prefers_large_stale_tensors_over_tiny_ones() {
        // Equally stale: the tiny tensor costs mostly latency, so the large one goes first.
        let cands = vec![c(1, 64, 0), c(2, 64 << 20, 0)];
        assert_eq!(taken(&cands, 1, EvictionScore::Dtr), Some(vec![2]));
        // Equally large: the staler goes first.
        let cands = vec![c(1, 1 << 20, 8), c(2, 1 << 20, 2)];
        assert_eq!(taken(&cands, 1, EvictionScore::Dtr), Some(vec![2]));
    }

    #[test]
    fn largest_first() {
        let cands = vec![c(1, 10, 0), c(2, 30, 9), c(3, 20, 0)];
        assert_eq!(taken(&cands, 25, EvictionScore::Largest), Some(vec![2]));
    }

    #[test]
    fn victims_leave_in_the_order_of_a_full_sort_of_their_scores() {
        // Many candidates with colliding sizes and ages: every victim, in turn, is the one a
        // stable sort by score (ties by key) puts next.
        let link = LinkModel {
            bandwidth: 1e9,
            latency: 20e-6,
        };
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for policy in [
            EvictionScore::Dtr,
            EvictionScore::Lru,
            EvictionScore::Largest,
        ] {
            let cands: Vec<Candidate> = (0..500)
                .map(|_| c(next() % 1000, 1 << (next() % 12), next() % 40))
                .collect();
            let mut sorted = cands.clone();
            sorted.sort_by(|a, b| {
                let (sa, sb) = (score(a, 50, policy, &link), score(b, 50, policy, &link));
                sb.partial_cmp(&sa).unwrap().then(a.key.cmp(&b.key))
            });
            let order: Vec<Candidate> = choose_victims(&cands, 1, 50, policy, &link)
                .unwrap()
                .collect();
            assert_eq!(order, sorted, "{policy:?}");
        }
    }

    #[test]
    fn a_score_that_is_not_a_number_goes_last() {
        // A link without latency scores the round trip of an empty tensor as 0/0.
        let link = LinkModel {
            bandwidth: 1e9,
            latency: 0.0,
        };
        let cands = vec![c(1, 0, 0), c(2, 8, 9), c(3, 8, 0)];
        let order: Vec<u64> = choose_victims(&cands, 1, 10, EvictionScore::Dtr, &link)
            .unwrap()
            .map(|c| c.key)
            .collect();
        assert_eq!(order, vec![3, 2, 1]);
    }
}
