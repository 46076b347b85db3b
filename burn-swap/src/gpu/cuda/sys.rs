//! Raw CUDA driver calls (see the module above for the layering).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DriverError, PinnedHostSlice, sys};

/// Whether `from` can read and write `to`'s memory directly.
pub(super) fn can_access_peer(from: &CudaContext, to: &CudaContext) -> Result<bool, DriverError> {
    let mut can = 0i32;
    // SAFETY: both devices are valid (they belong to live contexts); the driver writes one
    // int into `can`, which outlives the call.
    unsafe {
        sys::cuDeviceCanAccessPeer(&mut can, from.cu_device(), to.cu_device()).result()?;
    }
    Ok(can != 0)
}

/// Enables access from `from`'s context to `to`'s memory. Access already enabled is not an
/// error.
pub(super) fn enable_peer_access(from: &CudaContext, to: &CudaContext) -> Result<(), DriverError> {
    from.bind_to_thread()?;
    // SAFETY: `to`'s context is live (we hold it); the current context is `from`'s, bound
    // just above, which is what the call acts on.
    let enabled = unsafe { sys::cuCtxEnablePeerAccess(to.cu_ctx(), 0) };
    match enabled {
        sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
            Ok(())
        }
        other => other.result(),
    }
}

/// Queues a copy of `bytes` bytes from `src` in `from`'s memory to `dst` in `to`'s on
/// `stream` (a stream of `from`'s context). Returns once queued, not once done.
///
/// # Safety
///
/// `src` must point to at least `bytes` readable bytes of `from`'s device and `dst` to at
/// least `bytes` writable bytes of `to`'s, both kept allocated, and written by nothing else,
/// until the stream has finished the copy (the caller synchronises it before releasing
/// them).
pub(super) unsafe fn copy_peer_async(
    to: &CudaContext,
    dst: u64,
    from: &CudaContext,
    src: u64,
    bytes: usize,
    stream: &CudaStream,
) -> Result<(), DriverError> {
    // SAFETY: the ranges are the caller's guarantee; the contexts and the stream are live.
    unsafe {
        cudarc::driver::result::memcpy_peer_async(
            to.cu_ctx(),
            dst,
            from.cu_ctx(),
            src,
            bytes,
            stream.cu_stream(),
        )
    }
}

/// `bytes` bytes of page-locked host memory on `context`, zeroed (plain page-locked
/// memory: flags 0, as CubeCL's pinned pool allocates).
pub(super) fn pinned_zeroed(
    context: &Arc<CudaContext>,
    bytes: usize,
) -> Result<PinnedHostSlice<u8>, DriverError> {
    // SAFETY: the memory is uninitialised after the call; it is written (zeroed) below
    // before anything can read it.
    let mut host = unsafe { context.alloc_pinned_with_flags::<u8>(bytes, 0)? };
    let ptr = host.as_mut_ptr()?;
    // SAFETY: `ptr` points to the `bytes` bytes just allocated, which nothing else uses;
    // writing zeros through a raw pointer needs no initialised memory.
    unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
    Ok(host)
}
