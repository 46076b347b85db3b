//! Shared pieces of burn-swap's examples, integration tests and benches: small models on
//! synthetic data made here (nothing is downloaded), and one training loop generic over the
//! backend, so that a run on `Autodiff<B>` and one on `Autodiff<Swap<B>>` can be compared bit
//! for bit.

pub mod baseline;
pub mod cli;
pub mod data;
// Not in the harness's own unit-test build: no unit test runs it, and it is the largest unit
// of the library (every model trained on every backend a `--device` names).
#[cfg(not(test))]
pub mod devices;
pub mod harness;
pub mod lockstep;
pub mod models;
pub mod plot;
pub mod schedules;
pub mod table;
pub mod train;
pub mod trainers;
pub mod verify;
pub mod workload;

use std::sync::{Mutex, MutexGuard, PoisonError};

static RNG_LOCK: Mutex<()> = Mutex::new(());

/// Serialises uses of a backend's global random generator (Burn's CPU backends keep one per
/// process): seeding and initialising a model happen under this lock, so that tests running in
/// parallel threads get the same parameters every time.
pub fn rng_lock() -> MutexGuard<'static, ()> {
    RNG_LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

static SWAP_DEVICE_LOCK: Mutex<()> = Mutex::new(());

/// burn-swap keeps one configuration and one set of counters per device, and Burn's CPU
/// backends have a single device: tests of one binary that configure it take this lock so that
/// their budgets and reports do not mix.
pub fn swap_device_lock() -> MutexGuard<'static, ()> {
    SWAP_DEVICE_LOCK
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Whether CubeCL's wgpu runtime finds an adapter for `device`. Without one the caller's test
/// says `SKIPPED` and passes, unless `BURN_SWAP_REQUIRE_KERNELS=1` (set by `.ci/run`), where
/// this panics: CI never passes a GPU-path test that did not run.
#[cfg(feature = "wgpu")]
pub fn wgpu_adapter(device: &cubecl::wgpu::WgpuDevice) -> bool {
    use cubecl::Runtime;
    let found = std::panic::catch_unwind(|| {
        cubecl::wgpu::WgpuRuntime::client(device);
    })
    .is_ok();
    if !found {
        assert!(
            std::env::var("BURN_SWAP_REQUIRE_KERNELS").as_deref() != Ok("1"),
            "no wgpu adapter for {device:?}, and BURN_SWAP_REQUIRE_KERNELS=1"
        );
        eprintln!("SKIPPED: no wgpu adapter for {device:?} (install mesa-vulkan-drivers)");
    }
    found
}
