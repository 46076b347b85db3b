//! Unit tests of the parent module.

use super::*;
use burn_backend::Shape;
use hashbrown::HashMap;

/// Records one op of "kind" `kind` reading one tensor and making one, of `dims` floats.
fn op(r: &mut Recorder, id: &mut u64, kind: u64, dims: usize) {
    r.begin(kind, || format!("k{kind}"));
    let input = TensorIr {
        id: TensorId::new(*id),
        shape: Shape::from(vec![dims]),
        status: TensorStatus::ReadWrite,
        dtype: DType::F32,
    };
    r.input(&input, 4 * dims as u64);
    r.outputs_follow();
    *id += 1;
    let output = TensorIr {
        id: TensorId::new(*id),
        shape: Shape::from(vec![dims]),
        status: TensorStatus::NotInit,
        dtype: DType::F32,
    };
    r.output(&output, 4 * dims as u64);
    r.end(OpCounters {
        nanos: 0,
        live_before: 4 * dims as u64,
        resident_during: 8 * dims as u64,
        ..Default::default()
    });
}

/// Whether the schedule holds up to the op recorded last (its place is verified).
fn holds(r: &Recorder) -> bool {
    r.place_of_last().is_some_and(|p| p.verified)
}

/// Records a pseudo-op `name` (`Read`, `Init`) with at most one input and one output, each
/// `(id, floats)`.
fn named(
    r: &mut Recorder,
    name: &'static str,
    input: Option<(u64, usize)>,
    output: Option<(u64, usize)>,
) {
    let tensor = |(id, n): (u64, usize), status| TensorIr {
        id: TensorId::new(id),
        shape: Shape::from(vec![n]),
        status,
        dtype: DType::F32,
    };
    r.begin(signature::name_key(name), || name.to_string());
    if let Some(t) = input {
        r.input(&tensor(t, TensorStatus::ReadOnly), 4 * t.1 as u64);
    }
    r.outputs_follow();
    if let Some(t) = output {
        r.output(&tensor(t, TensorStatus::NotInit), 4 * t.1 as u64);
    }
    r.end(OpCounters::default());
}

#[test]
fn long_runs_stay_bounded_and_keep_their_schedule() {
    let mut r = Recorder::with_window(256);
    let mut id = 0;
    // 400 iterations of 20 ops, with one extra op every 37 iterations.
    for k in 0..400u64 {
        for i in 0..20 {
            op(&mut r, &mut id, i, 4 + i as usize);
        }
        if k % 37 == 36 {
            op(&mut r, &mut id, 99, 3);
        }
        assert!(r.window_len() <= 2 * 256, "the window stays bounded");
    }
    assert_eq!(r.period(), Some(20));
    let trace = r.trace().expect("the last complete iteration");
    assert_eq!(trace.ops.len(), 20);
    assert!(
        trace.iteration > 300,
        "numbering went on through resyncs: {}",
        trace.iteration
    );
    let peaks = r.iteration_peaks();
    assert!(!peaks.is_empty() && peaks.len() <= KEPT_ITERATION_PEAKS);
    assert!(peaks.windows(2).all(|w| w[0].iteration < w[1].iteration));
}

/// A plan's trace, derived on the planner's thread from an excerpt the op's thread copied
/// off the log, is the recorder's own: after the window was compacted (the log no longer
/// starts at op 0), with the tensor carried across the boundary linked to the iteration
/// before, in full and lean recording.
#[test]
fn an_excerpt_derives_the_recorders_own_trace() {
    for lean in [false, true] {
        let mut r = Recorder::with_window(256);
        r.set_lean(lean);
        let mut id = 0;
        let mut compared = 0;
        for k in 0..200 {
            for i in 0..20 {
                op(&mut r, &mut id, i, 4 + i as usize);
            }
            if k % 25 != 24 {
                continue;
            }
            let excerpt = r.excerpt().expect("a complete iteration");
            let want = r.trace().expect("a complete iteration");
            assert!(want.tensors.iter().any(|t| t.wraps_to.is_some()));
            assert_eq!(excerpt.trace(), want, "after iteration {k}, lean {lean}");
            compared += 1;
        }
        assert_eq!(compared, 8);
        assert!(r.base > 0, "the window was compacted");
    }
}

#[test]
fn a_stream_that_stops_repeating_stays_bounded() {
    let mut r = Recorder::with_window(256);
    let mut id = 0;
    for _ in 0..20 {
        for i in 0..10 {
            op(&mut r, &mut id, i, 8);
        }
    }
    assert_eq!(r.period(), Some(10));
    // Then no repetition at all, for a long time.
    let mut x = 1u64;
    for _ in 0..5000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        op(&mut r, &mut id, 1000 + (x >> 33), 8);
        assert!(r.window_len() <= 2 * 256);
    }
}

/// The executor passes over the ops where `may_end_iteration` says no while no plan is in
/// force: it must say yes at every op that ends an iteration, whatever the loop does (a
/// schedule found, ops swapped, an op inserted, a schedule of another period and back).
#[test]
fn every_iteration_end_is_one_that_may_end_an_iteration() {
    let mut r = Recorder::with_window(4096);
    let mut id = 0;
    let mut ends = 0;
    let check = |r: &Recorder, ends: &mut usize| {
        let ended = r
            .place_of_last()
            .zip(r.schedule_key())
            .is_some_and(|(place, (period, _))| place.verified && place.position + 1 == period);
        if ended {
            *ends += 1;
            assert!(r.may_end_iteration(), "op {}", r.next_index() - 1);
        }
    };
    for k in 0..60u64 {
        let period = if (20..30).contains(&k) { 30 } else { 40 };
        for i in 0..period {
            let kind = match (k % 7, i) {
                (3, 7) => 8,
                (3, 8) => 7,
                _ => i,
            };
            op(&mut r, &mut id, kind, 4 + kind as usize);
            check(&r, &mut ends);
        }
        if k % 11 == 5 {
            op(&mut r, &mut id, 99, 3);
            check(&r, &mut ends);
        }
    }
    assert!(ends > 30, "{ends} iteration ends seen");
}

#[test]
fn two_ops_that_swap_places_leave_the_schedule_in_force() {
    let mut r = Recorder::with_window(4096);
    let mut id = 0;
    // Iterations of 40 ops; in every third one after the tenth, ops 7 and 8 come the other
    // way round (a drop and an upload whose order varies).
    let iteration = |r: &mut Recorder, id: &mut u64, swapped: bool| {
        for i in 0..40u64 {
            let k = match (swapped, i) {
                (true, 7) => 8,
                (true, 8) => 7,
                _ => i,
            };
            op(r, id, k, 4 + k as usize);
        }
    };
    for _ in 0..10 {
        iteration(&mut r, &mut id, false);
    }
    assert_eq!(r.period(), Some(40));
    let key = r.schedule_key();
    for k in 0..12 {
        iteration(&mut r, &mut id, k % 3 == 0);
        // From the 16th op after the swap on, the plan's position is known again.
        assert!(holds(&r), "iteration {k}");
        assert_eq!(r.schedule_key(), key, "the anchor stays");
    }
    let trace = r.trace().expect("the last complete iteration");
    assert_eq!(trace.ops.len(), 40);
}

#[test]
fn another_threads_reads_landing_elsewhere_each_iteration_leave_the_schedule_in_force() {
    let mut r = Recorder::with_window(8192);
    let mut id = 0;
    // Iterations of 80 ops of the step and three reads of its outputs by a metrics thread,
    // which land among the first ops of the next step at a place that varies: 83 ops each.
    let iteration = |r: &mut Recorder, id: &mut u64, at: [u64; 3]| {
        let mut reads = 0;
        for i in 0..80u64 {
            while reads < 3 && at[reads] == i {
                op(r, id, 90, 2 + reads);
                reads += 1;
            }
            op(r, id, i, 4 + i as usize);
        }
    };
    for _ in 0..10 {
        iteration(&mut r, &mut id, [0, 0, 0]);
    }
    assert_eq!(r.period(), Some(83));
    let key = r.schedule_key();
    let places = [
        [1, 1, 1],
        [0, 3, 7],
        [5, 6, 12],
        [0, 0, 0],
        [2, 9, 9],
        [14, 15, 19],
    ];
    for (k, at) in places.iter().cycle().take(24).enumerate() {
        iteration(&mut r, &mut id, *at);
        // The step's last ops match the iteration before: the schedule holds there.
        assert!(holds(&r), "iteration {k} ({at:?})");
        assert_eq!(r.schedule_key(), key, "iteration {k}: the anchor stays");
    }
    assert!(r.profiled_schedule().is_some());
}

#[test]
fn a_loop_whose_reads_never_land_twice_at_one_place_is_found() {
    let mut r = Recorder::with_window(8192);
    let mut id = 0;
    // No two iterations alike: each holds the 80 ops of the step and, at a place that moves
    // every iteration, a read (another thread's) and an upload (a loader's worker).
    let mut found_at = None;
    for k in 0..30u64 {
        let (read_at, upload_at) = ((k * 7) % 30, (k * 11 + 3) % 40);
        for i in 0..80u64 {
            if i == read_at {
                named(&mut r, "Read", Some((id, 2)), None);
            }
            if i == upload_at {
                id += 1;
                named(&mut r, "Init", None, Some((id, 16)));
            }
            op(&mut r, &mut id, i, 4 + i as usize);
        }
        if found_at.is_none() && r.profiled_schedule().is_some() {
            found_at = Some(k);
        }
    }
    assert_eq!(r.period(), Some(82));
    let found_at = found_at.expect("a profiled schedule");
    assert!(found_at <= 6, "found after {found_at} iterations");
    assert!(holds(&r), "the schedule holds at the end");
}

#[test]
fn a_long_stretch_of_other_ops_still_breaks_the_schedule() {
    let mut r = Recorder::with_window(8192);
    let mut id = 0;
    for _ in 0..10 {
        for i in 0..80u64 {
            op(&mut r, &mut id, i, 4 + i as usize);
        }
    }
    // Ten ops of another shape in place of ten of the step: not a reordering.
    for i in 0..80u64 {
        let dims = if (20..30).contains(&i) {
            3
        } else {
            4 + i as usize
        };
        op(&mut r, &mut id, i, dims);
    }
    assert!(!holds(&r), "the schedule broke");
    assert_eq!(r.place_of_last(), None, "and no op after it has a place");
}

/// Records the drop of tensor `id`, of `floats` floats, as the engine records a `Drop`.
fn drop_of(r: &mut Recorder, id: u64, floats: usize) {
    r.begin(signature::name_key("Drop"), || "Drop".to_string());
    let t = TensorIr {
        id: TensorId::new(id),
        shape: Shape::from(vec![floats]),
        status: TensorStatus::ReadWrite,
        dtype: DType::F32,
    };
    r.dropped(&t, 4 * floats as u64);
    r.outputs_follow();
    r.end(OpCounters::default());
}

#[test]
fn a_loop_whose_drops_never_come_twice_in_one_order_is_found_and_holds() {
    let mut r = Recorder::with_window(8192);
    let mut id = 0;
    // Iterations of 60 ops and then the drops of four of their tensors, of four sizes, in
    // another order every iteration (Burn's autodiff drops a step's graph so).
    let mut rng = crate::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d);
    let mut last = 0;
    for k in 0..12 {
        let mut made = Vec::new();
        for i in 0..60u64 {
            op(&mut r, &mut id, i, 4 + i as usize);
            if i % 15 == 0 {
                made.push((id, 4 + i as usize));
            }
        }
        let mut rotation = rng.below(4);
        if rotation == last {
            rotation = (rotation + 1) % 4;
        }
        last = rotation;
        for j in 0..4 {
            let (dropped, floats) = made[(j + rotation) % 4];
            drop_of(&mut r, dropped, floats);
            if k >= 6 {
                assert!(holds(&r), "iteration {k}, drop {j}");
            }
        }
    }
    assert_eq!(r.period(), Some(64));
    let trace = r.trace().expect("the last complete iteration");
    assert_eq!(trace.ops.len(), 64);
    assert_eq!(trace.ops.iter().filter(|o| o.kind == "Drop").count(), 4);
}

#[test]
fn ops_after_a_reordered_stretch_keep_their_place_before_the_schedule_resumes() {
    let mut r = Recorder::with_window(8192);
    let mut id = 0;
    // Iterations of 80 ops, found in ten alike; then their ops 60-63 (the autodiff graph's
    // drops, say) come in another order every iteration, none at the place it had an
    // iteration before: rotated by a pseudo-random amount that changes from one iteration
    // to the next.
    let mut rotations = vec![0u64; 10];
    let mut rng = crate::rng::SplitMix64::new(0x9e37_79b9_7f4a_7c15);
    for _ in 10..20 {
        let r = rng.below(4) as u64;
        let last = *rotations.last().unwrap();
        rotations.push(if r == last { (r + 1) % 4 } else { r });
    }
    let kind = |k: usize, i: u64| match i {
        60..64 => 60 + (i - 60 + rotations[k]) % 4,
        _ => i,
    };
    for k in 0..10 {
        for i in 0..80 {
            op(&mut r, &mut id, kind(k, i), 4 + kind(k, i) as usize);
        }
    }
    assert_eq!(r.period(), Some(80));
    let key = r.schedule_key();
    let mut first = None;
    for k in 10..20 {
        for i in 0..80u64 {
            op(&mut r, &mut id, kind(k, i), 4 + kind(k, i) as usize);
            let place = r.place_of_last();
            if i == 0 {
                first = place.map(|p| p.position);
            }
            let at = first.map(|f| (f + i as usize) % 80);
            match i {
                // Reordered: no op is the one a period before, so none has a place.
                60..64 => assert_eq!(place, None, "iteration {k}, op {i}"),
                // After them, each op has its place before the schedule resumes at the
                // 16th (op 79), where the plan's steps would otherwise wait.
                64..79 => assert_eq!(
                    place.map(|p| (p.position, p.verified)),
                    at.map(|a| (a, false)),
                    "iteration {k}, op {i}"
                ),
                _ => assert_eq!(
                    place.map(|p| (p.position, p.verified)),
                    at.map(|a| (a, true)),
                    "iteration {k}, op {i}"
                ),
            }
        }
        assert_eq!(r.schedule_key(), key, "iteration {k}: the anchor stays");
    }
}

#[test]
fn an_op_inserted_once_still_moves_the_anchor() {
    let mut r = Recorder::with_window(4096);
    let mut id = 0;
    for _ in 0..10 {
        for i in 0..40u64 {
            op(&mut r, &mut id, i, 4 + i as usize);
        }
    }
    let (p, anchor) = r.schedule_key().expect("a schedule");
    op(&mut r, &mut id, 99, 3);
    for _ in 0..3 {
        for i in 0..40u64 {
            op(&mut r, &mut id, i, 4 + i as usize);
        }
    }
    let (p2, anchor2) = r.schedule_key().expect("a schedule");
    assert_eq!(p2, p);
    assert_ne!(
        anchor2 % p as u64,
        anchor % p as u64,
        "re-anchored after the insertion"
    );
}

/// A block of identical layers held as the schedule before the iteration's period was
/// found is an inner loop, not a schedule to recognise: in an evaluation pass (a block among
/// ops of its own), neither the block nor the training iterations after it take the block's
/// period up again by its first ops. Fails with the block kept (checked).
#[test]
fn an_inner_loop_held_before_the_iteration_is_not_recognised_later() {
    let mut r = Recorder::with_window(1 << 17);
    let mut id = 0;
    let iteration = |r: &mut Recorder, id: &mut u64| {
        for _ in 0..8 {
            for i in 0..208 {
                op(r, id, i, 8);
            }
        }
        for i in 0..67 {
            op(r, id, 5_000 + i, 4);
        }
    };
    for i in 0..1584 {
        op(&mut r, &mut id, 10_000 + i, 3);
    }
    for _ in 0..4 {
        iteration(&mut r, &mut id);
    }
    assert_eq!(r.period(), Some(1731));
    let mut periods = Vec::new();
    // An evaluation pass: one block between ops of its own (too few blocks in a row for
    // their period to be found again), then training again.
    for i in 0..40 {
        op(&mut r, &mut id, 20_000 + i, 5);
    }
    for i in 0..208 {
        op(&mut r, &mut id, i, 8);
        periods.push(r.schedule_key().map(|(p, _)| p));
    }
    for i in 0..40 {
        op(&mut r, &mut id, 30_000 + i, 5);
    }
    for _ in 0..3 {
        iteration(&mut r, &mut id);
        periods.push(r.schedule_key().map(|(p, _)| p));
    }
    assert!(
        !periods.contains(&Some(208)),
        "the block's period came back: {:?}",
        periods.iter().filter(|p| **p == Some(208)).count()
    );
}

#[test]
fn identical_layers_give_way_to_the_iteration_soon() {
    // The shape of the benches' GPT preset: an iteration of eight identical blocks of 208
    // ops (a sub-period the detector sees first, within one iteration) and 67 ops of its
    // own, period 1,731, after a first stretch of 1,584 ops that differs.
    let mut r = Recorder::with_window(1 << 17);
    let mut id = 0;
    for i in 0..1584 {
        op(&mut r, &mut id, 10_000 + i, 3);
    }
    let mut found_in = None;
    for k in 0..6 {
        for _ in 0..8 {
            for i in 0..208 {
                op(&mut r, &mut id, i, 8);
            }
        }
        for i in 0..67 {
            op(&mut r, &mut id, 5_000 + i, 4);
        }
        // The schedule in force, as the engine sees it after each op (asking `period()`
        // would analyse the window on the spot).
        if found_in.is_none() && r.schedule_key().map(|(p, _)| p) == Some(1731) {
            found_in = Some(k);
        }
    }
    assert_eq!(r.period(), Some(1731));
    // Two iterations show it by the end of iteration 1. The block's period breaks at each
    // iteration's own ops and heals a block later, looking healthy whenever the periodic
    // analysis comes due: a heal analyses the window (when a quarter due), so the
    // iteration's period is in force from the first heal after it shows, in iteration 2
    // (iteration 4 before: the next doubling of the window).
    assert!(
        found_in.is_some_and(|k| k <= 2),
        "found in iteration {found_in:?}"
    );
}

mod lean;
mod loops;

/// An output marked as sharing a buffer names the input whose buffer it holds, when the
/// executor knows it (one of its op's inputs); one whose source is not among them is still
/// marked as sharing, with no source.
#[test]
fn a_view_names_the_input_whose_buffer_it_holds() {
    let mut r = Recorder::with_window(256);
    named(&mut r, "Make", Some((0, 4)), Some((1, 8)));
    named(&mut r, "Slice", Some((1, 8)), Some((2, 2)));
    r.mark_output_shares(0, Some(TensorId::new(1)));
    named(&mut r, "Reshape", Some((2, 2)), Some((3, 2)));
    r.mark_output_shares(0, Some(TensorId::new(7)));
    let trace = r.trace_all();
    let tensor = |id: u64| trace.tensors.iter().find(|t| t.id == id).unwrap();
    assert_eq!(tensor(2).view_of, Some(1));
    assert!(tensor(2).shares_buffer);
    assert_eq!(tensor(3).view_of, None);
    assert!(tensor(3).shares_buffer);
    assert_eq!((tensor(1).view_of, tensor(1).shares_buffer), (None, false));
    // Made in the buffer of an input its op consumed: it holds that buffer alone, and may
    // leave by an offload of its own.
    named(&mut r, "Reshape", Some((3, 2)), Some((4, 2)));
    r.mark_output_source(0, TensorId::new(3));
    let trace = r.trace_all();
    let four = trace.tensors.iter().find(|t| t.id == 4).unwrap();
    assert_eq!((four.view_of, four.shares_buffer), (Some(3), false));
}
