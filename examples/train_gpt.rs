//! Trains a GPT-2-style decoder on the shipped corpus (`harness/src/corpus.txt`, bytewise tokens)
//! with Adam, on `Autodiff<B>`, or, with the cargo feature `swap`, on `Autodiff<Swap<B>>`
//! under a memory budget; `B` is Flex (`--device flex`, the default), CubeCL's wgpu or CUDA.
//!
//! ```text
//! cargo run --release --example train_gpt --features swap -- --steps 5 --budget 0.25
//! ```
//!
//! Options: the model's, `--preset small|gpt2-small`, then `--layers`, `--heads`, `--d-model`,
//! `--seq`; and those every trainer takes (README): `--steps N` (20), `--batch N`, `--lr` (1e-3),
//! `--budget B` (bytes such as `64MiB`, or a fraction such as `0.25` of the counted peak of one
//! unbudgeted warm-up step, which runs first in every build), `--policy
//! reactive|planned|offload-only|recompute-only`, `--compress` (zero-value compression of offloads;
//! `--compress-mode auto|on:0.7` to choose), `--eviction dtr|lru|largest`, `--report-json PATH`,
//! `--trace-json PATH` (the last complete iteration's trace), `--plot PATH` (its memory timeline,
//! SVG), `--device flex|wgpu|cuda` (wgpu and cuda with their features). The parsing, the device and
//! the printing are `trainers::main`'s; this file is the model's training run.

use std::error::Error;
use std::process::ExitCode;

use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use burn_swap_harness::trainers::gpt::{self, GptOptions};
use burn_swap_harness::trainers::{self, Example, RunOutcome};

// The one type that changes (over the inner backend `B` that `--device` picks).
#[cfg(feature = "swap")]
type On<B> = Autodiff<burn_swap::Swap<B>>;
#[cfg(not(feature = "swap"))]
type On<B> = Autodiff<B>;

struct TrainGpt;

impl Example for TrainGpt {
    const NAME: &'static str = "train_gpt";
    const SWAP: bool = cfg!(feature = "swap");
    type Options = GptOptions;

    fn train<I: burn_ir::BackendIr>(
        options: &GptOptions,
        device: &I::Device,
    ) -> Result<RunOutcome, Box<dyn Error>> {
        train::<On<I>>(options, device)
    }
}

fn main() -> ExitCode {
    trainers::main::<TrainGpt>()
}

/// The training run, with burn-swap's two lines around the loop.
fn train<B: AutodiffBackend>(
    options: &GptOptions,
    device: &B::Device,
) -> Result<RunOutcome, Box<dyn Error>> {
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
