//! `train_gpt`: a GPT-2-style decoder on the shipped corpus, tokenised bytewise, with Adam.

use std::error::Error;

use burn::tensor::backend::AutodiffBackend;

use super::{RunOptions, RunOutcome, SwapOptions, Trainer};
use crate::cli::Args;
use crate::models::{Gpt, GptConfig};

/// The options of `train_gpt`.
#[derive(Debug, Clone, PartialEq)]
pub struct GptOptions {
    /// Model and batch sizes.
    pub model: GptConfig,
    /// Steps, learning rate, burn-swap's options, progress bar.
    pub run: RunOptions,
}

impl super::TrainerOptions for GptOptions {
    /// The valued options beyond the shared ones.
    const KNOWN: &'static [&'static str] = &["layers", "heads", "d-model", "seq", "preset", "lr"];

    /// The options from the command line: `--preset small|gpt2-small` (small), then
    /// `--layers`, `--heads`, `--d-model`, `--seq`, `--batch` override it; `--steps N` (20),
    /// `--lr` (1e-3), and the [`SwapOptions`].
    fn from_args(args: &Args) -> Result<Self, crate::cli::ArgError> {
        let preset = match args.value("preset").unwrap_or("small") {
            "small" => GptConfig::small(),
            "gpt2-small" => GptConfig::gpt2_small(),
            other => {
                return Err(crate::cli::ArgError(format!(
                    "--preset {other}: expected small or gpt2-small"
                )));
            }
        };
        let model = GptConfig {
            layers: args.get("layers", preset.layers)?,
            heads: args.get("heads", preset.heads)?,
            d_model: args.get("d-model", preset.d_model)?,
            seq: args.get("seq", preset.seq)?,
            batch: args.get("batch", preset.batch)?,
            seed: preset.seed,
        };
        if model.heads == 0 || !model.d_model.is_multiple_of(model.heads) {
            return Err(crate::cli::ArgError(format!(
                "--d-model {} must be a multiple of --heads {}",
                model.d_model, model.heads
            )));
        }
        Ok(Self {
            model,
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
        format!("{:?}", self.model)
    }
}

/// The decoder's trainer (see [`super::Trainer`]).
pub fn trainer<'a, B: AutodiffBackend>(
    options: &GptOptions,
    device: &'a B::Device,
    swap: bool,
) -> Result<Trainer<'a, B, Gpt<B>>, Box<dyn Error>> {
    let config = options.model;
    let model = crate::train::init_seeded::<B, _>(device, 42, || config.init::<B>(device));
    Trainer::new(
        model,
        &options.run,
        device,
        swap,
        move |m: &Gpt<B>, step| m.loss(&config, step, device),
    )
}

/// Trains the decoder (see [`super::drive`]).
pub fn run<B: AutodiffBackend>(
    options: &GptOptions,
    device: &B::Device,
    swap: bool,
) -> Result<RunOutcome, Box<dyn Error>> {
    super::drive(trainer::<B>(options, device, swap)?)
}
