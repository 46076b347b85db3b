//! Shared pieces of burn-swap's examples, integration tests and benches: small models on
//! synthetic data made here (nothing is downloaded), and one training loop generic over the
//! backend, so that a run on `Autodiff<B>` and one on `Autodiff<Swap<B>>` can be compared bit
//! for bit.

pub mod baseline;
pub mod classifier;
pub mod cli;
pub mod data;
// Not in the harness's own unit-test build: no unit test runs it, and it is the largest unit
// of the library (every model trained on every backend a `--device` names).
#[cfg(not(test))]
pub mod devices;
pub mod harness;
pub mod loader;
pub mod lockstep;
pub mod models;
pub mod plan;
pub mod plot;
pub mod recurrent;
pub mod schedules;
pub mod steps;
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
/// their budgets and reports do not mix. The lock is handed over with the graphs a previous
/// holder left in Burn's autodiff freed ([`free_orphaned_graphs`]), so that no other thread
/// frees them in the middle of the new holder's counts.
pub fn swap_device_lock() -> MutexGuard<'static, ()> {
    let guard = SWAP_DEVICE_LOCK
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    free_orphaned_graphs();
    guard
}

/// Frees the autodiff graphs nothing refers to any more, of every backend. Burn's autodiff
/// keeps the graphs of all backends in one store per process, and a graph whose tensors were
/// all dropped without a backward pass (an evaluation's forward pass, a loss never
/// differentiated) holds the tensors its steps saved until the next `backward`, on any
/// thread and of any backend, frees such graphs. Between tests that share a device, that is
/// another test's plain `Autodiff<Flex>` step: the `Swap` device's counted bytes then fell in
/// the middle of whichever test held it (the `identical` binary's `views` tests, about one
/// run in three). One backward of a one-element tensor does it here.
pub fn free_orphaned_graphs() {
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::Tensor;
    let device = Default::default();
    let x = Tensor::<Autodiff<Flex>, 1>::from_floats([1.0], &device).require_grad();
    let _gradients = (x * 2.0).sum().backward();
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

#[cfg(test)]
mod tests {
    use burn::backend::flex::FlexDevice;
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::Tensor;
    use burn_swap::{Swap, SwapConfig};

    fn resident(device: &FlexDevice) -> u64 {
        burn_swap::memory(device).map_or(0, |m| m.resident_bytes)
    }

    /// A forward pass of `Autodiff<Swap<Flex>>` never differentiated leaves its graph, with the
    /// tensor its step saved, in Burn's store after its tensors are dropped; the next holder
    /// of the lock starts with it freed. (Another thread's backward frees it too: the
    /// leftover is made again until it is seen, then the lock is taken.)
    #[test]
    fn the_device_lock_is_handed_over_with_the_graphs_left_behind_freed() {
        let device = FlexDevice;
        let mut seen = None;
        for _ in 0..20 {
            let _guard = super::swap_device_lock();
            burn_swap::configure(&device, SwapConfig::default()).unwrap();
            let before = resident(&device);
            let x = Tensor::<Autodiff<Swap<Flex>>, 2>::ones([16, 16], &device).require_grad();
            let y = x.exp().sum();
            drop(y);
            let left = resident(&device);
            if left > before {
                seen = Some((before, left));
                break;
            }
        }
        let (before, left) = seen.expect("a forward pass never differentiated leaves its graph");
        let _guard = super::swap_device_lock();
        assert_eq!(resident(&device), before, "{left} bytes were left before");
    }
}
