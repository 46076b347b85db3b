//! Internals exposed for the suite, the benches and experiments: the planners, the codec and
//! its kernels, test fixtures, and measurements. No stability promise: anything here may
//! change in any release. A model needs none of it.

use burn_backend::backend::DeviceOps;

use crate::backend::registry::{self, DeviceKey};

pub use crate::backend::{SwapBridge, SwapChannel, SwapClient};
pub use crate::report::format_bytes;
/// The crate's reproducible pseudo-random bits (the planner's, the stress tests'), for the
/// harness's own draws.
pub use crate::rng::SplitMix64;

/// The planners: pure functions of a trace (see the book's *Planners* chapter).
pub mod plan {
    pub use crate::plan::{
        advisor, build, checkpoint, combine, compile, compression, payoff, profile, program,
        reactive, segments, simulate, views, waits,
    };
}

/// The zero-value codec on the CPU (the format is documented in `codec::Compressed`).
pub mod codec {
    pub use crate::codec::{
        CodecError, Compressed, compress, compressed_bytes, decompress, width, zero_fraction_sample,
    };
}

/// The zero-value codec on the device: its CubeCL kernels (the same format as [`codec`]).
pub mod kernels {
    pub use crate::codec::kernels::*;
}

/// The unsafe layer: checked kernel arguments and, with the `cuda` feature, the CUDA home
/// (peer copies, the plain pinned copy).
pub mod gpu {
    pub use crate::gpu::*;
}

/// Fault injection at every transfer point (debug builds only; see the book's
/// *Reliability* page): what the reliability tests use to show no failure loses data.
pub mod faults {
    pub use crate::exec::faults::{ENABLED, Hook, clear, force, injected, seed, set_rate};
}

/// Overrides the op thread's measured time to hand a copy to a transfer worker, in the links
/// every engine plans with from now on (`None`: the measured one again): experiments and
/// tests make the planner copy on the op thread (a large hand-over) or on the workers
/// (zero) with it.
pub fn set_handover_seconds(seconds: Option<f64>) {
    let nanos = seconds.map_or(u64::MAX, |s| (s.max(0.0) * 1e9) as u64);
    crate::exec::engine::HANDOVER_OVERRIDE.store(nanos, std::sync::atomic::Ordering::Relaxed);
}

/// Plants a defect for the tests of the cross-stream wait analysis: while `skip` is true,
/// every engine skips the waits the analysis placed before ops that read planned
/// prefetches. Each op still waits for its own inputs, so values stay right; the report's
/// `transfers.unawaited_prefetch_reads` counts the reads that came before their fetch
/// landed (the test's positive control).
pub fn skip_fetch_waits(skip: bool) {
    crate::exec::engine::SKIP_FETCH_WAITS.store(skip, std::sync::atomic::Ordering::Relaxed);
}

/// Pins the copy links every engine plans with from now on, instead of the ones it measured
/// (`None`: the measured ones again): tests make plans that do not depend on how fast the
/// machine happened to copy when the links were measured, or that expect slow links.
pub fn set_links(links: Option<crate::plan::profile::Links>) {
    *crate::exec::engine::PINNED_LINKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = links;
}

/// The period detector: the training loop's period in a stream of op signatures.
pub mod period {
    pub use crate::trace::period::{Periodicity, Stretch, detect, detect_recent, phase};
}

/// Synthetic traces, for planner tests and benches.
pub mod synthetic {
    pub use crate::trace::synthetic::chain;
}

/// Burn's CubeCL backend over CubeCL's wgpu runtime (no fusion, no autotune): what CI runs
/// the CubeCL fast path on, with a software Vulkan driver.
#[cfg(feature = "wgpu")]
pub type CubeWgpu = burn_cubecl::CubeBackend<cubecl::wgpu::WgpuRuntime, f32, i32, u32>;

/// The inner backend's allocator figures for `device`, as seen from the calling thread's
/// stream, for backends that have them (Burn's CubeCL backends: CUDA with the `cuda`
/// feature, wgpu with `wgpu`); `None` otherwise. For a run of the plain backend on one
/// thread this is the whole device; under [`crate::Swap`], [`crate::DeviceReport::allocator`] adds
/// up every stream burn-swap uses.
pub fn allocator_usage<B: burn_backend::Backend>(
    device: &B::Device,
) -> Option<crate::report::AllocatorUsage> {
    crate::exec::allocator_usage::<B>(device)
}

/// Asks the inner backend's allocator to give its free pages back (CubeCL backends), so that
/// its reserved figure starts again from what is live: call it between runs that are
/// compared.
pub fn allocator_cleanup<B: burn_backend::Backend>(device: &B::Device) {
    crate::exec::allocator_cleanup::<B>(device)
}

/// The profile of the last complete training iteration (the trial run): per op its
/// time and bytes, and the copy throughput between the device and host memory, measured on
/// the first call with a few temporary tensors that fit in the budget's headroom. `None`
/// before the loop's period was detected.
pub fn profile<D: DeviceOps + 'static>(device: &D) -> Option<crate::plan::profile::Profile> {
    registry::first(DeviceKey::of(device)).and_then(|c| c.profile())
}

/// Measures burn-swap's own transfers on a device used under [`crate::Swap`]: temporary
/// `f32` tensors of each size in `sizes` (bytes) copied off the device and back on the send
/// worker (the copies planned offloads and prefetches make, on a worker's own stream on
/// CubeCL backends), the fastest of three per size, each write back timed until its bytes
/// are on the device, plus the wake-up of a parked worker. Waited for, outside the budget:
/// the caller makes sure they fit. `None` when the device was never used under
/// [`crate::Swap`] or a transfer failed.
pub fn measure_transfers<D: DeviceOps + 'static>(
    device: &D,
    sizes: &[u64],
) -> Option<crate::plan::profile::Links> {
    registry::first(DeviceKey::of(device)).and_then(|c| c.measure_transfers(sizes))
}

/// Drops the links measured on `device` (after a probe running now has reported): the next
/// plan, or [`profile`], measures them again, beside the ops. For experiments after the
/// machine's load changed, and tests that watch the probe. Nothing when the device was never
/// used under [`crate::Swap`].
pub fn forget_links<D: DeviceOps + 'static>(device: &D) {
    if let Some(control) = registry::first(DeviceKey::of(device)) {
        control.forget_links();
    }
}

/// Makes every tensor resident on `device` now unable to leave it, as a strided view with no
/// op to make it again is: a test fixture for what no budget can move (on Flex every other
/// tensor can leave), for the errors that say so. Nothing when the device was never used
/// under [`crate::Swap`].
pub fn hold_resident<D: DeviceOps + 'static>(device: &D) {
    if let Some(control) = registry::first(DeviceKey::of(device)) {
        control.hold_resident();
    }
}

/// The trace of every op still kept in the device's window (the last iterations), without
/// cutting it into iterations: for graphs that do not repeat, and for inspection. Where
/// iterations were recorded without their tensors (no budget set, see [`crate::trace()`]),
/// the last stretch of ops recorded with them.
pub fn trace_window<D: DeviceOps + 'static>(device: &D) -> Option<crate::trace::Trace> {
    registry::first(DeviceKey::of(device)).map(|c| c.trace_window())
}
