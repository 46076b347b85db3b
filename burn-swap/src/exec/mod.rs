//! Execution: the per-device engine that runs every op on the inner backend, keeps the
//! residency table and the counted bytes, and carries out offloads and fetches.
//!
//! The engine decides no policy: when an op would exceed the budget it asks
//! [`crate::plan::reactive`] which tensors to move, then moves them.

pub(crate) mod engine;
mod host;
pub(crate) mod residency;

use burn_backend::{DType, Shape};

/// Bytes of a tensor of this shape and dtype, as burn-swap counts them.
pub(crate) fn bytes_of(shape: &Shape, dtype: DType) -> u64 {
    (shape.num_elements() * dtype.size()) as u64
}

/// Total memory of the device when the backend can tell it. The generic path cannot, so a
/// budget given as a fraction of device memory is refused there with a typed error.
pub(crate) fn device_memory<B: burn_backend::Backend>(_device: &B::Device) -> Option<u64> {
    None
}
