//! `train_mlp`: an MLP on synthetic regression data with Adam.

use std::error::Error;

use burn::tensor::backend::AutodiffBackend;

use super::{RunOutcome, SwapOptions, Trainer};
use crate::cli::Args;
use crate::models::{Mlp, MlpConfig};
use crate::train::init_mlp;

/// The options of `train_mlp`.
#[derive(Debug, Clone, PartialEq)]
pub struct MlpOptions {
    /// Steps after the warm-up step.
    pub steps: usize,
    /// Model and batch sizes.
    pub model: MlpConfig,
    /// Learning rate of Adam.
    pub learning_rate: f64,
    /// burn-swap's options.
    pub swap: SwapOptions,
    /// Show a progress bar.
    pub progress: bool,
}

impl MlpOptions {
    /// The options from the command line: `--steps N` (20), `--batch N` (256), `--width N`
    /// (1024), `--depth N` (4), and the [`SwapOptions`].
    pub fn from_args(args: &Args) -> Result<Self, crate::cli::ArgError> {
        Ok(Self {
            steps: args.get("steps", 20)?,
            model: MlpConfig {
                d_in: 256,
                hidden: args.get("width", 1024)?,
                depth: args.get("depth", 4)?,
                d_out: 16,
                batch: args.get("batch", 256)?,
                seed: 17,
            },
            learning_rate: 1e-3,
            swap: SwapOptions::from_args(args)?,
            progress: true,
        })
    }

    /// The bare flags `from_args` accepts.
    pub const FLAGS: &'static [&'static str] = &["compress"];

    /// The valued options `from_args` accepts.
    pub const KNOWN: &'static [&'static str] = &[
        "steps",
        "batch",
        "width",
        "depth",
        "budget",
        "policy",
        "compress-mode",
        "eviction",
        "report-json",
        "trace-json",
        "device",
    ];
}

/// The MLP's trainer (see [`super::Trainer`]).
pub fn trainer<'a, B: AutodiffBackend>(
    options: &MlpOptions,
    device: &'a B::Device,
    swap: bool,
) -> Result<Trainer<'a, B, Mlp<B>>, Box<dyn Error>> {
    let config = options.model;
    let model = init_mlp::<B>(&config, device, 42);
    let run = super::RunOptions {
        steps: options.steps,
        learning_rate: options.learning_rate,
        swap: options.swap.clone(),
        progress: options.progress,
    };
    Trainer::new(model, &run, device, swap, move |m: &Mlp<B>, step| {
        m.loss(&config, step, device)
    })
}

/// Trains an MLP (see [`super::drive`]).
pub fn run<B: AutodiffBackend>(
    options: &MlpOptions,
    device: &B::Device,
    swap: bool,
) -> Result<RunOutcome, Box<dyn Error>> {
    super::drive(trainer::<B>(options, device, swap)?)
}
