//! Workloads for instruction counts under `valgrind --tool=callgrind` (the book's
//! *Measurements*): exact and repeatable where wall-clock time on a shared machine is not.
//! Built with `cargo build --release -p burn-swap-harness --bin prof` into
//! `target/release/prof`.
//!
//! ```text
//! prof flex|router|untraced|traced [rounds]   # rounds (20,000) × 17 tiny elementwise ops
//! prof step-flex|step-swap           # 3 training steps of the benches' MLP
//! prof lstm-flex|lstm-router|lstm-swap [steps]  # steps (3) of the op-bound LSTM, no budget
//! prof lstm-bench [steps]   # swap-bench's LSTM under the BURN_SWAP_* variables (budget, policy)
//! prof deep-flex|deep-bench [steps]   # swap-bench's 12-block transformer, alone / under BURN_SWAP_*
//! prof bucketed-bench [steps]   # swap-bench's bucketed transformer (three schedules) under BURN_SWAP_*
//! prof gan-bench [steps]   # swap-bench's GAN (two alternating schedules) under BURN_SWAP_*
//! prof mlp-bench [steps]   # swap-bench's MLP (matmul-bound) under BURN_SWAP_*
//! prof gpt-bench [steps]   # swap-bench's GPT (its `small` preset) under BURN_SWAP_*
//! prof recurrent-flex|recurrent-router|recurrent-bench [steps]   # swap-bench's Burn-style stacked LSTM: alone, through burn-router alone, under BURN_SWAP_*
//! prof recurrent-untraced [steps]   # the same under BURN_SWAP_* with the trace off (what recording costs)
//! prof classifier-flex|classifier-router|classifier-bench [steps]   # swap-bench's Burn-style text classifier
//! prof varying-flex|varying-router|varying-bench [steps]   # the same, each batch padded to its longest text
//! ```
//!
//! `PROF_FOREGROUND=1` makes the `*-bench` modes' plans on the op's thread; `PROF_UNJUDGED=1`
//! follows every plan made, whatever it costs (to see what a declined plan does).
//! `PROF_REPORT=1 prof lstm-swap N` prints burn-swap's report after the steps (the period
//! found, the op count); `PROF_REPORT=json`, the report as JSON (when each plan took over).
//!
//! Two step counts give one step's steady cost (the difference over the extra steps),
//! apart from the first steps' warm-up (initialisation, the period being found).

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn_swap::{Swap, SwapConfig};
use burn_swap_harness::baseline::BareRouter;
use burn_swap_harness::classifier::ClassifierConfig;
use burn_swap_harness::models::{
    GptConfig, LstmNet, LstmNetConfig, Mlp, MlpConfig, TransformerConfig,
};
use burn_swap_harness::recurrent::RecurrentConfig;
use burn_swap_harness::schedules::GanConfig;
use burn_swap_harness::train::{init_mlp, init_seeded, train_loop};
use burn_swap_harness::workload::Workload;

fn tiny_ops<B: Backend>(rounds: usize) {
    let device = Default::default();
    let x = Tensor::<B, 1>::from_floats([1.0, 2.0, 3.0, 4.0], &device);
    for _ in 0..rounds {
        let mut y = x.clone();
        for _ in 0..8 {
            y = (y * 1.0001) + 0.5;
        }
        std::hint::black_box(y);
    }
}

fn steps<B: AutodiffBackend>() {
    let config = MlpConfig::bench();
    let device = Default::default();
    let model = init_mlp::<B>(&config, &device, 1);
    let (_model, losses) = train_loop(
        model,
        3,
        1e-4,
        |m: &Mlp<B>, s| m.loss(&config, s, &device),
        |_, _| {},
    );
    std::hint::black_box(losses);
}

fn lstm_steps<B: AutodiffBackend>(config: LstmNetConfig, steps: usize) {
    let device = Default::default();
    let model = init_seeded::<B, _>(&device, 1, || config.init(&device));
    let (_model, losses) = train_loop(
        model,
        steps,
        1e-3,
        |m: &LstmNet<B>, s| m.loss(&config, s, &device),
        |_, _| {},
    );
    std::hint::black_box(losses);
}

/// burn-swap's report on stderr when `PROF_REPORT` is set: as JSON for `PROF_REPORT=json`
/// (when each plan took over, what each room made), else as text.
fn print_report(device: &FlexDevice) {
    match std::env::var("PROF_REPORT").as_deref() {
        Ok("json") => eprintln!("{}", burn_swap::report(device).unwrap().to_json()),
        Ok(_) => eprintln!("{}", burn_swap::report(device).unwrap()),
        Err(_) => {}
    }
}

/// The configuration of the `*-bench` modes: the `BURN_SWAP_*` variables, with plans made on
/// the op's thread when `PROF_FOREGROUND` is set (so that a run under callgrind, which runs
/// one thread at a time, makes its plans within its steps).
fn env_config() -> SwapConfig {
    let config = SwapConfig::from_env().unwrap();
    config
        .with_background_planning(std::env::var_os("PROF_FOREGROUND").is_none())
        .with_plans_judged(std::env::var_os("PROF_UNJUDGED").is_none())
}

/// The models in the style of Burn's examples, by the prefix of a mode's name.
fn user_style(mode: &str) -> Workload {
    match mode.split('-').next() {
        Some("recurrent") => Workload::Recurrent(RecurrentConfig::example()),
        Some("classifier") => Workload::Classifier(ClassifierConfig::bench()),
        _ => Workload::Classifier(ClassifierConfig::bench().varying()),
    }
}

fn main() {
    let device = FlexDevice;
    let arg = std::env::args().nth(2).and_then(|s| s.parse().ok());
    let count = arg.unwrap_or(3);
    let rounds = arg.unwrap_or(20_000);
    match std::env::args().nth(1).as_deref() {
        Some("flex") => tiny_ops::<Flex>(rounds),
        Some("router") => tiny_ops::<BareRouter<Flex>>(rounds),
        Some("untraced") => {
            burn_swap::configure(&device, SwapConfig::default().with_trace(false)).unwrap();
            tiny_ops::<Swap<Flex>>(rounds)
        }
        Some("traced") => tiny_ops::<Swap<Flex>>(rounds),
        Some("step-flex") => steps::<Autodiff<Flex>>(),
        Some("step-swap") => steps::<Autodiff<Swap<Flex>>>(),
        Some("lstm-flex") => lstm_steps::<Autodiff<Flex>>(LstmNetConfig::op_bound(), count),
        Some("lstm-router") => {
            lstm_steps::<Autodiff<BareRouter<Flex>>>(LstmNetConfig::op_bound(), count)
        }
        Some("lstm-bench") => {
            burn_swap::configure(&device, env_config()).unwrap();
            lstm_steps::<Autodiff<Swap<Flex>>>(LstmNetConfig::bench(), count);
            print_report(&device);
        }
        Some("deep-flex") => {
            let deep = Workload::Transformer(TransformerConfig::deep());
            std::hint::black_box(deep.train::<Autodiff<Flex>>(&device, count));
        }
        Some("deep-bench") => {
            burn_swap::configure(&device, env_config()).unwrap();
            let deep = Workload::Transformer(TransformerConfig::deep());
            std::hint::black_box(deep.train::<Autodiff<Swap<Flex>>>(&device, count));
            print_report(&device);
        }
        Some("bucketed-bench") => {
            burn_swap::configure(&device, env_config()).unwrap();
            let bucketed = Workload::Bucketed(TransformerConfig::small());
            std::hint::black_box(bucketed.train::<Autodiff<Swap<Flex>>>(&device, count));
            print_report(&device);
        }
        Some("mlp-bench") => {
            burn_swap::configure(&device, env_config()).unwrap();
            let mlp = Workload::Mlp(MlpConfig::bench());
            std::hint::black_box(mlp.train::<Autodiff<Swap<Flex>>>(&device, count));
            print_report(&device);
        }
        Some("gpt-bench") => {
            burn_swap::configure(&device, env_config()).unwrap();
            let gpt = Workload::Gpt(GptConfig::small());
            std::hint::black_box(gpt.train::<Autodiff<Swap<Flex>>>(&device, count));
            print_report(&device);
        }
        Some("gan-bench") => {
            burn_swap::configure(&device, env_config()).unwrap();
            let gan = Workload::Gan(GanConfig::small());
            std::hint::black_box(gan.train::<Autodiff<Swap<Flex>>>(&device, count));
            print_report(&device);
        }
        Some(mode @ ("recurrent-flex" | "classifier-flex" | "varying-flex")) => {
            let workload = user_style(mode);
            std::hint::black_box(workload.train::<Autodiff<Flex>>(&device, count));
        }
        Some(mode @ ("recurrent-router" | "classifier-router" | "varying-router")) => {
            let workload = user_style(mode);
            std::hint::black_box(workload.train::<Autodiff<BareRouter<Flex>>>(&device, count));
        }
        Some(mode @ ("recurrent-bench" | "classifier-bench" | "varying-bench")) => {
            burn_swap::configure(&device, env_config()).unwrap();
            let workload = user_style(mode);
            std::hint::black_box(workload.train::<Autodiff<Swap<Flex>>>(&device, count));
            print_report(&device);
        }
        Some("recurrent-untraced") => {
            burn_swap::configure(&device, env_config().with_trace(false)).unwrap();
            let workload = user_style("recurrent");
            std::hint::black_box(workload.train::<Autodiff<Swap<Flex>>>(&device, count));
        }
        Some("lstm-swap") => {
            lstm_steps::<Autodiff<Swap<Flex>>>(LstmNetConfig::op_bound(), count);
            print_report(&device);
        }
        _ => eprintln!(
            "usage: prof flex|router|untraced|traced|step-flex|step-swap|lstm-flex|lstm-router|lstm-swap|lstm-bench|deep-flex|deep-bench|bucketed-bench|gan-bench|gpt-bench|mlp-bench|recurrent-flex|recurrent-router|recurrent-bench|recurrent-untraced|classifier-flex|classifier-router|classifier-bench|varying-flex|varying-router|varying-bench"
        ),
    }
}
