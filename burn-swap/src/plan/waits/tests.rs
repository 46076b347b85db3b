use super::*;
use Buffer::{Device, Host};
use Queue::{Compute, Receive, Send};
use Touch::{Free, Read, Write};

fn node(queue: Queue, touches: &[(Buffer, Touch)]) -> Node {
    Node::new(queue, touches)
}

/// The classic offload: produce, copy out, free, copy back, use.
fn offload_round_trip() -> Vec<Node> {
    vec![
        node(Compute, &[(Device(1), Write)]), // 0: producer
        node(Send, &[(Device(1), Read), (Host(1), Write)]), // 1: offload
        node(Compute, &[(Device(1), Free)]),  // 2: release
        node(Receive, &[(Host(1), Read), (Device(1), Write)]), // 3: prefetch
        node(Compute, &[(Device(1), Read)]),  // 4: user
    ]
}

#[test]
fn one_queue_needs_no_wait() {
    let nodes = vec![
        node(Compute, &[(Device(1), Write)]),
        node(Compute, &[(Device(1), Read), (Device(2), Write)]),
        node(Compute, &[(Device(1), Free)]),
    ];
    assert!(waits(&nodes).is_empty());
    assert_eq!(check(&nodes, &[]), Ok(()));
}

#[test]
fn the_round_trip_gets_the_four_waits_derived_by_hand() {
    let nodes = offload_round_trip();
    let found: Vec<(usize, usize)> = waits(&nodes).iter().map(|w| (w.before, w.after)).collect();
    // The offload waits for the producer; the release for the offload (a buffer goes
    // back only after its copy); the prefetch for the release (its device buffer is
    // written after a free on compute; the release waited for the offload, so the host
    // copy is covered too); the user for the prefetch.
    assert_eq!(found, vec![(1, 0), (2, 1), (3, 2), (4, 3)]);
    assert_eq!(check(&nodes, &waits(&nodes)), Ok(()));
}

#[test]
fn every_missing_wait_is_caught() {
    let nodes = offload_round_trip();
    let all = waits(&nodes);
    for skip in 0..all.len() {
        let fewer: Vec<Wait> = all
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != skip)
            .map(|(_, w)| *w)
            .collect();
        let hazard = check(&nodes, &fewer).unwrap_err();
        let Hazard::Unordered { later, .. } = hazard else {
            panic!("{hazard}");
        };
        assert_eq!(later, all[skip].before, "without {:?}", all[skip]);
    }
}

#[test]
fn a_free_waits_for_every_reader_on_other_queues() {
    // Two copy queues read the buffer; compute frees it: it must wait for both.
    let nodes = vec![
        node(Compute, &[(Device(7), Write)]),
        node(Send, &[(Device(7), Read)]),
        node(Receive, &[(Device(7), Read)]),
        node(Compute, &[(Device(7), Free)]),
    ];
    let w = waits(&nodes);
    let pairs: Vec<(usize, usize)> = w.iter().map(|w| (w.before, w.after)).collect();
    assert_eq!(pairs, vec![(1, 0), (2, 0), (3, 2), (3, 1)]);
    assert_eq!(check(&nodes, &w), Ok(()));
    // The second hazard (a buffer freed while another queue reads it): without the wait on the send queue, the free can overtake
    // its read.
    let hazard = check(&nodes, &w[..3]).unwrap_err();
    assert!(matches!(
        hazard,
        Hazard::Unordered {
            earlier: 1,
            later: 3,
            later_touch: Free,
            ..
        }
    ));
}

#[test]
fn waits_already_implied_are_left_out() {
    // The user on compute waits for the copy queue's later node, which itself waited for
    // the earlier one: one wait covers both buffers.
    let nodes = vec![
        node(Receive, &[(Device(1), Write)]),
        node(Receive, &[(Device(2), Write)]),
        node(Compute, &[(Device(1), Read), (Device(2), Read)]),
    ];
    let w = waits(&nodes);
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].before, w[0].after), (2, 1));
    assert_eq!(check(&nodes, &w), Ok(()));
    // Transitively: send waits for compute, receive for send; receive's reader of the
    // compute buffer needs no wait of its own.
    let nodes = vec![
        node(Compute, &[(Device(1), Write)]),
        node(Send, &[(Device(1), Read), (Host(1), Write)]),
        node(Receive, &[(Host(1), Read), (Device(1), Read)]),
    ];
    let w = waits(&nodes);
    assert_eq!(
        w.iter().map(|w| (w.before, w.after)).collect::<Vec<_>>(),
        vec![(1, 0), (2, 1)]
    );
    assert_eq!(check(&nodes, &w), Ok(()));
}

#[test]
fn forward_waits_are_refused() {
    let nodes = offload_round_trip();
    let bad = Wait {
        before: 1,
        after: 3,
        buffer: Device(1),
    };
    assert_eq!(check(&nodes, &[bad]), Err(Hazard::Backwards(bad)));
}

/// A random timeline over a few buffers and the three queues: the inserted waits always
/// pass the checker, and dropping any one of them fails it (none is redundant).
#[test]
fn random_timelines_are_ordered_by_exactly_their_waits() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    for _ in 0..300 {
        let len = 2 + next(14) as usize;
        let nodes: Vec<Node> = (0..len)
            .map(|_| {
                let queue = Queue::ALL[next(3) as usize];
                let touches: Vec<(Buffer, Touch)> = (0..1 + next(2))
                    .map(|_| {
                        let b = next(4);
                        let buffer = if next(2) == 0 { Device(b) } else { Host(b) };
                        let touch = [Read, Read, Write, Free][next(4) as usize];
                        (buffer, touch)
                    })
                    .collect();
                node(queue, &touches)
            })
            .collect();
        let w = waits(&nodes);
        assert_eq!(check(&nodes, &w), Ok(()), "{nodes:?}\n{w:?}");
        for skip in 0..w.len() {
            let mut fewer = w.clone();
            fewer.remove(skip);
            assert!(
                check(&nodes, &fewer).is_err(),
                "wait {:?} is redundant in {nodes:?}",
                w[skip]
            );
        }
    }
}
