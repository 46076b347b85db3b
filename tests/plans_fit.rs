//! Plans that fit: under the planned policy, at half, a third and a quarter of a model's
//! unbudgeted counted peak, the plan in force predicts a peak of counted bytes within the
//! budget, the plan steers alone (iterations end under it, and from its first full iteration
//! on the reactive fallback makes no room), and the iterations that follow it measure a peak
//! within 2% of its prediction (the README's figure; equal, with the links pinned), with
//! every planned copy made on the op thread (a worker's copy is done when its thread ran:
//! timing, for `swap-bench`). The simulator counts each op's bytes as the executor does.
//! Every candidate plan is judged (the combiner's, offload-only, recompute-only, seed 004's
//! checkpoints, seed 001's segments) and the cheapest that fits is the one in force. The
//! figures are printed. A plan that costs more than the reactive fallback is declined. A
//! schedule that comes back in no order gets its plan back by its iteration's first ops.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Policy, Swap, SwapConfig};
use burn_swap_harness::models::{
    BnCnnConfig, ConvNetConfig, GptConfig, LstmNetConfig, MlpConfig, ResNetConfig,
    TransformerConfig,
};
use burn_swap_harness::schedules::GanConfig;
use burn_swap_harness::verify::{copy_samples, links_at};
use burn_swap_harness::workload::Workload;

type B = Autodiff<Swap<Flex>>;

/// Steps under the budget: the plan is made, made again while it does not fit (the first
/// periodic iteration does not know what the previous one carried over), then followed.
const STEPS: usize = 10;

/// How the peak measured under a plan is held to the plan's prediction. Every planned copy
/// is made on the op thread here (`CopiesOnTheOpThread`): a copy handed to a transfer worker
/// frees its device bytes at the first op start after the worker's thread ran, and on a
/// loaded 2-vCPU machine that thread runs tens of microseconds early or late, which moved a
/// conv net's peak by 12.9 KB (4.3%) either way from run to run. That is timing, measured
/// where timing is measured: `swap-bench`'s rows give the predicted peak beside the measured.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Accuracy {
    /// Within 2% either way (the README's figure): the links are the ones measured here.
    Close,
    /// Equal, byte for byte: the links pinned, so that the plan does not depend on how fast
    /// this machine copied when its links were measured.
    Exact,
}

/// Configures the device, its trace and counters started afresh.
fn configure_afresh(config: SwapConfig) {
    let device = FlexDevice;
    burn_swap::configure(&device, config).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
}

/// `workload`'s counted peak over three unbudgeted steps.
fn unbudgeted_peak(workload: &Workload) -> u64 {
    let device = FlexDevice;
    configure_afresh(SwapConfig::default());
    workload.train::<B>(&device, 3);
    burn_swap::report(&device).unwrap().memory.peak_bytes
}

/// Planned on the op thread, every plan followed: the plan is followed from the same
/// iteration in every run, so that the last iterations measured are under it.
fn steered(budget: u64) -> SwapConfig {
    SwapConfig::budget_bytes(budget)
        .with_policy(Policy::Planned)
        .with_background_planning(false)
        .with_plans_judged(false)
}

/// Checks `workload` at half, a third and a quarter of its peak (with [`check_steered_at`],
/// over another number of steps and at other fractions): the fallback moves nothing while a
/// plan is followed, and the measured peak is the prediction by `accuracy`.
fn check_steered(workload: Workload, accuracy: Accuracy) {
    check_steered_at(workload, accuracy, STEPS, &[0.5, 0.33, 0.25])
}

/// [`check_steered`] over `steps` steps at each of `fractions` of the peak.
fn check_steered_at(workload: Workload, accuracy: Accuracy, steps: usize, fractions: &[f64]) {
    let device = FlexDevice;
    let peak = unbudgeted_peak(&workload);
    // Every planned copy made on the op thread: done when the op that issues it has made
    // it, so that the peak does not depend on when a transfer worker's thread ran.
    let _copies = CopiesOnTheOpThread::new();
    for &fraction in fractions {
        let budget = (peak as f64 * fraction) as u64;
        configure_afresh(steered(budget));
        workload.train::<B>(&device, steps);
        let report = burn_swap::report(&device).unwrap();
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        let name = workload.name();
        let predicted = report
            .plan
            .predicted_peak_bytes
            .unwrap_or_else(|| panic!("{name} at {fraction}: no plan\n{report}"));
        let measured = report
            .workload
            .iteration_peaks
            .last()
            .map(|p| p.peak_bytes)
            .unwrap_or_else(|| panic!("{name} at {fraction}: no iteration\n{report}"));
        println!(
            "{name} at {:.0}% ({budget} B): predicted {predicted} B, measured {measured} B \
             ({:+.1}%), {} offloads + {} recomputes planned, {} planned iterations, \
             {} B moved by the fallback under the plan",
            fraction * 100.0,
            100.0 * (measured as f64 / predicted as f64 - 1.0),
            report.plan.planned_offloads,
            report.plan.planned_recomputes,
            report.plan.planned_iterations,
            report.plan.fallback_bytes_under_plan
        );
        assert!(
            report.memory.peak_bytes <= budget,
            "{name} at {fraction}\n{report}"
        );
        assert!(
            predicted <= budget,
            "{name} at {fraction}: the plan does not fit\n{report}"
        );
        assert!(
            report.plan.planned_iterations > 0,
            "{name} at {fraction}: no iteration ended under the plan\n{report}"
        );
        // The plan steers alone: from each plan's first full iteration on, the fallback moves
        // nothing (without the plan's steps it moves 41-51% of the offloaded bytes).
        assert_eq!(
            report.plan.fallback_bytes_under_plan, 0,
            "{name} at {fraction}: the fallback made room under the plan\n{report}"
        );
        let error = (measured as f64 - predicted as f64).abs() / predicted as f64;
        let close = match accuracy {
            Accuracy::Close => error <= 0.02,
            Accuracy::Exact => measured == predicted,
        };
        assert!(
            close,
            "{name} at {fraction}: {measured} vs {predicted} ({accuracy:?})\n{report}"
        );
    }
}

/// Planned copies made on the op thread while it lives (the planner told that handing a copy
/// to a transfer worker costs a second, so that none is worth it); undone when dropped,
/// panics included.
struct CopiesOnTheOpThread;

impl CopiesOnTheOpThread {
    fn new() -> Self {
        burn_swap::unstable::set_handover_seconds(Some(1.0));
        Self
    }
}

impl Drop for CopiesOnTheOpThread {
    fn drop(&mut self) {
        burn_swap::unstable::set_handover_seconds(None);
    }
}

/// Links pinned (`burn_swap::unstable::set_links`) while it lives, each direction copying in
/// `latency` seconds plus its bytes at `bytes_per_second`, with a hand-over to a worker dearer
/// than any copy (every planned copy made on the op thread); unpinned when dropped, panics
/// included.
struct PinnedLinks;

impl PinnedLinks {
    fn new(to_host: (f64, f64), to_device: (f64, f64)) -> Self {
        use burn_swap::unstable::plan::profile::{Links, OnThread};
        let out = copy_samples(to_host.0, to_host.1);
        let back = copy_samples(to_device.0, to_device.1);
        burn_swap::unstable::set_links(Some(Links {
            to_host: out.clone(),
            to_device: back.clone(),
            on_thread: Some(OnThread {
                handover_seconds: 1.0,
                to_host: out,
                to_device: back,
            }),
        }));
        Self
    }
}

impl Drop for PinnedLinks {
    fn drop(&mut self) {
        burn_swap::unstable::set_links(None);
    }
}

/// [`check_steered`] with the links measured here.
fn check(workload: Workload) {
    check_steered(workload, Accuracy::Close);
}

#[test]
fn plans_fit_and_predict_the_measured_peak() {
    let _guard = burn_swap_harness::swap_device_lock();
    check(Workload::Mlp(MlpConfig::small()));
    check(Workload::ConvNet(ConvNetConfig::small()));
    check(Workload::Transformer(TransformerConfig::small()));
}

/// Where a plan is wrong, the fallback makes the room it did not, and the report says where:
/// a tensor the plan never saw (made by the loop between two steps and kept) takes bytes
/// the plan's peak counted on, so the fallback moves bytes under the plan, and
/// `fallback_rooms` names the op with the plan's prediction there, below what was needed.
/// Values stay those of the unwrapped backend.
#[test]
fn the_fallback_makes_the_room_a_wrong_plan_did_not_and_the_report_says_where() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let workload = Workload::Mlp(MlpConfig::small());
    let budget = unbudgeted_peak(&workload) / 2;
    let _copies = CopiesOnTheOpThread::new();
    configure_afresh(steered(budget));
    // An eighth of the budget, made once a plan steers and kept to the end.
    let floats = (budget / 8 / 4) as usize;
    let mut kept: Vec<burn::tensor::Tensor<Swap<Flex>, 1>> = Vec::new();
    let mut steered = false;
    let outcome = workload.train_with::<B>(&device, 14, &mut |_, _| {
        let report = burn_swap::report(&device).unwrap();
        if kept.is_empty() && report.plan.planned_iterations > 1 {
            steered = true;
            kept.push(burn::tensor::Tensor::ones([floats], &device));
        }
    });
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    assert!(steered, "no plan steered before the extra tensor\n{report}");
    assert!(report.memory.peak_bytes <= budget, "{report}");
    assert!(
        report.plan.fallback_bytes_under_plan > 0,
        "the fallback moved nothing under the plan\n{report}"
    );
    let first = *report
        .plan
        .fallback_rooms
        .first()
        .unwrap_or_else(|| panic!("no room recorded\n{report}"));
    println!(
        "MLP at half its peak ({budget} B), {floats} floats made after the plan steered: \
         {} B moved by the fallback under the plan, first room {first:?}",
        report.plan.fallback_bytes_under_plan
    );
    let period = report.plan.planned_period.expect("a plan in force");
    assert!(first.position < period, "{first:?} in a period of {period}");
    assert!(first.freed_bytes > 0, "{first:?}");
    assert!(
        first.predicted_bytes <= budget && first.needed_bytes > budget,
        "{first:?}: the plan predicted room the op did not find ({budget} B budget)\n{report}"
    );
    let plain = workload.train::<Autodiff<Flex>>(&device, 14);
    outcome.assert_same(&plain, "the MLP with a tensor the plan never saw");
    drop(kept);
}

/// The same on models whose tensors share buffers with views (batch norm's transposes and
/// broadcasts, an LSTM's slices of its output sequence, which keep the sequence's buffer on
/// the device after Burn dropped it): the simulator counts buffers as the executor does.
#[test]
fn plans_fit_on_models_with_views() {
    let _guard = burn_swap_harness::swap_device_lock();
    check(Workload::BnCnn(BnCnnConfig::small()));
    check(Workload::Lstm(LstmNetConfig::small()));
}

/// A residual CNN whose quarter of the peak is reached only when some tensors leave for the
/// one op between two of their uses (a convolution's backward between its input's uses).
#[test]
fn plans_fit_where_tensors_must_leave_for_a_single_op() {
    let _guard = burn_swap_harness::swap_device_lock();
    check(Workload::Cnn(ResNetConfig::small()));
}

/// At the smallest budget a model runs under (its largest op's working set), a plan cannot
/// fit where what lives across iterations must stay: it is made, made once more from the next
/// iteration's trace, and not again once that one predicts no lower peak, however many
/// iterations follow. The fallback keeps the budget; every value is the plain backend's.
#[test]
fn a_plan_that_cannot_fit_is_made_again_only_while_it_gets_closer() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let mut unfit = 0;
    for workload in [
        Workload::ConvNet(ConvNetConfig::small()),
        Workload::BnCnn(BnCnnConfig::small()),
    ] {
        let name = workload.name();
        let plain = workload.train::<Autodiff<Flex>>(&device, 12);
        configure_afresh(SwapConfig::default());
        workload.train::<B>(&device, 3);
        let budget = burn_swap::report(&device)
            .unwrap()
            .workload
            .minimum_budget_bytes;
        configure_afresh(steered(budget));
        let swapped = workload.train::<B>(&device, 12);
        let report = burn_swap::report(&device).unwrap();
        configure_afresh(SwapConfig::default());
        plain.assert_same(&swapped, name);
        println!(
            "{name} at {budget} B: {} plans, predicted peak {:?}",
            report.plan.plans, report.plan.predicted_peak_bytes
        );
        assert!(report.memory.peak_bytes <= budget, "{name}\n{report}");
        assert!(report.plan.plans >= 1, "{name}: no plan made\n{report}");
        if report.plan.predicted_peak_bytes.is_some_and(|p| p > budget) {
            unfit += 1;
            assert!(
                report.plan.plans <= 2,
                "{name}: {} plans that do not fit\n{report}",
                report.plan.plans
            );
        }
    }
    assert!(unfit > 0, "every plan fitted: the claim went unchecked");
}

/// A plan speaks of one schedule's ops: when the loop's period changes (Adam's updates of
/// same-shaped parameters repeat within a step, so a short period is found before the
/// step's), the plan made for the old schedule is dropped, neither followed nor reported,
/// until one is made for the new one. Checked after every step from the first.
#[test]
fn the_plan_in_force_is_made_for_the_schedule_in_force() {
    use burn_swap_harness::models::Mlp;
    use burn_swap_harness::train::{init_mlp, train_loop};
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    // `train_mlp`'s model (the README's main job).
    let config = MlpConfig {
        d_in: 256,
        hidden: 1024,
        depth: 4,
        d_out: 16,
        batch: 256,
        seed: 17,
    };
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    let model = init_mlp::<B>(&config, &device, 42);
    let loss = |m: &Mlp<B>, step| m.loss(&config, step, &device);
    let (model, _) = train_loop(model, 1, 1e-3, loss, |_, _| {});
    let peak = burn_swap::memory(&device).unwrap().peak_bytes;
    burn_swap::configure(
        &device,
        SwapConfig::budget_bytes(peak / 4)
            .with_background_planning(false)
            .with_plans_judged(false),
    )
    .unwrap();
    let mut periods = Vec::new();
    let mut planned = 0;
    train_loop(model, 8, 1e-3, loss, |step, _| {
        let report = burn_swap::report(&device).unwrap();
        periods.push(report.workload.period);
        if let Some(p) = report.plan.planned_period {
            planned += 1;
            assert_eq!(
                Some(p),
                report.workload.period,
                "step {step}: a plan for another schedule is in force\n{report}"
            );
        }
    });
    assert!(planned > 0, "no plan was made: periods {periods:?}");
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

/// Planned copies made on the op thread (the planner told that handing a copy to a worker
/// costs a second, so that none is worth it): the plan takes them, every value is the plain
/// backend's, bit for bit, and the budget holds; told that the hand-over is free, the same
/// run hands its copies over.
#[test]
fn planned_copies_on_the_op_thread_change_no_value() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let workload = Workload::Mlp(MlpConfig::small());
    let plain = workload.train::<Autodiff<Flex>>(&device, STEPS);
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    workload.train::<B>(&device, 3);
    let budget = burn_swap::report(&device).unwrap().memory.peak_bytes / 3;
    for handover in [1.0, 0.0] {
        burn_swap::unstable::set_handover_seconds(Some(handover));
        let config = SwapConfig::budget_bytes(budget)
            .with_policy(Policy::OffloadOnly)
            .with_background_planning(false);
        burn_swap::configure(&device, config).unwrap();
        burn_swap::restart_trace(&device);
        burn_swap::reset_counters(&device);
        let swapped = workload.train::<B>(&device, STEPS);
        let report = burn_swap::report(&device).unwrap();
        burn_swap::unstable::set_handover_seconds(None);
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        let what = format!("hand-over {handover} s");
        plain.assert_same(&swapped, &what);
        assert!(report.memory.peak_bytes <= budget, "{what}\n{report}");
        assert!(report.plan.planned_offloads > 0, "{what}\n{report}");
        let chosen = report
            .plan
            .plan_choices
            .iter()
            .find(|c| Some(&c.planner) == report.plan.plan_chosen.as_ref())
            .unwrap_or_else(|| panic!("{what}: no plan chosen\n{report}"));
        // A dear hand-over: every planned copy is made on the op thread (its time exposed,
        // none handed over). A free one: only where the copies' time on the op thread is
        // less than what their gap leaves exposed.
        println!(
            "{what}: {} planned offloads, predicted exposed {:.3} ms, hand-over {:.3} ms, \
             offloads on the op's path {:.3} ms",
            report.plan.planned_offloads,
            chosen.exposed_seconds * 1e3,
            chosen.handover_seconds * 1e3,
            report.transfers.exposed_wait.offload_seconds * 1e3
        );
        if handover > 0.0 {
            assert_eq!(chosen.handover_seconds, 0.0, "{what}\n{report}");
            assert!(chosen.exposed_seconds > 0.0, "{what}\n{report}");
        }
    }
}

/// Plans are made once per schedule, off the op's thread, and kept: over 30 steps at half
/// of each model's peak, a model of one schedule (an MLP, a GPT, a BatchNorm CNN, an
/// unrolled LSTM, twelve identical transformer blocks: loops inside the step that repeat as
/// exactly as the step) makes at most two plans, a GAN (critic and generator steps) at most
/// three, a transformer on three bucketed sequence lengths at most four; the links are
/// measured beside the ops (the probe ran, and no op waited for it); the op threads
/// spend less time on planning than the planner; every value is the plain backend's, bit
/// for bit; the budget holds. Plans kept for a schedule that comes back are reused: asserted
/// on the bucketed transformer planned on the op's thread (when a plan made beside the ops
/// takes over, or is ready in time to be kept before its schedule ends, depends on how fast
/// the planner thread runs: printed, not asserted).
#[test]
fn plans_are_made_once_per_schedule_off_the_op_thread() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let workloads = [
        (Workload::Gan(GanConfig::small()), 2),
        (Workload::Mlp(MlpConfig::small()), 1),
        (Workload::Gpt(GptConfig::small()), 1),
        (Workload::BnCnn(BnCnnConfig::small()), 1),
        (Workload::Lstm(LstmNetConfig::small()), 1),
        (Workload::Transformer(TransformerConfig::deep()), 1),
        (Workload::Bucketed(TransformerConfig::small()), 3),
    ];
    let mut failures = Vec::new();
    for (workload, schedules) in workloads {
        let name = workload.name();
        // Thirty steps; the GAN and the MLP, whose steps are a few tiny ops each (they run
        // faster than a plan is made beside them), three hundred.
        let steps = if matches!(name, "gan" | "mlp") {
            300
        } else {
            30
        };
        let plain = workload.train::<Autodiff<Flex>>(&device, steps);
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        burn_swap::restart_trace(&device);
        burn_swap::reset_counters(&device);
        workload.train::<B>(&device, 3);
        let budget = burn_swap::report(&device).unwrap().memory.peak_bytes / 2;
        burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
        burn_swap::restart_trace(&device);
        burn_swap::reset_counters(&device);
        // Measured again in each run, beside its ops.
        burn_swap::unstable::forget_links(&device);
        let swapped = workload.train::<B>(&device, steps);
        let report = burn_swap::report(&device).unwrap();
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        plain.assert_same(&swapped, name);
        println!(
            "{name}: {} plans made, {} reused, {} planned iterations, planner {:.1} ms, op \
             threads {:.2} ms, takeovers {:?}",
            report.plan.plans,
            report.plan.plans_reused,
            report.plan.planned_iterations,
            report.plan.planning_seconds * 1e3,
            report.plan.planning_op_thread_seconds * 1e3,
            report
                .plan
                .plan_takeovers
                .iter()
                .map(|t| (t.period, t.reused, t.waited_iterations))
                .collect::<Vec<_>>()
        );
        assert!(report.memory.peak_bytes <= budget, "{name}\n{report}");
        if report.plan.plans > schedules + 1 {
            failures.push(format!(
                "{name}: {} plans for {schedules} schedules",
                report.plan.plans
            ));
        }
        if report.plan.plans == 0 {
            failures.push(format!("{name}: no plan made"));
        }
        if name == "bucketed" {
            // Which bucket's plan is ready before its bucket ends depends on how fast the
            // planner thread runs beside the ops (on this VM under load: sometimes none is
            // reused in 30 steps). Planning on the op's thread makes the same run
            // deterministic: each bucket is planned once, then gets its plan back.
            let config = SwapConfig::budget_bytes(budget)
                .with_background_planning(false)
                .with_plans_judged(false);
            let (foreground, report) =
                burn_swap_harness::verify::run_configured(&device, config, || {
                    workload.train::<B>(&device, steps)
                });
            burn_swap::configure(&device, SwapConfig::default()).unwrap();
            plain.assert_same(&foreground, name);
            println!(
                "{name}, planned on the op's thread: {} plans made, {} reused, {} planned \
                 iterations",
                report.plan.plans, report.plan.plans_reused, report.plan.planned_iterations
            );
            assert!(report.memory.peak_bytes <= budget, "{name}\n{report}");
            if report.plan.plans > schedules + 1 || report.plan.plans_reused == 0 {
                failures.push(format!(
                    "{name} planned on the op's thread: {} plans for {schedules} schedules, {} \
                     reused",
                    report.plan.plans, report.plan.plans_reused
                ));
            }
        }
        // The links are measured beside the ops: no op waited for the probe to plan.
        if report.plan.link_probe_waits > 0 || report.plan.link_probe_seconds == 0.0 {
            failures.push(format!(
                "{name}: the link probe took {:.2} ms, waited for {} times",
                report.plan.link_probe_seconds * 1e3,
                report.plan.link_probe_waits
            ));
        }
        if report.plan.planning_op_thread_seconds >= report.plan.planning_seconds {
            failures.push(format!(
                "{name}: {:.2} ms planning on the op threads, {:.2} ms in the planner",
                report.plan.planning_op_thread_seconds * 1e3,
                report.plan.planning_seconds * 1e3
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Under the planned policy a plan is followed only while it pays against the reactive
/// fallback measured on its schedule, and the report says when it does not. Judged by its
/// prediction: links pinned at 1 MB/s, the segment plan (offloads only) predicts transfers
/// exposed for hundreds of milliseconds per iteration where the fallback, copying on this
/// machine, waits microseconds: declined when ready, never followed. Judged by what it
/// cost: links pinned as free predict nothing exposed for the cheapest plan, and the
/// transfer workers held up to 20 ms per copy (the ordering stress) make its prefetches
/// wait: declined after its first full iterations. Judged with its hand-overs: links free
/// but each copy handed to a worker for 20 µs of the op thread (copies on the op thread as
/// slow as 1 MB/s), the segment plan predicts nothing exposed (the compute hides the
/// hand-overs' delay) and its hand-overs cost more than the fallback's waits: declined when
/// ready (followed when the judgement leaves the hand-overs out). Neither judgement changes a value, and with judging off
/// every plan is followed to the end (so that the test fails when the judgement is lost).
#[test]
fn a_plan_that_costs_more_than_the_fallback_is_declined() {
    use burn_swap::Planner;
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let workload = Workload::Mlp(MlpConfig::small());
    let plain = workload.train::<Autodiff<Flex>>(&device, STEPS);
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    workload.train::<B>(&device, 3);
    let budget = burn_swap::report(&device).unwrap().memory.peak_bytes / 2;
    // (links, hand-over in seconds, transfer jitter in µs, planner, whether the plan is
    // judged by what it cost)
    let cases = [
        (1e6, 0.0, 0, Planner::Segments, false),
        (1e15, 0.0, 20_000, Planner::Cheapest, true),
        (1e15, 2e-5, 0, Planner::Segments, false),
    ];
    for (bytes_per_second, handover, jitter, planner, measured) in cases {
        for judged in [true, false] {
            let mut links = links_at(0.0, bytes_per_second);
            if handover > 0.0 {
                // Copies on the op thread as slow as 1 MB/s: the plan's copies go to the
                // workers, each handed over for `handover` seconds of the op thread.
                links.on_thread = Some(burn_swap::unstable::plan::profile::OnThread {
                    handover_seconds: handover,
                    to_host: copy_samples(0.0, 1e6),
                    to_device: copy_samples(0.0, 1e6),
                });
            }
            burn_swap::unstable::set_links(Some(links));
            burn_swap::unstable::set_handover_seconds(Some(handover));
            let config = SwapConfig::budget_bytes(budget)
                .with_policy(Policy::Planned)
                .with_planner(planner)
                .with_transfer_jitter(jitter)
                .with_background_planning(false)
                .with_plans_judged(judged);
            let (swapped, report) =
                burn_swap_harness::verify::run_configured(&device, config, || {
                    workload.train::<B>(&device, STEPS)
                });
            burn_swap::unstable::set_links(None);
            burn_swap::unstable::set_handover_seconds(None);
            burn_swap::configure(&device, SwapConfig::default()).unwrap();
            let what = format!(
                "links {bytes_per_second:e} B/s, hand-over {handover} s, jitter {jitter} us, \
                 judged {judged}"
            );
            plain.assert_same(&swapped, &what);
            assert!(report.memory.peak_bytes <= budget, "{what}\n{report}");
            println!(
                "{what}: {} plans, {} declined {:?}, {} planned iterations",
                report.plan.plans,
                report.plan.declines.count,
                report
                    .plan
                    .declines
                    .latest
                    .iter()
                    .map(|d| (d.plan_seconds * 1e3, d.measured, d.fallback_seconds * 1e3))
                    .collect::<Vec<_>>(),
                report.plan.planned_iterations
            );
            if !judged {
                assert_eq!(report.plan.declines.count, 0, "{what}\n{report}");
                assert!(
                    report.plan.planned_iterations > 0
                        && report.plan.predicted_peak_bytes.is_some(),
                    "{what}: the plan was not followed to the end\n{report}"
                );
                continue;
            }
            assert!(
                report.plan.declines.count >= 1,
                "{what}: not declined\n{report}"
            );
            let decline = report.plan.declines.latest[0];
            assert_eq!(decline.measured, measured, "{what}\n{report}");
            assert!(
                decline.plan_seconds > decline.fallback_seconds,
                "{what}\n{report}"
            );
            assert!(report.plan.declines.in_force, "{what}\n{report}");
            assert_eq!(report.plan.predicted_peak_bytes, None, "{what}\n{report}");
            // Declined when ready: never followed; by what it cost: after the first
            // iteration and the four it was judged by.
            let most = if measured { 5 } else { 0 };
            assert!(
                report.plan.planned_iterations <= most,
                "{what}: followed after its decline\n{report}"
            );
        }
    }
}

/// The conv net's plans with the copy links pinned (8 us a copy, 28 GB/s to the host; a
/// hand-over to a worker dearer than any copy): plans that do not depend on how fast this
/// machine copied when its links were measured, and a measured peak equal to the
/// prediction at every fraction. Its peak op at half the peak is a native `relu_backward`,
/// traced with its inputs and output at once (it was traced with what was left after it
/// consumed its inputs, 32 KiB under the prediction).
#[test]
fn the_conv_net_plan_predicts_its_peak_exactly_with_pinned_links() {
    let _guard = burn_swap_harness::swap_device_lock();
    let _links = PinnedLinks::new((8e-6, 28e9), (7.2e-6, 1e15));
    check_steered(Workload::ConvNet(ConvNetConfig::small()), Accuracy::Exact);
}

/// The small transformer with the links pinned at 100 MB/s and 5 us a copy (links a loaded
/// machine measures now and then): plans of about 110-190 offloads and up to 16
/// recomputations, followed with no room made by the fallback, each measuring its predicted
/// peak exactly. Three causes of a gap of 256 B to 16 KiB here were found and are kept out
/// by it: the simulator counting a view's bytes apart from its source's buffer, an input of
/// a recomputed tensor's producer offloaded across the replay (the executor fetched it back
/// for the replay and kept it), and a planned offload of a view op's input that the
/// executor skipped (it had forgotten the op's inputs while settling the view).
#[test]
fn the_transformer_plan_with_recomputes_predicts_its_peak_exactly_with_pinned_links() {
    let _guard = burn_swap_harness::swap_device_lock();
    let _links = PinnedLinks::new((5e-6, 1e8), (5e-6, 1e8));
    check_steered(
        Workload::Transformer(TransformerConfig::small()),
        Accuracy::Exact,
    );
}

/// The GAN-style loop (a discriminator step and a generator step, 339 ops together) with
/// the links pinned, at three quarters and half of its peak: followed with no room made by
/// the fallback, each measuring its predicted peak exactly. Every iteration, Burn drops
/// the autodiff graph's tensors in another order (four drops near op 280), and the schedule
/// holds through it, resuming once 16 ops have matched again; the plan's steps in those
/// 16 ops (two offloads at half) were skipped, the tensors they would have moved stayed,
/// and the fallback moved 40 KiB under the plan at half and 16-32 KiB at three quarters.
/// Below about 46% no candidate plan fits it and the reactive fallback keeps the budget.
#[test]
fn the_gan_plan_is_followed_through_the_reordered_drops_of_each_step() {
    let _guard = burn_swap_harness::swap_device_lock();
    let _links = PinnedLinks::new((5e-6, 1e8), (5e-6, 1e8));
    check_steered_at(
        Workload::Gan(GanConfig::small()),
        Accuracy::Exact,
        30,
        &[0.75, 0.5],
    );
}

/// The simulator counts what the executor counts: on every op of an iteration run with no
/// budget (every tensor kept), the counted bytes the simulator gives the trace's lifetimes
/// equal the resident bytes the executor traced while the op ran, on models whose tensors
/// share buffers with views (reshapes, transposes, slices, broadcasts) and on models
/// without, the GAN's two steps and the bucketed transformer's schedules among them (twelve
/// steps: the GAN's iteration is two of them).
#[test]
fn the_simulator_counts_every_op_as_the_executor_does() {
    use burn_swap::unstable::plan::{combine, simulate};
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let mut failures = Vec::new();
    for workload in [
        Workload::Mlp(MlpConfig::small()),
        Workload::ConvNet(ConvNetConfig::small()),
        Workload::Transformer(TransformerConfig::small()),
        Workload::BnCnn(BnCnnConfig::small()),
        Workload::Lstm(LstmNetConfig::small()),
        Workload::Cnn(ResNetConfig::small()),
        Workload::Gan(GanConfig::small()),
        Workload::Bucketed(TransformerConfig::small()),
        Workload::Gpt(GptConfig::small()),
    ] {
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        burn_swap::restart_trace(&device);
        burn_swap::reset_counters(&device);
        workload.train::<B>(&device, 12);
        let name = workload.name();
        let trace = burn_swap::trace(&device).unwrap_or_else(|| panic!("{name}: no trace"));
        let lives = combine::lifetimes(&trace, &[]);
        let predicted = simulate::live_per_op(&lives, trace.ops.len());
        let differ: Vec<(usize, &str, i64, u64)> = trace
            .ops
            .iter()
            .zip(&predicted)
            .filter(|(op, p)| op.resident_bytes as i64 != **p)
            .map(|(op, &p)| (op.index, op.kind.as_str(), p, op.resident_bytes))
            .collect();
        println!(
            "{name}: {} ops, {} differ; first: {:?}",
            trace.ops.len(),
            differ.len(),
            &differ[..differ.len().min(8)]
        );
        if !differ.is_empty() {
            failures.push(name);
        }
    }
    assert!(failures.is_empty(), "per-op counts differ on {failures:?}");
}

/// A schedule that comes back in no order gets its plan back by the first ops of its
/// iteration: a transformer trained on batches of three lengths, each length first for five
/// steps in a row (its schedule found and planned; a run's first step, the model's first or
/// a length's first, is not periodic), then one length per step, never the same twice in a
/// row, so that no iteration matches the one before it (which is how a schedule that holds
/// again is taken up otherwise). Each later step's schedule is recognised among its first
/// ops and its kept plan takes over in that very iteration: plans are taken back in most of
/// those steps, no more plans are made than schedules plus one, every loss and parameter is
/// the plain backend's, bit for bit, and the budget holds. Without the recognition no plan
/// is taken back there (checked).
#[test]
fn a_schedule_that_comes_back_in_no_order_gets_its_plan_back_by_its_first_ops() {
    use burn::optim::{AdamConfig, GradientsParams, Optimizer};
    use burn::tensor::ElementConversion;
    use burn_swap_harness::models::Transformer;
    use burn_swap_harness::train::{Outcome, init_seeded, parameters};

    const PREFIX: [usize; 15] = [8, 8, 8, 8, 8, 12, 12, 12, 12, 12, 16, 16, 16, 16, 16];
    // One length per step, never the one before (three lengths, a fixed order).
    const LATER: [usize; 18] = [
        8, 12, 16, 8, 16, 12, 8, 12, 8, 16, 12, 16, 8, 12, 16, 12, 8, 16,
    ];
    fn train<Bk: burn::tensor::backend::AutodiffBackend>(
        device: &Bk::Device,
        lengths: &[usize],
    ) -> Outcome {
        let config = TransformerConfig::small();
        let mut model: Transformer<Bk> =
            init_seeded::<Bk, _>(device, 42, || config.init::<Bk>(device));
        let mut adam = AdamConfig::new().init::<Bk, Transformer<Bk>>();
        let mut losses = Vec::with_capacity(lengths.len());
        for (step, &seq) in lengths.iter().enumerate() {
            let loss = model.loss(&TransformerConfig { seq, ..config }, step, device);
            losses.push(loss.clone().into_scalar().elem::<f32>());
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = adam.step(1e-3, model, grads);
        }
        Outcome {
            losses,
            params: parameters(&model),
        }
    }

    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let lengths: Vec<usize> = PREFIX.iter().chain(LATER.iter()).copied().collect();
    let plain = train::<Autodiff<Flex>>(&device, &lengths);
    configure_afresh(SwapConfig::default());
    train::<B>(&device, &PREFIX[14..15]);
    let budget = burn_swap::report(&device).unwrap().memory.peak_bytes / 2;
    configure_afresh(
        SwapConfig::budget_bytes(budget)
            .with_background_planning(false)
            .with_plans_judged(false),
    );
    let swapped = train::<B>(&device, &lengths);
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    plain.assert_same(&swapped, "bucketed lengths in no order");
    assert!(report.memory.peak_bytes <= budget, "{report}");
    let taken_back = report
        .plan
        .plan_takeovers
        .iter()
        .filter(|t| t.reused)
        .count();
    println!(
        "{} plans made, {} reused ({taken_back} of the takeovers kept), {} planned iterations",
        report.plan.plans, report.plan.plans_reused, report.plan.planned_iterations
    );
    assert!(
        report.plan.plans <= 3 + 1,
        "{} plans\n{report}",
        report.plan.plans
    );
    assert!(
        report.plan.plans_reused as usize >= LATER.len() / 2,
        "{} plans taken back in {} steps that no step before matched\n{report}",
        report.plan.plans_reused,
        LATER.len()
    );
}

/// The link probe starts at the end of a schedule's first iteration, so that it runs while
/// the iteration a plan is made from is profiled, and the first plan is not held back for the
/// iterations the probe takes after it. Planned on the op's thread, the plan takes over at the
/// end of that profiled iteration: one period after the probe was started (it was started
/// there, at the plan's own request, before: the test fails so). Measured on the MLP and the
/// BatchNorm CNN at half their peak.
#[test]
fn the_links_are_measured_while_the_iteration_a_plan_is_made_from_runs() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    for workload in [
        Workload::Mlp(MlpConfig::small()),
        Workload::BnCnn(BnCnnConfig::small()),
    ] {
        let name = workload.name();
        let (_, unbudgeted) =
            burn_swap_harness::verify::run_configured(&device, SwapConfig::default(), || {
                workload.train::<B>(&device, 3)
            });
        let budget = unbudgeted.memory.peak_bytes / 2;
        let config = SwapConfig::budget_bytes(budget)
            .with_policy(Policy::Planned)
            .with_background_planning(false)
            .with_plans_judged(false);
        burn_swap::unstable::forget_links(&device);
        let (_, report) = burn_swap_harness::verify::run_configured(&device, config, || {
            workload.train::<B>(&device, STEPS)
        });
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        let plan = &report.plan;
        let period = report.workload.period.expect("a period") as u64;
        let started = plan.link_probe_started_op.expect("the links probed");
        let first = plan.plan_takeovers.first().expect("a plan followed").op;
        assert_eq!(
            first - started,
            period,
            "{name}: probe started at op {started}, first plan at op {first}, period \
             {period}\n{report}"
        );
    }
}

/// The defaults as shipped (`SwapConfig::budget_bytes` and nothing else: the planned
/// policy, plans made on the planner thread, every plan judged when ready and again by what
/// its first iterations cost): on models whose plans pay here (their copies hidden on the
/// workers, no room searched for on the op's path), a plan is made for the training step,
/// takes over within a few steps, and is followed from then on, bit for bit and within the
/// budget. (The models whose plans tie with the fallback here, the conv nets, are left out:
/// which of two equal costs is lower is the noise's choice.) Checked to fail with a judge
/// that declines every plan (`plan::payoff::pays` returning false): each model then reports
/// a declined plan and no planned iteration.
#[test]
fn the_defaults_make_a_plan_that_takes_over_and_is_followed() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let steps = 32;
    for workload in [
        Workload::Lstm(LstmNetConfig::small()),
        Workload::Transformer(TransformerConfig::small()),
    ] {
        let name = workload.name();
        let plain = workload.train::<Autodiff<Flex>>(&device, steps);
        let budget = unbudgeted_peak(&workload) / 2;
        let (swapped, report) = burn_swap_harness::verify::run_configured(
            &device,
            SwapConfig::budget_bytes(budget),
            || workload.train::<B>(&device, steps),
        );
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        burn_swap_harness::verify::assert_budgeted_run(name, &plain, &swapped, &report, budget);
        let first =
            burn_swap_harness::verify::assert_plan_followed_to_the_end(name, &report, steps);
        assert!(!first.reused, "{name}: a kept plan\n{report}");
        assert!(
            report
                .plan
                .predicted_peak_bytes
                .is_some_and(|p| p <= budget),
            "{name}\n{report}"
        );
    }
}

/// The defaults as shipped where a plan does not pay: with copy links as slow as 1 MB/s
/// pinned (every planned copy exposed), the plan made on the planner thread is declined when
/// ready, never followed, and the report's table says so; training stays bit for bit under
/// the fallback.
#[test]
fn the_defaults_decline_a_plan_that_does_not_pay_and_say_so() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let steps = 12;
    let workload = Workload::ConvNet(ConvNetConfig::small());
    let plain = workload.train::<Autodiff<Flex>>(&device, steps);
    let budget = unbudgeted_peak(&workload) / 2;
    burn_swap::unstable::set_links(Some(links_at(0.0, 1e6)));
    let (swapped, report) = burn_swap_harness::verify::run_configured(
        &device,
        SwapConfig::budget_bytes(budget),
        || workload.train::<B>(&device, steps),
    );
    burn_swap::unstable::set_links(None);
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap_harness::verify::assert_budgeted_run("convnet", &plain, &swapped, &report, budget);
    let plan = &report.plan;
    assert!(
        plan.declines.count >= 1 && plan.declines.in_force,
        "not declined\n{report}"
    );
    assert!(
        plan.plan_takeovers.is_empty() && plan.planned_iterations == 0,
        "{report}"
    );
    let decline = plan.declines.latest[0];
    assert!(
        !decline.measured && decline.plan_seconds > decline.fallback_seconds,
        "{report}"
    );
    let table = report.to_string();
    assert!(
        table
            .lines()
            .any(|l| l.contains("declined") && l.contains("predicted")),
        "the table does not say the plan was declined\n{table}"
    );
}

/// The positive control of `plans_are_made_once_per_schedule_off_the_op_thread`'s "no op
/// waited for the link probe": under `reactive`, which plans nothing, no probe runs ahead,
/// so asking for the profile (which carries the links) starts the probe and waits for it on
/// the engine's thread, and `link_probe_waits` counts that wait; asking again waits no more.
#[test]
fn a_wait_for_the_link_probe_is_counted() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let workload = Workload::Lstm(LstmNetConfig::small());
    let budget = unbudgeted_peak(&workload) / 2;
    configure_afresh(SwapConfig::budget_bytes(budget).with_policy(Policy::Reactive));
    burn_swap::unstable::forget_links(&device);
    workload.train::<B>(&device, 6);
    let waits = || burn_swap::report(&device).unwrap().plan.link_probe_waits;
    assert_eq!(waits(), 0, "a probe was waited for under reactive");
    let profile = burn_swap::unstable::profile(&device).expect("a profiled iteration");
    assert!(profile.links.is_some(), "no links measured");
    assert_eq!(waits(), 1, "the wait for the probe was not counted");
    burn_swap::unstable::profile(&device).expect("a profiled iteration");
    assert_eq!(waits(), 1, "the links measured were measured again");
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}
