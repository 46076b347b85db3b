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
    /// A host budget of zero bytes can hold no offloaded tensor.
    #[error(
        "a host budget of 0 bytes can hold no offloaded tensor; leave it unlimited or give the bytes offloads may occupy (BURN_SWAP_HOST_BUDGET)"
    )]
    ZeroHostBudget,
    /// A planner whose plans the policy rules out (it would never plan).
    #[error(
        "the {planner} planner makes no plan under the {policy} policy (the segment plan offloads, the checkpoints recompute); name another planner or policy"
    )]
    PlannerOutsidePolicy {
        /// The planner named.
        planner: &'static str,
        /// The policy named.
        policy: &'static str,
    },
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

/// A value that could not be parsed (a budget, a compression mode, a peer list, a policy):
/// the reason, as a sentence that names the offending text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct ParseError(String);

impl From<String> for ParseError {
    fn from(reason: String) -> Self {
        Self(reason)
    }
}

impl From<&str> for ParseError {
    fn from(reason: &str) -> Self {
        Self(reason.to_string())
    }
}

/// An error met while running operations under a budget.
///
/// Burn's tensor API cannot return errors, so an error met inside an op stops the op with a
/// panic whose payload is this value itself (`std::panic::panic_any`): a caller can
/// `catch_unwind` and `downcast_ref::<SwapError>()` it, and match on the variant. Its
/// `Display` is a sentence for a person; burn-swap's panic hook prints it.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
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
    /// The operation fits the budget on its own, but not enough of what else is resident
    /// could leave the device to make room for it.
    #[error(
        "burn-swap: no room for operation {op}: it needs {needed} more bytes resident, the budget is \
         {budget} bytes and {resident} are resident, of which {pinned} cannot leave (the operation's \
         own tensors and what it pins); the smallest budget that would have worked here is \
         {minimum_budget} bytes (BURN_SWAP_BUDGET)"
    )]
    NoRoom {
        /// The operation (`Family.Op`), or what needed the room (`FromData`, `Configure`).
        op: String,
        /// Bytes that had to become free.
        needed: u64,
        /// The budget in force.
        budget: u64,
        /// Bytes resident when room was asked for.
        resident: u64,
        /// Resident bytes that could not leave: the op's inputs, tensors it pins or is
        /// bringing back, and tensors that can neither be offloaded nor recomputed.
        pinned: u64,
        /// The smallest budget under which this room could have been made: the bytes that
        /// could not leave plus the bytes asked for.
        minimum_budget: u64,
    },
    /// The device needs room and the host has none left: the tensor chosen to leave would
    /// take host memory past the host budget, and nothing else could leave. It stays
    /// resident, intact.
    #[error(
        "burn-swap: no room on the device (budget {budget} bytes, {resident} resident) and none on \
         the host for an offload of tensor {tensor} ({bytes} bytes): the host holds {host} of its \
         {host_budget}-byte budget; raise BURN_SWAP_HOST_BUDGET or BURN_SWAP_BUDGET"
    )]
    HostFull {
        /// The tensor that could not leave.
        tensor: u64,
        /// Its bytes.
        bytes: u64,
        /// Bytes of offloaded tensors in host memory.
        host: u64,
        /// The host budget in force.
        host_budget: u64,
        /// The device budget in force.
        budget: u64,
        /// Bytes resident on the device.
        resident: u64,
    },
    /// Copying a tensor off the device failed; it stays resident, intact.
    #[error(
        "burn-swap: offload of tensor {tensor} ({bytes} bytes) failed: {reason}; it stays on the device"
    )]
    OffloadFailed {
        /// The tensor id.
        tensor: u64,
        /// Its size.
        bytes: u64,
        /// What failed.
        reason: String,
    },
    /// Bringing a tensor back to the device failed.
    #[error("burn-swap: fetch of tensor {tensor} ({bytes} bytes) failed: {reason}")]
    FetchFailed {
        /// The tensor id.
        tensor: u64,
        /// Its size.
        bytes: u64,
        /// What failed.
        reason: String,
    },
    /// A tensor's bytes are gone: neither on the device, nor off it, nor recomputable.
    #[error("burn-swap: tensor {tensor} ({bytes} bytes) is lost: {reason}")]
    TensorLost {
        /// The tensor id.
        tensor: u64,
        /// Its size.
        bytes: u64,
        /// How it was lost.
        reason: String,
    },
    /// The inner backend panicked inside an operation (a bug of its own, an input it
    /// refuses): the handles the operation had taken went with the panic, so the device's
    /// tensors no longer match burn-swap's books and no operation can run on it any more.
    /// Every later operation on the device fails with this error (instead of a panic about a
    /// missing handle, or the process aborting when a tensor is dropped while that panic
    /// unwinds); dropping a tensor does nothing.
    #[error(
        "burn-swap: the inner backend panicked in an earlier operation on this device ({message}); \
         the handles that operation had taken are gone, so no operation can run on it any more \
         and its tensors are lost: restart the process"
    )]
    InnerBackendPanicked {
        /// The inner backend's panic message, when it had one.
        message: String,
    },
    /// A typed call named an inner backend that never ran on the device.
    #[error("burn-swap: backend {backend} was never used under Swap on this device")]
    NotInUse {
        /// The inner backend's name.
        backend: String,
    },
    /// The configuration could not be applied.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl SwapError {
    /// The same error, naming what needed the room when it was not named yet (no effect on
    /// the variants without an op).
    pub(crate) fn for_op(mut self, name: impl FnOnce() -> String) -> Self {
        if let SwapError::NoRoom { op, .. } | SwapError::OpExceedsBudget { op, .. } = &mut self
            && op.is_empty()
        {
            *op = name();
        }
        self
    }
}
