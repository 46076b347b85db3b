//! Rows measured in lockstep (`swap-bench --lockstep`): each row being compared trains in a
//! process of its own, and the processes take one training step each in turn, so that the
//! steps of every row are measured within one turn of each other.
//!
//! A shared machine's speed drifts over seconds (on the 2-vCPU VM the book's figures come
//! from, the same configuration's steps ran 270 ms in one stretch and 560 ms in another of
//! the same run): rows run one after the other, even interleaved by rounds, each sit in a
//! different stretch, and their medians differ by more than the policies do. Taken in turns,
//! step `s` of every row falls in the same stretch, and the ratio of two rows' step `s` is
//! free of the drift: the harness gives each row the median of its steps' ratios to the
//! first row's (`Row::paired`), the way paired benchmarks compare two programs.
//!
//! Each turn's order is drawn anew (a fixed seed: a run repeats), so that every row takes
//! every place and runs after every other, not always after the same one. A
//! row's process waits between its steps; its background work (transfers under way, a plan
//! being made) goes on meanwhile, as it would between two steps of a training loop that
//! loads its next batch, and is not in its measured steps.
//!
//! The protocol, one line each way: the parent writes `go` to start a step; the row writes
//! `step SECONDS` after each step (its first, which initialises the model, runs unasked) and,
//! after its last, `done JSON` (its step times, faults and report, or why it failed).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout};

use burn::backend::Autodiff;
use burn_ir::BackendIr;
use burn_swap::{Policy, Swap, SwapConfig};
use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::steps::{Steps, guarded, measure_steps_gated, step_milliseconds};

/// Starts the process of one row: the policy and the budget in bytes it runs under, with its
/// stdin and stdout piped.
pub type Spawn<'a> = dyn FnMut(Policy, u64) -> std::io::Result<Child> + 'a;

/// One row's run: its steps and report, or why it failed.
pub type RowRun = Result<(Steps, burn_swap::Report), String>;

/// What a row's process sends after its last step.
#[derive(Debug, Serialize, Deserialize)]
struct Done {
    times: Vec<f64>,
    faults_per_step: Option<f64>,
    report: Option<burn_swap::Report>,
    error: Option<String>,
}

/// The row's side, in the process the parent started: trains `plan`'s workload under
/// `policy` at `budget` bytes, one step per `go` read on stdin, and writes each step's time
/// and, at the end, its figures on stdout (the protocol above).
pub fn row<I: BackendIr>(device: &I::Device, plan: &Plan, policy: Policy, budget: u64) {
    let config = SwapConfig::budget_bytes(budget).with_policy(policy);
    let done = match burn_swap::configure(device, config) {
        Err(error) => Done {
            times: Vec::new(),
            faults_per_step: None,
            report: None,
            error: Some(error.to_string()),
        },
        Ok(()) => run_row::<I>(device, plan),
    };
    if std::env::var_os("SWAP_BENCH_REPORTS").is_some()
        && let Some(r) = &done.report
    {
        eprintln!(
            "{} (lockstep) at {budget} B:\n{r}\nstep ms: {}",
            policy.name(),
            step_milliseconds(&done.times)
        );
    }
    // A report that cannot be written still tells the parent why (serde escapes the text).
    let json = serde_json::to_string(&done).unwrap_or_else(|e| {
        let failed = Done {
            times: Vec::new(),
            faults_per_step: None,
            report: None,
            error: Some(format!("unwritable figures: {e}")),
        };
        serde_json::to_string(&failed).unwrap_or_default()
    });
    let mut out = std::io::stdout().lock();
    // The parent reads this line; if it is gone there is no one to tell.
    let _ = writeln!(out, "done {json}");
    let _ = out.flush();
}

fn run_row<I: BackendIr>(device: &I::Device, plan: &Plan) -> Done {
    let total = plan.warm_up + plan.steps;
    let stdin = std::io::stdin();
    let mut line = String::new();
    let result = guarded(|| {
        measure_steps_gated::<Autodiff<Swap<I>>>(
            &plan.workload,
            device,
            total,
            plan.warm_up,
            &mut |step, seconds| {
                let mut out = std::io::stdout().lock();
                let told = writeln!(out, "step {seconds}").and_then(|()| out.flush());
                line.clear();
                let go =
                    step + 1 >= total || stdin.lock().read_line(&mut line).is_ok_and(|n| n > 0);
                // The parent is gone: nothing would read the figures.
                if told.is_err() || !go {
                    std::process::exit(1);
                }
            },
        )
    });
    let report = burn_swap::report(device);
    match result {
        Ok(steps) => Done {
            times: steps.times,
            faults_per_step: steps.faults_per_step,
            error: report.is_none().then(|| "no report".to_string()),
            report,
        },
        Err(message) => Done {
            times: Vec::new(),
            faults_per_step: None,
            report: None,
            error: Some(message.lines().next().unwrap_or("").to_string()),
        },
    }
}

/// A row's process as the parent drives it.
struct Driven {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    times: Vec<f64>,
    /// Its figures once it sent them (or why it ended).
    ended: Option<RowRun>,
}

impl Driven {
    fn start(spawn: &mut Spawn<'_>, policy: Policy, budget: u64) -> Result<Self, String> {
        let mut child = spawn(policy, budget).map_err(|e| format!("could not start: {e}"))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err("started without piped stdin and stdout".into());
        };
        Ok(Self {
            child,
            input,
            output: BufReader::new(output),
            times: Vec::new(),
            ended: None,
        })
    }

    /// Reads the row's next message: a step's time, or its figures.
    fn read(&mut self) {
        let mut line = String::new();
        loop {
            line.clear();
            match self.output.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let status = self
                        .child
                        .wait()
                        .map_or("unknown".into(), |s| s.to_string());
                    self.ended = Some(Err(format!("the row's process ended ({status})")));
                    return;
                }
                Ok(_) => {}
            }
            if let Some(seconds) = line.trim().strip_prefix("step ") {
                match seconds.parse::<f64>() {
                    Ok(s) => self.times.push(s),
                    Err(_) => self.ended = Some(Err(format!("bad step line {line:?}"))),
                }
                return;
            }
            if let Some(json) = line.trim().strip_prefix("done ") {
                self.ended = Some(match serde_json::from_str::<Done>(json) {
                    Ok(Done {
                        error: Some(error), ..
                    }) => Err(error),
                    Ok(Done {
                        times,
                        faults_per_step,
                        report: Some(report),
                        error: None,
                    }) => Ok((
                        Steps {
                            times,
                            faults_per_step,
                        },
                        report,
                    )),
                    Ok(_) => Err("no report".into()),
                    Err(e) => Err(format!("unreadable figures: {e}")),
                });
                let _ = self.child.wait();
                return;
            }
            // Any other line is not the protocol's (a library's output): skipped.
        }
    }

    /// Lets the row take its next step and reads what it sends.
    fn step(&mut self) {
        // A row that ended cannot be told; what it sent (or its exit) says why.
        let _ = writeln!(self.input, "go").and_then(|()| self.input.flush());
        self.read();
    }
}

/// Runs one row per policy at `budget` bytes in lockstep, `total` steps each (the first of
/// each as its process starts, one process at a time, in `policies`' order turned by
/// `turn`); `turn` (a caller's round) draws its own turn orders ([`turn_order`]). Returns
/// each row's run in `policies`' order.
///
/// The starting order turns because where a process runs follows when it started: the
/// scheduler leaves each row's process on the core it first ran on, and on the 2-vCPU VM
/// three rows of one configuration (the GAN, 0.17 ms steps, 20 rounds) came out 0.94-0.96
/// and 1.01-1.04 of the first row at each of four budgets with their steps in drawn orders,
/// by starting place alone. Turned each round, every row starts in every place as often.
pub fn run(
    spawn: &mut Spawn<'_>,
    policies: &[Policy],
    budget: u64,
    total: usize,
    turn: usize,
) -> Vec<RowRun> {
    let n = policies.len();
    let mut started: Vec<Option<Result<Driven, String>>> = (0..n).map(|_| None).collect();
    for k in 0..n {
        let which = (k + turn) % n;
        // Started one at a time: each initialises its model and takes its first step alone.
        started[which] = Some(
            Driven::start(spawn, policies[which], budget).map(|mut row| {
                row.read();
                row
            }),
        );
    }
    let mut rows: Vec<Result<Driven, String>> = started.into_iter().flatten().collect();
    for step in 1..total {
        for which in turn_order(n, step, turn) {
            if let Ok(row) = &mut rows[which]
                && row.ended.is_none()
            {
                row.step();
            }
        }
    }
    rows.into_iter()
        .map(|row| {
            let mut row = row?;
            // After its last step a row sends its figures unasked.
            while row.ended.is_none() {
                row.read();
            }
            row.ended.unwrap_or_else(|| Err("did not run".into()))
        })
        .collect()
}

/// The order of `n` rows in turn `step` of round `round`: a permutation drawn from a fixed
/// seed, so that over the turns every row runs in every place and after every other row
/// (a row that runs after a heavy one may find the caches colder), and a run repeats.
pub fn turn_order(n: usize, step: usize, round: usize) -> Vec<usize> {
    let seed = ((step as u64) << 32) ^ (round as u64) ^ 0x9E37_79B9_7F4A_7C15;
    let mut rng = burn_swap::unstable::SplitMix64::new(seed);
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order
}

/// The paired ratio of one row's measured steps to a reference row's: the median over the
/// rounds' steps after `warm_up` of `row`'s time over the reference's at the same round and
/// step, with a 95% confidence interval of that median (`median_interval`), widened to
/// hold the interval of the rounds' own medians where there are two rounds or more. `None`
/// without one step measured in both.
///
/// The steps of one round are not independent samples: a round's rows are processes (or
/// runs) of their own, and where each ran (a core, a memory layout) holds for all its
/// steps. On the 2-vCPU VM three rows of one configuration, the GAN's 0.17 ms steps over 20
/// rounds, differed by up to 5% in the median with step intervals of 1%; the rounds'
/// interval covers what a run of the same rows again may show.
pub fn paired(row: &[Vec<f64>], reference: &[Vec<f64>], warm_up: usize) -> Option<Paired> {
    let rounds: Vec<Vec<f64>> = row
        .iter()
        .zip(reference)
        .map(|(r, q)| {
            r.iter()
                .zip(q)
                .skip(warm_up)
                .map(|(a, b)| a / b)
                .filter(|x| x.is_finite())
                .collect::<Vec<f64>>()
        })
        .filter(|ratios| !ratios.is_empty())
        .collect();
    let mut ratios: Vec<f64> = rounds.iter().flatten().copied().collect();
    if ratios.is_empty() {
        return None;
    }
    let (low, high) = median_interval(ratios.len());
    ratios.sort_by(f64::total_cmp);
    let (mut low, mut high) = (ratios[low], ratios[high]);
    if rounds.len() >= 2 {
        let mut medians: Vec<f64> = rounds.into_iter().map(crate::steps::median).collect();
        medians.sort_by(f64::total_cmp);
        let (l, h) = median_interval(medians.len());
        low = low.min(medians[l]);
        high = high.max(medians[h]);
    }
    Some(Paired {
        low,
        high,
        ratio: crate::steps::median(ratios),
    })
}

/// A row's paired ratio to the reference row ([`paired`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// The median of the step ratios.
    pub ratio: f64,
    /// The bounds of its 95% confidence interval.
    pub low: f64,
    /// See [`Paired::low`].
    pub high: f64,
}

/// The ranks (0-based, in `n` sorted samples) that bound a 95% confidence interval of their
/// median, free of their distribution: the sign test's, from the binomial distribution of
/// how many samples fall below the median (the largest `k` with `P(B(n, ½) < k) <= 2.5%`
/// gives the `k`th smallest and the `k`th largest, 1-based); the whole sample where `n` is
/// too small for one (five or fewer).
pub fn median_interval(n: usize) -> (usize, usize) {
    if n == 0 {
        return (0, 0);
    }
    // P(B = j) in logarithms: C(n, j) / 2^n underflows past n = 1074.
    let mut log_choose = 0.0f64;
    let log_half_n = n as f64 * std::f64::consts::LN_2;
    let mut below = 0.0f64;
    let mut k = 0;
    for j in 0..n {
        below += (log_choose - log_half_n).exp();
        if below > 0.025 {
            break;
        }
        k = j + 1;
        log_choose += ((n - j) as f64).ln() - ((j + 1) as f64).ln();
    }
    match k {
        0 => (0, n - 1),
        k => (k - 1, n - k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two rows whose steps drift together (a machine twice as slow in the second half): the
    /// paired ratio is the ratio of the rows, whatever the drift; the medians of each alone
    /// are not.
    #[test]
    fn the_paired_ratio_cancels_a_drift_both_rows_share() {
        let drift = |s: usize| if s < 6 { 1.0 } else { 2.0 };
        let reference: Vec<f64> = (0..10).map(|s| 0.1 * drift(s)).collect();
        let row: Vec<f64> = (0..10).map(|s| 0.11 * drift(s)).collect();
        let p = paired(&[row], &[reference], 2).expect("steps measured");
        assert!((p.ratio - 1.1).abs() < 1e-9, "{p:?}");
        assert!((p.high - p.low).abs() < 1e-9, "{p:?}");
        // The warm-up steps are left out, and steps one row lacks are not paired.
        let p = paired(&[vec![9.0, 9.0, 0.2]], &[vec![0.1, 0.1, 0.1, 0.1]], 2)
            .expect("one step in both");
        assert!((p.ratio - 2.0).abs() < 1e-9);
        assert_eq!(paired(&[vec![1.0]], &[vec![1.0]], 2), None);
    }

    /// Rounds whose steps agree within each round but not between rounds (each round's
    /// processes ran where they landed): the interval holds the rounds' medians, not only
    /// the steps' scatter about the median of them all.
    #[test]
    fn the_interval_holds_what_the_rounds_differ_by() {
        let round = |ratio: f64| -> Vec<f64> { (0..30).map(|s| ratio + s as f64 * 1e-4).collect() };
        let row = [
            round(1.00),
            round(1.06),
            round(1.00),
            round(1.03),
            round(1.00),
            round(1.08),
        ];
        let reference = vec![vec![1.0; 30]; 6];
        let p = paired(&row, &reference, 0).unwrap();
        assert!(p.low < 1.002 && p.high > 1.08, "{p:?}");
        // Of one round, the steps' interval alone.
        let p = paired(&row[..1], &reference[..1], 0).unwrap();
        assert!(p.high < 1.01, "{p:?}");
    }

    /// Over the turns of a run every row takes every place, about equally often, and runs
    /// right after every other row; each turn is a permutation, the same in every run.
    #[test]
    fn turns_put_every_row_everywhere() {
        let n = 4;
        let mut places = [[0u32; 4]; 4];
        let mut after = [[false; 4]; 4];
        for step in 1..200 {
            let order = turn_order(n, step, 1);
            assert_eq!(order, turn_order(n, step, 1));
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2, 3]);
            for (place, &row) in order.iter().enumerate() {
                places[row][place] += 1;
            }
            for pair in order.windows(2) {
                after[pair[1]][pair[0]] = true;
            }
        }
        // 199 turns: about 50 in each place.
        assert!(
            places.iter().flatten().all(|&c| (30..=70).contains(&c)),
            "{places:?}"
        );
        for (row, before) in after.iter().enumerate() {
            for (other, &seen) in before.iter().enumerate() {
                assert!(
                    seen || row == other,
                    "row {row} never ran right after {other}"
                );
            }
        }
        assert_ne!(
            (1..9).map(|s| turn_order(n, s, 0)).collect::<Vec<_>>(),
            (1..9).map(|s| turn_order(n, s, 1)).collect::<Vec<_>>(),
            "rounds draw their own"
        );
    }

    /// The interval's ranks: the sign test's at 95% (for 100 samples the 40th and 61st, as
    /// the exact binomial bounds; for 30, the 10th and 21st), the whole sample when it is
    /// small, and always inside it.
    #[test]
    fn the_median_interval_is_the_sign_tests() {
        assert_eq!(median_interval(100), (39, 60));
        assert_eq!(median_interval(30), (9, 20));
        assert_eq!(median_interval(1), (0, 0));
        assert_eq!(median_interval(5), (0, 4));
        // Six: both ends (P(B = 0) = 1/64 <= 2.5%), the smallest that gives an interval.
        assert_eq!(median_interval(6), (0, 5));
        assert_eq!(median_interval(8), (0, 7));
        assert_eq!(median_interval(10), (1, 8));
        assert!(median_interval(5000).0 > 2000);
        for n in 1..500 {
            let (low, high) = median_interval(n);
            assert!(
                low <= (n - 1) / 2 && n / 2 <= high && high < n,
                "{n}: {low} {high}"
            );
        }
        // A ratio whose steps scatter: the interval holds the median, and narrows as the
        // steps grow in number.
        let steps = |n: usize| -> Vec<f64> {
            (0..n)
                .map(|i| 1.0 + ((i * 37) % 21) as f64 / 100.0)
                .collect()
        };
        let wide = paired(&[steps(20)], &[vec![1.0; 20]], 0).unwrap();
        let narrow = paired(&[steps(200)], &[vec![1.0; 200]], 0).unwrap();
        assert!(wide.low <= wide.ratio && wide.ratio <= wide.high);
        assert!(
            narrow.high - narrow.low < wide.high - wide.low,
            "{wide:?} {narrow:?}"
        );
    }

    /// The parent's side against three scripted rows (`sh`): one that runs to its end, one
    /// that fails under its budget after a step, one whose process dies. The rows take their
    /// steps in turns in their drawn orders, each row's times and figures come back in
    /// the policies' order, and the two that ended early are errors that say why.
    #[test]
    fn rows_take_their_steps_in_turns_and_each_ending_is_told() {
        use burn::backend::{Autodiff, Flex, flex::FlexDevice};
        use std::process::{Command, Stdio};

        let report = {
            let _guard = crate::swap_device_lock();
            let device = FlexDevice;
            burn_swap::configure(&device, SwapConfig::default()).unwrap();
            let workload = crate::workload::Workload::Mlp(crate::models::MlpConfig::small());
            crate::steps::measure_steps::<Autodiff<Swap<Flex>>>(&workload, &device, 1, 0);
            burn_swap::report(&device).expect("a report")
        };
        let dir = std::env::temp_dir().join(format!("lockstep-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let done = Done {
            times: vec![0.5, 0.25, 0.125],
            faults_per_step: Some(3.0),
            report: Some(report.clone()),
            error: None,
        };
        std::fs::write(dir.join("done"), serde_json::to_string(&done).unwrap()).unwrap();
        let log = dir.join("turns");
        let _ = std::fs::remove_file(&log);
        let script = |policy: Policy| -> String {
            let d = dir.display();
            match policy {
                // Runs its three steps, logging each turn it was given.
                Policy::Reactive => format!(
                    "echo 'step 0.5'; read go; echo r >> {d}/turns; echo 'noise'; \
                     echo 'step 0.25'; read go; echo r >> {d}/turns; echo 'step 0.125'; \
                     echo \"done $(cat {d}/done)\""
                ),
                // Fails under its budget in its second step.
                Policy::OffloadOnly => format!(
                    "echo 'step 0.5'; read go; echo o >> {d}/turns; echo 'done \
                     {{\"times\":[],\"faults_per_step\":null,\"report\":null,\
                     \"error\":\"over budget\"}}'"
                ),
                // Dies in its second step.
                _ => format!("echo 'step 0.5'; read go; echo p >> {d}/turns; exit 3"),
            }
        };
        let mut started = Vec::new();
        let mut spawn = |policy: Policy, _budget: u64| {
            started.push(policy);
            Command::new("sh")
                .args(["-c", &script(policy)])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
        };
        let policies = [Policy::Reactive, Policy::OffloadOnly, Policy::Planned];
        // The second round: its rows start in the order turned by one.
        let runs = run(&mut spawn, &policies, 1 << 20, 3, 1);
        assert_eq!(
            started,
            [Policy::OffloadOnly, Policy::Planned, Policy::Reactive]
        );
        assert_eq!(runs.len(), 3);
        let (steps, got) = runs[0].as_ref().expect("the first row ran");
        assert_eq!(steps.times, vec![0.5, 0.25, 0.125]);
        assert_eq!(steps.faults_per_step, Some(3.0));
        assert_eq!(got, &report);
        assert_eq!(runs[1].as_ref().unwrap_err(), "over budget");
        let died = runs[2].as_ref().unwrap_err();
        assert!(died.contains("ended") && died.contains('3'), "{died}");
        // Each turn in its drawn order: turn 2 has only reactive left.
        let name = |k: usize| ["r", "o", "p"][k];
        let mut expected: Vec<&str> = turn_order(3, 1, 1).into_iter().map(name).collect();
        expected.push("r");
        let turns = std::fs::read_to_string(&log).unwrap();
        assert_eq!(turns.split_whitespace().collect::<Vec<_>>(), expected);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
