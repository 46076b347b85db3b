//! `swap-bench`: step time and peak memory of one workload on the unwrapped backend, on
//! Burn's `BalancedCheckpointing`, and under burn-swap with each policy at fractions of the
//! unwrapped peak, measured in one process; and the largest batch under a memory cap.
//!
//! ```text
//! cargo run --release -p burn-swap-harness --bin swap-bench -- --model mlp|gpt|cnn|bn-cnn|lstm|gan|bucketed|deep|recurrent|classifier|classifier-varying
//!     [--preset cpu|gpt2-small] [--quick]
//!     [--device flex|wgpu|cuda] [--steps 20] [--warmup 6] [--budgets 100,75,50,33,25,10]
//!     [--cap 50] [--limit 4096] [--csv swap-bench.csv] [--pareto swap-bench.svg]
//!     [--policies reactive,planned,offload-only,recompute-only] [--rounds 1] [--lockstep]
//!     [--fractions-only]
//! ```
//!
//! Besides the fractions, every policy runs at Burn's `BalancedCheckpointing` counted peak
//! (rows marked `@balanced`, where it lowers the peak) and at the smallest budget the
//! unbudgeted run's report names (`minimum_budget_bytes`); `--fractions-only` leaves both
//! out. Step times are medians of the measured steps with their interquartile range; the
//! unwrapped backend is measured first and last. `--rounds R` runs each budget's rows R
//! times, interleaved (the policies' order turned by one each round), and takes each row
//! over the measured steps of all its rounds.
//!
//! `--lockstep`: each budget's rows run in processes of their own, one training step each
//! in turn (`burn_swap_harness::lockstep`), and each row gets its step times' median ratio
//! to the first policy's at the same steps (`paired x`, with its 95% confidence interval):
//! on a machine whose speed drifts over seconds, the comparison that drift leaves
//! alone. With `--rounds R` the lockstep runs R times, each with turn orders of its own.
//!
//! GPT presets: `small` (the default: 2 blocks of width 64), `cpu` (4 blocks of width 256,
//! 128 positions, batch 4: ops of 100 µs and more on the CPU, so that transfers can hide
//! behind them), `gpt2-small`.
//!
//! `--quick` (CI): a tiny MLP, 4 warm-up and 6 measured steps, budgets 100, 50 and 25%.
//! On CubeCL backends (`--device wgpu|cuda`) each row also gives the allocator's reserved
//! peak over the measured steps (every stream burn-swap uses) and the cleanups per step.
//! `SWAP_BENCH_REPORTS=1` prints each budgeted row's burn-swap report on stderr (the plan's
//! choices, its moves and recomputes, the waits by cause) and the run's step times.
//! Prints the table last.

use std::process::ExitCode;

use burn_swap::Policy;
use burn_swap_harness::classifier::ClassifierConfig;
use burn_swap_harness::cli::Args;
use burn_swap_harness::devices;
use burn_swap_harness::harness::{self, Workload};
use burn_swap_harness::models::{
    BnCnnConfig, GptConfig, LstmNetConfig, MlpConfig, ResNetConfig, TransformerConfig,
};
use burn_swap_harness::plan::Plan;
use burn_swap_harness::recurrent::RecurrentConfig;
use burn_swap_harness::schedules::GanConfig;
use burn_swap_harness::steps;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("swap-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

/// A comma-separated list, each item parsed by `item` (trimmed).
fn list<T>(text: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    text.split(',').map(|p| item(p.trim())).collect()
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse(
        std::env::args().skip(1),
        &["quick", "lockstep", "fractions-only"],
        &[
            "model",
            "steps",
            "warmup",
            "budgets",
            "cap",
            "csv",
            "pareto",
            "limit",
            "device",
            "preset",
            "probe-batch",
            "probe-cap",
            "policies",
            "rounds",
            "lockstep-policy",
            "lockstep-budget",
        ],
    )?;
    let quick = args.flag("quick");
    let workload = match (args.value("model").unwrap_or("mlp"), quick) {
        ("mlp", true) => Workload::Mlp(MlpConfig {
            d_in: 32,
            hidden: 64,
            depth: 4,
            d_out: 8,
            batch: 64,
            seed: 3,
        }),
        ("mlp", false) => Workload::Mlp(MlpConfig::bench()),
        ("gpt", true) => Workload::Gpt(GptConfig {
            seq: 32,
            ..GptConfig::small()
        }),
        ("gpt", false) => Workload::Gpt(match args.value("preset").unwrap_or("small") {
            "gpt2-small" => GptConfig::gpt2_small(),
            "cpu" => GptConfig::cpu(),
            "small" => GptConfig::small(),
            other => {
                return Err(format!("--preset {other}: expected small, cpu or gpt2-small").into());
            }
        }),
        ("cnn", true) => Workload::Cnn(ResNetConfig {
            size: 16,
            batch: 8,
            ..ResNetConfig::small()
        }),
        ("cnn", false) => Workload::Cnn(ResNetConfig::small()),
        ("bn-cnn", true) => Workload::BnCnn(BnCnnConfig::small()),
        ("bn-cnn", false) => Workload::BnCnn(BnCnnConfig::bench()),
        ("lstm", true) => Workload::Lstm(LstmNetConfig::small()),
        ("lstm", false) => Workload::Lstm(LstmNetConfig::bench()),
        ("gan", _) => Workload::Gan(GanConfig::small()),
        ("bucketed", _) => Workload::Bucketed(TransformerConfig::small()),
        ("deep", _) => Workload::Transformer(TransformerConfig::deep()),
        ("recurrent", true) => Workload::Recurrent(RecurrentConfig::small()),
        ("recurrent", false) => Workload::Recurrent(RecurrentConfig::example()),
        ("classifier", true) => Workload::Classifier(ClassifierConfig::small()),
        ("classifier", false) => Workload::Classifier(ClassifierConfig::bench()),
        ("classifier-varying", true) => Workload::Classifier(ClassifierConfig::small().varying()),
        ("classifier-varying", false) => Workload::Classifier(ClassifierConfig::bench().varying()),
        (other, _) => {
            return Err(format!(
                "--model {other}: expected mlp, gpt, cnn, bn-cnn, lstm, gan, bucketed, deep, \
                 recurrent, classifier or classifier-varying"
            )
            .into());
        }
    };
    let budgets: Vec<f64> = match args.value("budgets") {
        Some(text) => list(text, |p| {
            p.parse::<f64>()
                .map(|v| v / 100.0)
                .map_err(|_| format!("--budgets: {p:?} is not a percentage"))
        })?,
        None if quick => vec![1.0, 0.5, 0.25],
        None => vec![1.0, 0.75, 0.5, 0.33, 0.25, 0.10],
    };
    // The policies, in the order their rows run (every one by default).
    let policies: Vec<Policy> = match args.value("policies") {
        Some(text) => list(text, |p| {
            p.parse::<Policy>().map_err(|e| format!("--policies: {e}"))
        })?,
        None => Policy::ALL.to_vec(),
    };
    let plan = Plan {
        workload,
        warm_up: args.get("warmup", if quick { 4 } else { 6 })?,
        steps: args.get("steps", if quick { 6 } else { 20 })?,
        budgets,
        policies,
        minimum: !quick && !args.flag("fractions-only"),
        cap_fraction: args.get::<f64>("cap", 50.0)? / 100.0,
        rounds: args.get("rounds", 1)?,
    };
    let limit: usize = args.get("limit", if quick { 256 } else { 4096 })?;
    let device = args.value("device").unwrap_or("flex").to_string();
    // A probe of the max-batch search, run by the parent in a fresh process.
    let probe_batch: Option<usize> = args.value("probe-batch").map(str::parse).transpose()?;
    let probe_cap: u64 = args.get("probe-cap", 0)?;
    let probe = probe_batch.map(|batch| (batch, probe_cap));
    steps::quiet_expected_panics();
    let mut probe_in_child = |batch: usize, cap: u64| -> bool {
        let Ok(exe) = std::env::current_exe() else {
            return false;
        };
        let mut command = std::process::Command::new(exe);
        command.args(std::env::args().skip(1)).args([
            "--probe-batch".to_string(),
            batch.to_string(),
            "--probe-cap".to_string(),
            cap.to_string(),
        ]);
        command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // A row of a lockstep run, started by the parent with the same arguments.
    let lockstep_row = match args.value("lockstep-policy") {
        Some(policy) => Some((
            policy
                .parse::<Policy>()
                .map_err(|e| format!("--lockstep-policy: {e}"))?,
            args.get::<u64>("lockstep-budget", 0)?.max(1),
        )),
        None => None,
    };
    let mut spawn_row = |policy: Policy, budget: u64| {
        let exe = std::env::current_exe()?;
        std::process::Command::new(exe)
            .args(std::env::args().skip(1))
            .args([
                "--lockstep-policy".to_string(),
                policy.name().to_string(),
                "--lockstep-budget".to_string(),
                budget.to_string(),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
    };
    let processes = devices::Processes {
        probe,
        probe_in_child: &mut probe_in_child,
        lockstep_row,
        spawn_row: args
            .flag("lockstep")
            .then_some(&mut spawn_row as &mut burn_swap_harness::lockstep::Spawn),
    };
    let csv_path = args.value("csv").unwrap_or("swap-bench.csv").to_string();
    let pareto_path = args.value("pareto").unwrap_or("swap-bench.svg").to_string();

    if processes.lockstep_row.is_none() {
        eprintln!(
            "swap-bench: {:?}, {} warm-up + {} measured steps",
            plan.workload, plan.warm_up, plan.steps
        );
        if cfg!(debug_assertions) {
            // The dev profile builds Burn optimised and our crates at opt-level 1: the
            // interception and the planner thread cost several times what they cost in a
            // release build, and the policies' ratios move with them.
            eprintln!(
                "swap-bench: built without --release: burn-swap's own code (interception, \
                 planning) runs less optimised than users build it; quote release figures"
            );
        }
    }
    let (rows, (cap, unwrapped_batch, swap_batch)) =
        devices::bench(&device, &plan, limit, processes)?;

    std::fs::write(&csv_path, harness::csv(&rows))?;
    harness::pareto(&rows, &pareto_path)?;
    println!("csv: {csv_path}; pareto plot: {pareto_path}");
    println!(
        "max batch under a cap of {cap} bytes ({:.0}% of the unwrapped peak at batch {}): \
         unwrapped {unwrapped_batch}, burn-swap {swap_batch} (bisection up to {limit})",
        plan.cap_fraction * 100.0,
        plan.workload.batch()
    );
    print!("{}", harness::table(&rows));
    Ok(())
}
