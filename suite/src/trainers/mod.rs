//! The example trainers' logic, generic over the backend, so that tests run them on
//! `Autodiff<Flex>` and on `Autodiff<Swap<Flex>>` in one process and compare.

pub mod cnn;
pub mod gpt;
pub mod mlp;

use std::error::Error;

use burn::module::AutodiffModule;
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use indicatif::{ProgressBar, ProgressStyle};

use burn_swap::{Budget, Compression, EvictionScore, Policy, Report, SwapConfig};

/// Options every trainer shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwapOptions {
    /// The budget: bytes, or a fraction of the counted peak of the unbudgeted warm-up step.
    pub budget: Option<Budget>,
    /// The policy.
    pub policy: Option<Policy>,
    /// Zero-value compression of offloads (`--compress`, or `--compress-mode auto|on:0.7`).
    pub compression: Option<Compression>,
    /// The eviction score.
    pub eviction: Option<EvictionScore>,
    /// Where to write the report as JSON.
    pub report_json: Option<String>,
    /// Where to write the last complete iteration's trace as JSON.
    pub trace_json: Option<String>,
    /// Where to draw the memory timeline of the last complete iteration (SVG).
    pub plot: Option<String>,
}

impl SwapOptions {
    /// Reads `--budget`, `--policy`, `--compress` / `--compress-mode`, `--eviction`,
    /// `--report-json` and `--trace-json`.
    pub fn from_args(args: &crate::cli::Args) -> Result<Self, crate::cli::ArgError> {
        use crate::cli::ArgError;
        let budget = args
            .value("budget")
            .map(|text| {
                text.parse::<Budget>()
                    .map_err(|reason| ArgError(format!("--budget {text}: {reason}")))
            })
            .transpose()?;
        let eviction = args
            .value("eviction")
            .map(|text| match text {
                "dtr" => Ok(EvictionScore::Dtr),
                "lru" => Ok(EvictionScore::Lru),
                "largest" => Ok(EvictionScore::Largest),
                other => Err(ArgError(format!(
                    "--eviction {other}: expected dtr, lru or largest"
                ))),
            })
            .transpose()?;
        let policy = args
            .value("policy")
            .map(|text| {
                text.parse::<Policy>()
                    .map_err(|reason| ArgError(format!("--policy: {reason}")))
            })
            .transpose()?;
        let compression = if args.flag("compress") {
            Some(Compression::On {
                max_ratio: Compression::DEFAULT_MAX_RATIO,
            })
        } else {
            args.value("compress-mode")
                .map(|text| {
                    text.parse::<Compression>()
                        .map_err(|reason| ArgError(format!("--compress-mode {text}: {reason}")))
                })
                .transpose()?
        };
        Ok(Self {
            budget,
            policy,
            compression,
            eviction,
            report_json: args.value("report-json").map(String::from),
            trace_json: args.value("trace-json").map(String::from),
            plot: args.value("plot").map(String::from),
        })
    }

    /// Whether any option needs burn-swap.
    pub fn any(&self) -> bool {
        *self != Self::default()
    }

    /// The configuration to apply after the warm-up step, whose counted peak was
    /// `warm_up_peak`: a fractional budget is a fraction of that peak.
    pub fn config(&self, warm_up_peak: u64) -> SwapConfig {
        let mut config = SwapConfig::default();
        if let Some(budget) = self.budget {
            let bytes = match budget {
                Budget::Bytes(bytes) => bytes,
                Budget::DeviceFraction(f) => (warm_up_peak as f64 * f) as u64,
                Budget::Unlimited => 0,
            };
            if bytes > 0 {
                config = config.with_budget(Budget::Bytes(bytes));
            }
        }
        if let Some(policy) = self.policy {
            config = config.with_policy(policy);
        }
        if let Some(compression) = self.compression {
            config = config.with_compression(compression);
        }
        if let Some(eviction) = self.eviction {
            config = config.with_eviction(eviction);
        }
        config
    }
}

/// What a trainer run leaves.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The warm-up step's loss, then every step's.
    pub losses: Vec<f32>,
    /// The counted peak of the warm-up step (under burn-swap).
    pub warm_up_peak: Option<u64>,
    /// The report of the budgeted steps (under burn-swap).
    pub report: Option<Report>,
}

/// Options every trainer shares besides burn-swap's.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// Steps after the warm-up step.
    pub steps: usize,
    /// Learning rate of Adam.
    pub learning_rate: f64,
    /// burn-swap's options.
    pub swap: SwapOptions,
    /// Show a progress bar.
    pub progress: bool,
}

/// The bare flags every trainer accepts.
pub const FLAGS: &[&str] = &["compress"];

/// The valued options every trainer accepts.
pub const KNOWN: &[&str] = &[
    "steps",
    "batch",
    "budget",
    "policy",
    "compress-mode",
    "eviction",
    "report-json",
    "trace-json",
    "plot",
    "device",
];

/// Trains `model`: one unbudgeted warm-up step (in every build, so that runs with and without
/// burn-swap follow the same steps), then, under burn-swap (`swap`), applies the budget and
/// trains `steps` more steps with a progress bar (loss and counted memory), and reports.
pub fn drive<B, M>(
    model: M,
    options: &RunOptions,
    device: &B::Device,
    swap: bool,
    loss_of: impl Fn(&M, usize) -> Tensor<B, 1>,
) -> Result<RunOutcome, Box<dyn Error>>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
{
    if !swap && options.swap.any() {
        return Err(
            "--budget, --policy, --compress, --eviction, --report-json and \
                    --trace-json need the `swap` feature"
                .into(),
        );
    }
    if swap {
        burn_swap::configure(device, burn_swap::SwapConfig::default())?;
        burn_swap::reset_counters(device);
    }
    let (model, mut losses) =
        crate::train::train_loop(model, 1, options.learning_rate, &loss_of, |_, _| {});
    let warm_up_peak = swap.then(|| burn_swap::memory(device).map(|m| m.peak_bytes).unwrap_or(0));
    // The unbudgeted curve of the timeline: the warm-up step's ops.
    let warm_up_trace = (swap && options.swap.plot.is_some())
        .then(|| burn_swap::unstable::trace_window(device))
        .flatten();
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
    let (_model, steps) = crate::train::train_loop(
        model,
        options.steps,
        options.learning_rate,
        |m: &M, step| loss_of(m, step + 1),
        |_, loss| {
            let memory = if swap {
                burn_swap::memory(device)
                    .map(|m| {
                        format!(
                            ", resident {}",
                            burn_swap::unstable::format_bytes(m.resident_bytes)
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
    if swap && let Some(path) = &options.swap.plot {
        let trace =
            burn_swap::trace(device).ok_or("no complete iteration was traced (run more steps)")?;
        let budget = report.as_ref().and_then(|r| r.budget_bytes);
        crate::plot::Timeline::new(&trace, warm_up_trace.as_ref(), budget)
            .draw(path, "counted memory over one training iteration")?;
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

/// Prints what a trainer run leaves: the warm-up peak, the losses, the report.
pub fn print_outcome(outcome: &RunOutcome, swap: &SwapOptions) {
    if let Some(peak) = outcome.warm_up_peak {
        println!(
            "warm-up step: counted peak {}",
            burn_swap::unstable::format_bytes(peak)
        );
    }
    let last = outcome.losses.last().copied().unwrap_or(f32::NAN);
    println!(
        "warm-up loss {:.6}; final loss {last:.6} (bits {:#010x})",
        outcome.losses.first().copied().unwrap_or(f32::NAN),
        last.to_bits()
    );
    if let Some(report) = &outcome.report {
        println!("{report}");
    }
    if let Some(path) = &swap.report_json {
        println!("report written to {path}");
    }
    if let Some(path) = &swap.trace_json {
        println!("trace written to {path}");
    }
}
