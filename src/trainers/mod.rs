//! The example trainers' logic, generic over the backend, so that tests run them on
//! `Autodiff<Flex>` and on `Autodiff<Swap<Flex>>` in one process and compare.

pub mod mlp;

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
}

impl SwapOptions {
    /// Reads `--budget`, `--policy`, `--compress` / `--compress-mode`, `--eviction`,
    /// `--report-json` and `--trace-json`.
    pub fn from_args(args: &crate::cli::Args) -> Result<Self, crate::cli::ArgError> {
        use crate::cli::ArgError;
        let budget = args
            .value("budget")
            .map(|text| {
                burn_swap::config::parse_budget(text)
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
                    .map_err(|reason| ArgError(format!("--policy {text}: {reason}")))
            })
            .transpose()?;
        let compression = if args.flag("compress") {
            Some(Compression::On {
                max_ratio: Compression::DEFAULT_MAX_RATIO,
            })
        } else {
            args.value("compress-mode")
                .map(|text| {
                    burn_swap::config::parse_compression(text)
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
