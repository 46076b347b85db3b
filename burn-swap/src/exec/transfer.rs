//! Seed 000, claim 4 on the generic path: the transfer workers, isolated from compute.
//!
//! Offload requests go on the *send* queue, prefetch requests on the *receive* queue; each
//! queue has a worker thread of its own, so that an offload and a fetch run at the same time
//! as each other and as the ops of the compute thread. A worker moves bytes through the inner
//! backend's own data path (`into_data` of a clone of the handle; `from_data` for the way
//! back) and reports on one completion queue, which the engine drains between ops. The
//! engine never drops a device copy before its offload reported success: the worker reads a
//! clone of the handle, and the engine releases its own one only on completion, so a failed
//! offload leaves the tensor resident.
//!
//! Fetched tensors come back as backend handles; the engine gives them the tensor's id.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use burn_backend::{DType, Shape, TensorData};
use burn_ir::{BackendIr, TensorHandle, TensorId};
use burn_std::reader::try_read_sync;

use super::faults::{self, Hook};
use super::host_pool::HostPool;
use super::peers::PeerPool;
use super::pools::{Worker, WorkerPools};
use super::residency::HostCopy;
use crate::codec;
use crate::config::Compression;
use crate::plan::compression::{self, Decision, Policy};

/// Compresses `data` on the CPU when `policy` says it pays (from a sample of its zero
/// fraction, seed 002's decision in `plan::compression`) and the result is smaller; keeps it raw
/// otherwise. Also returns the nanoseconds spent compressing (zero when it was not tried).
pub(crate) fn pack(data: TensorData, policy: &Policy) -> (HostCopy, u64) {
    if policy.mode == Compression::Off {
        return (HostCopy::Raw(data), 0);
    }
    let Ok(w) = codec::width(data.dtype) else {
        return (HostCopy::Raw(data), 0);
    };
    let start = Instant::now();
    let decision = Decision {
        elements: data.bytes.len() / w,
        width: w,
        zero_fraction: codec::zero_fraction_sample(&data.bytes, w, compression::SAMPLES),
        link_bandwidth: policy.link_bandwidth,
        codec_bandwidth: policy.codec_bandwidth,
    };
    if !decision.pays(policy.mode) {
        return (HostCopy::Raw(data), start.elapsed().as_nanos() as u64);
    }
    let _span = tracing::debug_span!("burn_swap::compress", bytes = data.bytes.len()).entered();
    match codec::compress(&data) {
        Ok(c) if c.bytes() < data.bytes.len() as u64 => {
            (HostCopy::Compressed(c), start.elapsed().as_nanos() as u64)
        }
        _ => (HostCopy::Raw(data), start.elapsed().as_nanos() as u64),
    }
}

/// Why a transfer failed. The tensor it concerned is intact where it was.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum TransferError {
    /// The inner backend refused a read, a write or a sync.
    #[error("the inner backend failed: {0}")]
    Backend(String),
    /// The inner backend panicked during the copy.
    #[error("the inner backend panicked: {0}")]
    Panicked(String),
    /// A dtype the data path cannot carry.
    #[error("dtype {0:?} cannot be moved")]
    Dtype(DType),
    /// This platform cannot block on a read.
    #[error("this platform cannot block on a read")]
    CannotBlock,
    /// The codec refused the bytes.
    #[error(transparent)]
    Codec(#[from] codec::CodecError),
    /// The device's codec kernels failed.
    #[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
    #[error("the device codec failed: {0}")]
    Kernel(String),
    /// A copy to or from a peer failed.
    #[error("a peer copy failed: {0}")]
    Peer(String),
    /// A failure injected by a test.
    #[error("injected {0} failure")]
    Injected(&'static str),
}

impl From<super::peers::ReceiveError> for TransferError {
    fn from(error: super::peers::ReceiveError) -> Self {
        match error {
            super::peers::ReceiveError::Codec(error) => TransferError::Codec(error),
            piece => TransferError::Peer(piece.to_string()),
        }
    }
}

impl From<burn_backend::ExecutionError> for TransferError {
    fn from(error: burn_backend::ExecutionError) -> Self {
        TransferError::Backend(error.to_string())
    }
}

/// Where an offload goes and how: the compression policy, the device it leaves, and the
/// peers that may take it.
pub(crate) struct Route<B: BackendIr> {
    pub compression: Policy,
    pub device: B::Device,
    pub peers: Option<Arc<PeerPool>>,
}

/// An offload for the send worker.
struct OffloadJob<B: BackendIr> {
    id: TensorId,
    handle: B::Handle,
    shape: Shape,
    dtype: DType,
    route: Route<B>,
    /// The memory of raw host copies on a backend whose tensors live in host memory.
    pool: Option<Arc<HostPool>>,
}

/// A fetch for the receive worker.
struct FetchJob<B: BackendIr> {
    id: TensorId,
    copy: HostCopy,
    device: B::Device,
    /// Wait until the bytes are on the device before reporting (for timing the link; a
    /// fetch needs no such wait for correctness: the backend orders its users after it).
    sync: bool,
}

/// A finished transfer.
pub(crate) enum Done<B: BackendIr> {
    /// The bytes of `id` are on the host, compressed when it paid (or the copy failed; the
    /// device copy is untouched). `codec_nanos` of `nanos` were spent compressing.
    Offloaded {
        id: TensorId,
        result: Result<HostCopy, TransferError>,
        nanos: u64,
        codec_nanos: u64,
        /// Whether the device's kernels compressed it (before the copy).
        on_device: bool,
    },
    /// The bytes of `id` are back on the device, in a handle without an id yet, or the
    /// write failed, with the copy back when it is still whole.
    Fetched {
        id: TensorId,
        result: Result<B::Handle, TransferError>,
        copy: Option<Box<HostCopy>>,
        nanos: u64,
        codec_nanos: u64,
        /// Whether the device's kernels decompressed it (after the copy).
        on_device: bool,
    },
}

impl<B: BackendIr> Done<B> {
    pub fn id(&self) -> TensorId {
        match self {
            Done::Offloaded { id, .. } | Done::Fetched { id, .. } => *id,
        }
    }
}

/// The two workers of one device and their queues. Started on first use; stopped (queues
/// closed, threads joined) when dropped.
pub(crate) struct Transfers<B: BackendIr> {
    send: Option<mpsc::Sender<OffloadJob<B>>>,
    receive: Option<mpsc::Sender<FetchJob<B>>>,
    done: Option<mpsc::Receiver<Done<B>>>,
    workers: Vec<JoinHandle<()>>,
    in_flight: usize,
    /// The ordering stress test's maximum delay, in microseconds (0: off), shared with the
    /// workers; see [`crate::SwapConfig::transfer_jitter_micros`].
    jitter: Arc<AtomicU64>,
    /// The workers' streams: their allocation mode and the allocator's figures.
    memory: Arc<WorkerPools>,
    /// The memory of raw host copies, on a backend whose tensors live in host memory.
    pool: Option<Arc<HostPool>>,
}

impl<B: BackendIr> Default for Transfers<B> {
    fn default() -> Self {
        Self {
            send: None,
            receive: None,
            done: None,
            workers: Vec::new(),
            in_flight: 0,
            jitter: Arc::new(AtomicU64::new(0)),
            memory: Arc::default(),
            pool: adopts_bytes::<B>().then(Arc::default),
        }
    }
}

/// The delay in microseconds that a transfer keyed `seed` is held under a jitter of at most
/// `max` microseconds: SplitMix64 of the key, so that each transfer gets its own and a run
/// can be repeated.
pub(crate) fn jitter_micros(seed: u64, max: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    crate::rng::mix(seed) % (max + 1)
}

fn pause(jitter: &AtomicU64, seed: u64) {
    let micros = jitter_micros(seed, jitter.load(Ordering::Relaxed));
    if micros > 0 {
        std::thread::sleep(std::time::Duration::from_micros(micros));
    }
}

/// The key of the jitter of the receive worker's transfers (the send worker's is the id).
pub(crate) const RECEIVE_KEY: u64 = 0x9e37_79b9;

fn read<B: BackendIr>(
    handle: B::Handle,
    shape: Shape,
    dtype: DType,
    pool: Option<&HostPool>,
) -> Result<TensorData, TransferError> {
    let handle = TensorHandle { handle, shape };
    let result = if dtype.is_float() {
        let tensor = B::float_tensor(handle);
        if let Some(data) = pool.and_then(|pool| copy_host_resident(&tensor, pool)) {
            return Ok(data);
        }
        try_read_sync(B::float_into_data(tensor))
    } else if dtype.is_int() {
        let tensor = B::int_tensor(handle);
        if let Some(data) = pool.and_then(|pool| copy_host_resident(&tensor, pool)) {
            return Ok(data);
        }
        try_read_sync(B::int_into_data(tensor))
    } else if dtype.is_bool() {
        let tensor = B::bool_tensor(handle);
        if let Some(data) = pool.and_then(|pool| copy_host_resident(&tensor, pool)) {
            return Ok(data);
        }
        try_read_sync(B::bool_into_data(tensor))
    } else if let DType::QFloat(_) = dtype {
        // Its stored values and quantization parameters, as the backend's records save it.
        try_read_sync(B::q_into_data(B::quantized_tensor(handle)))
    } else {
        return Err(TransferError::Dtype(dtype));
    };
    match result {
        Some(Ok(data)) => Ok(pinned_pool_fallback(data)),
        Some(Err(error)) => Err(error.into()),
        None => Err(TransferError::CannotBlock),
    }
}

/// A Flex tensor that is its whole buffer in order, borrowed; `None` for another backend's
/// tensor or a view.
fn whole_flex_tensor<T: 'static>(tensor: &T) -> Option<&burn::backend::flex::FlexTensor> {
    let tensor =
        (tensor as &dyn core::any::Any).downcast_ref::<burn::backend::flex::FlexTensor>()?;
    let layout = tensor.layout();
    let whole = layout.num_elements() * tensor.dtype().size();
    (layout.is_contiguous() && layout.start_offset() == 0 && tensor.bytes().len() == whole)
        .then_some(tensor)
}

/// A copy of a Flex tensor's bytes in memory from `pool`, as Flex's own `into_data` would
/// make them (it copies too: the engine keeps the tensor until the copy is done); `None` for
/// another backend's tensor or a view.
fn copy_host_resident<T: 'static>(tensor: &T, pool: &HostPool) -> Option<TensorData> {
    let tensor = whole_flex_tensor(tensor)?;
    Some(TensorData {
        bytes: pool.copy(tensor.bytes()),
        shape: tensor.layout().shape().clone(),
        dtype: tensor.dtype(),
    })
}

/// The storage of a Flex tensor that nothing else refers to, taken whole for `pool` (see
/// [`HostPool`]); anything else is dropped as it would have been.
fn recycle<B: BackendIr>(
    handle: B::Handle,
    shape: Shape,
    dtype: DType,
    pool: &HostPool,
    (host, peak): (u64, u64),
) {
    use burn::backend::flex::FlexTensor;
    let handle = TensorHandle { handle, shape };
    let tensor: Box<dyn core::any::Any> = if dtype.is_float() {
        Box::new(B::float_tensor(handle))
    } else if dtype.is_int() {
        Box::new(B::int_tensor(handle))
    } else if dtype.is_bool() {
        Box::new(B::bool_tensor(handle))
    } else {
        return;
    };
    let Ok(tensor) = tensor.downcast::<FlexTensor>() else {
        return;
    };
    if tensor.is_unique() && whole_flex_tensor(&*tensor).is_some() {
        // Unique and whole: `into_data` hands over the buffer itself, without a copy.
        pool.keep(tensor.into_data().bytes, host, peak);
    }
}

/// A read's bytes as the backend gives them when its pinned pool is exhausted (see
/// [`Hook::PinnedPool`]): pageable, the pinned ones released. Injected in tests only.
fn pinned_pool_fallback(data: TensorData) -> TensorData {
    let pinned = data.bytes.property() == burn_std::AllocationProperty::Pinned;
    if !(pinned && faults::take(Hook::PinnedPool)) {
        return data;
    }
    let bytes = burn_std::Bytes::from_bytes_vec(data.bytes.to_vec());
    TensorData {
        bytes,
        shape: data.shape,
        dtype: data.dtype,
    }
}

/// Copies a tensor to the host, compressed where it pays: on a CubeCL backend by the device
/// kernels before the copy (only the compressed bytes cross the link), elsewhere by the CPU
/// codec after it. Returns the copy, the nanoseconds spent on compression, and whether the
/// device compressed it.
fn send<B: BackendIr>(job: OffloadJob<B>) -> Result<(HostCopy, u64, bool), TransferError> {
    copy_out::<B>(
        job.handle,
        job.shape,
        job.dtype,
        &job.route.compression,
        job.route.peers.as_ref(),
        &job.route.device,
        job.pool.as_deref(),
    )
}

/// [`send`]'s work on any thread: the copy of a tensor (its handle) off the device. With
/// peers, split across them as the advisor says (seed 000; the host keeps what they cannot
/// take); otherwise to the host, compressed where it pays (on the device for a CubeCL
/// backend). Returns the copy, the nanoseconds spent on compression, and whether the device
/// compressed it. A raw copy of a host-resident tensor takes its memory from `host_pool`
/// when one is given.
pub(crate) fn copy_out<B: BackendIr>(
    handle: B::Handle,
    shape: Shape,
    dtype: DType,
    compression: &Policy,
    peers: Option<&Arc<PeerPool>>,
    device: &B::Device,
    host_pool: Option<&HostPool>,
) -> Result<(HostCopy, u64, bool), TransferError> {
    // A failed offload leaves the tensor resident: the device handle is only read.
    let injected = faults::take_first(&[
        (Hook::OffloadRead, true),
        (Hook::HostAlloc, true),
        (Hook::Compress, compression.mode != Compression::Off),
        (Hook::PeerCopy, peers.is_some()),
    ]);
    if let Some(hook) = injected {
        return Err(TransferError::Injected(hook.name()));
    }
    if let Some(pool) = peers {
        if pool.on_devices()
            && dtype.is_float()
            && let Some(copy) = device_peer_send::<B>(&handle, &shape, dtype, device, pool)
        {
            return Ok((HostCopy::Peers(Box::new(copy)), 0, false));
        }
        let data = read::<B>(handle, shape, dtype, host_pool)?;
        // The host's bandwidth as measured, else taken as slower than any peer link.
        let host = compression.link_bandwidth.unwrap_or(1.0);
        // The codec first, where it pays: the compressed bytes are what the peers take.
        let (packed, nanos) = pack(data, compression);
        let copy = match packed {
            HostCopy::Raw(data) => pool
                .send(data, host)
                .map_or_else(HostCopy::Raw, |c| HostCopy::Peers(Box::new(c))),
            HostCopy::Compressed(c) => pool
                .send_compressed(c, host)
                .map_or_else(HostCopy::Compressed, |c| HostCopy::Peers(Box::new(c))),
            peers @ HostCopy::Peers(_) => peers,
        };
        return Ok((copy, nanos, false));
    }
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    if dtype.is_float() {
        let tensor = B::float_tensor(TensorHandle {
            handle: handle.clone(),
            shape: shape.clone(),
        });
        let on_device = super::cube::compress_offload::<B>(&tensor, &shape, dtype, compression);
        drop(tensor);
        if let Some(result) = on_device {
            return match result? {
                (Some(compressed), nanos) => Ok((HostCopy::Compressed(compressed), nanos, true)),
                (None, nanos) => Ok((
                    HostCopy::Raw(read::<B>(handle, shape, dtype, host_pool)?),
                    nanos,
                    false,
                )),
            };
        }
    }
    let data = read::<B>(handle, shape, dtype, host_pool)?;
    let (copy, nanos) = pack(data, compression);
    Ok((copy, nanos, false))
}

/// A float tensor sent to device peers: by cudarc peer copies on CUDA, by the backend's
/// `to_device` elsewhere (`None`: the peers could not take it all; the host route follows).
fn device_peer_send<B: BackendIr>(
    handle: &B::Handle,
    shape: &Shape,
    dtype: DType,
    device: &B::Device,
    pool: &Arc<PeerPool>,
) -> Option<super::peers::PeerCopy> {
    #[cfg(feature = "cuda")]
    if super::cuda_ordinal::<B>(device).is_some() {
        let tensor = B::float_tensor(TensorHandle {
            handle: handle.clone(),
            shape: shape.clone(),
        });
        return super::cube::peer_send::<B>(&tensor, shape, dtype, pool);
    }
    super::peers::send_backend::<B>(handle.clone(), shape, dtype, device, pool)
}

/// A copy brought back by the device's own route, into a new tensor: a compressed host copy
/// decompressed by the device's kernels (CubeCL backends), or a tensor split across peer
/// devices brought back by peer copies (CUDA). `None` otherwise (a raw copy, another
/// backend): the caller takes the host route.
pub(crate) fn device_route<B: BackendIr>(
    copy: &HostCopy,
    device: &B::Device,
) -> Option<Result<B::Handle, TransferError>> {
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    if let HostCopy::Compressed(c) = copy {
        return super::cube::decompress_fetch::<B>(c, device)
            .map(|result| result.map(B::float_tensor_handle));
    }
    if let HostCopy::Peers(p) = copy
        && p.pool().on_devices()
    {
        #[cfg(feature = "cuda")]
        if let Some(result) = super::cube::peer_receive::<B>(p, device) {
            return Some(result.map(B::float_tensor_handle));
        }
        return super::peers::receive_backend::<B>(p, device)
            .map(|t| Ok(B::float_tensor_handle(t)));
    }
    let _ = (copy, device);
    None
}

/// What a write back to the device made: the handle, the nanoseconds spent decompressing,
/// and whether the device decompressed it.
pub(crate) type Written<B> = (<B as BackendIr>::Handle, u64, bool);

/// A write back that failed, with the copy. It is `None` only if a backend that adopts the
/// bytes it is given (Flex, whose write cannot fail) panicked in its write all the same.
pub(crate) type WriteFailed = (TransferError, Option<Box<HostCopy>>);

/// Writes a copy back to the device (decompressed where needed) and, with `sync`, waits
/// until its bytes are there. The copy is kept until the bytes are on the device: on
/// failure it comes back with the error.
pub(crate) fn write<B: BackendIr>(
    device: &B::Device,
    copy: HostCopy,
    sync: bool,
) -> Result<Written<B>, WriteFailed> {
    let start = Instant::now();
    let compressed = copy.compressed();
    let peers = matches!(copy, HostCopy::Peers(_));
    let injected = faults::take_first(&[
        (Hook::Upload, true),
        // Decoding a compressed or split copy allocates the bytes it decodes into.
        (Hook::HostAlloc, compressed || peers),
        (Hook::Decompress, compressed),
        (Hook::PeerCopy, peers),
    ]);
    if let Some(hook) = injected {
        return Err((TransferError::Injected(hook.name()), Some(Box::new(copy))));
    }
    let elapsed = |start: Instant| {
        if compressed {
            start.elapsed().as_nanos() as u64
        } else {
            0
        }
    };
    // The device's own route (its codec kernels, peer copies), the copy borrowed.
    let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        device_route::<B>(&copy, device)
    }))
    .unwrap_or_else(|panic| Some(Err(panic_message(panic))));
    let (handle, codec_nanos, on_device, kept) = match routed {
        Some(Ok(handle)) => (handle, elapsed(start), compressed, Some(copy)),
        Some(Err(error)) => return Err((error, Some(Box::new(copy)))),
        None => {
            // The host route. Raw bytes go to a backend that adopts them as its storage
            // (Flex: its write cannot fail) as they are; any other backend copies them to
            // the device and is lent them, the copy kept until they are written. Compressed
            // and split copies are decoded into new bytes, the copy kept likewise.
            let (data, kept) = match copy {
                HostCopy::Raw(data) if adopts_bytes::<B>() => (data, None),
                HostCopy::Raw(data) => {
                    let (lent, kept) = lend(data);
                    (lent, Some(HostCopy::Raw(kept)))
                }
                other => match other.to_data() {
                    Ok(data) => (data, Some(other)),
                    Err(error) => return Err((error.into(), Some(Box::new(other)))),
                },
            };
            let codec_nanos = elapsed(start);
            let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if kept.is_some() && faults::take(Hook::BackendWrite) {
                    // As a backend that took the bytes and then failed would.
                    drop(data);
                    panic!("injected backend write failure");
                }
                from_data::<B>(data, device)
            }));
            match written {
                Ok(handle) => (handle, codec_nanos, false, kept),
                Err(panic) => return Err((panic_message(panic), kept.map(Box::new))),
            }
        }
    };
    if sync && let Err(error) = B::sync(device) {
        return Err((error.into(), kept.map(Box::new)));
    }
    Ok((handle, codec_nanos, on_device))
}

/// Whether the inner backend's `from_data` adopts the bytes it is given as its tensor's
/// storage (Flex: an `Arc` around them, nothing that can fail), rather than copying them to
/// the device (CubeCL backends, fused backends, any other).
fn adopts_bytes<B: BackendIr>() -> bool {
    use core::any::TypeId;
    TypeId::of::<B::FloatTensorPrimitive>() == TypeId::of::<burn::backend::flex::FlexTensor>()
}

/// Host bytes that several owners share without a copy (`burn_std::Bytes` is `Send`).
struct Owned(burn_std::Bytes);

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// `data` twice over the same host bytes, without a copy: one to lend the backend's write,
/// one to keep until it succeeded. The bytes keep their allocation property, so CubeCL still
/// uploads pinned bytes by DMA without staging them; a backend that wanted to write into its
/// share would get its own copy (copy on write).
fn lend(data: TensorData) -> (TensorData, TensorData) {
    let property = data.bytes.property();
    let owner = bytes::Bytes::from_owner(Owned(data.bytes));
    let share = |owner: bytes::Bytes| TensorData {
        bytes: burn_std::Bytes::from_shared(owner, property),
        shape: data.shape.clone(),
        dtype: data.dtype,
    };
    (share(owner.clone()), share(owner))
}

/// A tensor made on the device from host bytes, as a handle.
fn from_data<B: BackendIr>(data: TensorData, device: &B::Device) -> B::Handle {
    let dtype = data.dtype;
    if dtype.is_float() {
        B::float_tensor_handle(B::float_from_data(data, device))
    } else if dtype.is_int() {
        B::int_tensor_handle(B::int_from_data(data, device))
    } else if let DType::QFloat(_) = dtype {
        B::quantized_tensor_handle(B::q_from_data(data, device))
    } else {
        B::bool_tensor_handle(B::bool_from_data(data, device))
    }
}

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> TransferError {
    TransferError::Panicked(
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "without a message".into()),
    )
}

/// What both workers share with the engine: the jitter setting and the allocator figures.
type Shared = (Arc<AtomicU64>, Arc<WorkerPools>);

/// A job of a transfer worker.
trait Job<B: BackendIr>: Send + 'static {
    /// The tensor it moves.
    fn id(&self) -> TensorId;
    /// What the engine is told of a job that a panic took before it could report.
    fn lost(id: TensorId, error: TransferError) -> Done<B>;
}

impl<B: BackendIr> Job<B> for OffloadJob<B> {
    fn id(&self) -> TensorId {
        self.id
    }

    /// An offload only reads the device copy: the tensor stays resident.
    fn lost(id: TensorId, error: TransferError) -> Done<B> {
        Done::Offloaded {
            id,
            result: Err(error),
            nanos: 0,
            codec_nanos: 0,
            on_device: false,
        }
    }
}

impl<B: BackendIr> Job<B> for FetchJob<B> {
    fn id(&self) -> TensorId {
        self.id
    }

    /// The copy went with the job (the engine recomputes the tensor from its recipe, or its
    /// use fails with `TensorLost`); [`receive_job`] catches every panic that could take it.
    fn lost(id: TensorId, error: TransferError) -> Done<B> {
        Done::Fetched {
            id,
            result: Err(error),
            copy: None,
            nanos: 0,
            codec_nanos: 0,
            on_device: false,
        }
    }
}

/// A worker thread named `name`: does each job of `jobs` with `work` and reports it on
/// `done`, until either queue closes. A panic that escapes a job is reported as that job's
/// failure and the worker goes on: a worker never dies with a job in flight, which would
/// leave the engine waiting for it forever.
fn spawn_worker<J: Job<B>, B: BackendIr>(
    name: &str,
    jobs: mpsc::Receiver<J>,
    done: mpsc::Sender<Done<B>>,
    work: impl Fn(J) -> Done<B> + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for job in jobs {
                let id = job.id();
                let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(job)))
                    .unwrap_or_else(|panic| J::lost(id, panic_message(panic)));
                if done.send(report).is_err() {
                    return;
                }
            }
        })
}

/// A worker's bookkeeping after a job (the allocator's figures, the jitter of the ordering
/// test): a panic there is caught, and the job's result is reported all the same.
fn after_job(bookkeeping: impl FnOnce()) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if faults::take(Hook::WorkerPanic) {
            panic!("injected worker panic after the job");
        }
        bookkeeping()
    }));
}

/// The send worker's job: a tensor copied off the device, compressed where it pays.
fn send_job<B: BackendIr>(job: OffloadJob<B>, (jitter, memory): &Shared) -> Done<B> {
    let id = job.id;
    let start = Instant::now();
    let bytes = super::bytes_of(&job.shape, job.dtype);
    let _span = tracing::debug_span!("burn_swap::send", tensor = id.value(), bytes).entered();
    let device = job.route.device.clone();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if faults::take(Hook::WorkerPanic) {
            panic!("injected worker panic");
        }
        memory.enter::<B>(Worker::Send, &device);
        send::<B>(job)
    }))
    .unwrap_or_else(|panic| Err(panic_message(panic)));
    let (result, codec_nanos, on_device) = match result {
        Ok((copy, codec_nanos, on_device)) => (Ok(copy), codec_nanos, on_device),
        Err(e) => (Err(e), 0, false),
    };
    after_job(|| {
        memory.note::<B>(Worker::Send, &device);
        pause(jitter, id.value());
    });
    Done::Offloaded {
        id,
        result,
        nanos: start.elapsed().as_nanos() as u64,
        codec_nanos,
        on_device,
    }
}

/// The receive worker's job: a copy written back to the device, decompressed where needed.
/// A failure hands the copy back whole (see [`write`]), a panic of the job's own included.
fn receive_job<B: BackendIr>(job: FetchJob<B>, (jitter, memory): &Shared) -> Done<B> {
    let FetchJob {
        id,
        copy,
        device,
        sync,
    } = job;
    let start = Instant::now();
    let _span = tracing::debug_span!(
        "burn_swap::receive",
        tensor = id.value(),
        bytes = copy.bytes()
    )
    .entered();
    let mut slot = Some(copy);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if faults::take(Hook::WorkerPanic) {
            panic!("injected worker panic");
        }
        memory.enter::<B>(Worker::Receive, &device);
        let copy = slot.take().expect("the copy is taken once");
        write::<B>(&device, copy, sync)
    }))
    .unwrap_or_else(|panic| Err((panic_message(panic), slot.take().map(Box::new))));
    after_job(|| {
        memory.note::<B>(Worker::Receive, &device);
        pause(jitter, id.value() ^ RECEIVE_KEY);
    });
    let nanos = start.elapsed().as_nanos() as u64;
    match result {
        Ok((handle, codec_nanos, on_device)) => Done::Fetched {
            id,
            result: Ok(handle),
            copy: None,
            nanos,
            codec_nanos,
            on_device,
        },
        Err((error, copy)) => Done::Fetched {
            id,
            result: Err(error),
            copy,
            nanos,
            codec_nanos: 0,
            on_device: false,
        },
    }
}

impl<B: BackendIr> Transfers<B> {
    /// The workers' streams: their allocation mode and the allocator's figures.
    pub fn pools(&self) -> &WorkerPools {
        &self.memory
    }

    /// The pool of raw host copies, on a backend whose tensors live in host memory (also for
    /// the copies made on the compute thread).
    pub fn pool(&self) -> Option<&HostPool> {
        self.pool.as_deref()
    }

    /// Drops the device copy of a tensor whose offload completed: on a backend whose tensors
    /// live in host memory its buffer goes to the pool of host copies, within the room below
    /// the host copies' highest peak (`host` and `peak`: their bytes now and their peak).
    pub fn release(&self, handle: B::Handle, shape: Shape, dtype: DType, host: (u64, u64)) {
        match &self.pool {
            Some(pool) => recycle::<B>(handle, shape, dtype, pool, host),
            None => drop(handle),
        }
    }

    /// Sets the ordering stress test's maximum delay (0: off), also for workers running.
    pub fn set_jitter(&self, max_micros: u64) {
        self.jitter.store(max_micros, Ordering::Relaxed);
    }

    fn start(&mut self) {
        if self.done.is_some() {
            return;
        }
        let (done_tx, done_rx) = mpsc::channel();
        let (send_tx, send_rx) = mpsc::channel::<OffloadJob<B>>();
        let (receive_tx, receive_rx) = mpsc::channel::<FetchJob<B>>();
        let shared: Shared = (self.jitter.clone(), self.memory.clone());
        let on_send = shared.clone();
        let sender = spawn_worker("burn-swap-send", send_rx, done_tx.clone(), move |job| {
            send_job(job, &on_send)
        });
        let receiver = spawn_worker("burn-swap-receive", receive_rx, done_tx, move |job| {
            receive_job(job, &shared)
        });
        // A worker that cannot start leaves its queue closed: requests then run on the
        // compute thread (see `offload`/`fetch`).
        if let Ok(worker) = sender {
            self.workers.push(worker);
            self.send = Some(send_tx);
        }
        if let Ok(worker) = receiver {
            self.workers.push(worker);
            self.receive = Some(receive_tx);
        }
        self.done = Some(done_rx);
    }

    /// Queues an offload of a clone of `handle`, compressed on the worker when `compression`
    /// says it pays. Returns `false` (nothing queued) when the send worker is not available.
    pub fn offload(
        &mut self,
        id: TensorId,
        handle: B::Handle,
        shape: Shape,
        dtype: DType,
        route: Route<B>,
    ) -> bool {
        self.start();
        let Some(send) = &self.send else {
            return false;
        };
        let job = OffloadJob {
            id,
            handle,
            shape,
            dtype,
            route,
            pool: self.pool.clone(),
        };
        if send.send(job).is_err() {
            self.send = None;
            return false;
        }
        self.in_flight += 1;
        true
    }

    /// Queues a fetch (decompressed on the worker). Gives the copy back when the receive
    /// worker is not available.
    pub fn fetch(
        &mut self,
        id: TensorId,
        copy: HostCopy,
        device: B::Device,
        sync: bool,
    ) -> Result<(), HostCopy> {
        self.start();
        let Some(receive) = &self.receive else {
            return Err(copy);
        };
        let job = FetchJob {
            id,
            copy,
            device,
            sync,
        };
        if let Err(mpsc::SendError(job)) = receive.send(job) {
            self.receive = None;
            return Err(job.copy);
        }
        self.in_flight += 1;
        Ok(())
    }

    /// Transfers queued and not yet reported.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// A finished transfer, without waiting.
    pub fn try_next(&mut self) -> Option<Done<B>> {
        let done = self.done.as_ref()?.try_recv().ok()?;
        self.in_flight -= 1;
        Some(done)
    }

    /// The next finished transfer, waiting for it; `None` when nothing is in flight.
    pub fn next(&mut self) -> Option<Done<B>> {
        if self.in_flight == 0 {
            return None;
        }
        let done = self.done.as_ref()?.recv().ok()?;
        self.in_flight -= 1;
        Some(done)
    }
}

impl<B: BackendIr> Drop for Transfers<B> {
    fn drop(&mut self) {
        self.send = None;
        self.receive = None;
        // Completions still queued are dropped with the receiver, after the workers stopped.
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use burn_backend::TensorData;
    use burn_std::AllocationProperty;

    /// A lent copy and the kept one read the same bytes without a copy, keep the allocation
    /// property, and the kept one outlives the lent one (as when the backend's write drops
    /// what it took and fails).
    #[test]
    fn a_lent_copy_leaves_the_kept_one_whole() {
        let data = TensorData::new(vec![1.5f32, -0.0, 3.25, 7.0], [2, 2]);
        let expected = data.clone();
        let property = data.bytes.property();
        let (lent, kept) = super::lend(data);
        assert_eq!(lent.bytes.as_ptr(), kept.bytes.as_ptr(), "no copy");
        assert_eq!(lent.bytes.property(), property);
        assert_eq!(kept.bytes.property(), property);
        assert_ne!(property, AllocationProperty::Pinned);
        drop(lent);
        assert_eq!(kept, expected);
        // Lent again (a retry), it is still the same bytes.
        let (again, kept) = super::lend(kept);
        drop(kept);
        assert_eq!(again, expected);
    }

    /// On Flex a device copy that nothing else holds goes to the host pool when its offload
    /// completes, and the next copy of its length is made into it: the same bytes as Flex's
    /// own read, in the same buffer. A device copy something else still holds is left alone.
    #[test]
    fn a_freed_device_copy_takes_the_next_host_copy_of_its_length() {
        use super::{HostPool, read, recycle};
        use burn::backend::Flex;
        use burn_backend::ops::FloatTensorOps;
        use burn_ir::HandleKind;
        let device = Default::default();
        let tensor = |values: Vec<f32>| {
            let data = TensorData::new(values, [2, 2]);
            HandleKind::<Flex>::Float(Flex::float_from_data(data, &device))
        };
        let (shape, dtype) = (burn_std::Shape::new([2, 2]), burn_std::DType::F32);
        let pool = HostPool::default();

        // Held elsewhere too (a view, a clone): not taken, and intact.
        let shared = tensor(vec![1.0, 2.0, 3.0, 4.0]);
        let other = shared.clone();
        recycle::<Flex>(shared, shape.clone(), dtype, &pool, (0, 1 << 20));
        assert_eq!(pool.idle_bytes(), 0);
        let data = read::<Flex>(other, shape.clone(), dtype, None).unwrap();
        assert_eq!(data.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);

        // Held by nothing else: taken whole, then filled by the next copy of 16 bytes.
        let freed = tensor(vec![0.0; 4]);
        let address = match &freed {
            HandleKind::Float(t) => t.bytes().as_ptr(),
            _ => unreachable!(),
        };
        recycle::<Flex>(freed, shape.clone(), dtype, &pool, (0, 1 << 20));
        assert_eq!(pool.idle_bytes(), 16);
        let source = tensor(vec![-1.5, 0.0, 2.25, 8.0]);
        let copy = read::<Flex>(source.clone(), shape.clone(), dtype, Some(&pool)).unwrap();
        assert_eq!(copy.bytes.as_ptr(), address, "made in the recycled buffer");
        assert_eq!(pool.idle_bytes(), 0);
        let own = read::<Flex>(source, shape, dtype, None).unwrap();
        assert_eq!(copy, own, "the same bytes as Flex's own read");
        // Adopted back as a tensor, it is Flex's own buffer: written in place, not copied.
        let added = Flex::float_add_scalar(Flex::float_from_data(copy, &device), 1.0f32.into());
        assert_eq!(added.bytes().as_ptr(), address, "written in place");
    }

    /// A panic that escapes a job is that job's failure, reported; the worker goes on with
    /// the next job (a dead worker would leave the engine waiting for it forever).
    #[test]
    fn a_worker_survives_a_panic_that_escapes_its_job() {
        use super::{Done, FetchJob, HostCopy};
        use burn::backend::Flex;
        use burn::backend::flex::FlexDevice;
        let (jobs, queue) = std::sync::mpsc::channel::<FetchJob<Flex>>();
        let (done, reports) = std::sync::mpsc::channel::<Done<Flex>>();
        let worker = super::spawn_worker("test-worker", queue, done, |job: FetchJob<Flex>| {
            if job.id.value() == 1 {
                panic!("injected escape");
            }
            <FetchJob<Flex> as super::Job<Flex>>::lost(
                job.id,
                super::TransferError::Injected("test"),
            )
        })
        .unwrap();
        for id in [1, 2] {
            let data = TensorData::new(vec![1.0f32; 4], [4]);
            jobs.send(FetchJob {
                id: burn_ir::TensorId::new(id),
                copy: HostCopy::Raw(data),
                device: FlexDevice,
                sync: false,
            })
            .unwrap();
        }
        drop(jobs);
        let first = reports.recv().unwrap();
        assert!(
            matches!(&first, Done::Fetched { id, result: Err(super::TransferError::Panicked(m)), .. }
                if id.value() == 1 && m == "injected escape"),
            "the escaped panic is the job's failure"
        );
        assert_eq!(
            reports.recv().unwrap().id().value(),
            2,
            "the worker went on"
        );
        worker.join().unwrap();
    }

    #[test]
    fn flex_adopts_the_bytes_it_is_given() {
        assert!(super::adopts_bytes::<burn::backend::Flex>());
    }
}
