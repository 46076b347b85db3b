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
//! | `BURN_SWAP_PLANNER` | `cheapest`, `combined`, `checkpoints`, `segments` | `cheapest` |
//! | `BURN_SWAP_EVICTION` | `dtr`, `lru`, `largest` | `dtr` |
//! | `BURN_SWAP_TRACE` | `on`, `off` | `on` |
//! | `BURN_SWAP_COMPRESS` | `off`, `on`, `auto`, `on:0.7` (size threshold) | `off` |
//! | `BURN_SWAP_PEERS` | peers, comma-separated: simulated `capacity@bandwidth` (`256MiB@50GB/s`), or devices `cuda:N@capacity` / `device:N@capacity`; or `off` | none |
//! | `BURN_SWAP_HOST_BUDGET` | bytes (`8GiB`, as the budget's bytes), or `unlimited` (`off`) | unlimited |
//! | `BURN_SWAP_JITTER` | microseconds (`0`, `300`): each transfer finishes up to this late, a stress test for ordering | `0` |
//!
//! A malformed value is a [`ConfigError::InvalidEnv`] naming the variable and the value; it is
//! never replaced by a default.

use crate::error::{ConfigError, ParseError};
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

/// The configuration of burn-swap for one device, built by its constructors and `with_*`
/// methods (or read from the `BURN_SWAP*` environment); the values are checked when it is
/// applied ([`crate::configure`]), which refuses a bad one with a typed error.
///
/// ```
/// use burn_swap::{SwapConfig, EvictionScore};
/// let config = SwapConfig::budget_bytes(512 << 20).with_eviction(EvictionScore::Lru);
/// assert!(config.enabled());
/// assert_eq!(config.eviction(), EvictionScore::Lru);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwapConfig {
    /// When false, operations go straight to the inner backend: no trace, no budget; bytes
    /// are still counted.
    pub(crate) enabled: bool,
    /// The memory budget.
    pub(crate) budget: Budget,
    /// The policy that keeps the budget.
    pub(crate) policy: Policy,
    /// How the reactive policy chooses what to offload.
    pub(crate) eviction: EvictionScore,
    /// Whether to record the op trace (needed for [`crate::trace`] and the iteration report).
    pub(crate) trace: bool,
    /// Zero-value compression of offloaded tensors.
    pub(crate) compression: Compression,
    /// A stress test for ordering, off at 0: each transfer worker holds every finished
    /// transfer for a pseudo-random time of up to this many microseconds before reporting
    /// it, so that completions reach compute in every order and at every distance from the
    /// ops that need them. Training must stay bit-identical (`tests/reliability/stress.rs`).
    #[serde(default)]
    pub(crate) transfer_jitter_micros: u64,
    /// Peer devices that take offloaded tensors: split across them by link
    /// bandwidth within their free memory, with host memory as the fallback. Empty: host
    /// only. See [`PeerSpec`].
    #[serde(default)]
    pub(crate) peers: Vec<PeerSpec>,
    /// The most bytes offloaded tensors may occupy in host memory (raw or compressed; peers'
    /// pieces are the peers'): an offload that would go past it is not made (the tensor
    /// stays, or leaves by recomputation), and an op that finds no other way to make room
    /// fails with [`crate::SwapError::HostFull`]. `None`: unlimited.
    #[serde(default)]
    pub(crate) host_budget: Option<u64>,
    /// Whether plans are made on a planner thread while the ops go on under the reactive
    /// fallback (the default), or on the op's thread at the end of the iteration profiled
    /// (the op waits; the plan is followed from the next iteration, every run alike).
    #[serde(default = "yes")]
    pub(crate) background_planning: bool,
    /// Whether [`Policy::Planned`] follows a plan only while it pays against the reactive
    /// fallback measured on its schedule (see [`SwapConfig::with_plans_judged`]).
    #[serde(default = "yes")]
    pub(crate) plans_judged: bool,
    /// Whose plan a planned policy follows: the cheapest that fits, or one planner's.
    #[serde(default)]
    pub(crate) planner: Planner,
}

fn yes() -> bool {
    true
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
            host_budget: None,
            background_planning: true,
            plans_judged: true,
            planner: Planner::Cheapest,
        }
    }
}

impl SwapConfig {
    /// Whether burn-swap is on (else ops go straight to the inner backend; bytes are still
    /// counted).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The memory budget.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// The bound on offloaded bytes in host memory (`None`: unlimited).
    pub fn host_budget(&self) -> Option<u64> {
        self.host_budget
    }

    /// The policy that keeps the budget.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Whose plan a planned policy follows.
    pub fn planner(&self) -> Planner {
        self.planner
    }

    /// How the reactive policy chooses what to offload.
    pub fn eviction(&self) -> EvictionScore {
        self.eviction
    }

    /// Whether the op trace is recorded.
    pub fn trace(&self) -> bool {
        self.trace
    }

    /// Zero-value compression of offloaded tensors.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The ordering stress test's maximum delay per transfer, in microseconds (0: off).
    pub fn transfer_jitter_micros(&self) -> u64 {
        self.transfer_jitter_micros
    }

    /// Whether plans are made on a planner thread of their own (see
    /// [`SwapConfig::with_background_planning`]).
    pub fn background_planning(&self) -> bool {
        self.background_planning
    }

    /// Whether the planned policy follows a plan only while it pays (see
    /// [`SwapConfig::with_plans_judged`]).
    pub fn plans_judged(&self) -> bool {
        self.plans_judged
    }

    /// The peers offloads go to (empty: host memory only).
    pub fn peers(&self) -> &[PeerSpec] {
        &self.peers
    }

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

    /// Makes plans on a planner thread while the ops go on under the reactive fallback
    /// (`true`, the default: the op's thread never waits for a plan, which takes over at the
    /// first iteration end after it is ready), or on the op's thread at the end of the
    /// iteration it is made from (`false`: the op waits, and every run follows the plan from
    /// the same iteration on, which tests and measurements of a plan's effect want).
    pub fn with_background_planning(mut self, background: bool) -> Self {
        self.background_planning = background;
        self
    }

    /// Under [`Policy::Planned`], follows a plan only while it pays (`true`, the default): a
    /// plan whose cost per iteration beyond the ops (transfers it leaves exposed,
    /// recomputation it adds), predicted when it is ready and measured over its first full
    /// iterations, is more than the reactive fallback was measured to cost on the same
    /// schedule (plus a hundredth of an iteration) is declined, and that schedule stays on
    /// the fallback (the report's `plan.declines` says so). `false`
    /// follows every plan, as [`Policy::OffloadOnly`] and [`Policy::RecomputeOnly`] always
    /// do: what tests and measurements of a plan's own effect want.
    pub fn with_plans_judged(mut self, judged: bool) -> Self {
        self.plans_judged = judged;
        self
    }

    /// Replaces the policy.
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Follows one planner's plan only ([`Planner::Cheapest`], the default: the cheapest of
    /// all that fits). A planner the policy rules out (the segment plan offloads, so it has
    /// no place under [`Policy::RecomputeOnly`]; the checkpoints recompute, none under
    /// [`Policy::OffloadOnly`]) is refused when the configuration is applied.
    pub fn with_planner(mut self, planner: Planner) -> Self {
        self.planner = planner;
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

    /// Bounds the bytes offloaded tensors occupy in host memory (see
    /// [`SwapConfig::host_budget`]); 0 is refused by [`crate::configure`].
    pub fn with_host_budget(mut self, bytes: u64) -> Self {
        self.host_budget = Some(bytes);
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
            self.budget = parse_budget(&value)
                .map_err(|reason| invalid("BURN_SWAP_BUDGET", &value, &reason.to_string()))?;
        }
        if let Some(value) = lookup("BURN_SWAP_POLICY") {
            self.policy = value.parse().map_err(|_: ParseError| {
                invalid(
                    "BURN_SWAP_POLICY",
                    &value,
                    "expected one of `reactive`, `planned`, `offload-only`, `recompute-only`",
                )
            })?;
        }
        if let Some(value) = lookup("BURN_SWAP_PLANNER") {
            self.planner = value.parse().map_err(|_: ParseError| {
                invalid(
                    "BURN_SWAP_PLANNER",
                    &value,
                    "expected one of `cheapest`, `combined`, `checkpoints`, `segments`",
                )
            })?;
        }
        if let Some(value) = lookup("BURN_SWAP_EVICTION") {
            self.eviction = value.parse().map_err(|_: ParseError| {
                invalid(
                    "BURN_SWAP_EVICTION",
                    &value,
                    "expected one of `dtr`, `lru`, `largest`",
                )
            })?;
        }
        if let Some(value) = lookup("BURN_SWAP_COMPRESS") {
            self.compression = parse_compression(&value)
                .map_err(|reason| invalid("BURN_SWAP_COMPRESS", &value, &reason.to_string()))?;
        }
        if let Some(value) = lookup("BURN_SWAP_TRACE") {
            self.trace = parse_switch("BURN_SWAP_TRACE", &value)?;
        }
        if let Some(value) = lookup("BURN_SWAP_PEERS") {
            self.peers = parse_peers(&value)
                .map_err(|reason| invalid("BURN_SWAP_PEERS", &value, &reason.to_string()))?;
        }
        if let Some(value) = lookup("BURN_SWAP_HOST_BUDGET") {
            let unlimited = ["unlimited", "off", "none"]
                .iter()
                .any(|w| value.trim().eq_ignore_ascii_case(w));
            self.host_budget = match parse_budget(&value) {
                _ if unlimited => None,
                Ok(Budget::Bytes(bytes)) => Some(bytes),
                Ok(Budget::Unlimited) => None,
                Ok(Budget::DeviceFraction(_)) => {
                    return Err(invalid(
                        "BURN_SWAP_HOST_BUDGET",
                        &value,
                        "a host budget is bytes (`8GiB`), not a fraction",
                    ));
                }
                Err(reason) => {
                    return Err(invalid(
                        "BURN_SWAP_HOST_BUDGET",
                        &value,
                        &reason.to_string(),
                    ));
                }
            };
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
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
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
        if self.host_budget == Some(0) {
            return Err(ConfigError::ZeroHostBudget);
        }
        let ruled_out = match self.planner {
            Planner::Segments => self.policy == Policy::RecomputeOnly,
            Planner::Checkpoints => self.policy == Policy::OffloadOnly,
            _ => false,
        };
        if ruled_out {
            return Err(ConfigError::PlannerOutsidePolicy {
                planner: self.planner.name(),
                policy: self.policy.name(),
            });
        }
        match self.budget {
            Budget::Bytes(0) => Err(ConfigError::ZeroBudget),
            Budget::DeviceFraction(f) => check_fraction(f),
            _ => Ok(()),
        }
    }
}

mod choices;
mod parse;

pub use choices::{Compression, EvictionScore, Planner, Policy};

use parse::{check_fraction, invalid, parse_budget, parse_compression, parse_peers, parse_switch};

#[cfg(test)]
mod tests;
