//! The yardstick of the GPU check: a plain copy between device memory and pinned host memory
//! with cudarc, on a stream of its own, timed by the host around a synchronised copy. What
//! burn-swap's transfers achieve is compared against it in the same run.

use cudarc::driver::{CudaContext, DriverError};

/// Achieved copy bandwidth in bytes per second, each direction the best of `repeats`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CopyBandwidth {
    /// Bytes per copy.
    pub bytes: usize,
    /// Device to host.
    pub to_host: f64,
    /// Host to device.
    pub to_device: f64,
}

/// Copies `bytes` bytes between a device buffer and page-locked host memory on device
/// `ordinal`, `repeats` times each way, and returns the best bandwidth of each direction.
pub fn pinned_copy(
    ordinal: usize,
    bytes: usize,
    repeats: usize,
) -> Result<CopyBandwidth, DriverError> {
    let context = CudaContext::new(ordinal)?;
    let stream = context.new_stream()?;
    let mut device = stream.alloc_zeros::<u8>(bytes)?;
    let mut host = super::sys::pinned_zeroed(&context, bytes)?;
    let (mut down, mut up) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..repeats.max(1) {
        let start = std::time::Instant::now();
        stream.memcpy_dtoh(&device, &mut host)?;
        stream.synchronize()?;
        down = down.min(start.elapsed().as_secs_f64());
        let start = std::time::Instant::now();
        stream.memcpy_htod(&host, &mut device)?;
        stream.synchronize()?;
        up = up.min(start.elapsed().as_secs_f64());
    }
    Ok(CopyBandwidth {
        bytes,
        to_host: bytes as f64 / down,
        to_device: bytes as f64 / up,
    })
}
