//! Errors of burn-swap: one enum for configuration, one for running under a budget.

use thiserror::Error;

/// A configuration value that burn-swap refused.
///
/// Every variant names the offending source (a builder call or an environment variable) and
/// the value, so that a typo never turns silently into a default.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    /// An environment variable holds a value that does not parse.
    #[error("invalid value {value:?} for environment variable {variable}: {reason}")]
    InvalidEnv {
        /// The variable, e.g. `BURN_SWAP_BUDGET`.
        variable: &'static str,
        /// The value as it was found.
        value: String,
        /// What was expected instead.
        reason: String,
    },
    /// A budget given as a fraction is outside `(0, 1]`.
    #[error("budget fraction {0} is outside (0, 1]")]
    FractionOutOfRange(f64),
    /// A compression size threshold outside `(0, 1]`.
    #[error("compression ratio threshold {0} is outside (0, 1]")]
    CompressionRatio(f64),
    /// A budget of zero bytes can hold no tensor.
    #[error("a budget of 0 bytes can hold no tensor; give at least the working set of one op")]
    ZeroBudget,
    /// A simulated peer without room or without a usable link.
    #[error(
        "peer {name}: a simulated peer needs a capacity above 0 and a finite bandwidth above 0 (got {capacity_bytes} bytes, {bandwidth} B/s)"
    )]
    BadPeer {
        /// The peer's name.
        name: String,
        /// Its capacity.
        capacity_bytes: u64,
        /// Its bandwidth.
        bandwidth: f64,
    },
    /// Simulated peers and CUDA devices given together.
    #[error(
        "peers must be all simulated (capacity@bandwidth) or all CUDA devices (cuda:N@capacity)"
    )]
    MixedPeers,
    /// A budget given as a fraction of device memory, on a backend that cannot tell its
    /// device memory.
    #[error(
        "budget given as fraction {fraction} of device memory, but backend {backend} cannot tell \
         its device memory; give the budget in bytes (e.g. BURN_SWAP_BUDGET=512MiB)"
    )]
    DeviceMemoryUnknown {
        /// The fraction asked for.
        fraction: f64,
        /// The backend's name.
        backend: String,
    },
}

/// An error met while running operations under a budget.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SwapError {
    /// One operation needs more bytes resident at once (its inputs plus its outputs) than the
    /// whole budget. Nothing can be offloaded to make it fit.
    #[error(
        "burn-swap: operation {op} needs {needed} bytes resident at once (its inputs and outputs) \
         but the budget is {budget} bytes; raise the budget (BURN_SWAP_BUDGET) to at least {needed} bytes"
    )]
    OpExceedsBudget {
        /// The operation, as `Family.Op` (e.g. `Float.Matmul`).
        op: String,
        /// Bytes the operation needs resident at once.
        needed: u64,
        /// The budget in force.
        budget: u64,
    },
    /// Reading a tensor back from the device failed during an offload; the tensor is kept
    /// resident.
    #[error("burn-swap: offload of tensor {tensor} ({bytes} bytes) failed: {reason}")]
    TransferFailed {
        /// The tensor id.
        tensor: u64,
        /// Its size.
        bytes: u64,
        /// The backend's message.
        reason: String,
    },
    /// The configuration could not be applied.
    #[error(transparent)]
    Config(#[from] ConfigError),
}
