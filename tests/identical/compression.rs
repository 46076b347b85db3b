//! Training with zero-value compression of offloads (seed 002) is bit-identical to
//! `Autodiff<Flex>`, keeps the budget, and moves fewer bytes than it offloads: ReLU
//! activations are half zeros.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Compression, Policy, Swap, SwapConfig};
use burn_swap_harness::models::{ConvNetConfig, MlpConfig};
use burn_swap_harness::train::Outcome;
use burn_swap_harness::workload::{train_convnet, train_mlp};

const STEPS: usize = 12;

fn check(name: &str, plain: Outcome, train: impl Fn() -> Outcome) {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    let _ = train();
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;
    for policy in [Policy::Reactive, Policy::Planned] {
        let budget = peak / 4;
        let config = SwapConfig::budget_bytes(budget)
            .with_policy(policy)
            .with_compression(Compression::On {
                max_ratio: Compression::DEFAULT_MAX_RATIO,
            });
        burn_swap::configure(&device, config).unwrap();
        burn_swap::restart_trace(&device);
        burn_swap::reset_counters(&device);
        let swapped = train();
        let report = burn_swap::report(&device).unwrap();
        let what = format!("{name}, {} with compression", policy.name());
        assert_eq!(
            plain.loss_bits(),
            swapped.loss_bits(),
            "{what}: losses differ"
        );
        for (a, b) in plain.params.iter().zip(&swapped.params) {
            assert_eq!(&a.bytes[..], &b.bytes[..], "{what}: parameters differ");
        }
        assert!(report.memory.peak_bytes <= budget, "{what}\n{report}");
        assert!(
            report.compression.compressed_offloads > 0,
            "{what}\n{report}"
        );
        assert!(
            report.compression.moved_bytes < report.compression.raw_bytes,
            "{what}: moved {} of {} raw bytes",
            report.compression.moved_bytes,
            report.compression.raw_bytes
        );
        assert!(!report.compression.by_tensor.is_empty());
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(
            json["raw_bytes"].as_u64(),
            Some(report.compression.raw_bytes)
        );
        assert_eq!(
            json["moved_bytes"].as_u64(),
            Some(report.compression.moved_bytes)
        );
        // The report reads back as itself, its parts flattened into one JSON object (the
        // seconds to within serde_json's float parsing), the compression in force as
        // `BURN_SWAP_COMPRESS` takes it.
        let back: burn_swap::Report = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(back.memory, report.memory);
        // The layer's times are seconds, read back to within serde_json's float parsing.
        let (read, written) = (back.workload.layer_time, report.workload.layer_time);
        for (a, b) in [
            (read.engine_seconds, written.engine_seconds),
            (read.trace_seconds, written.trace_seconds),
            (read.follow_seconds, written.follow_seconds),
            (read.inner_seconds, written.inner_seconds),
        ] {
            assert!((a - b).abs() <= 1e-12 * b.abs(), "{a} read back as {b}");
        }
        let mut workload = back.workload.clone();
        workload.layer_time = written;
        assert_eq!(workload, report.workload);
        assert_eq!(back.device, report.device);
        assert_eq!(back.transfers.offloads, report.transfers.offloads);
        let moves = |r: &burn_swap::Report| -> Vec<(Vec<usize>, u64, u64)> {
            let stats = &r.compression.by_tensor;
            stats
                .iter()
                .map(|s| (s.shape.clone(), s.raw_bytes, s.moved_bytes))
                .collect()
        };
        assert_eq!(moves(&back), moves(&report));
        assert_eq!(back.plan.plans, report.plan.plans);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
        assert!(close(
            back.compression.codec_seconds,
            report.compression.codec_seconds
        ));
        assert!(close(
            back.transfers.offload_seconds,
            report.transfers.offload_seconds
        ));
        assert_eq!(json["compression"].as_str(), Some("on"), "{json}");
        assert_ne!(report.compression.mode, burn_swap::Compression::Off);
        println!(
            "{what}: {} raw -> {} moved ({:.2}x), {} of {} offloads compressed",
            report.compression.raw_bytes,
            report.compression.moved_bytes,
            report.compression.ratio,
            report.compression.compressed_offloads,
            report.transfers.offloads
        );
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

#[test]
fn bit_identical_mlp_with_compression() {
    let config = MlpConfig {
        d_in: 32,
        hidden: 64,
        depth: 4,
        d_out: 8,
        batch: 128,
        seed: 3,
    };
    let device = FlexDevice;
    let plain = train_mlp::<Autodiff<Flex>>(&config, &device, STEPS);
    check("mlp", plain, || {
        train_mlp::<Autodiff<Swap<Flex>>>(&config, &device, STEPS)
    });
}

#[test]
fn bit_identical_convnet_with_compression() {
    let config = ConvNetConfig::small();
    let device = FlexDevice;
    let plain = train_convnet::<Autodiff<Flex>>(&config, &device, STEPS);
    check("convnet", plain, || {
        train_convnet::<Autodiff<Swap<Flex>>>(&config, &device, STEPS)
    });
}
