//! Ordering under stress: every transfer held a pseudo-random time of up to 300 µs before it
//! reports (`SwapConfig::with_transfer_jitter`), so that offloads and fetches finish in every
//! order and at every distance from the ops that need them. Training stays bit-identical to
//! the plain backend, the counted peak stays within the budget, and the runs really moved
//! tensors both ways.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Compression, Policy, Swap, SwapConfig};
use burn_swap_harness::models::{ConvNetConfig, MlpConfig, TransformerConfig};
use burn_swap_harness::train::Outcome;
use burn_swap_harness::verify::{assert_budgeted_run, run_configured};
use burn_swap_harness::workload::{train_convnet, train_mlp, train_transformer};

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

const STEPS: usize = 8;
const JITTER_MICROS: u64 = 300;

fn stress(name: &str, plain: Outcome, train: impl Fn() -> Outcome, compression: Compression) {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    assert_eq!(train(), plain, "{name} unbudgeted");
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;
    for policy in [Policy::Planned, Policy::OffloadOnly, Policy::Reactive] {
        for fraction in [0.5, 0.25] {
            let budget = (peak as f64 * fraction) as u64;
            let what = format!("{name}, {} at {fraction}, jitter", policy.name());
            let config = SwapConfig::budget_bytes(budget)
                .with_policy(policy)
                .with_compression(compression)
                .with_transfer_jitter(JITTER_MICROS);
            let (swapped, report) = run_configured(&device, config, &train);
            assert_budgeted_run(&what, &plain, &swapped, &report, budget);
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

#[test]
fn mlp_under_transfer_jitter() {
    let device = FlexDevice;
    let config = MlpConfig::small();
    let plain = train_mlp::<Plain>(&config, &device, STEPS);
    stress(
        "mlp",
        plain,
        || train_mlp::<Swapped>(&config, &device, STEPS),
        Compression::Off,
    );
}

#[test]
fn convnet_under_transfer_jitter_with_compression() {
    let device = FlexDevice;
    let config = ConvNetConfig::small();
    let plain = train_convnet::<Plain>(&config, &device, STEPS);
    stress(
        "convnet",
        plain,
        || train_convnet::<Swapped>(&config, &device, STEPS),
        Compression::On { max_ratio: 0.9 },
    );
}

#[test]
fn transformer_under_transfer_jitter() {
    let device = FlexDevice;
    let config = TransformerConfig::small();
    let plain = train_transformer::<Plain>(&config, &device, STEPS);
    stress(
        "transformer",
        plain,
        || train_transformer::<Swapped>(&config, &device, STEPS),
        Compression::Off,
    );
}
