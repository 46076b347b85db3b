//! Trains an MLP on synthetic regression data with Adam, on `Autodiff<Flex>`, or, with the
//! cargo feature `swap`, on `Autodiff<Swap<Flex>>` under a memory budget.
//!
//! ```text
//! cargo run --release --example train_mlp --features swap -- --steps 5 --budget 0.25 --report-json r.json
//! ```
//!
//! Options: `--steps N` (20), `--batch N` (256), `--width N` (1024), `--depth N` (4),
//! `--budget B` (bytes such as `64MiB`, or a fraction such as `0.25` of the counted peak of one
//! unbudgeted warm-up step, which runs first in every build), `--eviction dtr|lru|largest`,
//! `--report-json PATH`, `--trace-json PATH` (the last complete iteration's trace).

use std::process::ExitCode;

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap_suite::cli::Args;
use burn_swap_suite::models::{Mlp, MlpConfig};
use burn_swap_suite::train::{init_mlp, train_loop};
use indicatif::{ProgressBar, ProgressStyle};

#[cfg(feature = "swap")]
type Backend = Autodiff<burn_swap::Swap<Flex>>;
#[cfg(not(feature = "swap"))]
type Backend = Autodiff<Flex>;

const LEARNING_RATE: f64 = 1e-3;

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
    let args = Args::parse(
        std::env::args().skip(1),
        &[],
        &[
            "steps",
            "batch",
            "width",
            "depth",
            "budget",
            "eviction",
            "report-json",
            "trace-json",
            "device",
        ],
    )?;
    if let Some(device) = args.value("device").filter(|d| *d != "flex") {
        return Err(format!("--device {device}: this trainer runs on flex (the CPU) only").into());
    }
    let steps: usize = args.get("steps", 20)?;
    let config = MlpConfig {
        d_in: 256,
        hidden: args.get("width", 1024)?,
        depth: args.get("depth", 4)?,
        d_out: 16,
        batch: args.get("batch", 256)?,
        seed: 17,
    };
    let device = FlexDevice;
    println!(
        "train_mlp on {}: {} hidden layers of {}, batch {}, {} steps",
        <Backend as burn::tensor::backend::Backend>::name(&device),
        config.depth,
        config.hidden,
        config.batch,
        steps
    );

    let model = init_mlp::<Backend>(&config, &device, 42);
    let loss_of = |m: &Mlp<Backend>, step: usize| m.loss(&config, step, &device);

    // Warm-up: one unbudgeted step, in every build, so that runs with and without swap
    // follow the same sequence of steps.
    let (model, warm_up) = train_loop(model, 1, LEARNING_RATE, loss_of, |_, _| {});
    #[cfg(feature = "swap")]
    set_budget(&args, &device)?;
    #[cfg(not(feature = "swap"))]
    for name in ["budget", "eviction", "report-json", "trace-json"] {
        if args.value(name).is_some() {
            return Err(format!(
                "--{name} needs the `swap` feature (cargo run --features swap ...)"
            )
            .into());
        }
    }

    let bar = ProgressBar::new(steps as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")?);
    let (_model, losses) = train_loop(
        model,
        steps,
        LEARNING_RATE,
        |m: &Mlp<Backend>, step| loss_of(m, step + 1),
        |_, loss| {
            bar.set_message(format!("loss {loss:.5}{}", memory_note(&device)));
            bar.inc(1);
        },
    );
    bar.finish();

    let last = losses.last().copied().unwrap_or(warm_up[0]);
    println!(
        "warm-up loss {:.6}; final loss {last:.6} (bits {:#010x})",
        warm_up[0],
        last.to_bits()
    );
    #[cfg(feature = "swap")]
    write_report(&args, &device)?;
    Ok(())
}

#[cfg(feature = "swap")]
fn memory_note(device: &FlexDevice) -> String {
    burn_swap::memory(device)
        .map(|m| {
            format!(
                ", resident {}",
                burn_swap::report::format_bytes(m.resident_bytes)
            )
        })
        .unwrap_or_default()
}

#[cfg(not(feature = "swap"))]
fn memory_note(_device: &FlexDevice) -> String {
    String::new()
}

/// Applies `--budget` and `--eviction`, then starts the measurement.
#[cfg(feature = "swap")]
fn set_budget(args: &Args, device: &FlexDevice) -> Result<(), Box<dyn std::error::Error>> {
    use burn_swap::{Budget, EvictionScore, SwapConfig};

    let warm_up_peak = burn_swap::memory(device).map(|m| m.peak_bytes).unwrap_or(0);
    println!(
        "warm-up step: counted peak {}",
        burn_swap::report::format_bytes(warm_up_peak)
    );
    let mut config = SwapConfig::default();
    if let Some(text) = args.value("budget") {
        let budget = burn_swap::config::parse_budget(text)
            .map_err(|reason| format!("--budget {text}: {reason}"))?;
        // In this example a fraction is of the warm-up peak (the device is the CPU, whose
        // total memory says nothing about this model).
        let bytes = match budget {
            Budget::Bytes(bytes) => bytes,
            Budget::DeviceFraction(f) => (warm_up_peak as f64 * f) as u64,
            Budget::Unlimited => 0,
        };
        println!("budget: {}", burn_swap::report::format_bytes(bytes));
        config = config.with_budget(Budget::Bytes(bytes));
    }
    if let Some(text) = args.value("eviction") {
        let eviction = match text {
            "dtr" => EvictionScore::Dtr,
            "lru" => EvictionScore::Lru,
            "largest" => EvictionScore::Largest,
            other => return Err(format!("--eviction {other}: expected dtr, lru or largest").into()),
        };
        config = config.with_eviction(eviction);
    }
    burn_swap::configure(device, config)?;
    burn_swap::reset_counters(device);
    Ok(())
}

#[cfg(feature = "swap")]
fn write_report(args: &Args, device: &FlexDevice) -> Result<(), Box<dyn std::error::Error>> {
    let report = burn_swap::report(device).ok_or("the device was never used under Swap")?;
    println!("{report}");
    if let Some(path) = args.value("report-json") {
        std::fs::write(path, report.to_json())?;
        println!("report written to {path}");
    }
    if let Some(path) = args.value("trace-json") {
        let trace = burn_swap::trace(device).ok_or("no complete iteration was traced")?;
        std::fs::write(path, trace.to_json())?;
        println!(
            "trace of iteration {} ({} ops) written to {path}",
            trace.iteration,
            trace.ops.len()
        );
    }
    Ok(())
}
