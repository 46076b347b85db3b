//! `train_mlp`: an MLP on synthetic regression data with Adam.

use std::error::Error;

use burn::tensor::backend::AutodiffBackend;
use indicatif::{ProgressBar, ProgressStyle};

use super::{RunOutcome, SwapOptions};
use crate::cli::Args;
use crate::models::{Mlp, MlpConfig};
use crate::train::{init_mlp, train_loop};

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

/// Trains: one unbudgeted warm-up step (in every build, so that runs with and without
/// burn-swap follow the same steps), then, under burn-swap (`swap`), applies the budget and
/// trains `steps` more steps, and reports.
pub fn run<B: AutodiffBackend>(
    options: &MlpOptions,
    device: &B::Device,
    swap: bool,
) -> Result<RunOutcome, Box<dyn Error>> {
    if !swap && options.swap.any() {
        return Err(
            "--budget, --policy, --compress, --eviction, --report-json and --trace-json need the `swap` feature".into(),
        );
    }
    let config = options.model;
    let model = init_mlp::<B>(&config, device, 42);
    let loss_of = |m: &Mlp<B>, step: usize| m.loss(&config, step, device);

    if swap {
        burn_swap::configure(device, burn_swap::SwapConfig::default())?;
        burn_swap::reset_counters(device);
    }
    let (model, mut losses) = train_loop(model, 1, options.learning_rate, loss_of, |_, _| {});
    let warm_up_peak = swap.then(|| burn_swap::memory(device).map(|m| m.peak_bytes).unwrap_or(0));
    if let Some(peak) = warm_up_peak {
        burn_swap::configure(device, options.swap.config(peak))?;
        burn_swap::reset_counters(device);
    }

    let bar = if options.progress {
        ProgressBar::new(options.steps as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")?);
    let (_model, steps) = train_loop(
        model,
        options.steps,
        options.learning_rate,
        |m: &Mlp<B>, step| loss_of(m, step + 1),
        |_, loss| {
            let memory = if swap {
                burn_swap::memory(device)
                    .map(|m| {
                        format!(
                            ", resident {}",
                            burn_swap::report::format_bytes(m.resident_bytes)
                        )
                    })
                    .unwrap_or_default()
            } else {
                String::new()
            };
            bar.set_message(format!("loss {loss:.5}{memory}"));
            bar.inc(1);
        },
    );
    bar.finish();
    losses.extend(steps);

    let report = if swap {
        burn_swap::report(device)
    } else {
        None
    };
    if let Some(report) = &report
        && let Some(path) = &options.swap.report_json
    {
        std::fs::write(path, report.to_json())?;
    }
    if swap && let Some(path) = &options.swap.trace_json {
        let trace =
            burn_swap::trace(device).ok_or("no complete iteration was traced (run more steps)")?;
        std::fs::write(path, trace.to_json())?;
    }
    Ok(RunOutcome {
        losses,
        warm_up_peak,
        report,
    })
}
