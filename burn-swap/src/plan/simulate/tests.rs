//! The simulation's tests: block reuse, shared buffers, and the pool against a plain walk.

use super::*;

fn l(bytes: u64, from: Option<usize>, until: Option<usize>) -> Lifetime {
    Lifetime::own(bytes, from, until)
}

/// The allocator walked the plain way: every block kept with its size, the free list
/// searched whole for the smallest block that fits within the ratio.
fn walked_plainly(lifetimes: &[Lifetime], ops: usize, ratio: u64) -> (u64, u64, usize) {
    let (mut sizes, mut free, mut block_of) = (Vec::new(), Vec::<usize>::new(), Vec::new());
    let (mut live, mut peak_live, mut peak_pool) = (0u64, 0u64, 0u64);
    let allocate = |bytes: u64, sizes: &mut Vec<u64>, free: &mut Vec<usize>| {
        let fit = free
            .iter()
            .enumerate()
            .filter(|&(_, &b)| sizes[b] >= bytes)
            .min_by_key(|&(_, &b)| sizes[b])
            .filter(|&(_, &b)| sizes[b] <= bytes * ratio);
        match fit {
            Some((at, _)) => free.swap_remove(at),
            None => {
                sizes.push(bytes);
                sizes.len() - 1
            }
        }
    };
    block_of.resize(lifetimes.len(), None);
    for (i, l) in lifetimes.iter().enumerate() {
        if l.from.is_none() {
            block_of[i] = Some(allocate(l.bytes, &mut sizes, &mut free));
            live += l.bytes;
        }
    }
    peak_live = peak_live.max(live);
    peak_pool = peak_pool.max(sizes.iter().sum());
    for op in 0..ops {
        for (i, l) in lifetimes.iter().enumerate() {
            if l.from == Some(op) {
                block_of[i] = Some(allocate(l.bytes, &mut sizes, &mut free));
                live += l.bytes;
            }
        }
        peak_live = peak_live.max(live);
        peak_pool = peak_pool.max(sizes.iter().sum());
        for (i, l) in lifetimes.iter().enumerate() {
            if l.until == Some(op) && block_of[i].is_some() {
                live -= l.bytes;
                free.extend(block_of[i].take());
            }
        }
    }
    (peak_pool, peak_live, sizes.len())
}

#[test]
fn the_pool_reuses_blocks_as_a_plain_walk_over_every_free_block_does() {
    let mut rng = crate::rng::SplitMix64::new(11);
    for round in 0..40 {
        // Up to 300 distinct sizes (several words of the pool's free-size bits).
        let (ops, distinct) = (60, 1 + rng.below(300) as u64);
        let lifetimes: Vec<Lifetime> = (0..200)
            .map(|_| {
                let from = rng.below(ops + 1);
                let until = from + rng.below(ops);
                l(
                    64 * (1 + rng.below(distinct as usize) as u64),
                    (from < ops).then_some(from),
                    (until < ops).then_some(until),
                )
            })
            .collect();
        for ratio in RATIOS {
            let sim = simulate(&lifetimes, ops, ratio);
            assert_eq!(
                (sim.peak_pool_bytes, sim.peak_live_bytes, sim.blocks),
                walked_plainly(&lifetimes, ops, ratio as u64),
                "round {round}, ratio {ratio}"
            );
        }
    }
}

#[test]
fn chain_reuses_freed_blocks_of_equal_size() {
    // a (carried in) -> op0 -> b -> op1 -> c -> op2 -> d, each 100 bytes, each freed by
    // its consumer: at most two are live at once (an op's input and output).
    let lifetimes = [
        l(100, None, Some(0)),
        l(100, Some(0), Some(1)),
        l(100, Some(1), Some(2)),
        l(100, Some(2), None),
    ];
    let sim = simulate(&lifetimes, 3, 1);
    assert_eq!(sim.peak_live_bytes, 200);
    // op0 makes b while a lives: two blocks; op1 reuses a's block for c; op2 b's for d.
    assert_eq!(sim.peak_pool_bytes, 200);
    assert_eq!(sim.blocks, 2);
    assert_eq!(sim.peak_op, Some(0));
}

#[test]
fn the_ratio_bound_decides_whether_a_larger_block_is_reused() {
    // A 400-byte tensor dies at op 0; a 100-byte one is born at op 1.
    let lifetimes = [
        l(400, None, Some(0)),
        l(100, Some(0), Some(1)),
        l(100, Some(1), None),
    ];
    // Ratio 1: the 400-byte block does not fit a 100-byte tensor exactly: new blocks.
    let exact = simulate(&lifetimes, 2, 1);
    assert_eq!((exact.peak_pool_bytes, exact.blocks), (600, 3));
    // Ratio 4: it is reused.
    let loose = simulate(&lifetimes, 2, 4);
    assert_eq!((loose.peak_pool_bytes, loose.blocks), (500, 2));
    assert_eq!(exact.peak_live_bytes, 500);
    assert_eq!(simulate_best(&lifetimes, 2).ratio, 4);
}

#[test]
fn best_fit_takes_the_smallest_eligible_block() {
    // Blocks of 300 and 150 are free when a 120-byte tensor comes: ratio 4 allows both;
    // the 150 one is taken, leaving the 300 one for a 250-byte tensor.
    let lifetimes = [
        l(300, None, Some(0)),
        l(150, None, Some(0)),
        l(120, Some(1), None),
        l(250, Some(2), None),
    ];
    let sim = simulate(&lifetimes, 3, 4);
    assert_eq!((sim.peak_pool_bytes, sim.blocks), (450, 2));
}

#[test]
fn tensors_that_outlive_the_iteration_are_never_freed() {
    let lifetimes = [
        l(50, None, None),
        l(70, Some(0), None),
        l(30, Some(1), Some(1)),
    ];
    let sim = simulate(&lifetimes, 2, 16);
    assert_eq!(sim.peak_live_bytes, 150);
    assert_eq!(sim.peak_pool_bytes, 150);
}

/// A holder of buffer 0 at 100 bytes.
fn held(from: Option<usize>, until: Option<usize>) -> Lifetime {
    Lifetime {
        buffer: Some(0),
        ..Lifetime::own(100, from, until)
    }
}

#[test]
fn a_shared_buffer_counts_once_while_any_holder_lives() {
    // A source made at op 0 and consumed at op 1 by a view of it, which lives to op 3;
    // another tensor lives at op 2 alone.
    let lifetimes = [
        held(Some(0), Some(1)),
        held(Some(1), Some(3)),
        l(50, Some(2), Some(2)),
    ];
    assert_eq!(live_per_op(&lifetimes, 4), [100, 100, 150, 100]);
    let sim = simulate(&lifetimes, 4, 1);
    assert_eq!((sim.peak_live_bytes, sim.peak_op), (150, Some(2)));
    assert_eq!((sim.peak_pool_bytes, sim.blocks), (150, 2));
    // Stretches of one buffer that do not meet are two lives of it.
    let apart = [held(Some(0), Some(0)), held(Some(2), None)];
    assert_eq!(live_per_op(&apart, 3), [100, 0, 100]);
    // Made before the iteration and held past it by a view made in it.
    let carried = [held(None, Some(0)), held(Some(0), None)];
    assert_eq!(live_per_op(&carried, 2), [100, 100]);
}

/// `chain(4)` with tensor 1 a view of tensor 0 and tensor 2 a view of tensor 1.
fn views_of_views() -> Trace {
    let mut trace = crate::trace::synthetic::chain(4, |l| 100 * (l as u64 + 1), |_| 1);
    trace.tensors[1].view_of = Some(0);
    trace.tensors[2].view_of = Some(1);
    trace
}

#[test]
fn views_of_views_hold_the_buffer_their_first_source_made() {
    let trace = views_of_views();
    assert_eq!(buffer_makers(&trace), [Some(0), Some(0), Some(0), None]);
    let lives = lifetimes(&trace);
    // Each holder holds it at the maker's size; the last tensor has a buffer of its own.
    assert!(
        lives[..3]
            .iter()
            .all(|l| l.bytes == 100 && l.buffer == Some(0))
    );
    assert_eq!((lives[3].bytes, lives[3].buffer), (400, None));
    // Tensor 0 dies at op 8, tensor 2 at op 6: the buffer lives from op 0 to op 8, once.
    let live = live_per_op(&lives, 9);
    assert_eq!(live[2], 100);
    assert_eq!(live[8], 100);
    assert_eq!(live[3], 500);
    // A trace without views: every tensor alone in its buffer.
    let plain = crate::trace::synthetic::chain(4, |_| 100, |_| 1);
    assert!(buffer_makers(&plain).iter().all(Option::is_none));
}

#[test]
fn a_view_made_again_shares_its_source_and_a_fetched_one_is_alone() {
    let trace = views_of_views();
    let whole = lifetimes(&trace)[2];
    // Recomputed, the view is made again in its source's buffer.
    let remade = back(&trace, 2, whole, 5, true);
    assert_eq!(
        (remade.bytes, remade.buffer, remade.from),
        (100, Some(0), Some(5))
    );
    // Fetched, it comes back at its own size in a buffer of its own; so does the maker
    // of the buffer, recomputed (its views keep the old one).
    let fetched = back(&trace, 2, whole, 5, false);
    assert_eq!((fetched.bytes, fetched.buffer), (300, None));
    let maker = back(&trace, 0, lifetimes(&trace)[0], 5, true);
    assert_eq!((maker.bytes, maker.buffer), (100, None));
}

#[test]
fn a_view_that_lives_through_a_gap_keeps_its_sources_buffer() {
    let trace = views_of_views();
    let lives = lifetimes(&trace);
    let holders = buffer_holders(&lives);
    assert_eq!(holders[&0], [0, 1, 2]);
    // Tensor 0 is away from op 2 to op 7: tensor 1 lives from op 1 to op 7.
    assert!(kept_by_others(&lives, &holders, 0, (1, 8), 9));
    // Tensor 2 is away from op 4 to op 5 only: tensors 0 and 1 live throughout.
    assert!(kept_by_others(&lives, &holders, 2, (3, 6), 9));
    // Tensor 1, away from op 2 to op 8: tensor 0 lives to op 8 (tensor 2 ends at 6).
    assert!(kept_by_others(&lives, &holders, 1, (1, 9), 9));
    // Not to op 9: nobody holds it there.
    assert!(!kept_by_others(&lives, &holders, 1, (1, 10), 11));
    // A tensor alone in its buffer, or a gap with no op inside it.
    assert!(!kept_by_others(&lives, &holders, 3, (4, 8), 9));
    assert!(!kept_by_others(&lives, &holders, 0, (1, 2), 9));
}
