//! Peer copies between CUDA devices with cudarc (the peer offload's transmitter on CUDA): peer access
//! enabled once per pair where the devices allow it, copies with `cuMemcpyPeerAsync` on a
//! stream of ours per pair (the copy engines, not SM kernels as NCCL's send/recv), each copy
//! waited for before its buffers are released. Device 0 to itself works too (one GPU).
//!
//! The device pointers come from CubeCL (`get_resource` on a handle), whose allocation stays
//! alive and in place while the caller holds the handle; cudarc and CubeCL share each
//! device's primary context.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaStream, DriverError};

use super::sys;

/// One device: its ordinal and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The CUDA ordinal.
    pub ordinal: usize,
    /// Free bytes when discovered.
    pub free_bytes: u64,
    /// Total bytes.
    pub total_bytes: u64,
}

/// The devices and the pairs that can reach each other directly.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Every device.
    pub devices: Vec<DeviceInfo>,
    /// `(from, to)` pairs with peer access enabled (a device reaches itself always).
    pub direct: Vec<(usize, usize)>,
}

/// The contexts and per-pair streams in use, made once.
struct State {
    contexts: HashMap<usize, Arc<CudaContext>>,
    streams: HashMap<(usize, usize), Arc<CudaStream>>,
    enabled: Vec<(usize, usize)>,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| {
        Mutex::new(State {
            contexts: HashMap::new(),
            streams: HashMap::new(),
            enabled: Vec::new(),
        })
    })
}

fn context(state: &mut State, ordinal: usize) -> Result<Arc<CudaContext>, DriverError> {
    if let Some(c) = state.contexts.get(&ordinal) {
        return Ok(c.clone());
    }
    let c = CudaContext::new(ordinal)?;
    state.contexts.insert(ordinal, c.clone());
    Ok(c)
}

/// Enables access from `from`'s context to `to`'s memory, once; `false` when the devices
/// cannot reach each other directly (a copy then goes through the host, inside the driver).
pub fn enable_peer_access(from: usize, to: usize) -> Result<bool, DriverError> {
    if from == to {
        return Ok(true);
    }
    let mut state = state().lock().unwrap_or_else(|e| e.into_inner());
    if state.enabled.contains(&(from, to)) {
        return Ok(true);
    }
    let source = context(&mut state, from)?;
    let target = context(&mut state, to)?;
    if !sys::can_access_peer(&source, &target)? {
        return Ok(false);
    }
    sys::enable_peer_access(&source, &target)?;
    state.enabled.push((from, to));
    Ok(true)
}

/// The free memory of device `ordinal` now.
pub fn free_memory(ordinal: usize) -> Result<u64, DriverError> {
    let context = {
        let mut state = state().lock().unwrap_or_else(|e| e.into_inner());
        context(&mut state, ordinal)?
    };
    Ok(context.mem_get_info()?.0 as u64)
}

/// Every device, its memory, and the pairs with peer access (enabled on the way).
pub fn discover() -> Result<Topology, DriverError> {
    let count = CudaContext::device_count()? as usize;
    let mut devices = Vec::with_capacity(count);
    for ordinal in 0..count {
        let context = {
            let mut state = state().lock().unwrap_or_else(|e| e.into_inner());
            context(&mut state, ordinal)?
        };
        let (free, total) = context.mem_get_info()?;
        devices.push(DeviceInfo {
            ordinal,
            free_bytes: free as u64,
            total_bytes: total as u64,
        });
    }
    let mut direct = Vec::new();
    for from in 0..count {
        for to in 0..count {
            if enable_peer_access(from, to)? {
                direct.push((from, to));
            }
        }
    }
    Ok(Topology { devices, direct })
}

/// Copies `bytes` bytes from `src` on device `from` to `dst` on device `to` on the pair's own
/// stream, and waits for the copy; returns its time.
///
/// # Safety
///
/// `src` must point to at least `bytes` readable bytes of device `from`, and `dst` to at
/// least `bytes` writable bytes of device `to`, both kept allocated and unused by other work
/// until this returns. (CubeCL handles held by the caller, whose producers finished, give
/// that.)
unsafe fn copy(
    to: usize,
    dst: u64,
    from: usize,
    src: u64,
    bytes: usize,
) -> Result<Duration, DriverError> {
    enable_peer_access(from, to)?;
    let (stream, source, target) = {
        let mut state = state().lock().unwrap_or_else(|e| e.into_inner());
        let source = context(&mut state, from)?;
        let target = context(&mut state, to)?;
        let stream = match state.streams.get(&(from, to)) {
            Some(s) => s.clone(),
            None => {
                let s = source.new_stream()?;
                state.streams.insert((from, to), s.clone());
                s
            }
        };
        (stream, source, target)
    };
    let start = Instant::now();
    // SAFETY: the caller guarantees both ranges until this returns, and the copy is waited
    // for below; the stream belongs to `source`'s context.
    unsafe { sys::copy_peer_async(&target, dst, &source, src, bytes, &stream)? };
    stream.synchronize()?;
    Ok(start.elapsed())
}

/// Measures the link from `from` to `to` with a copy of `bytes` bytes between buffers of
/// cudarc's own (the fastest of three); bytes per second.
pub fn measure(from: usize, to: usize, bytes: usize) -> Result<f64, DriverError> {
    let (source, target) = {
        let mut state = state().lock().unwrap_or_else(|e| e.into_inner());
        (context(&mut state, from)?, context(&mut state, to)?)
    };
    use cudarc::driver::DevicePtr;
    let (source_stream, target_stream) = (source.default_stream(), target.default_stream());
    let src = source_stream.alloc_zeros::<u8>(bytes)?;
    let dst = target_stream.alloc_zeros::<u8>(bytes)?;
    source_stream.synchronize()?;
    target_stream.synchronize()?;
    let (src_ptr, _src_guard) = src.device_ptr(&source_stream);
    let (dst_ptr, _dst_guard) = dst.device_ptr(&target_stream);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        // SAFETY: both buffers were allocated above with `bytes` bytes and are idle (their
        // streams synchronised); they live until the end of this function.
        let took = unsafe { copy(to, dst_ptr, from, src_ptr, bytes)? };
        best = best.min(took.as_secs_f64());
    }
    Ok(bytes as f64 / best)
}

/// A range of a CubeCL buffer on a CUDA device: the client that owns it, the handle, the
/// device's ordinal and the byte offset in the handle.
pub struct Range<'a> {
    /// The client of the buffer's device.
    pub client: &'a cubecl::client::ComputeClient<cubecl::cuda::CudaRuntime>,
    /// The buffer.
    pub handle: &'a cubecl::server::Handle,
    /// Its device.
    pub ordinal: usize,
    /// Where the range starts in it.
    pub offset: u64,
}

/// Copies `bytes` bytes between two ranges of CubeCL buffers, on the same or different
/// devices, with `copy`: the buffers are kept alive and in place by their resources for the
/// copy, and the calling thread's CubeCL streams are synchronised first, so that every kernel
/// that wrote the source (CubeCL makes this thread's stream wait for the buffer's own) and
/// every allocation of the destination has finished.
pub fn copy_between(
    to: Range<'_>,
    from: Range<'_>,
    bytes: usize,
) -> Result<Duration, PeerCopyError> {
    let cube = |e: &dyn core::fmt::Debug| PeerCopyError::Cube(format!("{e:?}"));
    let dst = to
        .client
        .get_resource(to.handle.clone())
        .map_err(|e| cube(&e))?;
    let src = from
        .client
        .get_resource(from.handle.clone())
        .map_err(|e| cube(&e))?;
    let (dst_res, src_res) = (dst.resource(), src.resource());
    if to.offset + bytes as u64 > dst_res.size || from.offset + bytes as u64 > src_res.size {
        return Err(PeerCopyError::OutOfRange {
            bytes,
            to: (to.offset, dst_res.size),
            from: (from.offset, src_res.size),
        });
    }
    cubecl::future::block_on(from.client.sync()).map_err(|e| cube(&e))?;
    cubecl::future::block_on(to.client.sync()).map_err(|e| cube(&e))?;
    // SAFETY: both ranges lie inside their resources (checked above), which `dst` and `src`
    // keep allocated and in place until they drop after the copy returned; the source's
    // writers and the destination's allocation finished (both streams synchronised above),
    // and nothing else uses the destination, fresh from its allocator.
    unsafe {
        copy(
            to.ordinal,
            dst_res.ptr + to.offset,
            from.ordinal,
            src_res.ptr + from.offset,
            bytes,
        )
    }
    .map_err(PeerCopyError::Driver)
}

/// Why a copy between CubeCL buffers failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerCopyError {
    /// CubeCL could not give a buffer's resource or synchronise a stream.
    #[error("CubeCL: {0}")]
    Cube(String),
    /// A range lies outside its buffer.
    #[error(
        "peer copy of {bytes} bytes out of range (destination {} of {}, source {} of {})",
        to.0, to.1, from.0, from.1
    )]
    OutOfRange {
        /// Bytes to copy.
        bytes: usize,
        /// The destination's offset and its buffer's size.
        to: (u64, u64),
        /// The source's offset and its buffer's size.
        from: (u64, u64),
    },
    /// The driver refused the copy.
    #[error(transparent)]
    Driver(DriverError),
}
