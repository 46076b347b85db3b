//! What `swap-bench` runs: a workload, its steps, the budgets and the policies.

use burn_swap::Policy;

use crate::workload::Workload;

/// What the harness runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The workload.
    pub workload: Workload,
    /// Steps not measured (the trace finds the loop, one iteration is profiled, the plan made).
    pub warm_up: usize,
    /// Steps measured after the warm-up.
    pub steps: usize,
    /// Budgets as fractions of the unwrapped peak.
    pub budgets: Vec<f64>,
    /// The policies under burn-swap.
    pub policies: Vec<Policy>,
    /// Whether to run every policy also at the smallest budget the unbudgeted run's report
    /// names (`report.workload.minimum_budget_bytes`).
    pub minimum: bool,
    /// The memory cap of the max-batch search, as a fraction of the unwrapped peak.
    pub cap_fraction: f64,
    /// Rounds per budget: each round runs every policy's row once (warm-up and measured
    /// steps), the policies' order turned by one each round, and a row's figures are taken
    /// over the measured steps of all its rounds. More than one interleaves the rows being
    /// compared, so that a machine's drift over minutes falls on all of them alike.
    pub rounds: usize,
}
