//! burn-swap over Burn's CUDA backend.
//!
//! `Swap<Cuda>` takes the CubeCL fast path (see the executor's `cube` module: transfers on
//! the workers' own streams into CubeCL's pinned pool, compression on the device before the
//! copy, the allocator's figures, budgets as a fraction of the device's memory). The plain
//! pinned-copy yardstick that the GPU check compares against is [`crate::gpu::cuda::pinned`].

use burn::backend::Autodiff;
use burn::backend::Cuda;

/// `Swap` over Burn's CUDA backend as Burn's features configure it: unfused here, fused
/// with the `cuda-fusion` feature (Burn's `fusion`), which takes the generic path.
pub type SwapCuda = crate::backend::Swap<Cuda>;

/// The training backend: `Autodiff<Swap<Cuda>>`.
pub type AutodiffSwapCuda = Autodiff<SwapCuda>;

/// Compile-time proof that `Autodiff<Swap<Cuda>>` is a Burn autodiff backend: Burn's
/// `Cuda` (fused under `cuda-fusion`), and the unfused CubeCL backend by name.
const _: fn() = assert_autodiff_backend::<AutodiffSwapCuda>;
const _: fn() = assert_autodiff_backend::<
    Autodiff<
        crate::backend::Swap<burn_cubecl::CubeBackend<cubecl::cuda::CudaRuntime, f32, i32, u8>>,
    >,
>;

fn assert_autodiff_backend<B: burn::tensor::backend::AutodiffBackend>() {}
