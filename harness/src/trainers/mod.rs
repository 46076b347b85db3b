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

use burn_swap::unstable::format_bytes;
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

/// A trainer's options, as the shared [`main`] reads them: the shared ones ([`KNOWN`],
/// [`FLAGS`]) and its model's.
pub trait TrainerOptions: Sized {
    /// The valued options beyond the shared ones.
    const KNOWN: &'static [&'static str];
    /// The options from the command line.
    fn from_args(args: &crate::cli::Args) -> Result<Self, crate::cli::ArgError>;
    /// Steps, learning rate, burn-swap's options, progress bar.
    fn run_options(&self) -> &RunOptions;
    /// The model and batch, for the first line a trainer prints.
    fn describe(&self) -> String;
}

/// What an example trainer writes itself: its name, its options, and its training run with
/// burn-swap's two lines (`configure` before the loop, `report` after it), on the autodiff
/// backend the example's `swap` feature picks over the inner backend `I`. [`main`] does the
/// rest.
pub trait Example {
    /// The program's name (`train_cnn`), for its messages.
    const NAME: &'static str;
    /// Whether it trains under burn-swap (the example's `swap` feature: the harness is a
    /// package of its own and does not see it).
    const SWAP: bool;
    /// Its options.
    type Options: TrainerOptions;
    /// Trains on the inner backend `I` (Flex, CubeCL's wgpu, CUDA) as `--device` picks it.
    fn train<I: burn_ir::BackendIr>(
        options: &Self::Options,
        device: &I::Device,
    ) -> Result<RunOutcome, Box<dyn Error>>;
}

/// The `main` every example trainer shares: every trainer takes the shared options and its
/// model's, `--device flex|wgpu|cuda` (wgpu and cuda with their features) picks the inner
/// backend, and the outcome is printed; an error is printed with the program's name.
pub fn main<E: Example>() -> std::process::ExitCode {
    match run_example::<E>() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}: {error}", E::NAME);
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_example<E: Example>() -> Result<(), Box<dyn Error>> {
    let known: Vec<&str> = KNOWN.iter().chain(E::Options::KNOWN).copied().collect();
    let args = crate::cli::Args::parse(std::env::args().skip(1), FLAGS, &known)?;
    let options = E::Options::from_args(&args)?;
    let device = args.value("device").unwrap_or("flex");
    println!(
        "{} on {device}{}: {}, 1 warm-up step + {} steps",
        E::NAME,
        if E::SWAP { " under burn-swap" } else { "" },
        options.describe(),
        options.run_options().steps
    );
    let outcome = match device {
        "flex" => E::train::<burn::backend::Flex>(&options, &burn::backend::flex::FlexDevice)?,
        #[cfg(feature = "wgpu")]
        "wgpu" => E::train::<burn_swap::unstable::CubeWgpu>(
            &options,
            &cubecl::wgpu::WgpuDevice::DefaultDevice,
        )?,
        #[cfg(feature = "cuda")]
        "cuda" => E::train::<burn::backend::Cuda>(&options, &Default::default())?,
        other => return Err(crate::cli::unknown_device(other).into()),
    };
    print_outcome(&outcome, &options.run_options().swap);
    Ok(())
}

/// A model's loss at a step.
type LossOf<'a, B, M> = Box<dyn Fn(&M, usize) -> Tensor<B, 1> + 'a>;

/// A trainer run in its phases, so that a program shows burn-swap's two lines between them
/// (see the `train_*` examples): [`Trainer::warm_up`] (one step without a budget), then
/// `burn_swap::configure`, [`Trainer::train`], `burn_swap::report`, [`Trainer::finish`].
pub struct Trainer<'a, B: AutodiffBackend, M> {
    model: Option<M>,
    options: RunOptions,
    device: &'a B::Device,
    swap: bool,
    loss_of: LossOf<'a, B, M>,
    losses: Vec<f32>,
    warm_up_peak: Option<u64>,
    warm_up_trace: Option<burn_swap::Trace>,
}

impl<'a, B, M> Trainer<'a, B, M>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
{
    /// A trainer of `model` on `device`, under burn-swap when `swap`; its loss at step `k`
    /// is `loss_of(model, k)`. Refuses burn-swap's options without `swap`.
    pub fn new(
        model: M,
        options: &RunOptions,
        device: &'a B::Device,
        swap: bool,
        loss_of: impl Fn(&M, usize) -> Tensor<B, 1> + 'a,
    ) -> Result<Self, Box<dyn Error>> {
        if !swap && options.swap.any() {
            return Err(
                "--budget, --policy, --compress, --eviction, --report-json and \
                    --trace-json need the `swap` feature"
                    .into(),
            );
        }
        Ok(Self {
            model: Some(model),
            options: options.clone(),
            device,
            swap,
            loss_of: Box::new(loss_of),
            losses: Vec::new(),
            warm_up_peak: None,
            warm_up_trace: None,
        })
    }

    /// One step without a budget (in every build, so that runs with and without burn-swap
    /// follow the same steps). Under burn-swap, returns its counted peak, of which a
    /// fractional budget is a fraction.
    pub fn warm_up(&mut self) -> Result<Option<u64>, Box<dyn Error>> {
        if self.swap {
            burn_swap::configure(self.device, SwapConfig::default())?;
            burn_swap::reset_counters(self.device);
        }
        let model = self.model.take().ok_or("the trainer's model is gone")?;
        let (model, losses) = crate::train::train_loop(
            model,
            1,
            self.options.learning_rate,
            &*self.loss_of,
            |_, _| {},
        );
        self.model = Some(model);
        self.losses.extend(losses);
        self.warm_up_peak = self
            .swap
            .then(|| burn_swap::memory(self.device).map_or(0, |m| m.peak_bytes));
        // The unbudgeted curve of the timeline: the warm-up step's ops.
        if self.swap && self.options.swap.plot.is_some() {
            self.warm_up_trace = burn_swap::unstable::trace_window(self.device);
        }
        Ok(self.warm_up_peak)
    }

    /// The configured number of steps after the warm-up, with a progress bar (loss and,
    /// under burn-swap, the counted resident bytes).
    pub fn train(&mut self) -> Result<(), Box<dyn Error>> {
        let bar = if self.options.progress {
            ProgressBar::new(self.options.steps as u64)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")?);
        let (swap, device, loss_of) = (self.swap, self.device, &self.loss_of);
        let model = self.model.take().ok_or("the trainer's model is gone")?;
        let (model, steps) = crate::train::train_loop(
            model,
            self.options.steps,
            self.options.learning_rate,
            |m: &M, step| loss_of(m, step + 1),
            |_, loss| {
                let memory = burn_swap::memory(device)
                    .filter(|_| swap)
                    .map(|m| format!(", resident {}", format_bytes(m.resident_bytes)))
                    .unwrap_or_default();
                bar.set_message(format!("loss {loss:.5}{memory}"));
                bar.inc(1);
            },
        );
        bar.finish();
        self.model = Some(model);
        self.losses.extend(steps);
        Ok(())
    }

    /// The run's outcome with burn-swap's `report`; writes the report, the timeline and the
    /// trace where the options ask.
    pub fn finish(self, report: Option<Report>) -> Result<RunOutcome, Box<dyn Error>> {
        let swap = &self.options.swap;
        if let Some(report) = &report
            && let Some(path) = &swap.report_json
        {
            std::fs::write(path, report.to_json())?;
        }
        let last_trace = || {
            burn_swap::trace(self.device).ok_or("no complete iteration was traced (run more steps)")
        };
        if self.swap
            && let Some(path) = &swap.plot
        {
            let budget = report.as_ref().and_then(|r| r.budget_bytes);
            crate::plot::Timeline::new(&last_trace()?, self.warm_up_trace.as_ref(), budget)
                .draw(path, "counted memory over one training iteration")?;
        }
        if self.swap
            && let Some(path) = &swap.trace_json
        {
            std::fs::write(path, last_trace()?.to_json())?;
        }
        Ok(RunOutcome {
            losses: self.losses,
            warm_up_peak: self.warm_up_peak,
            report,
        })
    }
}

/// Runs a trainer through its phases: the warm-up step, then, under burn-swap, the budget
/// (`configure`), the steps, and the report (as the `train_*` examples do in their own
/// files).
pub fn drive<B, M>(mut trainer: Trainer<'_, B, M>) -> Result<RunOutcome, Box<dyn Error>>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
{
    let device = trainer.device;
    if let Some(peak) = trainer.warm_up()? {
        burn_swap::configure(device, trainer.options.swap.config(peak))?;
        burn_swap::reset_counters(device);
    }
    trainer.train()?;
    let report = if trainer.swap {
        burn_swap::report(device)
    } else {
        None
    };
    trainer.finish(report)
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
