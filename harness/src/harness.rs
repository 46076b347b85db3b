//! The benchmark harness behind `swap-bench`: one workload trained on the unwrapped backend,
//! on Burn's `BalancedCheckpointing`, and under burn-swap with each policy at fractions of
//! the unwrapped peak, all in one process; median steady-state step time, the ratio to the
//! unwrapped run, counted peaks, bytes moved each way, time waited on transfers; and the
//! largest batch that trains under a fixed memory cap, by bisection.

use std::error::Error;

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn_ir::BackendIr;
use burn_swap::{Swap, SwapConfig};

pub use crate::workload::Workload;

use crate::plan::Plan;
use crate::steps::{
    Steps, guarded, measure_steps, median, quantile, step_milliseconds, step_times,
};

/// One measured configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `unwrapped`, `balanced-checkpointing`, or the policy's name.
    pub config: String,
    /// The budget as a fraction of the unwrapped peak (burn-swap rows).
    pub budget_fraction: Option<f64>,
    /// Median step time after the warm-up, in seconds (`None` when it could not run).
    pub median_step: Option<f64>,
    /// The spread of the measured steps: their interquartile range over the median.
    pub spread: Option<f64>,
    /// `median_step` over the unwrapped run's.
    pub time_ratio: Option<f64>,
    /// Counted peak in bytes (for the unwrapped and checkpointing rows, counted by burn-swap
    /// without a budget in a separate run).
    pub peak_bytes: Option<u64>,
    /// `peak_bytes` over the unwrapped peak.
    pub memory_ratio: Option<f64>,
    /// Bytes offloaded to host memory per step.
    pub offloaded_per_step: u64,
    /// Bytes fetched back per step.
    pub fetched_per_step: u64,
    /// Time per step the ops waited on transfers, in seconds.
    pub exposed_per_step: f64,
    /// Minor page faults of the process per measured step ([`Steps::faults_per_step`]).
    pub faults_per_step: Option<f64>,
    /// `exposed_per_step` by cause (`burn_swap::ExposedWait`), in seconds per step.
    pub exposed_by_cause: burn_swap::ExposedWait,
    /// The planner whose plan was followed (`report.plan.plan_chosen`): `keep-all`,
    /// `combined`, `offload-only`, ...; `none fits` when a plan was made and none fit,
    /// `declined` when the planned policy kept the fallback because its plan did not pay
    /// (`report.plan.declines.in_force`), `None` when no plan was made (a reactive policy, or no
    /// budget).
    pub plan: Option<String>,
    /// The followed plan's simulated counted peak (`report.plan.predicted_peak_bytes`), to set
    /// beside the measured `peak_bytes`.
    pub predicted_peak_bytes: Option<u64>,
    /// The followed plan's predicted exposed transfer time per step, in seconds, to set
    /// beside the measured `exposed_per_step`.
    pub predicted_exposed_per_step: Option<f64>,
    /// The allocator's reserved peak in bytes over the measured steps, every stream
    /// burn-swap uses added up (CubeCL backends; for the unwrapped row, what its pools hold
    /// at the end of its run, which they never give back during it).
    pub reserved_bytes: Option<u64>,
    /// Cleanups per measured step that burn-swap made because the allocator reserved more
    /// than the budget (CubeCL backends).
    pub cleanups_per_step: Option<f64>,
    /// Where the rows ran in lockstep (`swap-bench --lockstep`): the median over the measured
    /// steps of this row's step time over the first policy's at the same step (and round),
    /// with its 95% confidence interval (`crate::lockstep::paired`).
    pub paired: Option<crate::lockstep::Paired>,
    /// Why it could not run, if it could not.
    pub error: Option<String>,
}

/// The counted peak of `steps` steps of `workload` under burn-swap without a budget, with
/// autodiff strategy chosen by `checkpointing`.
fn counted_peak<I: BackendIr>(
    device: &I::Device,
    workload: &Workload,
    checkpointing: bool,
    steps: usize,
) -> u64 {
    counted_figures::<I>(device, workload, checkpointing, steps).0
}

/// [`counted_peak`], and the smallest budget the same run says it could have run under.
/// Taken over at least [`Workload::steps_to_see_every_schedule`]: over fewer, a workload
/// whose steps differ (a longer bucket, the generator's step) would get a peak and a minimum
/// from its smaller steps only, and its minimum row would fail on a larger one.
fn counted_figures<I: BackendIr>(
    device: &I::Device,
    workload: &Workload,
    checkpointing: bool,
    steps: usize,
) -> (u64, u64) {
    let steps = steps.max(workload.steps_to_see_every_schedule());
    burn_swap::configure(device, SwapConfig::default()).expect("the default is valid");
    burn_swap::reset_counters(device);
    if checkpointing {
        step_times::<Autodiff<Swap<I>, BalancedCheckpointing>>(workload, device, steps);
    } else {
        step_times::<Autodiff<Swap<I>>>(workload, device, steps);
    }
    burn_swap::report(device).map_or((0, 0), |r| {
        (r.memory.peak_bytes, r.workload.minimum_budget_bytes)
    })
}

/// Runs the plan on the inner backend `I` (Flex, or CUDA); the caller holds the device for
/// itself. With `lockstep`, which starts a process for one row, each budget's rows run in
/// lockstep (`crate::lockstep`), each in a process of its own, and get their paired ratio to
/// the first policy's row; else they run here, one after the other.
pub fn run<I: BackendIr>(
    plan: &Plan,
    device: &I::Device,
    mut lockstep: Option<&mut crate::lockstep::Spawn<'_>>,
) -> Vec<Row> {
    let total = plan.warm_up + plan.steps;
    // Over the steps every row runs: the fractions are of their peak, and the minimum row
    // must fit each of them.
    let (peak, minimum) = counted_figures::<I>(device, &plan.workload, false, total);
    // The median of the measured steps, and their interquartile range over it.
    let steady = |times: Vec<f64>| -> (f64, f64) {
        let measured: Vec<f64> = times.into_iter().skip(plan.warm_up).collect();
        let m = median(measured.clone());
        (
            m,
            (quantile(&measured, 0.75) - quantile(&measured, 0.25)) / m,
        )
    };
    let unbudgeted = |checkpointing: bool| {
        let workload = &plan.workload;
        if checkpointing {
            measure_steps::<Autodiff<I, BalancedCheckpointing>>(
                workload,
                device,
                total,
                plan.warm_up,
            )
        } else {
            measure_steps::<Autodiff<I>>(workload, device, total, plan.warm_up)
        }
    };

    // The first run in a process pays for cold caches and the allocator's first growth:
    // one run of the unwrapped backend is thrown away, and it is measured again at the end
    // (the last row) to show the drift of the machine over the whole run.
    step_times::<Autodiff<I>>(&plan.workload, device, total);
    // Every stream's pools emptied, so that what the unwrapped run reserves is its own.
    <Swap<I> as burn::tensor::backend::Backend>::memory_cleanup(device);
    let first = unbudgeted(false);
    let unwrapped_reserved = burn_swap::unstable::allocator_usage::<I>(device).map(|u| u.reserved);
    // burn-swap without a budget (its default configuration: what wrapping a model costs
    // before any budget is set), each round beside an unwrapped run of its own, so that the
    // two rows are taken over the same rounds.
    let rounds = plan.rounds.max(1);
    let mut plain_times = first.times.clone();
    let mut no_budget_times = Vec::new();
    let mut no_budget_faults = Vec::new();
    for round in 0..rounds {
        if round > 0 {
            let again = unbudgeted(false);
            plain_times.extend(again.times.into_iter().skip(plan.warm_up));
        }
        burn_swap::configure(device, SwapConfig::default()).expect("the default is valid");
        burn_swap::restart_trace(device);
        let run = measure_steps::<Autodiff<Swap<I>>>(&plan.workload, device, total, plan.warm_up);
        no_budget_times.extend(run.times.into_iter().skip(if round == 0 {
            0
        } else {
            plan.warm_up
        }));
        no_budget_faults.extend(run.faults_per_step);
    }
    let no_budget_report = burn_swap::report(device);
    if std::env::var_os("SWAP_BENCH_REPORTS").is_some()
        && let Some(r) = &no_budget_report
    {
        eprintln!("no budget:\n{r}");
    }
    let (unwrapped, unwrapped_spread) = steady(plain_times);
    let (no_budget, no_budget_spread) = steady(no_budget_times);
    let mut rows = vec![Row {
        config: "unwrapped".into(),
        budget_fraction: None,
        median_step: Some(unwrapped),
        spread: Some(unwrapped_spread),
        time_ratio: Some(1.0),
        peak_bytes: Some(peak),
        memory_ratio: Some(1.0),
        offloaded_per_step: 0,
        fetched_per_step: 0,
        exposed_per_step: 0.0,
        faults_per_step: first.faults_per_step,
        exposed_by_cause: Default::default(),
        plan: None,
        predicted_peak_bytes: None,
        predicted_exposed_per_step: None,
        reserved_bytes: unwrapped_reserved,
        cleanups_per_step: None,
        paired: None,
        error: None,
    }];
    rows.push(Row {
        config: "no-budget".into(),
        median_step: Some(no_budget),
        spread: Some(no_budget_spread),
        time_ratio: Some(no_budget / unwrapped),
        faults_per_step: (!no_budget_faults.is_empty())
            .then(|| no_budget_faults.iter().sum::<f64>() / no_budget_faults.len() as f64),
        reserved_bytes: None,
        ..rows[0].clone()
    });
    <Swap<I> as burn::tensor::backend::Backend>::memory_cleanup(device);
    let checkpointed = unbudgeted(true);
    let checkpointed_reserved =
        burn_swap::unstable::allocator_usage::<I>(device).map(|u| u.reserved);
    let faults = checkpointed.faults_per_step;
    let (checkpointed, checkpointed_spread) = steady(checkpointed.times);
    let checkpoint_peak = counted_peak::<I>(device, &plan.workload, true, total);
    rows.push(Row {
        config: "balanced-checkpointing".into(),
        budget_fraction: None,
        median_step: Some(checkpointed),
        spread: Some(checkpointed_spread),
        time_ratio: Some(checkpointed / unwrapped),
        peak_bytes: Some(checkpoint_peak),
        memory_ratio: Some(checkpoint_peak as f64 / peak as f64),
        offloaded_per_step: 0,
        fetched_per_step: 0,
        exposed_per_step: 0.0,
        faults_per_step: faults,
        exposed_by_cause: Default::default(),
        plan: None,
        predicted_peak_bytes: None,
        predicted_exposed_per_step: None,
        reserved_bytes: checkpointed_reserved,
        cleanups_per_step: None,
        paired: None,
        error: None,
    });

    // The fractions, then Balanced checkpointing's counted peak (where it lowers the peak:
    // burn-swap at the same peak, rows marked `@balanced`), then the smallest budget the
    // unbudgeted run's report named.
    let mut budgets: Vec<(f64, u64, &str)> = plan
        .budgets
        .iter()
        .map(|&f| (f, ((peak as f64 * f) as u64).max(1), ""))
        .collect();
    if plan.minimum && checkpoint_peak < peak {
        budgets.push((
            checkpoint_peak as f64 / peak as f64,
            checkpoint_peak,
            " @balanced",
        ));
    }
    if plan.minimum && peak > 0 {
        budgets.push((minimum as f64 / peak as f64, minimum, ""));
    }
    for (fraction, budget, mark) in budgets {
        // Each policy's measured steps and reports, over the rounds.
        let mut runs: Vec<Vec<Result<(Steps, burn_swap::Report), String>>> =
            vec![Vec::new(); plan.policies.len()];
        for round in 0..rounds {
            if let Some(spawn) = lockstep.as_deref_mut() {
                let each = crate::lockstep::run(spawn, &plan.policies, budget, total, round);
                for (runs, run) in runs.iter_mut().zip(each) {
                    runs.push(run);
                }
                continue;
            }
            for k in 0..plan.policies.len() {
                let which = (k + round) % plan.policies.len();
                let policy = plan.policies[which];
                burn_swap::configure(device, SwapConfig::budget_bytes(budget).with_policy(policy))
                    .expect("a positive budget is valid");
                burn_swap::restart_trace(device);
                // Each run's pools start empty, so that its reserved peak is its own.
                <Swap<I> as burn::tensor::backend::Backend>::memory_cleanup(device);
                let workload = plan.workload;
                let result = guarded(|| {
                    measure_steps::<Autodiff<Swap<I>>>(&workload, device, total, plan.warm_up)
                });
                let report = burn_swap::report(device);
                // `SWAP_BENCH_REPORTS=1`: each budgeted row's report on stderr (the plan's
                // choices, recomputes, waits) and its step times, to see why a row is slow.
                if std::env::var_os("SWAP_BENCH_REPORTS").is_some()
                    && let Some(r) = &report
                {
                    eprintln!("{}{mark} at {:.0}%:\n{r}", policy.name(), fraction * 100.0);
                    if let Ok(steps) = &result {
                        eprintln!("step ms: {}", step_milliseconds(&steps.times));
                    }
                }
                runs[which].push(match (result, report) {
                    (Ok(steps), Some(r)) => Ok((steps, r)),
                    (Err(message), _) => Err(message.lines().next().unwrap_or("").to_string()),
                    (Ok(_), None) => Err("no report".to_string()),
                });
            }
        }
        // Paired with the first policy's steps, where the rows ran in lockstep.
        let times = |runs: &[Result<(Steps, burn_swap::Report), String>]| -> Vec<Vec<f64>> {
            runs.iter()
                .map(|r| r.as_ref().map_or(Vec::new(), |(s, _)| s.times.clone()))
                .collect()
        };
        let reference = lockstep.is_some().then(|| times(&runs[0]));
        for (&policy, runs) in plan.policies.iter().zip(runs) {
            let config = format!("{}{mark}", policy.name());
            let paired = reference
                .as_ref()
                .and_then(|r| crate::lockstep::paired(&times(&runs), r, plan.warm_up));
            let mut row = budgeted_row(config, fraction, runs, plan, unwrapped, peak);
            if row.error.is_none() {
                row.paired = paired;
            }
            rows.push(row);
        }
    }
    burn_swap::configure(device, SwapConfig::default()).expect("the default is valid");
    let last = unbudgeted(false);
    let (again, again_spread) = steady(last.times);
    rows.push(Row {
        config: "unwrapped-again".into(),
        median_step: Some(again),
        spread: Some(again_spread),
        time_ratio: Some(again / unwrapped),
        faults_per_step: last.faults_per_step,
        ..rows[0].clone()
    });
    rows
}

/// A budgeted row from its rounds: the step time over the measured steps of every round,
/// the per-step figures (bytes, waits, faults) over all of them, the highest counted peak of
/// any round, the plan and its predictions from the last round; the first error if a round
/// failed.
fn budgeted_row(
    config: String,
    fraction: f64,
    runs: Vec<Result<(Steps, burn_swap::Report), String>>,
    plan: &Plan,
    unwrapped: f64,
    peak: u64,
) -> Row {
    let failed = |error: String| Row {
        config: config.clone(),
        budget_fraction: Some(fraction),
        median_step: None,
        spread: None,
        time_ratio: None,
        peak_bytes: None,
        memory_ratio: None,
        offloaded_per_step: 0,
        fetched_per_step: 0,
        exposed_per_step: 0.0,
        faults_per_step: None,
        exposed_by_cause: Default::default(),
        plan: None,
        predicted_peak_bytes: None,
        predicted_exposed_per_step: None,
        reserved_bytes: None,
        cleanups_per_step: None,
        paired: None,
        error: Some(error),
    };
    let runs = match runs.into_iter().collect::<Result<Vec<_>, _>>() {
        Ok(runs) if !runs.is_empty() => runs,
        Ok(_) => return failed("did not run".into()),
        Err(error) => return failed(error),
    };
    let measured: Vec<f64> = runs
        .iter()
        .flat_map(|(steps, _)| steps.times.iter().skip(plan.warm_up).copied())
        .collect();
    let step = median(measured.clone());
    let spread = (quantile(&measured, 0.75) - quantile(&measured, 0.25)) / step;
    let n = (plan.steps.max(1) * runs.len()) as f64;
    let sum = |f: &dyn Fn(&burn_swap::Report) -> f64| runs.iter().map(|(_, r)| f(r)).sum::<f64>();
    let faults: Option<Vec<f64>> = runs.iter().map(|(s, _)| s.faults_per_step).collect();
    let last = &runs[runs.len() - 1].1;
    let highest = runs.iter().map(|(_, r)| r.memory.peak_bytes).max();
    Row {
        config,
        budget_fraction: Some(fraction),
        median_step: Some(step),
        spread: Some(spread),
        time_ratio: Some(step / unwrapped),
        peak_bytes: highest,
        memory_ratio: highest.map(|p| p as f64 / peak as f64),
        offloaded_per_step: (sum(&|r| r.transfers.offloaded_bytes as f64) / n) as u64,
        fetched_per_step: (sum(&|r| r.transfers.fetched_bytes as f64) / n) as u64,
        exposed_per_step: sum(&|r| r.transfers.exposed_wait_seconds) / n,
        faults_per_step: faults.map(|f| f.iter().sum::<f64>() / f.len() as f64),
        exposed_by_cause: burn_swap::ExposedWait {
            fetch_seconds: sum(&|r| r.transfers.exposed_wait.fetch_seconds) / n,
            prefetch_seconds: sum(&|r| r.transfers.exposed_wait.prefetch_seconds) / n,
            room_seconds: sum(&|r| r.transfers.exposed_wait.room_seconds) / n,
            offload_seconds: sum(&|r| r.transfers.exposed_wait.offload_seconds) / n,
        },
        plan: match (&last.plan.plan_chosen, last.plan.plan_choices.is_empty()) {
            (Some(name), _) => Some(name.clone()),
            (None, _) if last.plan.declines.in_force => Some("declined".into()),
            (None, false) => Some("none fits".into()),
            (None, true) => None,
        },
        predicted_peak_bytes: last
            .plan
            .plan_chosen
            .as_ref()
            .and(last.plan.predicted_peak_bytes),
        predicted_exposed_per_step: last
            .plan
            .plan_chosen
            .as_ref()
            .and(last.plan.predicted_exposed_seconds),
        reserved_bytes: runs
            .iter()
            .filter_map(|(_, r)| r.device.allocator_peak.map(|a| a.reserved))
            .max(),
        cleanups_per_step: last
            .device
            .allocator_peak
            .map(|_| sum(&|r| r.device.allocator_cleanups as f64) / n),
        paired: None,
        error: None,
    }
}

/// The largest batch (bisection from 1 up to `limit`) for which `fits` holds.
pub fn max_batch(limit: usize, mut fits: impl FnMut(usize) -> bool) -> usize {
    if !fits(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1, limit.max(1));
    if fits(hi) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The max-batch search at a cap of `cap_fraction` of the workload's unwrapped peak: the
/// largest batch whose unwrapped counted peak fits the cap, and the largest for which
/// `swap_fits(batch, cap)` holds (training under burn-swap with the cap as its budget; the
/// caller runs each probe in a fresh process, since a step that fails under its budget can
/// leave the tensors of its unwound graph alive). Returns `(cap bytes, unwrapped, burn-swap)`.
pub fn max_batches<I: BackendIr>(
    device: &I::Device,
    workload: &Workload,
    cap_fraction: f64,
    limit: usize,
    mut swap_fits: impl FnMut(usize, u64) -> bool,
) -> (u64, usize, usize) {
    let cap = (counted_peak::<I>(device, workload, false, 2) as f64 * cap_fraction) as u64;
    let unwrapped = max_batch(limit, |b| {
        counted_peak::<I>(device, &workload.with_batch(b), false, 2) <= cap
    });
    let swapped = max_batch(limit, |b| swap_fits(b, cap));
    (cap, unwrapped, swapped)
}

/// One probe of the max-batch search, for a fresh process: trains `workload` under
/// burn-swap with a budget of `cap` bytes, three steps or every kind of step it has twice
/// ([`Workload::steps_to_see_every_schedule`]); whether it ran.
pub fn probe<I: BackendIr>(device: &I::Device, workload: &Workload, cap: u64) -> bool {
    burn_swap::configure(device, SwapConfig::budget_bytes(cap.max(1)))
        .expect("a positive budget is valid");
    let steps = workload.steps_to_see_every_schedule().max(3);
    guarded(|| step_times::<Autodiff<Swap<I>>>(workload, device, steps)).is_ok()
}

/// The rows as CSV.
pub fn csv(rows: &[Row]) -> String {
    let mut out = String::from(
        "config,budget_fraction,median_step_ms,spread,time_ratio,peak_bytes,memory_ratio,\
         offloaded_per_step,fetched_per_step,exposed_ms_per_step,page_faults_per_step,\
         exposed_fetch_ms,exposed_prefetch_ms,exposed_room_ms,exposed_offload_ms,plan,predicted_peak_bytes,\
         predicted_exposed_ms_per_step,reserved_bytes,cleanups_per_step,paired_ratio,paired_low,paired_high,error\n",
    );
    let opt = |v: Option<f64>, scale: f64| v.map_or(String::new(), |v| format!("{:.4}", v * scale));
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{:.4},{},{:.4},{:.4},{:.4},{:.4},{},{},{},{},{},{},{},{},{}\n",
            r.config,
            opt(r.budget_fraction, 1.0),
            opt(r.median_step, 1e3),
            opt(r.spread, 1.0),
            opt(r.time_ratio, 1.0),
            r.peak_bytes.map_or(String::new(), |p| p.to_string()),
            opt(r.memory_ratio, 1.0),
            r.offloaded_per_step,
            r.fetched_per_step,
            r.exposed_per_step * 1e3,
            r.faults_per_step
                .map_or(String::new(), |f| format!("{f:.0}")),
            r.exposed_by_cause.fetch_seconds * 1e3,
            r.exposed_by_cause.prefetch_seconds * 1e3,
            r.exposed_by_cause.room_seconds * 1e3,
            r.exposed_by_cause.offload_seconds * 1e3,
            r.plan.as_deref().unwrap_or(""),
            r.predicted_peak_bytes
                .map_or(String::new(), |p| p.to_string()),
            opt(r.predicted_exposed_per_step, 1e3),
            r.reserved_bytes.map_or(String::new(), |b| b.to_string()),
            opt(r.cleanups_per_step, 1.0),
            opt(r.paired.map(|p| p.ratio), 1.0),
            opt(r.paired.map(|p| p.low), 1.0),
            opt(r.paired.map(|p| p.high), 1.0),
            r.error.as_deref().unwrap_or("").replace(',', ";")
        ));
    }
    out
}

/// The rows as a table.
pub fn table(rows: &[Row]) -> String {
    let mut table = crate::table::Table::new(&[
        "config",
        "budget",
        "step ms",
        "iqr",
        "time x",
        "peak B",
        "mem x",
        "moved/step",
        "wait ms",
        "fetch/late/room/out",
        "plan",
        "pred/meas peak",
        "pred wait",
        "faults",
        "reserved B",
        "cleanups/step",
        "paired x",
    ]);
    for r in rows {
        let budget = r
            .budget_fraction
            .map_or("-".into(), |f| format!("{:.0}%", f * 100.0));
        table.row(match (&r.error, r.median_step) {
            (None, Some(step)) => vec![
                r.config.clone(),
                budget,
                format!("{:.2}", step * 1e3),
                format!("{:.0}%", r.spread.unwrap_or(f64::NAN) * 100.0),
                format!("{:.2}", r.time_ratio.unwrap_or(f64::NAN)),
                r.peak_bytes.unwrap_or(0).to_string(),
                format!("{:.3}", r.memory_ratio.unwrap_or(f64::NAN)),
                (r.offloaded_per_step + r.fetched_per_step).to_string(),
                format!("{:.2}", r.exposed_per_step * 1e3),
                {
                    let w = &r.exposed_by_cause;
                    format!(
                        "{:.2}/{:.2}/{:.2}/{:.2}",
                        w.fetch_seconds * 1e3,
                        w.prefetch_seconds * 1e3,
                        w.room_seconds * 1e3,
                        w.offload_seconds * 1e3
                    )
                },
                r.plan.clone().unwrap_or_else(|| "-".into()),
                r.predicted_peak_bytes.map_or("-".into(), |p| {
                    format!("{:.3}", p as f64 / r.peak_bytes.unwrap_or(p).max(1) as f64)
                }),
                r.predicted_exposed_per_step
                    .map_or("-".into(), |w| format!("{:.2}", w * 1e3)),
                r.faults_per_step.map_or("-".into(), |f| format!("{f:.0}")),
                r.reserved_bytes.map_or("-".into(), |b| b.to_string()),
                r.cleanups_per_step
                    .map_or("-".into(), |c| format!("{c:.1}")),
                r.paired.map_or("-".into(), |p| {
                    format!("{:.3} [{:.3}, {:.3}]", p.ratio, p.low, p.high)
                }),
            ],
            _ => vec![
                r.config.clone(),
                budget,
                r.error.clone().unwrap_or_else(|| "did not run".into()),
            ],
        });
    }
    table.plain()
}

/// Draws the Pareto picture (memory ratio against time ratio) as SVG.
pub fn pareto(rows: &[Row], path: &str) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let points: Vec<(f64, f64, String)> = rows
        .iter()
        .filter_map(|r| {
            let label = match r.budget_fraction {
                Some(f) => format!("{} {:.0}%", r.config, f * 100.0),
                None => r.config.clone(),
            };
            Some((r.memory_ratio?, r.time_ratio?, label))
        })
        .collect();
    let max_t = points.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.1;
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "memory against time, relative to the unwrapped run",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..1.1f64, 0f64..max_t)?;
    chart
        .configure_mesh()
        .x_desc("peak memory / unwrapped peak")
        .y_desc("step time / unwrapped step time")
        .draw()?;
    chart.draw_series(
        points
            .iter()
            .map(|(m, t, _)| Circle::new((*m, *t), 4, BLUE.filled())),
    )?;
    chart.draw_series(
        points
            .iter()
            .map(|(m, t, name)| Text::new(name.clone(), (*m, *t), ("sans-serif", 10).into_font())),
    )?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_batch_bisects_to_the_largest_that_fits() {
        for largest in [0usize, 1, 2, 7, 100, 255, 256] {
            let mut probes = 0;
            let found = max_batch(256, |b| {
                probes += 1;
                b <= largest
            });
            assert_eq!(found, largest, "largest {largest}");
            assert!(probes <= 10, "{probes} probes");
        }
    }

    /// Two rounds of one row: the step time is the median over both rounds' measured steps
    /// (the warm-up of each left out), the bytes moved their mean per step; a round that
    /// failed makes the row an error.
    #[test]
    fn a_row_over_rounds_takes_every_rounds_measured_steps() {
        use burn::backend::{Flex, flex::FlexDevice};
        let _guard = crate::swap_device_lock();
        let device = FlexDevice;
        let workload = Workload::Mlp(crate::models::MlpConfig::small());
        let plan = Plan {
            workload,
            warm_up: 2,
            steps: 3,
            budgets: Vec::new(),
            policies: vec![burn_swap::Policy::Reactive],
            minimum: false,
            cap_fraction: 0.5,
            rounds: 2,
        };
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        measure_steps::<Autodiff<Swap<Flex>>>(&workload, &device, 2, 1);
        let peak = burn_swap::memory(&device).unwrap().peak_bytes;
        burn_swap::configure(&device, SwapConfig::budget_bytes(peak / 3)).unwrap();
        let mut runs = Vec::new();
        for times in [[9.0, 9.0, 1.0, 2.0, 3.0], [9.0, 9.0, 4.0, 5.0, 6.0]] {
            burn_swap::restart_trace(&device);
            let mut steps = measure_steps::<Autodiff<Swap<Flex>>>(&workload, &device, 5, 2);
            steps.times = times.to_vec();
            runs.push(Ok((steps, burn_swap::report(&device).unwrap())));
        }
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        let moved: u64 = runs
            .iter()
            .map(|r| r.as_ref().unwrap().1.transfers.offloaded_bytes)
            .sum();
        assert!(moved > 0, "nothing moved at a third of the peak");
        let row = budgeted_row("reactive".into(), 1.0 / 3.0, runs.clone(), &plan, 2.0, peak);
        assert_eq!(row.median_step, Some(3.5));
        assert_eq!(row.time_ratio, Some(1.75));
        assert_eq!(row.offloaded_per_step, moved / 6);
        assert_eq!(row.error, None);
        runs[1] = Err("out of memory".into());
        let row = budgeted_row("reactive".into(), 1.0 / 3.0, runs, &plan, 2.0, peak);
        assert_eq!(row.error.as_deref(), Some("out of memory"));
        assert_eq!(row.median_step, None);
    }
}
