//! Training through `Autodiff<Swap<Flex>>` gives the same losses and parameters, bit for bit,
//! as `Autodiff<Flex>`: with no budget, and under budgets that force offloading and
//! recomputation, under every policy; the counted peak stays within the budget every time.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Policy, Swap, SwapConfig};
use burn_swap_harness::models::{ConvNetConfig, MlpConfig, TransformerConfig};
use burn_swap_harness::train::{Outcome, train_mlp_short_tail};
use burn_swap_harness::workload::{train_convnet, train_mlp, train_transformer};

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

const STEPS: usize = 20;

/// Runs `train` unbudgeted to find the counted peak, then under every policy at half and a
/// quarter of it (and the reactive policy at the whole of it), and checks every run against
/// the plain backend and its counted peak against the budget.
fn check_policies(name: &str, plain: Outcome, train: impl Fn() -> Outcome) {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    let unbudgeted = train();
    plain.assert_same(&unbudgeted, &format!("{name} unbudgeted"));
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;
    assert!(peak > 0);

    let mut runs = vec![(Policy::Reactive, 1.0)];
    for policy in Policy::ALL {
        runs.push((policy, 0.5));
        runs.push((policy, 0.25));
    }
    for (policy, fraction) in runs {
        let budget = (peak as f64 * fraction) as u64;
        let what = format!("{name}, {} at {fraction} of the peak", policy.name());
        burn_swap::configure(
            &device,
            SwapConfig::budget_bytes(budget)
                .with_policy(policy)
                .with_background_planning(false),
        )
        .unwrap();
        burn_swap::restart_trace(&device);
        burn_swap::reset_counters(&device);
        let swapped = train();
        let report = burn_swap::report(&device).unwrap();
        plain.assert_same(&swapped, &what);
        assert!(
            report.memory.peak_bytes <= budget,
            "{what}: counted peak {} over budget {budget}",
            report.memory.peak_bytes
        );
        if fraction < 0.5 {
            assert!(
                report.transfers.offloads + report.transfers.recomputes > 0,
                "{what}: nothing left the device"
            );
        }
        if policy.planned() {
            assert!(report.plan.plans > 0, "{what}: no plan was made\n{report}");
        }
        if policy == Policy::OffloadOnly {
            // (Strided views may still leave by recomputation on the reactive path.)
            assert_eq!(report.plan.planned_recomputes, 0, "{what}");
        }
        if policy == Policy::RecomputeOnly {
            assert_eq!(report.plan.planned_offloads, 0, "{what}");
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

fn mlp_config() -> MlpConfig {
    MlpConfig {
        d_in: 32,
        hidden: 48,
        depth: 4,
        d_out: 8,
        batch: 128,
        seed: 3,
    }
}

#[test]
fn bit_identical_mlp_under_every_policy() {
    let config = mlp_config();
    let device = FlexDevice;
    let plain = train_mlp::<Plain>(&config, &device, STEPS);
    let early: f32 = plain.losses[..5].iter().sum();
    let late: f32 = plain.losses[STEPS - 5..].iter().sum();
    assert!(late < early, "the MLP learns: {:?}", plain.losses);
    check_policies("mlp", plain, || {
        train_mlp::<Swapped>(&config, &device, STEPS)
    });
}

#[test]
fn bit_identical_convnet_under_every_policy() {
    let config = ConvNetConfig::small();
    let device = FlexDevice;
    let plain = train_convnet::<Plain>(&config, &device, STEPS);
    check_policies("convnet", plain, || {
        train_convnet::<Swapped>(&config, &device, STEPS)
    });
}

#[test]
fn bit_identical_transformer_block_under_every_policy() {
    let config = TransformerConfig::small();
    let device = FlexDevice;
    let plain = train_transformer::<Plain>(&config, &device, STEPS);
    let early: f32 = plain.losses[..5].iter().sum();
    let late: f32 = plain.losses[STEPS - 5..].iter().sum();
    assert!(late < early, "the block learns: {:?}", plain.losses);
    check_policies("transformer", plain, || {
        train_transformer::<Swapped>(&config, &device, STEPS)
    });
}

/// The last steps run a shorter batch: the iteration departs from the plan (other shapes),
/// the executor falls back to the reactive path for them, and nothing changes.
#[test]
fn bit_identical_when_the_last_batch_is_shorter() {
    let config = mlp_config();
    let device = FlexDevice;
    let train = |d: &_| -> Outcome { train_mlp_short_tail::<Swapped>(&config, d, STEPS, 3, 40) };
    let plain = train_mlp_short_tail::<Plain>(&config, &device, STEPS, 3, 40);
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    plain.assert_same(&train(&device), "short tail unbudgeted");
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;
    for policy in [Policy::Planned, Policy::Reactive] {
        let budget = peak / 4;
        burn_swap::configure(
            &device,
            SwapConfig::budget_bytes(budget)
                .with_policy(policy)
                .with_background_planning(false),
        )
        .unwrap();
        burn_swap::restart_trace(&device);
        burn_swap::reset_counters(&device);
        let swapped = train(&device);
        let report = burn_swap::report(&device).unwrap();
        plain.assert_same(&swapped, &format!("short tail, {}", policy.name()));
        assert!(report.memory.peak_bytes <= budget, "{report}");
        if policy == Policy::Planned {
            assert!(report.plan.plans > 0, "{report}");
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}
