//! Unit tests of the combiner.

use super::fit::{late_in_queue, lead_into_slack};
use super::*;
use crate::plan::checkpoint::candidates;
use crate::plan::profile::{CopySample, Links};
use crate::plan::simulate::Lifetime;

/// The chain of `trace::synthetic` with 1000-byte activations, whose forward ops take
/// `forward_ns` each and the rest 1 µs.
fn chain(layers: usize, forward_ns: u64) -> Trace {
    crate::trace::synthetic::chain(
        layers,
        |_| 1000,
        |i| if i < layers { forward_ns } else { 1000 },
    )
}

/// `trace` with tensor `tensor` read once more, by op `op` (its accesses in order).
fn read_again(trace: &mut Trace, tensor: usize, op: usize) {
    use crate::trace::{Access, AccessKind};
    let accesses = &mut trace.tensors[tensor].accesses;
    let at = accesses.partition_point(|a| a.op < op);
    accesses.insert(
        at,
        Access {
            op,
            kind: AccessKind::Read,
        },
    );
    let id = trace.tensors[tensor].id;
    trace.ops[op].inputs.push(id);
}

/// An offload after op `after` whose fetch starts at `prefetch_at`, copied on the op thread
/// when `inline`.
fn offload(after: usize, prefetch_at: usize, inline: bool) -> Action {
    Action::Offload {
        after,
        prefetch_at,
        inline,
    }
}

/// Where each of the plan's offloads starts its fetch.
fn starts(actions: &[(usize, Action)]) -> Vec<usize> {
    actions
        .iter()
        .map(|(_, a)| match *a {
            Action::Offload { prefetch_at, .. } => prefetch_at,
            Action::Recompute { .. } => panic!("expected offloads: {actions:?}"),
        })
        .collect()
}

fn profile(trace: &Trace, bandwidth: f64) -> Profile {
    let samples = [1u64 << 10, 1 << 20]
        .iter()
        .map(|&b| CopySample {
            bytes: b,
            seconds: b as f64 / bandwidth,
        })
        .collect::<Vec<_>>();
    Profile::new(
        trace,
        Some(Links {
            to_host: samples.clone(),
            to_device: samples,
            on_thread: None,
        }),
    )
}

#[test]
fn a_roomy_budget_keeps_everything() {
    let trace = chain(8, 1000);
    let p = profile(&trace, 1e9);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 1 << 20);
    assert!(plan.feasible && plan.actions.is_empty());
}

#[test]
fn recompute_beats_a_slow_link_and_offload_beats_an_expensive_producer() {
    // Cheap producers (1 µs) and a slow link (1 MB/s: 2 ms per round trip): recompute.
    let trace = chain(12, 1000);
    let p = profile(&trace, 1e6);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 8000);
    assert!(plan.feasible, "{plan:?}");
    let recomputed: Vec<usize> = plan
        .actions
        .iter()
        .filter(|(_, a)| matches!(a, Action::Recompute { .. }))
        .map(|&(t, _)| t)
        .collect();
    assert!(!recomputed.is_empty());
    // Recomputation stays one level deep: activation l + 1 is made from activation l,
    // so no two neighbours are both recomputed; a neighbour of a recomputed tensor that
    // must leave too is offloaded instead.
    for &t in &recomputed {
        assert!(!recomputed.contains(&(t + 1)), "{recomputed:?}");
    }
    for &(t, a) in &plan.actions {
        if matches!(a, Action::Offload { .. }) {
            assert!(
                recomputed.contains(&(t + 1)) || (t > 0 && recomputed.contains(&(t - 1))),
                "tensor {t} offloaded over a slow link without need: {plan:?}"
            );
        }
    }

    // Expensive producers (1 ms) and a fast link (1 GB/s: 2 µs, hidden by the gap): offload.
    let trace = chain(12, 1_000_000);
    let p = profile(&trace, 1e9);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 8000);
    assert!(plan.feasible, "{plan:?}");
    assert!(
        plan.actions
            .iter()
            .all(|(_, a)| matches!(a, Action::Offload { .. }))
    );
    assert_eq!(plan.recompute_seconds, 0.0);
    assert_eq!(plan.exposed_seconds, 0.0, "the gaps hide the copies");
    assert!(plan.simulation.peak_pool_bytes <= 8000);
}

#[test]
fn prefetch_starts_early_enough_to_land_in_time() {
    // Backward ops take 1 µs; a fetch of 1000 bytes at 250 MB/s takes 4 µs, so the
    // prefetch starts at least four ops before the use (sooner where the budget has room:
    // see `fetches_start_early_in_the_budgets_slack_in_the_order_of_their_uses`); the plan's
    // exposed time counts the fetches queued behind one another.
    let trace = chain(12, 1_000_000);
    let p = profile(&trace, 2.5e8);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 8000);
    assert!(plan.feasible, "{plan:?}");
    assert!(!plan.actions.is_empty());
    for &(tensor, action) in &plan.actions {
        let Action::Offload {
            after, prefetch_at, ..
        } = action
        else {
            panic!("expected offloads");
        };
        let next_use = trace.tensors[tensor].accesses[1].op;
        let hidden = p.gap_seconds(prefetch_at, next_use) + p.op_nanos[prefetch_at] as f64 * 1e-9;
        assert!(
            hidden >= 4e-6 - 1e-12,
            "tensor {tensor}: {hidden} s before its use"
        );
        assert!(after < prefetch_at, "fetched after it left: {action:?}");
    }
    // Each fetch is hidden alone, but they are made one after another: activations 3, 2, 1
    // and 0 are fetched from the ends of ops 13, 14, 15 and 16 (each 4 µs) for ops 21, 22, 23
    // and 24, so activation 2 lands just in time, 1 lands 3 µs late and 0 lands 6 µs late.
    assert_eq!(starts(&plan.actions), vec![17, 16, 15, 14], "{plan:?}");
    assert!((plan.exposed_seconds - 9e-6).abs() < 1e-9, "{plan:?}");
}

#[test]
fn a_tensor_leaves_in_each_of_its_gaps_and_returns_just_in_time() {
    // A chain of 8 whose activation 0 (8000 bytes) op 4 reads again, and whose
    // activation 2 is as large: activation 0 must be gone while activation 2 is made
    // (ops 2 and 3) and again while the backward reads it (op 14).
    let mut trace =
        crate::trace::synthetic::chain(8, |l| if l == 0 || l == 2 { 8000 } else { 1000 }, |_| 1000);
    read_again(&mut trace, 0, 4);
    let p = profile(&trace, 1e9);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 12_000);
    assert!(plan.feasible, "{plan:?}");
    assert!(plan.simulation.peak_live_bytes <= 12_000);
    let mut gaps: Vec<(usize, usize)> = plan
        .actions
        .iter()
        .filter(|(t, _)| *t == 0)
        .map(|&(_, a)| match a {
            Action::Offload {
                after, prefetch_at, ..
            } => (after, prefetch_at),
            Action::Recompute { .. } => panic!("activation 0 is offloaded: {plan:?}"),
        })
        .collect();
    gaps.sort_unstable();
    // Out after op 1, back for op 4 only when op 3 is done (earlier, it would not fit
    // beside activation 2); out again after op 4, back before op 14's end at the latest.
    assert_eq!(gaps.len(), 2, "{plan:?}");
    assert_eq!(gaps[0], (1, 4));
    assert_eq!(gaps[1].0, 4);
    assert!(gaps[1].1 > 14, "{plan:?}");
    // Its lifetimes: made at op 0 until op 1, at op 4 alone, then from the second
    // prefetch to its end.
    let lifetimes = lifetimes(&trace, &plan.actions);
    assert_eq!(lifetimes[0], Lifetime::own(8000, Some(0), Some(1)));
    assert!(lifetimes.contains(&Lifetime::own(8000, Some(4), Some(4))));
}

#[test]
fn an_impossible_budget_is_reported_infeasible() {
    let trace = chain(6, 1000);
    let p = profile(&trace, 1e9);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 1000);
    assert!(!plan.feasible);
    assert!(plan.simulation.peak_pool_bytes > 1000);
}

#[test]
fn a_copy_that_costs_less_than_handing_it_over_is_made_on_the_op_thread() {
    use crate::plan::profile::OnThread;
    // Expensive producers (1 ms) and a 1 GB/s link: every offload hides behind its gap,
    // and copying 1000 bytes on the op thread takes 1 µs each way.
    let trace = chain(12, 1_000_000);
    let with_handover = |handover_seconds: f64| {
        let mut p = profile(&trace, 1e9);
        let links = p.links.as_mut().unwrap();
        links.on_thread = Some(OnThread {
            handover_seconds,
            to_host: links.to_host.clone(),
            to_device: links.to_device.clone(),
        });
        p
    };

    // Handing a copy to a worker costs the op thread 20 µs: both copies are made there.
    let p = with_handover(20e-6);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 8000);
    assert!(plan.feasible, "{plan:?}");
    assert!(!plan.actions.is_empty());
    for &(tensor, action) in &plan.actions {
        let Action::Offload {
            after,
            prefetch_at,
            inline,
        } = action
        else {
            panic!("expected offloads: {plan:?}");
        };
        assert!(inline, "{plan:?}");
        // Gone right after the op that opens the gap, back for the use and no earlier.
        let next_use = trace.tensors[tensor]
            .accesses
            .iter()
            .find(|a| a.op > after)
            .unwrap()
            .op;
        assert_eq!(prefetch_at, next_use, "{plan:?}");
    }
    let offloads = plan.actions.len() as f64;
    assert!(
        (plan.exposed_seconds - offloads * 2e-6).abs() < 1e-9,
        "{plan:?}"
    );
    assert_eq!(plan.handover_seconds, 0.0);
    assert!(plan.simulation.peak_live_bytes <= 8000);
    // The executor's steps: out after the op, back after the op before the use, both on
    // the op thread.
    let program = crate::plan::compile(&trace, &plan);
    let steps: Vec<_> = program.after.iter().flatten().collect();
    assert!(steps.iter().all(|s| matches!(
        s,
        crate::plan::program::Step::Offload { inline: true, .. }
            | crate::plan::program::Step::Prefetch { inline: true, .. }
    )));

    // A cheap hand-over (0.5 µs, 1 µs for both copies): the workers make the copies, and
    // the plan's cost counts the hand-overs.
    let p = with_handover(0.5e-6);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), 8000);
    assert!(plan.feasible, "{plan:?}");
    assert!(
        plan.actions
            .iter()
            .all(|(_, a)| matches!(a, Action::Offload { inline: false, .. })),
        "{plan:?}"
    );
    assert_eq!(plan.exposed_seconds, 0.0, "the gaps hide the copies");
    let offloads = plan.actions.len() as f64;
    assert!(
        (plan.handover_seconds - offloads * 1e-6).abs() < 1e-12,
        "{plan:?}"
    );
}

/// A chain of 8 with three 8000-byte activations first, activation 0 read again by op 3: op
/// 2 holds activations 1 and 2 and fits 20,000 bytes only if activation 0 leaves for that
/// one op, between its reads at ops 1 and 3. Gaps of three ops or more cannot get there
/// (24,000 at best); with the single-op gaps the plan fits, and `build` takes that plan when
/// no other fits.
#[test]
fn single_op_gaps_reach_a_peak_that_sits_between_two_uses() {
    let mut trace =
        crate::trace::synthetic::chain(8, |l| if l <= 2 { 8000 } else { 1000 }, |_| 1000);
    read_again(&mut trace, 0, 3);
    let p = profile(&trace, 1e9);
    let offload_only = |min_gap| -> Vec<Candidate> {
        candidates(&trace, &p, min_gap)
            .into_iter()
            .map(|c| Candidate {
                recomputable: false,
                ..c
            })
            .collect()
    };
    let budget = 20_000;
    let usual = combine(&trace, &p, &offload_only(3), budget);
    assert!(!usual.feasible, "{usual:?}");
    assert_eq!(usual.smallest_budget, 24_000);
    let short = combine_gaps(&trace, &p, &offload_only(2), budget, 2);
    assert!(short.feasible, "{short:?}");
    assert!(short.simulation.peak_live_bytes <= budget);
    assert!(
        short.actions.iter().any(|&(t, a)| t == 0
            && matches!(a, Action::Offload { after: 1, prefetch_at, .. } if prefetch_at <= 3)),
        "activation 0 leaves between ops 1 and 3: {short:?}"
    );
    let program = crate::plan::build(
        &trace,
        &p,
        budget,
        (crate::config::Policy::OffloadOnly, Default::default()),
    );
    assert!(program.fits, "{:?}", program.choices);
    assert_eq!(
        program.choices[program.chosen].planner,
        "offload-only, single-op gaps"
    );
    // Where gaps of three ops suffice, no single-op plan is made.
    let roomy = crate::plan::build(
        &trace,
        &p,
        24_000,
        (crate::config::Policy::OffloadOnly, Default::default()),
    );
    assert!(roomy.fits);
    assert!(
        roomy
            .choices
            .iter()
            .all(|c| !c.planner.contains("single-op"))
    );
}

/// Copies to the host are made one after another: a second offload after the same op
/// starts when the first is done, and holds its device bytes an op longer.
#[test]
fn an_offload_queued_behind_another_holds_its_bytes_longer() {
    let trace = chain(8, 1000);
    // Each 1000-byte copy takes 1.4 ops' time (ops take 1 µs).
    let p = profile(&trace, 1000.0 / 1.4e-6);
    let fits = link_fits(&p);
    let copy = |tensor| (tensor, offload(2, 12, false));
    assert_eq!(held_in_queue(&trace, &p, fits, &[copy(1)]), vec![4]);
    assert_eq!(held_in_queue(&trace, &p, fits, &[copy(2)]), vec![4]);
    assert_eq!(
        held_in_queue(&trace, &p, fits, &[copy(1), copy(2)]),
        vec![4, 5]
    );
    // A copy on the op thread is done at once and does not hold the queue.
    let inline = (1, offload(2, 12, true));
    assert_eq!(
        held_in_queue(&trace, &p, fits, &[inline, copy(2)]),
        vec![2, 4]
    );
}

/// Fetches start as early as the budget's slack lets them: not where their bytes would put
/// an op over the budget, not before their copy out is done, not before the fetch of an
/// earlier use (the receive side takes them in the order started), not into the iteration
/// before the one they are planned in; copies on the op thread stay at their use.
#[test]
fn fetches_start_early_in_the_budgets_slack_in_the_order_of_their_uses() {
    // Tensor 2 (1000 B) is used again at op 14, tensor 1 (400 B) at op 15; 17 ops.
    let trace = crate::trace::synthetic::chain(8, |l| if l == 1 { 400 } else { 1000 }, |_| 1000);
    let mut actions = vec![
        (2, offload(2, 13, false)),
        (1, offload(1, 14, false)),
        // Used in the next iteration (op 19 is op 2 of the next one).
        (3, offload(3, 18, false)),
        (4, offload(4, 11, true)),
    ];
    let used = [14, 15, 19, 11];
    let held = [3, 2, 4, 4];
    let mut live = vec![5000i64; trace.ops.len()];
    live[8] = 6000;
    lead_into_slack(&trace, &mut actions, (&used, &held), (&mut live, 6500));
    // Tensor 2 stops after op 8, where its 1000 B would make 7000; tensor 1's 400 B would fit
    // there, but it is needed later and starts no sooner than tensor 2's fetch; the next
    // iteration's fetch starts at that iteration's first op; the inline copy stays.
    assert_eq!(starts(&actions), vec![9, 9, 17, 11]);
    assert_eq!(live[8], 6000);
    assert_eq!(&live[9..13], &[6400; 4]);
    assert_eq!(live[13], 5400);
    assert_eq!(live[0], 6000);
    // Without the budget's slack nothing moves.
    let mut tight = vec![6500i64; trace.ops.len()];
    let mut again = vec![(2, offload(2, 13, false))];
    lead_into_slack(&trace, &mut again, (&[14], &[3]), (&mut tight, 6500));
    assert_eq!(again[0].1, offload(2, 13, false));
}

/// Fetches are made one after another, in the order they are started: two fetches started
/// after the same op, each in time alone, land one behind the other, and the second is late
/// by what the first delays it; the one needed sooner goes first, whatever the plan's order
/// (as `program::compile` orders them).
#[test]
fn a_fetch_queued_behind_another_lands_later() {
    let trace = chain(8, 1000);
    // Ops take 1 µs; each 1000-byte fetch 1.6 µs.
    let p = profile(&trace, 1000.0 / 1.6e-6);
    let fits = link_fits(&p);
    let fetch = |tensor| (tensor, offload(2, 11, false));
    let near = |a: f64, b: f64| (a - b).abs() < 1e-12;
    // Started when op 10 is done (11 µs): needed at op 13 (starts at 13 µs), it lands at
    // 12.6 µs, in time.
    let alone = late_in_queue(&trace, &p, fits, &[fetch(1)], &[13]);
    assert!(near(alone[0], 0.0), "{alone:?}");
    // Behind it, one needed at op 14 (14 µs) lands at 14.2 µs: 0.2 µs late.
    let both = late_in_queue(&trace, &p, fits, &[fetch(1), fetch(2)], &[13, 14]);
    assert!(near(both[0], 0.0) && near(both[1], 0.2e-6), "{both:?}");
    // Listed the other way round, the one needed at op 13 still goes first.
    let swapped = late_in_queue(&trace, &p, fits, &[fetch(2), fetch(1)], &[14, 13]);
    assert!(
        near(swapped[0], 0.2e-6) && near(swapped[1], 0.0),
        "{swapped:?}"
    );
    // Started an op apart, the order started wins: the one needed at op 13, started after
    // op 11 (12 µs) behind one started after op 10, lands at 14.2 µs, 1.2 µs late.
    let later = (1, offload(2, 12, false));
    let apart = late_in_queue(&trace, &p, fits, &[fetch(2), later], &[14, 13]);
    assert!(near(apart[0], 0.0) && near(apart[1], 1.2e-6), "{apart:?}");
    // A copy on the op thread takes no place in the queue.
    let inline = (1, offload(2, 13, true));
    let mixed = late_in_queue(&trace, &p, fits, &[inline, fetch(2)], &[13, 14]);
    assert_eq!(mixed[0], 0.0);
    assert!(near(mixed[1], 0.0), "{mixed:?}");
}

#[test]
fn a_named_planner_is_the_only_one_judged() {
    use crate::config::{Planner, Policy};
    let trace = crate::trace::synthetic::chain(12, |_| 8000, |_| 1000);
    let p = profile(&trace, 1e9);
    let peak = keep_all(&trace, &p, u64::MAX).simulation.peak_live_bytes;
    let budget = peak / 2;
    let names = |planner| -> Vec<String> {
        let program = crate::plan::build(&trace, &p, budget, (Policy::Planned, planner));
        program.choices.into_iter().map(|c| c.planner).collect()
    };
    let all = names(Planner::Cheapest);
    for planner in ["combined", "checkpoints", "segments"] {
        assert!(all.iter().any(|n| n.starts_with(planner)), "{all:?}");
    }
    let base = |n: &String| n.split(',').next().unwrap().to_string();
    let segments = names(Planner::Segments);
    assert!(!segments.is_empty() && segments.iter().all(|n| base(n) == "segments"));
    let checkpoints = names(Planner::Checkpoints);
    assert!(!checkpoints.is_empty() && checkpoints.iter().all(|n| base(n) == "checkpoints"));
    let combined = names(Planner::Combined);
    assert!(
        !combined.is_empty()
            && combined
                .iter()
                .all(|n| ["combined", "offload-only", "recompute-only"].contains(&base(n).as_str())),
        "{combined:?}"
    );
}

/// The segment search is skipped where a plan that fits costs nothing worth telling apart
/// (copies the ops hide: a fast link), and made where the plans that fit cost more (a slow
/// link), or where it is the planner named.
#[test]
fn the_segment_search_is_skipped_where_a_plan_that_fits_costs_nothing() {
    use crate::config::{Planner, Policy};
    let trace = crate::trace::synthetic::chain(12, |_| 8000, |_| 1000);
    let budget = keep_all(&trace, &profile(&trace, 1e9), u64::MAX)
        .simulation
        .peak_live_bytes
        / 2;
    let made = |bandwidth: f64, planner| {
        let p = profile(&trace, bandwidth);
        let program = crate::plan::build(&trace, &p, budget, (Policy::Planned, planner));
        let chosen = program.choices.get(program.chosen).cloned();
        let segments = program
            .choices
            .iter()
            .any(|c| c.planner.starts_with("segments"));
        (segments, chosen)
    };
    let (searched, chosen) = made(1e15, Planner::Cheapest);
    let chosen = chosen.expect("a plan fits");
    assert!(chosen.seconds() <= 1e-12, "{chosen:?}");
    assert!(
        !searched,
        "the segments were searched past a plan that costs nothing"
    );
    assert!(
        made(1e9, Planner::Cheapest).0,
        "a slow link: the segments are searched"
    );
    assert!(made(1e15, Planner::Segments).0, "the planner named is made");
}

/// The segment search gets its whole work limit where it is the planner named and a tenth
/// of it where its plan is one candidate among the others (the cheapest choice).
#[test]
fn the_segment_search_among_other_plans_gets_a_tenth_of_its_work() {
    use crate::config::Planner;
    let named = crate::plan::segment_search(Planner::Segments);
    let among = crate::plan::segment_search(Planner::Cheapest);
    assert_eq!(named.work, 10_000_000);
    assert_eq!(among.work, named.work / 10);
    assert_eq!(
        crate::plan::segments::GaConfig {
            work: named.work,
            ..among
        },
        named,
        "only the work differs"
    );
}

#[test]
fn a_plan_predicts_its_counted_bytes_at_every_op() {
    // The chain of 8 under half its keep-all peak: the plan's per-op bytes are those of its
    // own lifetimes (what the executor holds when it follows it), their largest is the
    // simulated peak, and they stay within the budget where the plan fits.
    let trace = chain(8, 1000);
    let p = profile(&trace, 1e9);
    let all = keep_all(&trace, &p, u64::MAX);
    assert_eq!(all.live_bytes.len(), trace.ops.len());
    assert_eq!(
        all.live_bytes.iter().max(),
        Some(&all.simulation.peak_live_bytes)
    );
    let budget = all.simulation.peak_live_bytes / 2;
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), budget);
    assert!(plan.feasible && !plan.actions.is_empty(), "{plan:?}");
    assert_eq!(
        plan.live_bytes.iter().max(),
        Some(&plan.simulation.peak_live_bytes)
    );
    assert!(
        plan.live_bytes.iter().all(|&b| b <= budget),
        "{:?}",
        plan.live_bytes
    );
    // Where the plan's tensors are away, it predicts less than keeping everything.
    assert!(
        plan.live_bytes
            .iter()
            .zip(&all.live_bytes)
            .any(|(p, a)| p < a),
        "{:?} against {:?}",
        plan.live_bytes,
        all.live_bytes
    );
}

/// A recomputation replays its producer before the op that needs it, so that producer's
/// inputs must be on the device then: an offload of one of them across the replay comes back
/// for it instead, whichever is ranked first, and is left out when that leaves no gap.
#[test]
fn an_offload_of_a_replays_input_comes_back_for_the_replay() {
    // Tensor 1 is made by op 1 from tensor 0, read at op 2 and again at op 7; tensor 0 is
    // read at op 1 and again at op 8.
    let trace = chain(4, 1000);
    let p = profile(&trace, 1e9);
    let recompute = |score| Ranked {
        score,
        tensor: 1,
        used: 7,
        action: Action::Recompute {
            after: 2,
            before: 7,
        },
        cost: 1e-6,
        offload: Some((offload(2, 6, false), 2e-6)),
        handover: 0.0,
    };
    let offload_input = |score, after, used, inline| Ranked {
        score,
        tensor: 0,
        used,
        action: offload(after, if inline { used } else { used - 2 }, inline),
        cost: 0.0,
        offload: None,
        handover: 0.0,
    };
    let ways = |ranked: &[Ranked]| -> Vec<(usize, Action, usize)> {
        ranked
            .iter()
            .map(|r| (r.tensor, r.action, r.used))
            .collect()
    };
    let recomputed = (1, recompute(0.0).action, 7);
    for order in [[0, 1], [1, 0]] {
        let mut ranked: Vec<Ranked> = order
            .iter()
            .map(|&k| match k {
                0 => offload_input(2.0, 1, 8, false),
                _ => recompute(1.0),
            })
            .collect();
        one_level(&trace, &p, 1 << 20, &mut ranked);
        // Back for the replay before op 7, fetched two ops ahead as it was of op 8.
        let back = (0, offload(1, 5, false), 7);
        let expected = if order[0] == 0 {
            vec![back, recomputed]
        } else {
            vec![recomputed, back]
        };
        assert_eq!(ways(&ranked), expected);
    }
    // Copied on the op thread, it is fetched right before the replay.
    let mut ranked = vec![recompute(2.0), offload_input(1.0, 1, 8, true)];
    one_level(&trace, &p, 1 << 20, &mut ranked);
    assert_eq!(ways(&ranked)[1], (0, offload(1, 7, true), 7));
    // Back before the replay anyway: unchanged.
    let mut ranked = vec![recompute(2.0), offload_input(1.0, 1, 6, false)];
    one_level(&trace, &p, 1 << 20, &mut ranked);
    assert_eq!(ways(&ranked)[1], (0, offload(1, 4, false), 6));
    // A gap that ends at the replay's op leaves nothing: left out.
    let mut ranked = vec![recompute(2.0), offload_input(1.0, 6, 8, false)];
    one_level(&trace, &p, 1 << 20, &mut ranked);
    assert_eq!(ways(&ranked), [recomputed]);
}

#[test]
fn room_is_kept_for_each_ops_temporaries() {
    let mut trace = chain(8, 1000);
    let p = profile(&trace, 1e9);
    let peak = combine(&trace, &p, &candidates(&trace, &p, 3), 1 << 20)
        .simulation
        .peak_live_bytes;
    // The counted peak as budget: everything stays.
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), peak);
    assert!(plan.feasible && plan.actions.is_empty());
    // Every op holds 2,000 bytes of temporaries beside its tensors: the plan moves tensors
    // so that the counted bytes stay 2,000 under the budget at every op.
    for op in &mut trace.ops {
        op.temporaries = 2000;
    }
    let p = profile(&trace, 1e9);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), peak);
    assert!(plan.feasible, "{plan:?}");
    assert!(!plan.actions.is_empty());
    assert!(plan.simulation.peak_live_bytes + 2000 <= peak, "{plan:?}");
    assert!(plan.smallest_budget <= peak);
    // Temporaries as large as the budget leave no plan that fits, and the smallest budget
    // says how much is needed.
    for op in &mut trace.ops {
        op.temporaries = peak;
    }
    let p = profile(&trace, 1e9);
    let plan = combine(&trace, &p, &candidates(&trace, &p, 3), peak);
    assert!(!plan.feasible);
    assert!(plan.smallest_budget > peak);
}
