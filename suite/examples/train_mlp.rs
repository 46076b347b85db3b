//! Trains an MLP on synthetic regression data with Adam, on `Autodiff<Flex>`, or, with the
//! cargo feature `swap`, on `Autodiff<Swap<Flex>>` under a memory budget.
//!
//! ```text
//! cargo run --release --example train_mlp --features swap -- --steps 5 --budget 0.25 --report-json r.json
//! ```
//!
//! Options: `--steps N` (20), `--batch N` (256), `--width N` (1024), `--depth N` (4),
//! `--budget B` (bytes such as `64MiB`, or a fraction such as `0.25` of the counted peak of one
//! unbudgeted warm-up step, which runs first in every build),
//! `--policy reactive|planned|offload-only|recompute-only`, `--compress` (zero-value
//! compression of offloads; `--compress-mode auto|on:0.7` to choose), `--eviction dtr|lru|largest`,
//! `--report-json PATH`, `--trace-json PATH` (the last complete iteration's trace).

use std::process::ExitCode;

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap_suite::cli::Args;
use burn_swap_suite::trainers::{
    self,
    mlp::{self, MlpOptions},
};

#[cfg(feature = "swap")]
type Backend = Autodiff<burn_swap::Swap<Flex>>;
#[cfg(not(feature = "swap"))]
type Backend = Autodiff<Flex>;

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
        MlpOptions::FLAGS,
        MlpOptions::KNOWN,
    )?;
    if let Some(device) = args.value("device").filter(|d| *d != "flex") {
        return Err(format!("--device {device}: this trainer runs on flex (the CPU) only").into());
    }
    let options = MlpOptions::from_args(&args)?;
    let device = FlexDevice;
    let m = options.model;
    println!(
        "train_mlp on {}: {} hidden layers of {}, batch {}, 1 warm-up step + {} steps",
        <Backend as burn::tensor::backend::Backend>::name(&device),
        m.depth,
        m.hidden,
        m.batch,
        options.steps
    );
    let outcome = mlp::run::<Backend>(&options, &device, cfg!(feature = "swap"))?;
    trainers::print_outcome(&outcome, &options.swap);
    Ok(())
}
