//! Op-bound models as users write them (Burn's examples' style: loops inside the step, batches
//! made on a loader thread): the period is the training step whatever the loader's timing,
//! `planned` makes a plan for it, and the trace's work per op does not grow with the step.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Swap, SwapConfig};
use burn_swap_harness::classifier::ClassifierConfig;
use burn_swap_harness::recurrent::RecurrentConfig;
use burn_swap_harness::workload::Workload;

type S = Autodiff<Swap<Flex>>;

/// The recurrent network's step in ops of the training thread: the ops the trace recorded
/// between the ends of two steps (`report.workload.traced_ops`) over the last three steps
/// of `steps`, which are all the same (the trace starts anew where the training thread is
/// judged: `trace::threads`).
fn ops_per_step(config: RecurrentConfig, steps: usize) -> u64 {
    let device = FlexDevice;
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    let mut at_step = Vec::new();
    let workload = Workload::Recurrent(config);
    workload.train_with::<S>(&device, steps, &mut |_, _| {
        at_step.push(burn_swap::report(&device).unwrap().workload.traced_ops);
    });
    let last = &at_step[at_step.len() - 4..];
    let per_step: Vec<u64> = last.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
    assert!(
        per_step[0] > 0 && per_step.windows(2).all(|w| w[0] == w[1]),
        "the steps differ: {at_step:?}"
    );
    per_step[0]
}

/// Trains `workload` under `config` for `steps` steps, checks it against the unwrapped run bit
/// for bit, and returns burn-swap's report.
fn train(workload: Workload, config: SwapConfig, steps: usize) -> burn_swap::Report {
    let device = FlexDevice;
    let plain = workload.train::<Autodiff<Flex>>(&device, steps);
    burn_swap::configure(&device, config).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    let swapped = workload.train::<S>(&device, steps);
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    plain.assert_same(&swapped, workload.name());
    report
}

/// Stacked LSTM cells, both directions, loops over time steps and layers inside the step, and
/// batches stacked item by item on a loader thread: the period found is the step's (the
/// training thread's ops), never a time step's, every run.
#[test]
fn the_period_of_a_stacked_recurrent_model_with_a_loader_is_its_step() {
    let _guard = burn_swap_harness::swap_device_lock();
    let config = RecurrentConfig {
        bidirectional: true,
        ..RecurrentConfig::small()
    };
    let step = ops_per_step(config, 16);
    for _ in 0..3 {
        let report = train(Workload::Recurrent(config), SwapConfig::default(), 16);
        let w = &report.workload;
        assert_eq!(w.period, Some(step as usize), "{report}");
        assert!(w.untraced_ops > 0, "the loader's ops were traced: {report}");
    }
}

/// The same model under half its peak, `planned`: one plan, made for the step and for no loop
/// inside it, however the loader's ops fall.
#[test]
fn planned_makes_one_plan_for_the_step_of_a_recurrent_model_with_a_loader() {
    let _guard = burn_swap_harness::swap_device_lock();
    let config = RecurrentConfig {
        bidirectional: true,
        ..RecurrentConfig::small()
    };
    let step = ops_per_step(config, 16);
    let peak = train(Workload::Recurrent(config), SwapConfig::default(), 16)
        .memory
        .peak_bytes;
    // Planned on the op's thread, so that when the plan is ready does not depend on the load.
    let report = train(
        Workload::Recurrent(config),
        SwapConfig::budget_bytes(peak / 2).with_background_planning(false),
        24,
    );
    let p = &report.plan;
    assert_eq!(report.workload.period, Some(step as usize), "{report}");
    assert!(report.memory.peak_bytes <= peak / 2, "{report}");
    assert_eq!(p.plans, 1, "{report}");
    assert!(
        p.plan_takeovers.iter().all(|t| t.period == step as usize)
            && p.declines.latest.iter().all(|d| d.period == step as usize),
        "a plan for another period than the step's: {report}"
    );
}

/// A text classifier whose padding masks are made on the loader thread (an op per text, on
/// that thread): the step is found, and the loader's ops are left out of it.
#[test]
fn a_text_classifier_with_masks_made_on_a_loader_has_its_step_found() {
    let _guard = burn_swap_harness::swap_device_lock();
    let report = train(
        Workload::Classifier(ClassifierConfig::small()),
        SwapConfig::default(),
        60,
    );
    assert!(report.workload.period.is_some(), "{report}");
    assert!(report.workload.untraced_ops > 0, "{report}");
}

/// Log entries the trace may read off the fast path per op once the period holds: a
/// compaction reads the window once per half a window of ops (2 per op), the content of an
/// iteration is hashed once per iteration (1 per op) when a plan asks for it.
const STEADY_READS_PER_OP: f64 = 4.0;

/// The trace's work per op, counted by the report (log entries read off the fast path, over
/// the ops recorded) from the 16th step to the 24th, once the period holds, at two lengths
/// of the same op-bound model, the step about four times as long in the second: bounded by
/// a constant at both, where a path that scans the iteration or the window per op makes it
/// grow with the step (hundreds of reads per op).
#[test]
fn the_traces_work_per_op_does_not_grow_with_the_step() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let per_op = |seq: usize| {
        let workload = Workload::Recurrent(RecurrentConfig {
            seq,
            ..RecurrentConfig::small()
        });
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        burn_swap::restart_trace(&device);
        let mut at = Vec::new();
        workload.train_with::<S>(&device, 24, &mut |step, _| {
            if step == 15 || step == 23 {
                let w = burn_swap::report(&device).unwrap().workload;
                assert!(w.period.is_some(), "seq {seq}: no period by step {step}");
                at.push((w.trace_reads, w.traced_ops));
            }
        });
        let ((reads_0, ops_0), (reads_1, ops_1)) = (at[0], at[1]);
        assert!(ops_1 > ops_0, "seq {seq}: the trace started anew: {at:?}");
        (reads_1 - reads_0) as f64 / (ops_1 - ops_0) as f64
    };
    let (short, long) = (per_op(4), per_op(16));
    assert!(
        short <= STEADY_READS_PER_OP && long <= STEADY_READS_PER_OP,
        "log reads per op: {short:.2} at 4 time steps, {long:.2} at 16"
    );
}
