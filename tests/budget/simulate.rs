//! The memory simulator (seed 004, claims 1–2) predicts the counted peak of a real run from
//! its trace: for the plan that keeps everything, its live peak must match burn-swap's counted
//! peak of the same iteration within 5%. The figures are printed.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::unstable::plan::simulate;
use burn_swap::{Swap, Trace};
use burn_swap_harness::models::{ConvNetConfig, MlpConfig};
use burn_swap_harness::train::last_iteration;
use burn_swap_harness::workload::{train_convnet, train_mlp};

type B = Autodiff<Swap<Flex>>;

fn check(name: &str, trace: &Trace) {
    let sim = simulate::simulate_trace(trace);
    let counted = trace.peak_bytes;
    let error = (sim.peak_live_bytes as f64 - counted as f64).abs() / counted as f64;
    println!(
        "{name}: counted peak {counted} B, simulated live peak {} B ({:+.2}%), pool peak {} B \
         with ratio {} ({} blocks) over {} ops",
        sim.peak_live_bytes,
        100.0 * (sim.peak_live_bytes as f64 / counted as f64 - 1.0),
        sim.peak_pool_bytes,
        sim.ratio,
        sim.blocks,
        trace.ops.len()
    );
    assert!(
        error <= 0.05,
        "{name}: simulated {} vs counted {counted}",
        sim.peak_live_bytes
    );
    assert!(sim.peak_pool_bytes >= sim.peak_live_bytes);
}

/// The trace of the last complete iteration of the tests' conv net.
fn convnet_iteration(device: &FlexDevice) -> Trace {
    last_iteration(device, || {
        train_convnet::<B>(&ConvNetConfig::small(), device, 6);
    })
}

#[test]
fn simulated_peak_matches_the_counted_peak_of_real_runs() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let trace = last_iteration(&device, || {
        train_mlp::<B>(&MlpConfig::small(), &device, 6);
    });
    check("mlp", &trace);
    check("convnet", &convnet_iteration(&device));
}

#[test]
fn checkpoint_selection_on_real_iterations() {
    use burn_swap::unstable::plan::checkpoint;
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let trace = convnet_iteration(&device);
    let profile = burn_swap::unstable::profile(&device).unwrap();

    let keep_all = simulate::simulate_trace(&trace);
    let candidates = checkpoint::candidates(&trace, &profile, 8);
    let plan = checkpoint::select(&trace, &candidates, 8);
    println!(
        "convnet: {} candidates ({} swappable); {} checkpoints, {} recomputed ({:.1} µs); \
         simulated pool peak {} B -> {} B (live {} B -> {} B), threshold {:.0}",
        candidates.len(),
        candidates.iter().filter(|c| c.swappable).count(),
        plan.checkpoints.len(),
        plan.recomputed.len(),
        plan.recompute_seconds * 1e6,
        keep_all.peak_pool_bytes,
        plan.simulation.peak_pool_bytes,
        keep_all.peak_live_bytes,
        plan.simulation.peak_live_bytes,
        plan.threshold
    );
    assert!(plan.simulation.peak_pool_bytes <= keep_all.peak_pool_bytes);
    assert!(!candidates.is_empty());
}

#[test]
fn combined_plan_for_half_the_peak_of_a_real_iteration() {
    use burn_swap::unstable::plan::{checkpoint, combine};
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let trace = convnet_iteration(&device);
    let profile = burn_swap::unstable::profile(&device).unwrap();

    let keep_all = simulate::simulate_trace(&trace);
    let budget = keep_all.peak_pool_bytes / 2;
    let candidates = checkpoint::candidates(&trace, &profile, 8);
    let start = std::time::Instant::now();
    let plan = combine::combine(&trace, &profile, &candidates, budget);
    let offloads = plan
        .actions
        .iter()
        .filter(|(_, a)| matches!(a, combine::Action::Offload { .. }))
        .count();
    println!(
        "convnet at half its simulated peak ({budget} B): {} offloads, {} recomputes; \
         predicted pool peak {} B, exposed {:.1} µs, recompute {:.1} µs; planned in {:.2} ms",
        offloads,
        plan.actions.len() - offloads,
        plan.simulation.peak_pool_bytes,
        plan.exposed_seconds * 1e6,
        plan.recompute_seconds * 1e6,
        start.elapsed().as_secs_f64() * 1e3
    );
    assert!(plan.feasible);
    assert!(plan.simulation.peak_live_bytes <= budget);
}
