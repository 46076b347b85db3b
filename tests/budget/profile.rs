//! The profiled iteration (seed 004, claim 4): op times and bytes from the trace, copy
//! throughput measured on the device without breaking the budget.
//!
//! One test, in a fixed order: the copy measurement is made once per device and kept, and
//! Burn's CPU backend has a single device.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Swap, SwapConfig};
use burn_swap_harness::models::MlpConfig;
use burn_swap_harness::workload::train_mlp;

type B = Autodiff<Swap<Flex>>;

#[test]
fn profile_of_a_training_iteration_measured_within_the_budget() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();

    // Under a budget of 100 KiB: the probes that fit in half of its headroom (1 KiB and
    // 16 KiB) measure the links, and the budget holds.
    let budget = 100 * 1024;
    burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    train_mlp::<B>(&MlpConfig::small(), &device, 6);
    let profile = burn_swap::unstable::profile(&device).unwrap();
    assert!(profile.links.is_some_and(|l| l.to_host.len() >= 2));
    let report = burn_swap::report(&device).unwrap();
    assert!(report.memory.peak_bytes <= budget, "{report}");

    // Unbudgeted: the copies are measured.
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    train_mlp::<B>(&MlpConfig::small(), &device, 6);
    let trace = burn_swap::trace(&device).unwrap();
    let profile = burn_swap::unstable::profile(&device).unwrap();
    assert_eq!(profile.op_nanos.len(), trace.ops.len());
    assert_eq!(profile.op_bytes.len(), trace.ops.len());
    for (op, (&nanos, &bytes)) in trace
        .ops
        .iter()
        .zip(profile.op_nanos.iter().zip(&profile.op_bytes))
    {
        if op.kind != "Drop" && op.kind != "Read" {
            assert!(nanos > 0, "{} was not timed", op.kind);
        }
        assert!(bytes > 0, "{} moves no bytes", op.kind);
    }
    assert!(profile.iteration_seconds() > 0.0);
    assert!(profile.gap_seconds(0, trace.ops.len() - 1) > 0.0);

    let links = profile.links.expect("measured on an unbudgeted device");
    let (out, back) = links.fits();
    let (out, back) = (out.unwrap(), back.unwrap());
    println!(
        "device -> host {:.2} GB/s + {:.1} µs; host -> device {:.2} GB/s + {:.1} µs",
        out.bandwidth / 1e9,
        out.latency * 1e6,
        back.bandwidth / 1e9,
        back.latency * 1e6
    );
    assert!(out.bandwidth > 0.0 && back.bandwidth > 0.0);
}
