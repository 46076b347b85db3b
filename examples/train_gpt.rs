//! Trains a GPT-2-style decoder on the shipped corpus (`data/corpus.txt`, bytewise tokens) with Adam, on
//! `Autodiff<B>`, or, with the cargo feature `swap`, on `Autodiff<Swap<B>>` under a memory
//! budget; `B` is Flex (`--device flex`, the default) or CUDA (`--device cuda`, with the
//! `cuda` feature).
//!
//! ```text
//! cargo run --release --example train_gpt --features swap -- --steps 5 --budget 0.25
//! ```
//!
//! Options: `--preset small|gpt2-small`, `--layers`, `--heads`, `--d-model`, `--seq`, `--batch`, `--steps N`, `--lr`, `--budget B` (bytes, or a fraction of the
//! counted peak of one unbudgeted warm-up step), `--policy`, `--compress`,
//! `--compress-mode`, `--eviction`, `--report-json PATH`, `--trace-json PATH`.

use std::process::ExitCode;

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::AutodiffBackend;
use burn_swap_suite::cli::Args;
use burn_swap_suite::trainers::gpt::{self, GptOptions};
use burn_swap_suite::trainers::{self as trainers, RunOutcome};

#[cfg(feature = "swap")]
type On<B> = Autodiff<burn_swap::Swap<B>>;
#[cfg(not(feature = "swap"))]
type On<B> = Autodiff<B>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("train_gpt: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let known: Vec<&str> = trainers::KNOWN
        .iter()
        .chain(GptOptions::KNOWN)
        .copied()
        .collect();
    let args = Args::parse(std::env::args().skip(1), trainers::FLAGS, &known)?;
    let options = GptOptions::from_args(&args)?;
    let swap = cfg!(feature = "swap");
    let device = args.value("device").unwrap_or("flex");
    println!(
        "train_gpt on {device}{}: {:?}, 1 warm-up step + {} steps",
        if swap { " under burn-swap" } else { "" },
        options.model,
        options.run.steps
    );
    let outcome: RunOutcome = match device {
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
    options: &GptOptions,
    device: &B::Device,
) -> Result<RunOutcome, Box<dyn std::error::Error>> {
    let swap = cfg!(feature = "swap");
    let mut trainer = gpt::trainer::<B>(options, device, swap)?;
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
