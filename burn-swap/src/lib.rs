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
//! 1. **intercepts** it ([`backend`]),
//! 2. **traces** it: per tensor its producer, accesses and end of life, per op its kind and
//!    time, and the training loop's period ([`trace`](mod@trace)),
//! 3. **plans** what to move when the budget binds ([`plan`]), and
//! 4. **executes** that: offload to host memory and fetch back, so that the bytes resident on
//!    the device never exceed the budget ([`exec`](crate::exec)).
//!
//! Values never change: offload and fetch move bytes, bit for bit.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod backend;
pub mod compress;
pub mod config;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod error;
pub(crate) mod exec;
#[allow(unsafe_code)]
pub mod gpu;
pub mod plan;
pub mod report;
pub mod trace;

use burn_backend::backend::DeviceOps;

pub use backend::{Swap, SwapBridge, SwapChannel, SwapClient};
pub use config::{Budget, Compression, EvictionScore, PeerSpec, Policy, SwapConfig};
pub use error::{ConfigError, SwapError};
pub use report::{AllocatorUsage, PeerStat, Report};
pub use trace::Trace;

/// Burn's CubeCL backend over CubeCL's wgpu runtime (no fusion, no autotune): what CI runs
/// the CubeCL fast path on, with a software Vulkan driver.
#[cfg(feature = "wgpu")]
pub type CubeWgpu = burn_cubecl::CubeBackend<cubecl::wgpu::WgpuRuntime, f32, i32, u32>;

/// The inner backend's allocator figures for `device`, as seen from the calling thread's
/// stream, for backends that have them (Burn's CubeCL backends: CUDA with the `cuda`
/// feature, wgpu with `wgpu`); `None` otherwise. For a run of the plain backend on one
/// thread this is the whole device; under [`Swap`], [`Report::allocator`] adds up every
/// stream burn-swap uses.
pub fn allocator_usage<B: burn_backend::Backend>(device: &B::Device) -> Option<AllocatorUsage> {
    exec::allocator_usage::<B>(device)
}

/// Asks the inner backend's allocator to give its free pages back (CubeCL backends), so that
/// its reserved figure starts again from what is live: call it between runs that are
/// compared.
pub fn allocator_cleanup<B: burn_backend::Backend>(device: &B::Device) {
    exec::allocator_cleanup::<B>(device)
}

/// Sets the configuration of a device.
///
/// Takes effect at once when the device is already in use under [`Swap`]: a budget below what
/// is resident offloads at once, so the budget holds from this call on. Otherwise it takes
/// effect when the device is first used (the environment is then not read). Errors that need
/// the backend (a budget as a fraction of device memory on a backend that cannot tell it) are
/// returned here when the device is in use; for a device not used yet they surface when it is
/// first used, as a panic with the same message. A refused configuration leaves the one in
/// force.
pub fn configure<D: DeviceOps>(device: &D, config: SwapConfig) -> Result<(), SwapError> {
    config.validate()?;
    match backend::registry::get(device.id()) {
        Some(control) => control.configure(config),
        None => {
            backend::registry::set_pending(device.id(), config);
            Ok(())
        }
    }
}

/// What burn-swap did on a device, or `None` if the device was never used under [`Swap`].
pub fn report<D: DeviceOps>(device: &D) -> Option<Report> {
    backend::registry::get(device.id()).map(|c| c.report())
}

/// Counted bytes of a device right now: cheap enough to call every step (unlike [`report`],
/// which also analyses the trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Memory {
    /// Bytes resident on the device.
    pub resident_bytes: u64,
    /// Highest resident bytes since the last [`reset_counters`].
    pub peak_bytes: u64,
    /// Bytes offloaded to host memory.
    pub host_bytes: u64,
    /// The budget in force, `None` when unlimited.
    pub budget_bytes: Option<u64>,
}

/// The counted bytes of a device, or `None` if it was never used under [`Swap`].
pub fn memory<D: DeviceOps>(device: &D) -> Option<Memory> {
    backend::registry::get(device.id()).map(|c| c.memory())
}

/// Starts a new measurement on a device: peaks restart from the current values, counts of
/// offloads and fetches from zero.
pub fn reset_counters<D: DeviceOps>(device: &D) {
    if let Some(control) = backend::registry::get(device.id()) {
        control.reset_counters();
    }
}

/// The trace of the last complete training iteration on a device: `None` before the loop's
/// period was detected (two iterations are needed), when tracing is off, or if the device
/// was never used under [`Swap`].
pub fn trace<D: DeviceOps>(device: &D) -> Option<Trace> {
    backend::registry::get(device.id()).and_then(|c| c.trace())
}

/// Forgets the ops recorded so far on a device and starts a new trace (for instance when a
/// program moves from evaluation to training). Counters are not touched.
pub fn restart_trace<D: DeviceOps>(device: &D) {
    if let Some(control) = backend::registry::get(device.id()) {
        control.restart_trace();
    }
}

/// The profile of the last complete training iteration (seed 004's trial run): per op its
/// time and bytes, and the copy throughput between the device and host memory, measured on
/// the first call with a few temporary tensors that fit in the budget's headroom. `None`
/// before the loop's period was detected.
pub fn profile<D: DeviceOps>(device: &D) -> Option<plan::profile::Profile> {
    backend::registry::get(device.id()).and_then(|c| c.profile())
}

/// Measures burn-swap's own transfers on a device used under [`Swap`]: round trips of
/// temporary `f32` tensors of each size in `sizes` (bytes) through the send and receive
/// workers (the path planned offloads and prefetches take, on their own streams on CubeCL
/// backends), the fastest of three per size, each fetch timed until its bytes are on the
/// device. Outside the budget: the caller makes sure they fit. `None` when the device was
/// never used under [`Swap`] or a transfer failed.
pub fn measure_transfers<D: DeviceOps>(device: &D, sizes: &[u64]) -> Option<plan::profile::Links> {
    backend::registry::get(device.id()).and_then(|c| c.measure_transfers(sizes))
}

/// The trace of every op still kept in the device's window (the last iterations), without
/// cutting it into iterations: for graphs that do not repeat, and for inspection.
pub fn trace_window<D: DeviceOps>(device: &D) -> Option<Trace> {
    backend::registry::get(device.id()).map(|c| c.trace_window())
}
