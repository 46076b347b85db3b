//! Peer offload's advisor: for a tensor to offload, which destinations
//! take how many of its bytes, so that the transfer finishes fastest.
//!
//! The destinations are peer devices (each with its free memory and the bandwidth of the
//! link to it) and, as the fallback, host memory. The transmitter sends the pieces to all
//! destinations at once, so a split finishes when its slowest piece does: the fastest split
//! gives each peer a share proportional to its link's bandwidth, capped at its free memory,
//! the excess spread over the others the same way (water-filling). What the peers cannot
//! hold goes to the host when there is one. The advisor also says whether to offload at all:
//! not when the round trip does not fit in the tensor's reuse gap (when the caller knows it),
//! nor when nothing can hold it.
//!
//! Pure: a function of the sizes, the free memory and the bandwidths it is given.

/// One place a tensor's bytes can go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Destination {
    /// Bytes it can still take.
    pub free_bytes: u64,
    /// The bandwidth of the link to it and back, bytes per second.
    pub bandwidth: f64,
}

/// Where a tensor's bytes go.
#[derive(Debug, Clone, PartialEq)]
pub enum Advice {
    /// Do not offload it: the round trip does not fit in its reuse gap, or nothing can hold
    /// it.
    Keep,
    /// Send these bytes to these peers (by index, each share a multiple of the alignment)
    /// and the rest, `host_bytes`, to host memory; the transfer is expected to take
    /// `seconds`.
    Offload {
        /// `(peer, bytes)`, in peer order, no zero shares.
        peers: Vec<(usize, u64)>,
        /// Bytes for host memory (the fallback).
        host_bytes: u64,
        /// The expected time of the transfer, one way (its slowest piece).
        seconds: f64,
    },
}

impl Advice {
    /// Bytes this advice sends to peers.
    pub fn peer_bytes(&self) -> u64 {
        match self {
            Advice::Keep => 0,
            Advice::Offload { peers, .. } => peers.iter().map(|p| p.1).sum(),
        }
    }
}

/// The fastest split of `bytes` over `peers` (water-filling: shares proportional to
/// bandwidth, capped at free memory), in multiples of `align` bytes (the element size).
/// Returns the shares and the bytes left over when the peers cannot hold all of it.
pub fn split(bytes: u64, peers: &[Destination], align: u64) -> (Vec<(usize, u64)>, u64) {
    let align = align.max(1);
    let units = bytes / align;
    let tail = bytes - units * align;
    // Capacities in whole units; peers with no link or no room take nothing.
    let cap: Vec<u64> = peers
        .iter()
        .map(|p| {
            if p.bandwidth > 0.0 {
                p.free_bytes / align
            } else {
                0
            }
        })
        .collect();
    let mut share = vec![0u64; peers.len()];
    let mut open: Vec<usize> = (0..peers.len()).filter(|&i| cap[i] > 0).collect();
    let mut left = units;
    // Water-filling: give each open peer its bandwidth share of what is left; a peer whose
    // share exceeds its room takes its room and closes; repeat until no peer overflows.
    while left > 0 && !open.is_empty() {
        let total: f64 = open.iter().map(|&i| peers[i].bandwidth).sum();
        let overflowing: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| (left as f64) * peers[i].bandwidth / total >= cap[i] as f64)
            .collect();
        if overflowing.is_empty() {
            // Everyone fits: proportional shares, the rounding remainder to the fastest.
            let mut given = 0;
            for &i in &open {
                let s = ((left as f64) * peers[i].bandwidth / total).floor() as u64;
                share[i] = s;
                given += s;
            }
            let mut rest = left - given;
            let mut by_speed = open.clone();
            by_speed.sort_by(|&a, &b| peers[b].bandwidth.total_cmp(&peers[a].bandwidth));
            for &i in by_speed.iter().cycle().take(by_speed.len() * 2) {
                if rest == 0 {
                    break;
                }
                let room = cap[i] - share[i];
                let more = room.min(rest);
                share[i] += more;
                rest -= more;
            }
            left = rest;
            break;
        }
        for &i in &overflowing {
            share[i] = cap[i];
            left -= cap[i];
        }
        open.retain(|i| !overflowing.contains(i));
    }
    let mut shares: Vec<(usize, u64)> = share
        .iter()
        .enumerate()
        .filter(|&(_, &s)| s > 0)
        .map(|(i, &s)| (i, s * align))
        .collect();
    let mut leftover = left * align + tail;
    // The tail (less than one unit) goes with the first share that has room for it.
    if tail > 0
        && let Some(first) = shares
            .iter_mut()
            .find(|(i, s)| peers[*i].free_bytes >= *s + tail)
    {
        first.1 += tail;
        leftover -= tail;
    }
    (shares, leftover)
}

/// The advisor's decision for `bytes` (in elements of `align` bytes) whose next use is
/// `reuse_gap` seconds away (`None`: the caller needs the room now, whatever it costs).
pub fn advise(
    bytes: u64,
    align: u64,
    reuse_gap: Option<f64>,
    peers: &[Destination],
    host_bandwidth: Option<f64>,
) -> Advice {
    if bytes == 0 {
        return Advice::Keep;
    }
    let (shares, leftover) = split(bytes, peers, align);
    let host_bytes = leftover;
    if host_bytes > 0 && host_bandwidth.is_none_or(|b| b <= 0.0) {
        // The peers cannot hold it and there is no host to take the rest.
        return Advice::Keep;
    }
    let peer_seconds = shares
        .iter()
        .map(|&(i, s)| s as f64 / peers[i].bandwidth)
        .fold(0.0, f64::max);
    let host_seconds = host_bandwidth.map_or(0.0, |b| host_bytes as f64 / b);
    let mut seconds = peer_seconds.max(host_seconds);
    let mut peers_out = shares;
    let mut host_out = host_bytes;
    // All of it on the host may still be faster (a slow peer link): take the faster.
    if let Some(host) = host_bandwidth.filter(|&b| b > 0.0) {
        let all_host = bytes as f64 / host;
        if all_host < seconds {
            seconds = all_host;
            peers_out = Vec::new();
            host_out = bytes;
        }
    }
    if reuse_gap.is_some_and(|gap| 2.0 * seconds > gap) {
        return Advice::Keep;
    }
    Advice::Offload {
        peers: peers_out,
        host_bytes: host_out,
        seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(free_mib: u64, gbps: f64) -> Destination {
        Destination {
            free_bytes: free_mib << 20,
            bandwidth: gbps * 1e9,
        }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn shares_follow_bandwidth_when_everyone_has_room() {
        // 100 MiB over links of 50, 25 and 25 GB/s with room to spare: 50/25/25 MiB, and
        // every piece takes the same time.
        let peers = [dest(1024, 50.0), dest(1024, 25.0), dest(1024, 25.0)];
        let (shares, left) = split(100 * MIB, &peers, 4);
        assert_eq!(left, 0);
        assert_eq!(shares, vec![(0, 50 * MIB), (1, 25 * MIB), (2, 25 * MIB)]);
    }

    #[test]
    fn a_full_peer_takes_its_room_and_the_rest_is_re_split() {
        // By bandwidth the first would take 60 MiB, but it has 20: it takes 20, and the
        // other 80 MiB split 1:1 between the two others (40 each), derived by hand.
        let peers = [dest(20, 60.0), dest(1024, 20.0), dest(1024, 20.0)];
        let (shares, left) = split(100 * MIB, &peers, 4);
        assert_eq!(left, 0);
        assert_eq!(shares, vec![(0, 20 * MIB), (1, 40 * MIB), (2, 40 * MIB)]);
        // Cascading: after the first is capped, the second overflows too.
        let peers = [dest(10, 50.0), dest(30, 30.0), dest(1024, 20.0)];
        let (shares, left) = split(100 * MIB, &peers, 4);
        assert_eq!(left, 0);
        assert_eq!(shares, vec![(0, 10 * MIB), (1, 30 * MIB), (2, 60 * MIB)]);
    }

    #[test]
    fn what_the_peers_cannot_hold_goes_to_the_host_or_stays() {
        let peers = [dest(30, 50.0), dest(20, 50.0)];
        match advise(100 * MIB, 4, None, &peers, Some(10e9)) {
            Advice::Offload {
                peers, host_bytes, ..
            } => {
                assert_eq!(peers, vec![(0, 30 * MIB), (1, 20 * MIB)]);
                assert_eq!(host_bytes, 50 * MIB);
            }
            Advice::Keep => panic!("the host takes the rest"),
        }
        // No host: it stays.
        assert_eq!(advise(100 * MIB, 4, None, &peers, None), Advice::Keep);
        // No peer with room: all to the host.
        let full = [dest(0, 50.0)];
        assert_eq!(
            advise(8 * MIB, 4, None, &full, Some(8e9)),
            Advice::Offload {
                peers: vec![],
                host_bytes: 8 * MIB,
                seconds: (8 * MIB) as f64 / 8e9,
            }
        );
    }

    #[test]
    fn the_reuse_gap_decides_whether_to_offload() {
        // 100 MiB over two 50 GB/s links: 1.05 ms each way, 2.1 ms round trip.
        let peers = [dest(1024, 50.0), dest(1024, 50.0)];
        let one_way = (50 * MIB) as f64 / 50e9;
        match advise(100 * MIB, 4, Some(3e-3), &peers, None) {
            Advice::Offload { seconds, .. } => assert!((seconds - one_way).abs() < 1e-12),
            Advice::Keep => panic!("2.1 ms fits in 3 ms"),
        }
        assert_eq!(advise(100 * MIB, 4, Some(2e-3), &peers, None), Advice::Keep);
    }

    #[test]
    fn a_slow_peer_link_loses_to_the_host() {
        // One peer over a 2 GB/s link against a 12 GB/s host: the host alone is faster.
        let peers = [dest(1024, 2.0)];
        match advise(64 * MIB, 4, None, &peers, Some(12e9)) {
            Advice::Offload {
                peers, host_bytes, ..
            } => {
                assert!(peers.is_empty());
                assert_eq!(host_bytes, 64 * MIB);
            }
            Advice::Keep => panic!(),
        }
    }

    #[test]
    fn shares_are_whole_elements_and_add_up() {
        let peers = [dest(1, 3.0), dest(1, 7.0), dest(1, 11.0)];
        for bytes in [4u64, 12, 1000, 4 * 1001, (3 << 20) - 8, 3 << 20] {
            let (shares, left) = split(bytes, &peers, 4);
            let total: u64 = shares.iter().map(|s| s.1).sum();
            assert_eq!(total + left, bytes, "{bytes}");
            for &(i, s) in &shares {
                assert_eq!(s % 4, 0, "{bytes}");
                assert!(s <= peers[i].free_bytes, "{bytes}");
            }
        }
        // An odd tail rides with the first share that has room.
        let (shares, left) = split(4 * 10 + 2, &[dest(1, 1.0)], 4);
        assert_eq!((shares, left), (vec![(0, 42)], 0));
    }
}
