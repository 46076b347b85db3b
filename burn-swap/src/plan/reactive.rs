//! The reactive policy's choice of what to offload when an op would exceed the budget.
//!
//! A pure function of the candidates (resident tensors the op does not use), the bytes to free
//! and the current op index; it never touches a device.

use crate::config::EvictionScore;

/// A resident tensor that may be offloaded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Caller's key for the tensor.
    pub key: u64,
    /// Its size.
    pub bytes: u64,
    /// Global index of the last op that used (or made) it.
    pub last_use: u64,
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
    candidates.sort_by(|a, b| {
        let (sa, sb) = (score(a, now, policy, link), score(b, now, policy, link));
        sb.partial_cmp(&sa)
            .unwrap_or(core::cmp::Ordering::Equal)
            .then(a.key.cmp(&b.key))
    });
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
        }
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
