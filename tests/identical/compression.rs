//! Training with zero-value compression of offloads (seed 002) is bit-identical to
//! `Autodiff<Flex>`, keeps the budget, and moves fewer bytes than it offloads: ReLU
//! activations are half zeros.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Compression, Policy, Swap, SwapConfig};
use burn_swap_suite::models::{ConvNetConfig, MlpConfig};
use burn_swap_suite::train::{Outcome, train_convnet, train_mlp};

const STEPS: usize = 12;

fn check(name: &str, plain: Outcome, train: impl Fn() -> Outcome) {
    let device = FlexDevice;
    let _guard = burn_swap_suite::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    let _ = train();
    let peak = burn_swap::report(&device).unwrap().peak_bytes;
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
        assert!(report.peak_bytes <= budget, "{what}\n{report}");
        assert!(report.compressed_offloads > 0, "{what}\n{report}");
        assert!(
            report.moved_bytes < report.raw_bytes,
            "{what}: moved {} of {} raw bytes",
            report.moved_bytes,
            report.raw_bytes
        );
        assert!(!report.compression_by_tensor.is_empty());
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["raw_bytes"].as_u64(), Some(report.raw_bytes));
        assert_eq!(json["moved_bytes"].as_u64(), Some(report.moved_bytes));
        // The compression in force, as `BURN_SWAP_COMPRESS` takes it, reads back as itself.
        let back: burn_swap::Report = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(back.compression, report.compression);
        assert_ne!(report.compression, burn_swap::Compression::Off);
        println!(
            "{what}: {} raw -> {} moved ({:.2}x), {} of {} offloads compressed",
            report.raw_bytes,
            report.moved_bytes,
            report.compression_ratio,
            report.compressed_offloads,
            report.offloads
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
