//! Configuration: the budget, the policy, and how they are read from the environment.
//!
//! Environment variables (read when a device's swap client is created, and by
//! [`SwapConfig::from_env`]):
//!
//! | variable | values | default |
//! |---|---|---|
//! | `BURN_SWAP` | `on`, `off`, `1`, `0`, `true`, `false` | `on` |
//! | `BURN_SWAP_BUDGET` | bytes (`536870912`, `512MiB`, `12GiB`, `1.5GB`, `64K`) or a fraction of device memory (`0.4`, `40%`) | unlimited |
//! | `BURN_SWAP_POLICY` | `reactive`, `planned`, `offload-only`, `recompute-only` | `planned` |
//! | `BURN_SWAP_EVICTION` | `dtr`, `lru`, `largest` | `dtr` |
//! | `BURN_SWAP_TRACE` | `on`, `off` | `on` |
//! | `BURN_SWAP_COMPRESS` | `off`, `on`, `auto`, `on:0.7` (size threshold) | `off` |
//! | `BURN_SWAP_PEERS` | peers, comma-separated: simulated `capacity@bandwidth` (`256MiB@50GB/s`), or devices `cuda:N@capacity` / `device:N@capacity`; or `off` | none |
//! | `BURN_SWAP_JITTER` | microseconds (`0`, `300`): each transfer finishes up to this late, a stress test for ordering | `0` |
//!
//! A malformed value is a [`ConfigError::InvalidEnv`] naming the variable and the value; it is
//! never replaced by a default.

pub use crate::compress::Compression;
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// How much device memory the tensors of one device may occupy, as counted by burn-swap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub enum Budget {
    /// No limit: burn-swap only counts and traces.
    #[default]
    Unlimited,
    /// A limit in bytes.
    Bytes(u64),
    /// A fraction in `(0, 1]` of the device's total memory. Only backends that can tell their
    /// memory accept it; the others give [`ConfigError::DeviceMemoryUnknown`].
    DeviceFraction(f64),
}

impl Budget {
    /// Resolves the budget to bytes, given the device's total memory when the backend knows it.
    ///
    /// Returns `Ok(None)` for [`Budget::Unlimited`].
    pub fn resolve(
        &self,
        device_memory: Option<u64>,
        backend: &str,
    ) -> Result<Option<u64>, ConfigError> {
        match *self {
            Budget::Unlimited => Ok(None),
            Budget::Bytes(0) => Err(ConfigError::ZeroBudget),
            Budget::Bytes(bytes) => Ok(Some(bytes)),
            Budget::DeviceFraction(fraction) => {
                check_fraction(fraction)?;
                match device_memory {
                    Some(total) => Ok(Some(((total as f64) * fraction) as u64)),
                    None => Err(ConfigError::DeviceMemoryUnknown {
                        fraction,
                        backend: backend.to_string(),
                    }),
                }
            }
        }
    }
}

/// When the budget binds, how the tensors to move are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Policy {
    /// Decide at each operation, from what has been seen so far: before an operation would
    /// exceed the budget, offload resident tensors it does not use, chosen by the
    /// [`EvictionScore`]; fetch them back when they are next used.
    Reactive,
    /// Profile one iteration, plan the whole iteration once (offload with prefetch, or drop
    /// and recompute, per tensor; `plan::combine`), and follow the plan in every iteration,
    /// with transfers on the transfer workers. Until the plan exists, and whenever the running
    /// iteration departs from it, the reactive policy keeps the budget. Needs the trace. The
    /// default: on the benches' MLP it cuts the time steps wait on transfers from 15 to
    /// 0.6 ms at half the peak (`benches/policies.rs`).
    #[default]
    Planned,
    /// [`Policy::Planned`] with offloads only (no recomputation).
    OffloadOnly,
    /// [`Policy::Planned`] with recomputation only (no planned offloads; the reactive
    /// fallback still offloads when recomputation alone cannot keep the budget).
    RecomputeOnly,
}

impl Policy {
    /// The name used on command lines and in `BURN_SWAP_POLICY`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Reactive => "reactive",
            Policy::Planned => "planned",
            Policy::OffloadOnly => "offload-only",
            Policy::RecomputeOnly => "recompute-only",
        }
    }

    /// Every policy.
    pub const ALL: [Policy; 4] = [
        Policy::Reactive,
        Policy::Planned,
        Policy::OffloadOnly,
        Policy::RecomputeOnly,
    ];

    /// Whether the policy follows a plan.
    pub fn planned(self) -> bool {
        self != Policy::Reactive
    }
}

impl core::str::FromStr for Policy {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim().to_ascii_lowercase().replace('_', "-");
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == value)
            .ok_or_else(|| {
                "expected one of `reactive`, `planned`, `offload-only`, `recompute-only`".into()
            })
    }
}

/// The score by which the reactive policy chooses which resident tensor to offload.
///
/// See `plan::reactive` for the formulas. Every score only ever picks tensors that the
/// operation about to run does not use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum EvictionScore {
    /// DTR's heuristic (Kirisame et al., 2021), `staleness × bytes / cost`, where the cost of
    /// offloading a tensor is its round-trip copy time: large, long-unused tensors go first,
    /// tiny ones (whose copies are dominated by latency) last.
    #[default]
    Dtr,
    /// Least recently used first.
    Lru,
    /// Largest first, ties broken by least recently used.
    Largest,
}

/// The configuration of burn-swap for one device.
///
/// ```
/// use burn_swap::{SwapConfig, EvictionScore};
/// let config = SwapConfig::budget_bytes(512 << 20).with_eviction(EvictionScore::Lru);
/// assert!(config.enabled);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwapConfig {
    /// When false, operations go straight to the inner backend: no trace, no budget; bytes
    /// are still counted.
    pub enabled: bool,
    /// The memory budget.
    pub budget: Budget,
    /// The policy that keeps the budget.
    pub policy: Policy,
    /// How the reactive policy chooses what to offload.
    pub eviction: EvictionScore,
    /// Whether to record the op trace (needed for [`crate::trace`] and the iteration report).
    pub trace: bool,
    /// Zero-value compression of offloaded tensors (see [`crate::compress`]).
    pub compression: Compression,
    /// A stress test for ordering, off at 0: each transfer worker holds every finished
    /// transfer for a pseudo-random time of up to this many microseconds before reporting
    /// it, so that completions reach compute in every order and at every distance from the
    /// ops that need them. Training must stay bit-identical (`tests/stress.rs`).
    #[serde(default)]
    pub transfer_jitter_micros: u64,
    /// Peer devices that take offloaded tensors (seed 000): split across them by link
    /// bandwidth within their free memory, with host memory as the fallback. Empty: host
    /// only. See [`PeerSpec`].
    #[serde(default)]
    pub peers: Vec<PeerSpec>,
}

/// A peer that takes offloaded tensors: its capacity for them and the bandwidth of the link
/// to it. A peer is either a device of the inner backend (`device`: its index; on CUDA the
/// ordinal, pieces live in its memory, allocated by its own CubeCL allocator, and move by
/// cudarc peer copies; on other backends pieces move with Burn's `to_device`), or
/// *simulated* (`device: None`: its bytes live in host memory, each transfer is paced to the
/// link's bandwidth, and the capacity is enforced as a peer device's free memory would be;
/// this is how the advisor, the split, the reassembly and the fallback run on any backend,
/// CI included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerSpec {
    /// Its name in the report.
    pub name: String,
    /// Bytes it can hold.
    pub capacity_bytes: u64,
    /// The bandwidth of the link to it and back, bytes per second (for a CUDA peer, 0:
    /// measured when the device is configured).
    pub bandwidth: f64,
    /// The index of a device peer (the CUDA ordinal on CUDA); `None` for a simulated one.
    #[serde(default)]
    pub device: Option<usize>,
}

impl PeerSpec {
    /// A simulated peer of `capacity_bytes` behind a link of `bandwidth` bytes per second.
    pub fn simulated(name: impl Into<String>, capacity_bytes: u64, bandwidth: f64) -> Self {
        Self {
            name: name.into(),
            capacity_bytes,
            bandwidth,
            device: None,
        }
    }

    /// Device `index` of the inner backend as a peer taking up to `capacity_bytes`. Its link
    /// is measured when the device is configured on CUDA (device 0 to itself works: the path
    /// runs on one GPU); elsewhere the advisor takes all device links as equal.
    pub fn device(index: usize, capacity_bytes: u64) -> Self {
        Self {
            name: format!("device:{index}"),
            capacity_bytes,
            bandwidth: 0.0,
            device: Some(index),
        }
    }

    /// CUDA device `ordinal` as a peer: [`PeerSpec::device`] under its CUDA name.
    pub fn cuda(ordinal: usize, capacity_bytes: u64) -> Self {
        Self {
            name: format!("cuda:{ordinal}"),
            ..Self::device(ordinal, capacity_bytes)
        }
    }
}

/// Parses `BURN_SWAP_PEERS`: `off`, or comma-separated peers, each either simulated,
/// `capacity@bandwidth` with a capacity as in budgets (`256MiB`) and a bandwidth in bytes
/// per second with a decimal or binary unit and an optional `/s` (`50GB/s`, `12.5GB`,
/// `900MiB/s`), or a device of the inner backend, `device:N@capacity` or, the same on CUDA,
/// `cuda:N@capacity` (`cuda:1@8GiB`).
pub fn parse_peers(text: &str) -> Result<Vec<PeerSpec>, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") || text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .enumerate()
        .map(|(i, item)| {
            let (first, second) = item.trim().split_once('@').ok_or_else(|| {
                format!("peer `{item}`: expected capacity@bandwidth or cuda:N@capacity, e.g. 256MiB@50GB/s")
            })?;
            let first = first.trim();
            let device = first
                .strip_prefix("cuda:")
                .map(|n| (n, true))
                .or_else(|| first.strip_prefix("device:").map(|n| (n, false)));
            if let Some((ordinal, cuda)) = device {
                let ordinal: usize = ordinal
                    .trim()
                    .parse()
                    .map_err(|_| format!("peer `{item}`: `{ordinal}` is not a device number"))?;
                return match parse_budget(second) {
                    Ok(Budget::Bytes(b)) if b > 0 && cuda => Ok(PeerSpec::cuda(ordinal, b)),
                    Ok(Budget::Bytes(b)) if b > 0 => Ok(PeerSpec::device(ordinal, b)),
                    _ => Err(format!("peer `{item}`: the capacity must be bytes, above 0")),
                };
            }
            let (capacity, bandwidth) = (first, second);
            let capacity = match parse_budget(capacity)
                .map_err(|e| format!("peer `{item}`: capacity: {e}"))?
            {
                Budget::Bytes(b) if b > 0 => b,
                _ => {
                    return Err(format!(
                        "peer `{item}`: the capacity must be bytes, above 0"
                    ));
                }
            };
            let rate = bandwidth.trim();
            let rate = rate
                .strip_suffix("/s")
                .or_else(|| rate.strip_suffix("/S"))
                .unwrap_or(rate);
            let split = rate
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rate.len());
            let (number, unit) = rate.split_at(split);
            let number: f64 = number
                .parse()
                .map_err(|_| format!("peer `{item}`: bandwidth `{bandwidth}` is not a number"))?;
            let unit = match unit.trim().to_ascii_lowercase().as_str() {
                "b" | "" => 1.0,
                "kb" => 1e3,
                "mb" => 1e6,
                "gb" => 1e9,
                "kib" => 1024.0,
                "mib" => (1u64 << 20) as f64,
                "gib" => (1u64 << 30) as f64,
                other => return Err(format!("peer `{item}`: unknown bandwidth unit `{other}`")),
            };
            let bandwidth = number * unit;
            if !(bandwidth.is_finite() && bandwidth > 0.0) {
                return Err(format!("peer `{item}`: the bandwidth must be above 0"));
            }
            Ok(PeerSpec::simulated(format!("peer{i}"), capacity, bandwidth))
        })
        .collect()
}

impl Default for SwapConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            budget: Budget::Unlimited,
            policy: Policy::Planned,
            eviction: EvictionScore::Dtr,
            trace: true,
            compression: Compression::Off,
            transfer_jitter_micros: 0,
            peers: Vec::new(),
        }
    }
}

impl SwapConfig {
    /// A configuration with a budget in bytes.
    pub fn budget_bytes(bytes: u64) -> Self {
        Self::default().with_budget(Budget::Bytes(bytes))
    }

    /// A configuration with a budget as a fraction of the device's total memory.
    pub fn budget_fraction(fraction: f64) -> Self {
        Self::default().with_budget(Budget::DeviceFraction(fraction))
    }

    /// Replaces the budget.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Replaces the policy.
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Replaces the eviction score.
    pub fn with_eviction(mut self, eviction: EvictionScore) -> Self {
        self.eviction = eviction;
        self
    }

    /// Turns burn-swap on or off.
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets when offloaded tensors are compressed.
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Holds each finished transfer up to `max_micros` microseconds before it is reported
    /// (see [`SwapConfig::transfer_jitter_micros`]); 0 turns it off.
    pub fn with_transfer_jitter(mut self, max_micros: u64) -> Self {
        self.transfer_jitter_micros = max_micros;
        self
    }

    /// Offloads to these peers, split by link bandwidth within their capacity, with host
    /// memory as the fallback (see [`SwapConfig::peers`]).
    pub fn with_peers(mut self, peers: Vec<PeerSpec>) -> Self {
        self.peers = peers;
        self
    }

    /// Turns trace recording on or off.
    pub fn with_trace(mut self, trace: bool) -> Self {
        self.trace = trace;
        self
    }

    /// The default configuration overridden by the `BURN_SWAP*` environment variables.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::default().with_env()
    }

    /// This configuration overridden by the `BURN_SWAP*` environment variables that are set.
    pub fn with_env(self) -> Result<Self, ConfigError> {
        self.with_vars(|name| std::env::var(name).ok())
    }

    /// This configuration overridden by the variables that `lookup` finds; the seam that lets
    /// tests parse environments without touching the process environment.
    pub fn with_vars(
        mut self,
        lookup: impl Fn(&'static str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        if let Some(value) = lookup("BURN_SWAP") {
            self.enabled = parse_switch("BURN_SWAP", &value)?;
        }
        if let Some(value) = lookup("BURN_SWAP_BUDGET") {
            self.budget = parse_budget(&value).map_err(|reason| ConfigError::InvalidEnv {
                variable: "BURN_SWAP_BUDGET",
                value: value.clone(),
                reason,
            })?;
        }
        if let Some(value) = lookup("BURN_SWAP_POLICY") {
            self.policy = value
                .parse()
                .map_err(|reason: String| invalid("BURN_SWAP_POLICY", &value, &reason))?;
        }
        if let Some(value) = lookup("BURN_SWAP_EVICTION") {
            self.eviction = match value.trim().to_ascii_lowercase().as_str() {
                "dtr" => EvictionScore::Dtr,
                "lru" => EvictionScore::Lru,
                "largest" => EvictionScore::Largest,
                _ => {
                    return Err(invalid(
                        "BURN_SWAP_EVICTION",
                        &value,
                        "expected one of `dtr`, `lru`, `largest`",
                    ));
                }
            };
        }
        if let Some(value) = lookup("BURN_SWAP_COMPRESS") {
            self.compression = parse_compression(&value)
                .map_err(|reason| invalid("BURN_SWAP_COMPRESS", &value, &reason))?;
        }
        if let Some(value) = lookup("BURN_SWAP_TRACE") {
            self.trace = parse_switch("BURN_SWAP_TRACE", &value)?;
        }
        if let Some(value) = lookup("BURN_SWAP_PEERS") {
            self.peers = parse_peers(&value)
                .map_err(|reason| invalid("BURN_SWAP_PEERS", &value, &reason))?;
        }
        if let Some(value) = lookup("BURN_SWAP_JITTER") {
            self.transfer_jitter_micros = value.trim().parse().map_err(|_| {
                invalid(
                    "BURN_SWAP_JITTER",
                    &value,
                    "expected a whole number of microseconds",
                )
            })?;
        }
        Ok(self)
    }

    /// Checks the values that can be checked without a device.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Compression::On { max_ratio } | Compression::Auto { max_ratio } = self.compression
            && !(max_ratio > 0.0 && max_ratio <= 1.0)
        {
            return Err(ConfigError::CompressionRatio(max_ratio));
        }
        let devices = self.peers.iter().filter(|p| p.device.is_some()).count();
        if devices > 0 && devices < self.peers.len() {
            return Err(ConfigError::MixedPeers);
        }
        if let Some(p) = self.peers.iter().find(|p| {
            p.capacity_bytes == 0
                || (p.device.is_none() && !(p.bandwidth.is_finite() && p.bandwidth > 0.0))
        }) {
            return Err(ConfigError::BadPeer {
                name: p.name.clone(),
                capacity_bytes: p.capacity_bytes,
                bandwidth: p.bandwidth,
            });
        }
        match self.budget {
            Budget::Bytes(0) => Err(ConfigError::ZeroBudget),
            Budget::DeviceFraction(f) => check_fraction(f),
            _ => Ok(()),
        }
    }
}

/// Parses `off`, `on`, `auto`, or `on:R` / `auto:R` with a size threshold `R` in `(0, 1]`.
pub fn parse_compression(text: &str) -> Result<Compression, String> {
    let text = text.trim().to_ascii_lowercase();
    let (mode, ratio) = match text.split_once(':') {
        Some((mode, ratio)) => {
            let ratio: f64 = ratio
                .trim()
                .parse()
                .map_err(|_| format!("threshold {ratio:?} is not a number"))?;
            if !(ratio > 0.0 && ratio <= 1.0) {
                return Err(format!("threshold {ratio} is outside (0, 1]"));
            }
            (mode.trim().to_string(), ratio)
        }
        None => (text.clone(), Compression::DEFAULT_MAX_RATIO),
    };
    match mode.as_str() {
        "off" | "0" | "false" | "no" => Ok(Compression::Off),
        "on" | "1" | "true" | "yes" => Ok(Compression::On { max_ratio: ratio }),
        "auto" => Ok(Compression::Auto { max_ratio: ratio }),
        _ => Err("expected `off`, `on`, `auto`, or `on:0.8`-style with a threshold".into()),
    }
}

fn invalid(variable: &'static str, value: &str, reason: &str) -> ConfigError {
    ConfigError::InvalidEnv {
        variable,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

fn parse_switch(variable: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(invalid(
            variable,
            value,
            "expected on/off, 1/0 or true/false",
        )),
    }
}

fn check_fraction(fraction: f64) -> Result<(), ConfigError> {
    if fraction.is_finite() && fraction > 0.0 && fraction <= 1.0 {
        Ok(())
    } else {
        Err(ConfigError::FractionOutOfRange(fraction))
    }
}

/// Parses a budget: a byte count with an optional unit, or a fraction of device memory.
///
/// A number with a decimal point and no unit (`0.4`) or a percentage (`40%`) is a fraction;
/// an integer without unit is bytes. Units are case-insensitive: `B`; decimal `KB`, `MB`,
/// `GB`, `TB`; binary `KiB`, `MiB`, `GiB`, `TiB`, and `K`, `M`, `G`, `T` as binary too.
pub fn parse_budget(text: &str) -> Result<Budget, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(
            "empty value; expected bytes such as `512MiB` or a fraction such as `0.4`".into(),
        );
    }
    if let Some(percent) = text.strip_suffix('%') {
        let value: f64 = percent
            .trim()
            .parse()
            .map_err(|_| format!("`{percent}` is not a number"))?;
        let fraction = value / 100.0;
        check_fraction(fraction).map_err(|e| e.to_string())?;
        return Ok(Budget::DeviceFraction(fraction));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number = number.replace('_', "");
    let unit = unit.trim().to_ascii_lowercase();
    if unit.is_empty() && number.contains('.') {
        let fraction: f64 = number
            .parse()
            .map_err(|_| format!("`{number}` is not a number"))?;
        check_fraction(fraction).map_err(|e| e.to_string())?;
        return Ok(Budget::DeviceFraction(fraction));
    }
    let multiplier: u64 = match unit.as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown unit `{other}`; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{number}` is not a number"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("`{number}` is not a size"));
    }
    let bytes = value * multiplier as f64;
    if bytes < 1.0 {
        return Err("a budget of 0 bytes can hold no tensor".into());
    }
    if bytes > u64::MAX as f64 {
        return Err("too large".into());
    }
    Ok(Budget::Bytes(bytes as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bytes_with_units() {
        assert_eq!(parse_budget("1000"), Ok(Budget::Bytes(1000)));
        assert_eq!(parse_budget("512MiB"), Ok(Budget::Bytes(512 << 20)));
        assert_eq!(parse_budget(" 12 GiB "), Ok(Budget::Bytes(12 << 30)));
        assert_eq!(parse_budget("1.5GB"), Ok(Budget::Bytes(1_500_000_000)));
        assert_eq!(parse_budget("64k"), Ok(Budget::Bytes(64 << 10)));
        assert_eq!(parse_budget("2_048b"), Ok(Budget::Bytes(2048)));
    }

    #[test]
    fn parses_fractions() {
        assert_eq!(parse_budget("0.4"), Ok(Budget::DeviceFraction(0.4)));
        assert_eq!(parse_budget("40%"), Ok(Budget::DeviceFraction(0.4)));
        assert_eq!(parse_budget("1.0"), Ok(Budget::DeviceFraction(1.0)));
    }

    #[test]
    fn rejects_malformed_budgets() {
        for bad in [
            "", "abc", "12XB", "1.5.3", "0", "0.0", "1.5", "150%", "-3", "GiB", "nan",
        ] {
            assert!(parse_budget(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn env_errors_name_variable_and_value() {
        let err = SwapConfig::default()
            .with_vars(|name| (name == "BURN_SWAP_BUDGET").then(|| "12GX".to_string()))
            .unwrap_err();
        match &err {
            ConfigError::InvalidEnv {
                variable, value, ..
            } => {
                assert_eq!(*variable, "BURN_SWAP_BUDGET");
                assert_eq!(value, "12GX");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("BURN_SWAP_BUDGET"));
        assert!(err.to_string().contains("12GX"));

        for (var, value) in [
            ("BURN_SWAP", "maybe"),
            ("BURN_SWAP_POLICY", "greedy"),
            ("BURN_SWAP_EVICTION", "random"),
            ("BURN_SWAP_TRACE", "2"),
            ("BURN_SWAP_COMPRESS", "maybe"),
            ("BURN_SWAP_COMPRESS", "on:1.5"),
            ("BURN_SWAP_COMPRESS", "on:x"),
            ("BURN_SWAP_JITTER", "-5"),
            ("BURN_SWAP_PEERS", "256MiB"),
            ("BURN_SWAP_PEERS", "0@50GB/s"),
            ("BURN_SWAP_PEERS", "256MiB@fast"),
            ("BURN_SWAP_PEERS", "256MiB@50XB/s"),
            ("BURN_SWAP_PEERS", "0.5@50GB/s"),
            ("BURN_SWAP_JITTER", "300us"),
        ] {
            let err = SwapConfig::default()
                .with_vars(|name| (name == var).then(|| value.to_string()))
                .unwrap_err();
            assert!(
                matches!(&err, ConfigError::InvalidEnv { variable, value: v, .. } if *variable == var && v == value),
                "{var}={value}: {err:?}"
            );
        }
    }

    #[test]
    fn env_overrides_fields() {
        let config = SwapConfig::default()
            .with_vars(|name| match name {
                "BURN_SWAP" => Some("off".into()),
                "BURN_SWAP_BUDGET" => Some("256MiB".into()),
                "BURN_SWAP_EVICTION" => Some("LRU".into()),
                "BURN_SWAP_POLICY" => Some("Offload_Only".into()),
                "BURN_SWAP_COMPRESS" => Some("auto:0.5".into()),
                "BURN_SWAP_TRACE" => Some("0".into()),
                "BURN_SWAP_JITTER" => Some(" 250 ".into()),
                "BURN_SWAP_PEERS" => Some("256MiB@50GB/s, 1GiB@12.5GiB".into()),
                _ => None,
            })
            .unwrap();
        assert!(!config.enabled);
        assert_eq!(config.budget, Budget::Bytes(256 << 20));
        assert_eq!(config.eviction, EvictionScore::Lru);
        assert_eq!(config.policy, Policy::OffloadOnly);
        assert_eq!(config.compression, Compression::Auto { max_ratio: 0.5 });
        assert_eq!(config.transfer_jitter_micros, 250);
        assert_eq!(
            config.peers,
            vec![
                PeerSpec::simulated("peer0", 256 << 20, 50e9),
                PeerSpec::simulated("peer1", 1 << 30, 12.5 * (1u64 << 30) as f64),
            ]
        );
        assert_eq!(parse_peers("off"), Ok(vec![]));
        assert_eq!(
            parse_peers("cuda:1@8GiB, cuda:0@1G"),
            Ok(vec![PeerSpec::cuda(1, 8 << 30), PeerSpec::cuda(0, 1 << 30)])
        );
        assert!(parse_peers("cuda:x@8GiB").is_err());
        assert_eq!(
            parse_peers("device:2@1MiB"),
            Ok(vec![PeerSpec::device(2, 1 << 20)])
        );
        assert_eq!(
            parse_compression("ON"),
            Ok(Compression::On { max_ratio: 0.8 })
        );
        assert_eq!(parse_compression("off"), Ok(Compression::Off));
        assert_eq!(
            SwapConfig::default()
                .with_compression(Compression::On { max_ratio: 0.0 })
                .validate(),
            Err(ConfigError::CompressionRatio(0.0))
        );
        assert!(!config.trace);
        for policy in Policy::ALL {
            assert_eq!(policy.name().parse(), Ok(policy));
        }
    }

    #[test]
    fn fraction_needs_known_device_memory() {
        let budget = Budget::DeviceFraction(0.25);
        assert_eq!(budget.resolve(Some(1000), "x"), Ok(Some(250)));
        assert!(matches!(
            budget.resolve(None, "flex"),
            Err(ConfigError::DeviceMemoryUnknown { .. })
        ));
        assert_eq!(
            Budget::Bytes(0).resolve(None, "x"),
            Err(ConfigError::ZeroBudget)
        );
        assert_eq!(
            SwapConfig::budget_fraction(1.5).validate(),
            Err(ConfigError::FractionOutOfRange(1.5))
        );
    }
}
