//! Unit tests of the parent module.

use super::*;

fn data(n: usize) -> TensorData {
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 3.0).collect();
    TensorData::new(values, [n])
}

#[test]
fn split_sent_and_reassembled_bit_for_bit() {
    let pool = PeerPool::new(
        &[
            PeerSpec::simulated("a", 1 << 20, 40e9),
            PeerSpec::simulated("b", 1 << 20, 20e9),
            PeerSpec::simulated("c", 1 << 20, 20e9),
        ],
        |_| None,
    )
    .unwrap();
    let original = data(10_000);
    let copy = pool
        .send(original.clone(), 1e9)
        .expect("the peers have room");
    assert_eq!(copy.host_bytes(), 0);
    assert_eq!(copy.peer_bytes(), 40_000);
    let stats = pool.stats();
    // 2:1:1 by bandwidth.
    assert_eq!(
        stats.iter().map(|s| s.held_bytes).collect::<Vec<_>>(),
        vec![20_000, 10_000, 10_000]
    );
    let back = copy.receive().unwrap();
    assert_eq!(back, original);
    drop(copy);
    assert!(pool.stats().iter().all(|s| s.held_bytes == 0));
    assert!(pool.stats().iter().all(|s| s.sent_bytes == s.fetched_bytes));
}

#[test]
fn a_full_peer_falls_back_without_loss() {
    let pool = PeerPool::new(
        &[
            PeerSpec::simulated("small", 8_000, 50e9),
            PeerSpec::simulated("smaller", 4_000, 50e9),
        ],
        |_| None,
    )
    .unwrap();
    // 40 000 bytes: 8 000 and 4 000 on the peers, 28 000 on the host.
    let first = pool.send(data(10_000), 1e9).unwrap();
    assert_eq!((first.peer_bytes(), first.host_bytes()), (12_000, 28_000));
    assert_eq!(pool.fallbacks(), 1);
    // Both full now: the next one stays on the host, whole and untouched.
    let second = data(500);
    let back = pool.send(second.clone(), 1e9).unwrap_err();
    assert_eq!(back, second);
    assert_eq!(pool.fallbacks(), 2);
    assert_eq!(first.receive().unwrap(), data(10_000));
    drop(first);
    // Room again.
    assert!(pool.send(data(500), 1e9).is_ok());
}

#[test]
fn compressed_tensors_travel_compressed_and_come_back_bit_for_bit() {
    let pool = PeerPool::new(
        &[
            PeerSpec::simulated("a", 1 << 20, 30e9),
            PeerSpec::simulated("b", 1 << 20, 10e9),
        ],
        |_| None,
    )
    .unwrap();
    // ReLU-like: every other element zero (and one -0.0, which must survive).
    let mut values: Vec<f32> = (0..4096)
        .map(|i| if i % 2 == 0 { 0.0 } else { i as f32 * 0.5 })
        .collect();
    values[10] = -0.0;
    let original = TensorData::new(values, [64, 64]);
    let c = crate::codec::compress(&original).unwrap();
    let stored = c.bytes();
    let copy = pool.send_compressed(c, 1e9).unwrap();
    assert!(copy.compressed());
    assert_eq!(copy.stored_bytes(), stored);
    assert!(stored < original.bytes.len() as u64);
    let sent: Vec<u64> = pool.stats().iter().map(|s| s.sent_bytes).collect();
    assert_eq!(sent.iter().sum::<u64>(), stored);
    assert!(sent[0] > 2 * sent[1], "{sent:?}");
    let back = copy.receive().unwrap();
    assert_eq!(back.as_bytes(), original.as_bytes());
}

#[test]
fn transfers_are_paced_to_the_link() {
    // 4 MB over a 1 GB/s link: at least 4 ms each way.
    let pool = PeerPool::new(&[PeerSpec::simulated("slow", 8 << 20, 1e9)], |_| None).unwrap();
    let start = Instant::now();
    let copy = pool.send(data(1_000_000), 1.0).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(4));
    let start = Instant::now();
    let _ = copy.receive().unwrap();
    assert!(start.elapsed() >= Duration::from_millis(4));
    let bandwidth = pool.stats()[0].bandwidth;
    assert!(bandwidth <= 1.05e9, "{bandwidth}");
}

#[test]
fn a_piece_that_does_not_come_back_whole_is_an_error_naming_it_and_the_copy_stays() {
    let pool = PeerPool::new(
        &[
            PeerSpec::simulated("a", 1 << 20, 40e9),
            PeerSpec::simulated("b", 1 << 20, 20e9),
        ],
        |_| None,
    )
    .unwrap();
    let original = data(10_000);
    let mut copy = pool.send(original.clone(), 1e9).unwrap();
    let held = pool
        .stats()
        .iter()
        .map(|s| s.held_bytes)
        .collect::<Vec<_>>();
    let (peer, offset, len) = {
        let p = &copy.pieces[1];
        (p.peer, p.offset, p.len)
    };
    let named = |error: ReceiveError, what: &str| match error {
        ReceiveError::Piece {
            peer: p,
            offset: o,
            len: l,
            reason,
        } => {
            assert_eq!((p, o, l), (peer, offset, len));
            assert!(reason.contains(what), "{reason}");
        }
        other => panic!("not the piece's error: {other}"),
    };
    // A peer whose read fails.
    let bytes = std::mem::replace(
        &mut copy.pieces[1].data,
        PieceData::Backend {
            tensor: Box::new(()),
            read: |_| None,
        },
    );
    named(copy.receive().unwrap_err(), "refused");
    // A peer that gives back fewer bytes than it holds.
    let PieceData::Host(whole) = bytes else {
        panic!("simulated peers hold host pieces")
    };
    copy.pieces[1].data = PieceData::Host(whole[..len / 2].to_vec());
    named(
        copy.receive().unwrap_err(),
        &format!("{} bytes came back", len / 2),
    );
    // Nothing was given back meanwhile: with the peer whole again, the tensor comes back.
    assert_eq!(
        pool.stats()
            .iter()
            .map(|s| s.held_bytes)
            .collect::<Vec<_>>(),
        held
    );
    copy.pieces[1].data = PieceData::Host(whole);
    assert_eq!(copy.receive().unwrap(), original);
}
