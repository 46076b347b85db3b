//! What a configuration chooses between: the policy that keeps the budget, the planner,
//! the eviction score and compression, each with its name as the environment and the
//! report's JSON write it.

use serde::{Deserialize, Serialize};

use crate::error::ParseError;

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

    /// Whether tensors may leave by copy (offload) under this policy, so that the links are
    /// worth measuring and costing; [`Policy::RecomputeOnly`] moves nothing by plan.
    pub fn moves_by_copy(self) -> bool {
        self != Policy::RecomputeOnly
    }

    /// Whether the policy follows a plan.
    pub fn planned(self) -> bool {
        self != Policy::Reactive
    }
}

/// The choice among `all` whose name is `value` (trimmed and lowercased by the caller), or
/// an error naming `value` and every choice, in `all`'s order.
fn named<T: Copy>(value: &str, all: &[T], name: fn(T) -> &'static str) -> Result<T, ParseError> {
    all.iter()
        .copied()
        .find(|&c| name(c) == value)
        .ok_or_else(|| {
            let names: Vec<String> = all.iter().map(|&c| format!("`{}`", name(c))).collect();
            format!("`{value}`: expected one of {}", names.join(", ")).into()
        })
}

impl core::fmt::Display for Policy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Policy {
    type Err = ParseError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim().to_ascii_lowercase().replace('_', "-");
        named(&value, &Policy::ALL, Policy::name)
    }
}

/// Which planner's plan a planned policy follows. Every planner's candidate is judged by the
/// simulator (`plan::build`); by default the cheapest that fits is followed, and naming one
/// planner follows its plan alone, or none when it does not fit (the reactive fallback then
/// keeps the budget): what tests and measurements of one mechanism want.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[non_exhaustive]
pub enum Planner {
    /// The cheapest plan that fits, of every planner the policy allows (the default).
    #[default]
    Cheapest,
    /// The combiner's per-tensor mix (offload with prefetch, or recompute; restricted to one
    /// of them under [`Policy::OffloadOnly`] and [`Policy::RecomputeOnly`]).
    Combined,
    /// The checkpoint selection (recompute or swap whole blocks between checkpoints, chosen
    /// by a threshold on the simulated peak).
    Checkpoints,
    /// The segment plan evolved by the genetic algorithm (offloads only).
    Segments,
}

impl Planner {
    /// Every planner choice.
    pub const ALL: [Planner; 4] = [
        Planner::Cheapest,
        Planner::Combined,
        Planner::Checkpoints,
        Planner::Segments,
    ];

    /// The name used in `BURN_SWAP_PLANNER` and in the report's plan choices (`combined`,
    /// `checkpoints`, `segments`; `cheapest` for the default).
    pub fn name(self) -> &'static str {
        match self {
            Planner::Cheapest => "cheapest",
            Planner::Combined => "combined",
            Planner::Checkpoints => "checkpoints",
            Planner::Segments => "segments",
        }
    }
}

impl core::fmt::Display for Planner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Planner {
    type Err = ParseError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim().to_ascii_lowercase();
        named(&value, &Planner::ALL, Planner::name)
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

impl EvictionScore {
    /// Every score.
    pub const ALL: [EvictionScore; 3] = [
        EvictionScore::Dtr,
        EvictionScore::Lru,
        EvictionScore::Largest,
    ];

    /// The name used in `BURN_SWAP_EVICTION` and in the report (`dtr`, `lru`, `largest`).
    pub fn name(self) -> &'static str {
        match self {
            EvictionScore::Dtr => "dtr",
            EvictionScore::Lru => "lru",
            EvictionScore::Largest => "largest",
        }
    }
}

impl core::fmt::Display for EvictionScore {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for EvictionScore {
    type Err = ParseError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim().to_ascii_lowercase();
        named(&value, &EvictionScore::ALL, EvictionScore::name)
    }
}

/// When compression is used.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Compression {
    /// Never.
    Off,
    /// When the compressed form is at most `max_ratio` of the raw bytes (estimated from a
    /// sample of the tensor, then checked on the result: a tensor that would not shrink is
    /// moved raw).
    On {
        /// Largest compressed / raw size accepted, in `(0, 1]`.
        max_ratio: f64,
    },
    /// [`Compression::On`], and only when compressing, moving and decompressing is predicted
    /// faster than moving raw, at the measured link bandwidth and codec throughput.
    Auto {
        /// Largest compressed / raw size accepted, in `(0, 1]`.
        max_ratio: f64,
    },
}

impl Compression {
    /// The default size threshold: compress when it saves at least a fifth.
    pub const DEFAULT_MAX_RATIO: f64 = 0.8;

    /// The name used in `BURN_SWAP_COMPRESS`.
    pub fn name(&self) -> &'static str {
        match self {
            Compression::Off => "off",
            Compression::On { .. } => "on",
            Compression::Auto { .. } => "auto",
        }
    }
}

/// As `BURN_SWAP_COMPRESS` takes it: `off`, `on`, `auto`, with `:ratio` when the threshold is
/// not the default (`on:0.7`); parsing it gives the same value back.
impl core::fmt::Display for Compression {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Compression::On { max_ratio } | Compression::Auto { max_ratio }
                if max_ratio != Compression::DEFAULT_MAX_RATIO =>
            {
                write!(f, "{}:{max_ratio}", self.name())
            }
            _ => f.write_str(self.name()),
        }
    }
}
