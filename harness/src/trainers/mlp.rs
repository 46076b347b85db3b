//! `train_mlp`: an MLP on synthetic regression data with Adam.

use std::error::Error;

use burn::tensor::backend::AutodiffBackend;

use super::{RunOptions, RunOutcome, SwapOptions, Trainer};
use crate::cli::Args;
use crate::models::{Mlp, MlpConfig};
use crate::train::init_mlp;

/// The options of `train_mlp`.
#[derive(Debug, Clone, PartialEq)]
pub struct MlpOptions {
    /// Model and batch sizes.
    pub model: MlpConfig,
    /// Steps, learning rate, burn-swap's options, progress bar.
    pub run: RunOptions,
}

impl super::TrainerOptions for MlpOptions {
    /// The valued options beyond the shared ones.
    const KNOWN: &'static [&'static str] = &["width", "depth", "lr"];

    /// The options from the command line: `--width N` (1024), `--depth N` (4), `--batch N`
    /// (256), `--steps N` (20), `--lr` (1e-3), and the [`SwapOptions`].
    fn from_args(args: &Args) -> Result<Self, crate::cli::ArgError> {
        Ok(Self {
            model: MlpConfig {
                d_in: 256,
                hidden: args.get("width", 1024)?,
                depth: args.get("depth", 4)?,
                d_out: 16,
                batch: args.get("batch", 256)?,
                seed: 17,
            },
            run: RunOptions {
                steps: args.get("steps", 20)?,
                learning_rate: args.get("lr", 1e-3)?,
                swap: SwapOptions::from_args(args)?,
                progress: true,
            },
        })
    }

    fn run_options(&self) -> &RunOptions {
        &self.run
    }

    fn describe(&self) -> String {
        format!(
            "{} hidden layers of {}, batch {}",
            self.model.depth, self.model.hidden, self.model.batch
        )
    }
}

/// The MLP's trainer (see [`super::Trainer`]).
pub fn trainer<'a, B: AutodiffBackend>(
    options: &MlpOptions,
    device: &'a B::Device,
    swap: bool,
) -> Result<Trainer<'a, B, Mlp<B>>, Box<dyn Error>> {
    let config = options.model;
    let model = init_mlp::<B>(&config, device, 42);
    Trainer::new(
        model,
        &options.run,
        device,
        swap,
        move |m: &Mlp<B>, step| m.loss(&config, step, device),
    )
}

/// Trains an MLP (see [`super::drive`]).
pub fn run<B: AutodiffBackend>(
    options: &MlpOptions,
    device: &B::Device,
    swap: bool,
) -> Result<RunOutcome, Box<dyn Error>> {
    super::drive(trainer::<B>(options, device, swap)?)
}
