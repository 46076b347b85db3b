//! burn-swap over Burn's CUDA backend.
//!
//! Today `Swap<Cuda>` runs the generic path (host offload through the backend's own reads and
//! writes). The CUDA fast path (own copy streams, pinned host memory, cross-stream waits,
//! the allocator's figures) will live in this module, with every `unsafe` block in it.

use burn::backend::Autodiff;
use burn::backend::Cuda;

/// `Swap` over Burn's CUDA backend (with fusion, as Burn configures it).
pub type SwapCuda = crate::Swap<Cuda>;

/// The training backend: `Autodiff<Swap<Cuda>>`.
pub type AutodiffSwapCuda = Autodiff<SwapCuda>;

/// Compile-time proof that `Autodiff<Swap<Cuda>>` is a Burn autodiff backend.
const _: fn() = assert_autodiff_backend::<AutodiffSwapCuda>;

fn assert_autodiff_backend<B: burn::tensor::backend::AutodiffBackend>() {}
