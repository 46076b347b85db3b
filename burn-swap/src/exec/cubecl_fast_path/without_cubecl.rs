//! The CubeCL fast path's API where no CubeCL runtime is compiled in (neither the `cuda` nor
//! the `wgpu` feature): no tensor is a CubeCL tensor, so every question is answered as the
//! generic path needs it (`None`, `false`, one pool set) and the callers take that path.

use burn_backend::{Backend, DType, Shape};

use crate::codec::Compressed;
use crate::exec::transfer_error::TransferError;
use crate::plan::compression::CompressionPolicy;
use crate::report::AllocatorUsage;

/// No tensor's buffer can be told.
pub(crate) fn probe<T: 'static>(_tensor: &T) -> Option<(bool, usize, u64)> {
    None
}

/// No tensor's storage can be taken as a CubeCL buffer.
pub(crate) fn storage<T: 'static>(_tensor: &T) -> Option<(T, burn_std::Metadata, Shape, u64)> {
    None
}

/// Never reached (`storage` keeps no CubeCL layout): the tensor as it is.
pub(crate) fn restore<T: 'static>(tensor: T, _meta: burn_std::Metadata) -> T {
    tensor
}

/// No type is a CubeCL tensor.
#[allow(
    clippy::extra_unused_type_parameters,
    reason = "the same signature as the fast path's, which its callers name"
)]
pub(crate) fn is_cube<T: 'static>() -> bool {
    false
}

/// No allocator figures.
pub(crate) fn allocator_usage<B: Backend>(_device: &B::Device) -> Option<AllocatorUsage> {
    None
}

/// No allocator to clean.
pub(crate) fn allocator_cleanup<B: Backend>(_device: &B::Device) -> Option<()> {
    None
}

/// No allocator to switch.
pub(crate) fn set_exact_allocations<B: Backend>(_device: &B::Device, _exact: bool) -> Option<()> {
    None
}

/// No allocator takes the switch.
pub(crate) fn exact_allocations_taken() -> bool {
    false
}

/// One pool set per device.
pub(crate) fn pool_sets() -> u64 {
    1
}

/// The device's memory cannot be told.
pub(crate) fn total_memory<B: Backend>(_device: &B::Device) -> Option<u64> {
    None
}

/// No device codec: the caller copies through the backend.
pub(crate) fn compress_offload<B: Backend>(
    _tensor: &B::FloatTensorPrimitive,
    _shape: &Shape,
    _dtype: DType,
    _policy: &CompressionPolicy,
) -> Option<Result<(Option<Compressed>, u64), TransferError>> {
    None
}

/// No device codec: the caller decompresses on the host.
pub(crate) fn decompress_fetch<B: Backend>(
    _compressed: &Compressed,
    _device: &B::Device,
) -> Option<Result<B::FloatTensorPrimitive, TransferError>> {
    None
}
