//! Training through `Autodiff<Swap<Flex>>` gives the same losses and parameters, bit for bit,
//! as `Autodiff<Flex>`, with no budget and under budgets that force offloading.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Swap, SwapConfig};
use burn_swap_suite::models::{ConvNetConfig, MlpConfig};
use burn_swap_suite::train::{Outcome, train_convnet, train_mlp};

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

const STEPS: usize = 20;

fn assert_same(plain: &Outcome, swapped: &Outcome, what: &str) {
    assert_eq!(
        plain.loss_bits(),
        swapped.loss_bits(),
        "{what}: losses differ"
    );
    assert_eq!(plain.params.len(), swapped.params.len());
    for (i, (a, b)) in plain.params.iter().zip(&swapped.params).enumerate() {
        assert_eq!(a.shape, b.shape, "{what}: parameter {i} shape");
        assert_eq!(&a.bytes[..], &b.bytes[..], "{what}: parameter {i} differs");
    }
}

/// Runs `train` unbudgeted to find the counted peak, then at each fraction of it, and checks
/// every run against the plain backend.
fn check_budgets(name: &str, plain: Outcome, train: impl Fn() -> Outcome) {
    let device = FlexDevice;
    let _guard = burn_swap_suite::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    let unbudgeted = train();
    assert_same(&plain, &unbudgeted, &format!("{name} unbudgeted"));
    let peak = burn_swap::report(&device).unwrap().peak_bytes;
    assert!(peak > 0);

    for fraction in [1.0, 0.5, 0.25] {
        let budget = (peak as f64 * fraction) as u64;
        burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
        burn_swap::reset_counters(&device);
        let swapped = train();
        let report = burn_swap::report(&device).unwrap();
        assert_same(
            &plain,
            &swapped,
            &format!("{name} at {fraction} of the peak"),
        );
        assert!(
            report.peak_bytes <= budget,
            "{name}: counted peak {} over budget {budget}",
            report.peak_bytes
        );
        if fraction < 0.5 {
            assert!(report.offloads > 0, "{name}: no offload at {fraction}");
            assert!(report.fetches > 0, "{name}: no fetch at {fraction}");
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

#[test]
fn bit_identical_mlp_under_budgets() {
    let config = MlpConfig {
        d_in: 32,
        hidden: 48,
        depth: 4,
        d_out: 8,
        batch: 128,
        seed: 3,
    };
    let device = FlexDevice;
    let plain = train_mlp::<Plain>(&config, &device, STEPS);
    let early: f32 = plain.losses[..5].iter().sum();
    let late: f32 = plain.losses[STEPS - 5..].iter().sum();
    assert!(late < early, "the MLP learns: {:?}", plain.losses);
    check_budgets("mlp", plain, || {
        train_mlp::<Swapped>(&config, &device, STEPS)
    });
}

#[test]
fn bit_identical_convnet_under_budgets() {
    let config = ConvNetConfig::small();
    let device = FlexDevice;
    let plain = train_convnet::<Plain>(&config, &device, STEPS);
    check_budgets("convnet", plain, || {
        train_convnet::<Swapped>(&config, &device, STEPS)
    });
}
