//! Trains an MLP on synthetic regression data with Adam, on `Autodiff<Flex>`, or, with the
//! cargo feature `swap`, on `Autodiff<Swap<Flex>>` under a memory budget.
//!
//! ```text
//! cargo run --release --example train_mlp --features swap -- --steps 5 --budget 0.25 --report-json r.json
//! ```
//!
//! Options: `--steps N` (20), `--batch N` (256), `--width N` (1024), `--depth N` (4),
//! `--lr` (1e-3), `--budget B` (bytes such as `64MiB`, or a fraction such as `0.25` of the counted peak of one
//! unbudgeted warm-up step, which runs first in every build),
//! `--policy reactive|planned|offload-only|recompute-only`, `--compress` (zero-value
//! compression of offloads; `--compress-mode auto|on:0.7` to choose), `--eviction dtr|lru|largest`,
//! `--report-json PATH`, `--trace-json PATH` (the last complete iteration's trace),
//! `--plot PATH` (its memory timeline, SVG), `--device flex|wgpu|cuda` (wgpu and cuda with
//! their features): the options `train_gpt` and `train_cnn` take, and the model's.

use std::process::ExitCode;

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::AutodiffBackend;
use burn_swap_suite::cli::Args;
use burn_swap_suite::trainers::{
    self, RunOutcome,
    mlp::{self, MlpOptions},
};

// The one type that changes (over the inner backend `B` that `--device` picks).
#[cfg(feature = "swap")]
type On<B> = Autodiff<burn_swap::Swap<B>>;
#[cfg(not(feature = "swap"))]
type On<B> = Autodiff<B>;

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
    let known: Vec<&str> = trainers::KNOWN
        .iter()
        .chain(MlpOptions::KNOWN)
        .copied()
        .collect();
    let args = Args::parse(std::env::args().skip(1), trainers::FLAGS, &known)?;
    let options = MlpOptions::from_args(&args)?;
    let m = options.model;
    let device = args.value("device").unwrap_or("flex");
    println!(
        "train_mlp on {device}{}: {} hidden layers of {}, batch {}, 1 warm-up step + {} steps",
        if cfg!(feature = "swap") {
            " under burn-swap"
        } else {
            ""
        },
        m.depth,
        m.hidden,
        m.batch,
        options.run.steps
    );
    let outcome = match device {
        "flex" => train::<On<Flex>>(&options, &FlexDevice)?,
        #[cfg(feature = "wgpu")]
        "wgpu" => train::<On<burn_swap::unstable::CubeWgpu>>(
            &options,
            &cubecl::wgpu::WgpuDevice::DefaultDevice,
        )?,
        #[cfg(feature = "cuda")]
        "cuda" => train::<On<burn::backend::Cuda>>(&options, &Default::default())?,
        other => {
            return Err(burn_swap_suite::cli::unknown_device(other).into());
        }
    };
    trainers::print_outcome(&outcome, &options.run.swap);
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
        burn_swap::configure(device, options.run.swap.config(peak))?;
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
