//! Measuring training steps: each step's wall time and the page faults per step, the
//! quantiles the rows are made of, and the guard that turns a run's panic (an op that cannot
//! run under its budget) into a row's error.

use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;

use crate::workload::Workload;
/// The measured steps of one row.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps {
    /// Each step's wall time in seconds (the first includes the model's initialisation:
    /// warm-up steps are never measured).
    pub times: Vec<f64>,
    /// Minor page faults of the whole process per step after step `measure_from`, where the
    /// platform tells them (Linux): pages the kernel mapped and zeroed because the allocator
    /// had given memory back to it. `None` elsewhere, or with nothing after `measure_from`.
    pub faults_per_step: Option<f64>,
}

/// Trains `workload` for `steps` steps on `B` and returns each step's wall time in seconds
/// (the first includes the model's initialisation: warm-up steps are never measured).
pub fn step_times<B: AutodiffBackend>(
    workload: &Workload,
    device: &B::Device,
    steps: usize,
) -> Vec<f64> {
    measure_steps::<B>(workload, device, steps, usize::MAX).times
}

/// Trains `workload` for `steps` steps on `B`: each step's wall time, and the page faults per
/// step after step `measure_from`, where burn-swap's counters are reset too (so that the
/// report covers the measured steps only).
pub fn measure_steps<B: AutodiffBackend>(
    workload: &Workload,
    device: &B::Device,
    steps: usize,
    measure_from: usize,
) -> Steps {
    measure_steps_gated::<B>(workload, device, steps, measure_from, &mut |_, _| {})
}

/// [`measure_steps`], calling `gate` with each step's index and wall time after the step:
/// the next step's clock starts when it returns (a lockstep row waits there for its turn,
/// `crate::lockstep`).
pub fn measure_steps_gated<B: AutodiffBackend>(
    workload: &Workload,
    device: &B::Device,
    steps: usize,
    measure_from: usize,
    gate: &mut dyn FnMut(usize, f64),
) -> Steps {
    let mut times = Vec::with_capacity(steps);
    let mut faults_from = None;
    // Measured from the first step: the counters start here (else they would carry the
    // peak of whatever ran before).
    if measure_from == 0 {
        burn_swap::reset_counters(device);
        faults_from = minor_faults();
    }
    let mut last = Instant::now();
    workload.train_with::<B>(device, steps, &mut |step, _| {
        if step + 1 == measure_from {
            burn_swap::reset_counters(device);
            faults_from = minor_faults();
        }
        let seconds = last.elapsed().as_secs_f64();
        times.push(seconds);
        gate(step, seconds);
        last = Instant::now();
    });
    let measured = steps.saturating_sub(measure_from);
    let faults_per_step = match (faults_from, minor_faults()) {
        (Some(from), Some(to)) if measured > 0 => {
            Some(to.saturating_sub(from) as f64 / measured as f64)
        }
        _ => None,
    };
    Steps {
        times,
        faults_per_step,
    }
}

/// The minor page faults of this process so far (all threads; `/proc/self/stat`'s tenth
/// field), or `None` where the platform does not tell them.
pub fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces:
    // state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt.
    let fields = stat.rsplit_once(')')?.1;
    fields.split_whitespace().nth(7)?.parse().ok()
}

/// Step times in whole milliseconds, separated by spaces (`SWAP_BENCH_REPORTS`' lines).
pub(crate) fn step_milliseconds(times: &[f64]) -> String {
    let ms: Vec<String> = times.iter().map(|t| format!("{:.0}", t * 1e3)).collect();
    ms.join(" ")
}

/// The `q` quantile of `xs` (linear between the nearest ranks); NaN when empty.
pub(crate) fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n => {
            let at = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
            xs[lo] + (xs[hi] - xs[lo]) * (at - lo as f64)
        }
    }
}

pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

thread_local! {
    /// Set while [`guarded`] runs: its panics are expected and reported as rows.
    static EXPECTING_PANICS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs a panic hook that stays quiet for the panics the harness's guarded runs expect
/// (an op that cannot run under its budget, reported in the table) and prints every other
/// one as usual.
pub fn quiet_expected_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !EXPECTING_PANICS.with(|e| e.get()) {
            default(info);
        }
    }));
}

/// Runs `f`, turning a panic (an op that cannot run under the budget) into an error.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    EXPECTING_PANICS.with(|e| e.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    EXPECTING_PANICS.with(|e| e.set(false));
    result.map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn minor_faults_count_the_pages_fresh_memory_maps() {
        // 32 MiB is above glibc's largest mmap threshold: the allocation comes fresh from
        // the kernel, and writing it faults in each of its 8,192 pages once.
        const BYTES: usize = 32 << 20;
        let before = minor_faults().expect("Linux tells the minor faults");
        let memory = std::hint::black_box(vec![1u8; BYTES]);
        let after = minor_faults().expect("Linux tells the minor faults");
        assert_eq!(memory[BYTES - 1], 1);
        // Huge pages (transparent) may map it in fewer faults; never in none.
        assert!(after > before, "{before} -> {after}");
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}
