//! The example trainers give the same losses with and without burn-swap, bit for bit, and
//! keep the budget with offloads.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap::{Budget, Policy, Swap};
use burn_swap_harness::models::MlpConfig;
use burn_swap_harness::trainers::SwapOptions;
use burn_swap_harness::trainers::mlp::{self, MlpOptions};

fn options(swap: SwapOptions) -> MlpOptions {
    MlpOptions {
        // Deep and narrow with a large batch: saved activations dominate the peak, so a
        // quarter of it still holds the largest single op.
        model: MlpConfig {
            d_in: 64,
            hidden: 64,
            depth: 8,
            d_out: 16,
            batch: 512,
            seed: 17,
        },
        run: run_options(swap, 8),
    }
}

#[test]
fn bit_identical_train_mlp_at_a_quarter_of_the_peak_reactive_and_planned() {
    let device = FlexDevice;
    let plain =
        mlp::run::<Autodiff<Flex>>(&options(SwapOptions::default()), &device, false).unwrap();
    assert!(plain.report.is_none());

    let dir = std::env::temp_dir().join(format!("burn-swap-trainers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report_path = dir.join("r.json");
    let _guard = burn_swap_harness::swap_device_lock();
    for policy in [Policy::Reactive, Policy::Planned] {
        let swap = SwapOptions {
            budget: Some(Budget::DeviceFraction(0.25)),
            policy: Some(policy),
            report_json: Some(report_path.to_string_lossy().into_owned()),
            ..SwapOptions::default()
        };
        burn_swap::restart_trace(&device);
        let swapped = mlp::run::<Autodiff<Swap<Flex>>>(&options(swap), &device, true).unwrap();

        let bits = |l: &[f32]| l.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&plain.losses), bits(&swapped.losses), "{policy:?}");
        let report = swapped.report.unwrap();
        let budget = report.budget_bytes.unwrap();
        assert_eq!(budget, swapped.warm_up_peak.unwrap() / 4);
        assert!(report.memory.peak_bytes <= budget, "{report}");
        assert!(report.transfers.offloaded_bytes > 0, "{report}");
        assert_eq!(report.policy, policy);

        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
        assert_eq!(json["budget_bytes"].as_u64(), Some(budget));
        // The typed fields keep their JSON strings.
        assert_eq!(json["policy"].as_str(), Some(policy.name()));
        assert_eq!(json["eviction"].as_str(), Some("dtr"));
        assert_eq!(json["compression"].as_str(), Some("off"));
        assert!(json["peak_bytes"].as_u64().unwrap() <= budget);
        assert!(json["offloaded_bytes"].as_u64().unwrap() > 0);
        assert!(json["exposed_wait_seconds"].as_f64().is_some());
        // The plans' counts are there; whether a plan made on the planner thread is ready
        // within 8 steps of this tiny MLP depends on the machine (its period is found at
        // the sixth step, the plan started at the eighth), so plans are checked where they
        // are made on the op's thread (`plans_fit.rs`, `learner.rs`).
        assert!(json["plans"].as_u64().is_some(), "{report}");
        assert!(json["planned_iterations"].as_u64().is_some(), "{report}");
    }
    std::fs::remove_dir_all(dir).ok();
    burn_swap::configure(&device, burn_swap::SwapConfig::default()).unwrap();
}

#[test]
fn swap_options_without_swap_are_refused() {
    let swap = SwapOptions {
        budget: Some(Budget::Bytes(1 << 20)),
        ..SwapOptions::default()
    };
    let err = mlp::run::<Autodiff<Flex>>(&options(swap), &FlexDevice, false).unwrap_err();
    assert!(err.to_string().contains("need the `swap` feature"));
}

fn run_options(swap: SwapOptions, steps: usize) -> burn_swap_harness::trainers::RunOptions {
    burn_swap_harness::trainers::RunOptions {
        steps,
        learning_rate: 1e-3,
        swap,
        progress: false,
    }
}

fn quarter() -> SwapOptions {
    SwapOptions {
        budget: Some(Budget::DeviceFraction(0.25)),
        ..SwapOptions::default()
    }
}

/// Runs a trainer without and with burn-swap at a quarter of its warm-up peak and compares.
fn both_ways(
    name: &str,
    run: impl Fn(SwapOptions, bool) -> burn_swap_harness::trainers::RunOutcome,
) {
    let plain = run(SwapOptions::default(), false);
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::restart_trace(&FlexDevice);
    let swapped = run(quarter(), true);
    let bits = |l: &[f32]| l.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&plain.losses), bits(&swapped.losses), "{name}");
    let report = swapped.report.unwrap();
    assert!(
        report.memory.peak_bytes <= report.budget_bytes.unwrap(),
        "{name}\n{report}"
    );
    assert!(
        report.transfers.offloads + report.transfers.recomputes > 0,
        "{name}\n{report}"
    );
    burn_swap::configure(&FlexDevice, burn_swap::SwapConfig::default()).unwrap();
}

#[test]
fn bit_identical_train_gpt_at_a_quarter_of_the_peak() {
    use burn_swap_harness::models::GptConfig;
    use burn_swap_harness::trainers::gpt::{self, GptOptions};
    let model = GptConfig {
        seq: 32,
        ..GptConfig::small()
    };
    both_ways("train_gpt", |swap, on| {
        let options = GptOptions {
            model,
            run: run_options(swap, 6),
        };
        if on {
            gpt::run::<Autodiff<Swap<Flex>>>(&options, &FlexDevice, true).unwrap()
        } else {
            gpt::run::<Autodiff<Flex>>(&options, &FlexDevice, false).unwrap()
        }
    });
}

#[test]
fn bit_identical_train_cnn_at_a_quarter_of_the_peak() {
    use burn_swap_harness::models::ResNetConfig;
    use burn_swap_harness::trainers::cnn::{self, CnnOptions};
    let model = ResNetConfig {
        size: 16,
        batch: 8,
        ..ResNetConfig::small()
    };
    both_ways("train_cnn", |swap, on| {
        let options = CnnOptions {
            model,
            run: run_options(swap, 6),
        };
        if on {
            cnn::run::<Autodiff<Swap<Flex>>>(&options, &FlexDevice, true).unwrap()
        } else {
            cnn::run::<Autodiff<Flex>>(&options, &FlexDevice, false).unwrap()
        }
    });
}

/// `--plot` draws the memory timeline: a non-trivial SVG whose data has hundreds of points
/// and the budget line.
#[test]
fn plot_draws_the_memory_timeline() {
    use burn_swap_harness::models::ResNetConfig;
    use burn_swap_harness::plot::Timeline;
    use burn_swap_harness::trainers::cnn::{self, CnnOptions};
    let dir = std::env::temp_dir().join(format!("burn-swap-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("timeline.svg").to_string_lossy().into_owned();
    let options = CnnOptions {
        model: ResNetConfig {
            size: 16,
            batch: 8,
            ..ResNetConfig::small()
        },
        run: run_options(
            SwapOptions {
                plot: Some(path.clone()),
                ..quarter()
            },
            6,
        ),
    };
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::restart_trace(&FlexDevice);
    let outcome = cnn::run::<Autodiff<Swap<Flex>>>(&options, &FlexDevice, true).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.len() > 10_000, "{} bytes", svg.len());
    assert!(svg.contains("budget") && svg.contains("under burn-swap"));

    let trace = burn_swap::trace(&FlexDevice).unwrap();
    let budget = outcome.report.unwrap().budget_bytes;
    let timeline = Timeline::new(&trace, Some(&trace), budget);
    assert!(
        timeline.resident.len() >= 300,
        "{} points",
        timeline.resident.len()
    );
    let budget_mib = timeline.budget.unwrap();
    assert!(budget_mib > 0.0);
    assert!(timeline.resident.iter().all(|p| p.1 <= budget_mib + 1e-9));
    assert!(!timeline.offloads.is_empty() && !timeline.fetches.is_empty());
    std::fs::remove_dir_all(dir).ok();
    burn_swap::configure(&FlexDevice, burn_swap::SwapConfig::default()).unwrap();
}
