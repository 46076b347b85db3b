//! `train_cnn`: a ResNet-style CNN with ReLU on synthetic images, with Adam.

use std::error::Error;

use burn::tensor::backend::AutodiffBackend;

use super::{RunOptions, RunOutcome, SwapOptions, Trainer};
use crate::cli::Args;
use crate::models::{ResNet, ResNetConfig};

/// The options of `train_cnn`.
#[derive(Debug, Clone, PartialEq)]
pub struct CnnOptions {
    /// Model and batch sizes.
    pub model: ResNetConfig,
    /// Steps, learning rate, burn-swap's options, progress bar.
    pub run: RunOptions,
}

impl super::TrainerOptions for CnnOptions {
    /// The valued options beyond the shared ones.
    const KNOWN: &'static [&'static str] = &["width", "blocks", "size", "lr"];

    /// The options from the command line: `--width` (16), `--blocks` (4), `--size` (32),
    /// `--batch` (16), `--steps N` (20), `--lr` (1e-3), and the [`SwapOptions`].
    fn from_args(args: &Args) -> Result<Self, crate::cli::ArgError> {
        let small = ResNetConfig::small();
        Ok(Self {
            model: ResNetConfig {
                width: args.get("width", small.width)?,
                blocks: args.get("blocks", small.blocks)?,
                size: args.get("size", small.size)?,
                batch: args.get("batch", small.batch)?,
                ..small
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
        format!("{:?}", self.model)
    }
}

/// The CNN's trainer (see [`super::Trainer`]).
pub fn trainer<'a, B: AutodiffBackend>(
    options: &CnnOptions,
    device: &'a B::Device,
    swap: bool,
) -> Result<Trainer<'a, B, ResNet<B>>, Box<dyn Error>> {
    let config = options.model;
    let model = crate::train::init_seeded::<B, _>(device, 42, || config.init::<B>(device));
    Trainer::new(
        model,
        &options.run,
        device,
        swap,
        move |m: &ResNet<B>, step| m.loss(&config, step, device),
    )
}

/// Trains the CNN (see [`super::drive`]).
pub fn run<B: AutodiffBackend>(
    options: &CnnOptions,
    device: &B::Device,
    swap: bool,
) -> Result<RunOutcome, Box<dyn Error>> {
    super::drive(trainer::<B>(options, device, swap)?)
}
