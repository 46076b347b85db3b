//! # burn-swap
//!
//! Train Burn models that do not fit in device memory by changing one type:
//!
//! ```ignore
//! type Backend = burn::backend::Autodiff<burn_swap::Swap<burn::backend::Flex>>;
//! burn_swap::configure(&device, burn_swap::SwapConfig::budget_bytes(512 << 20))?;
//! // ... the training loop is unchanged ...
//! println!("{}", burn_swap::report(&device).unwrap());
//! ```
//!
//! [`Swap<B>`] is Burn's router backend over a channel of ours: every tensor op of the model,
//! forward and backward, reaches burn-swap as an `OperationIr` with its inputs' statuses and
//! explicit drops, and runs at once on the inner backend `B`. On the way, burn-swap
//!
//! 1. **intercepts** it (the op traits of [`Swap`]),
//! 2. **traces** it: per tensor its producer, accesses and end of life, per op its kind and
//!    time, and the training loop's period ([`trace`](mod@trace)),
//! 3. **plans** what to move when the budget binds (the planners, pure functions of the
//!    trace: [`unstable::plan`]), and
//! 4. **executes** that: offload to host memory (or peers) and fetch back, or drop and
//!    recompute, so that the bytes resident on the device never exceed the budget.
//!
//! Values never change: offload and fetch move bytes, bit for bit.
//!
//! # The API
//!
//! The backend type [`Swap`]; its configuration [`SwapConfig`] (given to [`configure`], or
//! read from the `BURN_SWAP*` environment); what happened, [`report`] ([`Report`]) and
//! [`memory`] ([`Memory`]), restarted by [`reset_counters`]; the [`trace()`] of the last
//! iteration (restarted by [`restart_trace`]); the errors [`SwapError`] and
//! [`ConfigError`]. Everything else (planners, the codec, kernels, test fixtures) is under
//! [`unstable`], without a stability promise.
#![warn(missing_docs)]
#![deny(unsafe_code)]

mod backend;
mod codec;
mod config;
mod error;
mod exec;
#[allow(unsafe_code)]
mod gpu;
mod plan;
mod report;
mod rng;
pub mod trace;
pub mod unstable;

/// burn-swap over Burn's CUDA backend: the backend types by name.
#[cfg(feature = "cuda")]
pub mod cuda {
    pub use crate::backend::cuda::{AutodiffSwapCuda, SwapCuda};
}

use backend::registry::{self, DeviceKey};
use burn_backend::backend::DeviceOps;

pub use backend::{Swap, SwapQTensor};
pub use config::{Budget, Compression, EvictionScore, PeerSpec, Planner, Policy, SwapConfig};
pub use error::{ConfigError, ParseError, SwapError};
pub use report::{
    AllocatorUsage, CompressionReport, CompressionStat, Declines, DeviceReport, ExposedWait,
    FallbackRoom, LayerTime, Memory, MemoryReport, PeerStat, PlanChoice, PlanDecline, PlanReport,
    PlanTakeover, Report, ReservedOver, StreamRole, StreamUsage, TransferReport, WorkloadReport,
};
pub use trace::Trace;

/// Sets the configuration of a device, for every inner backend used on it under [`Swap`].
///
/// Takes effect at once when the device is already in use: a budget below what is resident
/// offloads at once, so the budget holds from this call on. Otherwise it takes effect when
/// the device is first used (the environment is then not read). All or nothing: a refused
/// configuration (a typed error: a bad value, a budget the backend cannot resolve, or a
/// budget below what cannot leave the device) leaves the one in force. Errors that need the
/// backend are returned here when the device is in use; for a device not used yet they
/// surface when it is first used, as a panic carrying the [`SwapError`].
pub fn configure<D: DeviceOps + 'static>(device: &D, config: SwapConfig) -> Result<(), SwapError> {
    config.validate()?;
    let key = DeviceKey::of(device);
    for control in registry::all(key) {
        control.configure(config.clone())?;
    }
    registry::set_config(key, config);
    Ok(())
}

/// What burn-swap did on a device, or `None` if the device was never used under [`Swap`].
/// With several inner backends on one device, the first one's; [`Swap::report`] names one.
pub fn report<D: DeviceOps + 'static>(device: &D) -> Option<Report> {
    registry::first(DeviceKey::of(device)).map(|c| c.report())
}

/// The counted bytes of a device, or `None` if it was never used under [`Swap`]. With
/// several inner backends on one device, the first one's; [`Swap::memory`] names one.
pub fn memory<D: DeviceOps + 'static>(device: &D) -> Option<Memory> {
    registry::first(DeviceKey::of(device)).map(|c| c.memory())
}

/// Starts a new measurement on a device: peaks restart from the current values, counts of
/// offloads and fetches from zero.
pub fn reset_counters<D: DeviceOps + 'static>(device: &D) {
    for control in registry::all(DeviceKey::of(device)) {
        control.reset_counters();
    }
}

/// The trace of the last complete training iteration on a device: `None` before the loop's
/// period was detected (two iterations are needed), when tracing is off, or if the device
/// was never used under [`Swap`]. While no budget is set, once the loop's period holds, the
/// recorder keeps the tensors of two iterations in sixteen only (the others have the same
/// ops on the same shapes, their signatures checked): the trace is then of one of the last
/// few iterations, with its own number. Any budget records every iteration in full.
pub fn trace<D: DeviceOps + 'static>(device: &D) -> Option<Trace> {
    registry::first(DeviceKey::of(device)).and_then(|c| c.trace())
}

/// Forgets the ops recorded so far on a device and starts a new trace (for instance when a
/// program moves from evaluation to training), with the plans made from them: the plans kept
/// for schedules seen before, and what the fallback and the plans were measured to cost.
/// Counters are not touched.
pub fn restart_trace<D: DeviceOps + 'static>(device: &D) {
    for control in registry::all(DeviceKey::of(device)) {
        control.restart_trace();
    }
}
