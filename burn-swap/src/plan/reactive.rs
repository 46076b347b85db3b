//! The reactive policy: what leaves the device, and how, when an op would exceed the budget.
//!
//! Pure functions of what the executor knows (the candidates, the bytes to free, the current
//! op index); none touches a device:
//!
//! - [`leaves`]: whether a resident tensor may leave now, and how (offload or recompute);
//! - [`choose_victims`]: which of them go first;
//! - [`RoomStep`]: the order in which room is made (transfers in flight first).

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

/// Orders `candidates` so that the victims come first and returns how many of them to offload
/// to free at least `deficit` bytes, or `None` when all of them together free less.
///
/// Deterministic: ties are broken by the smaller key.
pub fn choose_victims(
    candidates: &mut [Candidate],
    deficit: u64,
    now: u64,
    policy: EvictionScore,
    link: &LinkModel,
) -> Option<usize> {
    if deficit == 0 {
        return Some(0);
    }
    let total: u64 = candidates.iter().map(|c| c.bytes).sum();
    if total < deficit {
        return None;
    }
    // Each score once (a comparison sort would compute two per comparison), then the
    // candidates in the order of their scores.
    let mut scored: Vec<((f64, f64), Candidate)> = candidates
        .iter()
        .map(|c| (score(c, now, policy, link), *c))
        .collect();
    scored.sort_by(|(sa, a), (sb, b)| {
        sb.partial_cmp(sa)
            .unwrap_or(core::cmp::Ordering::Equal)
            .then(a.key.cmp(&b.key))
    });
    for (slot, (_, c)) in candidates.iter_mut().zip(scored) {
        *slot = c;
    }
    let mut freed = 0;
    for (i, c) in candidates.iter().enumerate() {
        freed += c.bytes;
        if freed >= deficit {
            return Some(i + 1);
        }
    }
    None
}

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

    #[test]
    fn frees_at_least_the_deficit_or_reports_impossible() {
        let link = LinkModel::default();
        let mut cands = vec![c(1, 100, 5), c(2, 300, 1), c(3, 50, 9)];
        let n = choose_victims(&mut cands, 350, 10, EvictionScore::Lru, &link).unwrap();
        let freed: u64 = cands[..n].iter().map(|c| c.bytes).sum();
        assert!(freed >= 350);
        assert_eq!(cands[0].key, 2, "least recently used first");
        assert_eq!(
            choose_victims(&mut cands, 451, 10, EvictionScore::Lru, &link),
            None
        );
        assert_eq!(
            choose_victims(&mut cands, 0, 10, EvictionScore::Lru, &link),
            Some(0)
        );
    }

    #[test]
    fn dtr_prefers_large_stale_tensors_over_tiny_ones() {
        let link = LinkModel::default();
        // Equally stale: the tiny tensor costs mostly latency, so the large one goes first.
        let mut cands = vec![c(1, 64, 0), c(2, 64 << 20, 0)];
        choose_victims(&mut cands, 1, 10, EvictionScore::Dtr, &link).unwrap();
        assert_eq!(cands[0].key, 2);
        // Equally large: the staler goes first.
        let mut cands = vec![c(1, 1 << 20, 8), c(2, 1 << 20, 2)];
        choose_victims(&mut cands, 1, 10, EvictionScore::Dtr, &link).unwrap();
        assert_eq!(cands[0].key, 2);
    }

    #[test]
    fn largest_first() {
        let link = LinkModel::default();
        let mut cands = vec![c(1, 10, 0), c(2, 30, 9), c(3, 20, 0)];
        let n = choose_victims(&mut cands, 25, 10, EvictionScore::Largest, &link).unwrap();
        assert_eq!(n, 1);
        assert_eq!(cands[0].key, 2);
    }
}
