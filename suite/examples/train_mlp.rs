//! Trains an MLP on synthetic regression data with Adam, on `Autodiff<Flex>`, or, with the
//! cargo feature `swap`, on `Autodiff<Swap<Flex>>` under a memory budget.
//!
//! ```text
//! cargo run --release --example train_mlp --features swap -- --steps 5 --budget 0.25 --report-json r.json
//! ```
//!
//! Options: `--steps N` (20), `--batch N` (256), `--width N` (1024), `--depth N` (4),
//! `--budget B` (bytes such as `64MiB`, or a fraction such as `0.25` of the counted peak of one
//! unbudgeted warm-up step, which runs first in every build),
//! `--policy reactive|planned|offload-only|recompute-only`, `--compress` (zero-value
//! compression of offloads; `--compress-mode auto|on:0.7` to choose), `--eviction dtr|lru|largest`,
//! `--report-json PATH`, `--trace-json PATH` (the last complete iteration's trace).

use std::process::ExitCode;

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::AutodiffBackend;
use burn_swap_suite::cli::Args;
use burn_swap_suite::trainers::{
    self, RunOutcome,
    mlp::{self, MlpOptions},
};

// The one type that changes.
#[cfg(feature = "swap")]
type Backend = Autodiff<burn_swap::Swap<Flex>>;
#[cfg(not(feature = "swap"))]
type Backend = Autodiff<Flex>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("train_mlp: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse(
        std::env::args().skip(1),
        MlpOptions::FLAGS,
        MlpOptions::KNOWN,
    )?;
    if let Some(device) = args.value("device").filter(|d| *d != "flex") {
        return Err(format!("--device {device}: this trainer runs on flex (the CPU) only").into());
    }
    let options = MlpOptions::from_args(&args)?;
    let device = FlexDevice;
    let m = options.model;
    println!(
        "train_mlp on {}: {} hidden layers of {}, batch {}, 1 warm-up step + {} steps",
        <Backend as burn::tensor::backend::Backend>::name(&device),
        m.depth,
        m.hidden,
        m.batch,
        options.steps
    );
    let outcome = train::<Backend>(&options, &device)?;
    trainers::print_outcome(&outcome, &options.swap);
    Ok(())
}

/// The training run, with burn-swap's two lines around the loop.
fn train<B: AutodiffBackend>(
    options: &MlpOptions,
    device: &B::Device,
) -> Result<RunOutcome, Box<dyn std::error::Error>> {
    let swap = cfg!(feature = "swap");
    let mut trainer = mlp::trainer::<B>(options, device, swap)?;
    // One step with no budget: a fractional `--budget` is a fraction of its counted peak.
    let warm_up_peak = trainer.warm_up()?;
    // burn-swap, line one: the budget, before the training loop.
    if let Some(peak) = warm_up_peak {
        burn_swap::configure(device, options.swap.config(peak))?;
        burn_swap::reset_counters(device);
    }
    trainer.train()?;
    // burn-swap, line two: what it did (printed by `print_outcome`).
    let report = if swap {
        burn_swap::report(device)
    } else {
        None
    };
    trainer.finish(report)
}
