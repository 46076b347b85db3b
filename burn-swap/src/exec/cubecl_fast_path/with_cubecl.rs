//! The CubeCL fast path where a CubeCL runtime is compiled in (the `cuda` or `wgpu`
//! feature): see the parent module.

use core::any::Any;
use std::time::Instant;

use burn_backend::{Backend, DType, Shape};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use cubecl::Runtime;

use crate::codec::Compressed;
use crate::codec::kernels;
use crate::config::Compression;
use crate::exec::transfer_error::TransferError;
use crate::plan::compression::{self, Decision};
use crate::report::AllocatorUsage;

/// `value` as the CubeCL tensor of runtime `R`, when it is one.
pub(crate) fn as_cube<R: CubeRuntime, T: 'static>(value: &T) -> Option<&CubeTensor<R>> {
    (value as &dyn Any).downcast_ref::<CubeTensor<R>>()
}

/// `device` as a device of runtime `R`, when it is one.
pub(crate) fn as_device<R: Runtime, D: 'static>(device: &D) -> Option<&R::Device> {
    (device as &dyn Any).downcast_ref::<R::Device>()
}

/// Runs `$body` with `$R` bound to each CubeCL runtime compiled in, returning the first
/// `Some`.
macro_rules! each_runtime {
    (|$R:ident| $body:expr) => {{
        #[cfg(feature = "cuda")]
        {
            type $R = cubecl::cuda::CudaRuntime;
            if let Some(found) = $body {
                return Some(found);
            }
        }
        #[cfg(feature = "wgpu")]
        {
            type $R = cubecl::wgpu::WgpuRuntime;
            if let Some(found) = $body {
                return Some(found);
            }
        }
        None
    }};
}

/// `exec::layout::probe` of a CubeCL tensor, as (dense, buffer, buffer bytes): dense when
/// laid out row-major over a buffer of exactly its size; its buffer named by its memory
/// handle's id and sized by its handle. CubeCL gives that id no accessor; its `Debug` prints
/// it (`ManagedMemoryId { value: N }`), and a handle it cannot be read from is not probed.
pub(crate) fn probe<T: 'static>(tensor: &T) -> Option<(bool, usize, u64)> {
    each_runtime!(|R| as_cube::<R, T>(tensor).and_then(|t| {
        Some((
            t.is_contiguous() && t.is_contiguous_buffer(),
            memory_id(&t.handle.memory)?,
            t.handle.size(),
        ))
    }))
}

/// `exec::layout::storage` of a CubeCL tensor: its handle as a dense one-dimensional
/// tensor of its element type over the bytes the handle covers (no copy: the same handle),
/// its metadata (shape and strides from the handle's first byte), the dense tensor's
/// shape, and where the handle starts in its memory (bytes). `None` for a quantized tensor, or a handle
/// that is not a whole number of elements.
pub(crate) fn storage<T: 'static>(tensor: &T) -> Option<(T, burn_std::Metadata, Shape, u64)> {
    each_runtime!(|R| as_cube::<R, T>(tensor).and_then(|t| {
        let width = t.dtype.size();
        // The bytes the tensor may index: its handle's, less the offsets of a slice (the
        // memory under the handle may be larger, and belong to others).
        let size = t.handle.size_in_used() as usize;
        if width == 0 || !size.is_multiple_of(width) || t.qparams.is_some() {
            return None;
        }
        let whole = Shape::new([size / width]);
        let dense = CubeTensor::<R>::new_contiguous(
            t.client.clone(),
            t.device.clone(),
            whole.clone(),
            t.handle.clone(),
            t.dtype,
        );
        let dense: Box<dyn Any> = Box::new(dense);
        let from = t.handle.offset_start.unwrap_or(0);
        Some((*dense.downcast::<T>().ok()?, (*t.meta).clone(), whole, from))
    }))
}

/// `exec::layout::restore` of a CubeCL tensor: the dense tensor over a handle that came
/// back, given the shape and strides `meta` over it; `tensor` itself when it is not a CubeCL
/// one.
pub(crate) fn restore<T: 'static>(tensor: T, meta: burn_std::Metadata) -> T {
    /// `boxed` with `meta` when it is the tensor of runtime `R`; as it was otherwise.
    fn relaid<R: CubeRuntime>(boxed: Box<dyn Any>, meta: &burn_std::Metadata) -> Box<dyn Any> {
        match boxed.downcast::<CubeTensor<R>>() {
            Ok(mut t) => {
                t.meta = Box::new(meta.clone());
                t
            }
            Err(other) => other,
        }
    }
    let boxed: Box<dyn Any> = Box::new(tensor);
    #[cfg(feature = "cuda")]
    let boxed = relaid::<cubecl::cuda::CudaRuntime>(boxed, &meta);
    #[cfg(feature = "wgpu")]
    let boxed = relaid::<cubecl::wgpu::WgpuRuntime>(boxed, &meta);
    *boxed.downcast::<T>().expect("the type it was boxed as")
}

/// The id CubeCL gives a memory handle, read from its `Debug`.
fn memory_id(memory: &impl core::fmt::Debug) -> Option<usize> {
    let text = format!("{memory:?}");
    let start = text.find("value: ")? + "value: ".len();
    let digits: String = text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether `T` is the tensor primitive of a CubeCL runtime compiled in.
pub(crate) fn is_cube<T: 'static>() -> bool {
    fn check<T: 'static>() -> Option<()> {
        each_runtime!(|R| (core::any::TypeId::of::<T>()
            == core::any::TypeId::of::<CubeTensor<R>>())
        .then_some(()))
    }
    check::<T>().is_some()
}

/// The allocator's figures for the pools of the calling thread's stream on `device` (CubeCL
/// keeps a pool per stream: the caller adds up the threads it runs on). `None` when the
/// inner backend is not a CubeCL one.
pub(crate) fn allocator_usage<B: Backend>(device: &B::Device) -> Option<AllocatorUsage> {
    each_runtime!(|R| as_device::<R, _>(device).and_then(|d| {
        let usage = R::client(d).memory_usage().ok()?;
        Some(AllocatorUsage {
            in_use: usage.bytes_in_use,
            reserved: usage.bytes_reserved,
            padding: usage.bytes_padding,
        })
    }))
}

/// Asks the allocator of the calling thread's stream on `device` to give free pages back;
/// `None` when the inner backend is not a CubeCL one.
pub(crate) fn allocator_cleanup<B: Backend>(device: &B::Device) -> Option<()> {
    each_runtime!(|R| as_device::<R, _>(device).map(|d| R::client(d).memory_cleanup()))
}

/// Sets how the pools of the calling thread's stream on `device` place new buffers: each in a
/// device allocation of its exact size (`exact`), or carved out of CubeCL's shared pages (its
/// default). `None` when the inner backend is not a CubeCL one.
pub(crate) fn set_exact_allocations<B: Backend>(device: &B::Device, exact: bool) -> Option<()> {
    let mode = if exact {
        cubecl::MemoryAllocationMode::Persistent
    } else {
        cubecl::MemoryAllocationMode::Auto
    };
    each_runtime!(|R| as_device::<R, _>(device)
        .map(|d| crate::gpu::cubecl_calls::set_allocation_mode(&R::client(d), mode)))
}

/// Whether CubeCL takes a stream's switch to exact-size allocation: not when its
/// `[memory] persistent_memory` is `"disabled"` (it then ignores the switch, and buffers are
/// carved out of pages).
pub(crate) fn exact_allocations_taken() -> bool {
    use cubecl::config::memory::PersistentMemory;
    use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    !matches!(
        CubeClRuntimeConfig::get().memory.persistent_memory,
        PersistentMemory::Disabled
    )
}

/// The number of pool sets CubeCL keeps per device: streams whose ids are equal modulo it
/// share one (its `[streaming] max_streams`).
pub(crate) fn pool_sets() -> u64 {
    use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    u64::from(CubeClRuntimeConfig::get().streaming.max_streams).max(1)
}

/// The device's total memory, when the backend can tell it (CUDA).
pub(crate) fn total_memory<B: Backend>(device: &B::Device) -> Option<u64> {
    #[cfg(feature = "cuda")]
    if let Some(d) = as_device::<cubecl::cuda::CudaRuntime, _>(device) {
        let context = cudarc::driver::CudaContext::new(d.index).ok()?;
        return context.total_mem().ok().map(|b| b as u64);
    }
    let _ = device;
    None
}

/// Whether a tensor of `dtype` takes the device codec: 4- and 8-byte floats (their
/// decompressed buffers need no padding).
fn device_codec_dtype(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64)
}

/// Compresses a float tensor on its device, on the calling thread's stream, and reads back
/// the bitmask and the nonzero values when `policy` says it pays with the exact zero count
/// (which the first kernel gives). `None`: not a CubeCL tensor, or not a dtype or layout the
/// kernels take; `Some(Ok(None))`: compression does not pay (the caller copies it raw).
/// Also returns the nanoseconds spent.
pub(crate) fn compress_offload<B: Backend>(
    tensor: &B::FloatTensorPrimitive,
    shape: &Shape,
    dtype: DType,
    policy: &compression::CompressionPolicy,
) -> Option<Result<(Option<Compressed>, u64), TransferError>> {
    if policy.mode == Compression::Off || !device_codec_dtype(dtype) {
        return None;
    }
    // The kernels read the handle as the tensor's values in order: only a tensor laid out
    // row-major over a handle of exactly its size (a broadcast one is "contiguous" over a
    // smaller handle; its values go through the backend's read).
    each_runtime!(|R| as_cube::<R, _>(tensor)
        .filter(|t| t.is_contiguous() && t.is_contiguous_buffer() && t.dtype == dtype)
        .map(|t| compress_cube(t, shape, dtype, policy)))
}

fn compress_cube<R: CubeRuntime>(
    tensor: &CubeTensor<R>,
    shape: &Shape,
    dtype: DType,
    policy: &compression::CompressionPolicy,
) -> Result<(Option<Compressed>, u64), TransferError> {
    let start = Instant::now();
    let width = dtype.size();
    let n = shape.num_elements();
    let _span = tracing::debug_span!("burn_swap::device_compress", bytes = n * width).entered();
    let c = kernels::compress(&tensor.client, &tensor.handle, n, width)
        .map_err(|e| TransferError::Kernel(e.to_string()))?;
    let decision = Decision {
        elements: n,
        width,
        zero_fraction: 1.0 - c.nonzeros as f64 / n.max(1) as f64,
        link_bandwidth: policy.link_bandwidth,
        // The kernels run far faster than the link: the time check is the link's alone.
        codec_bandwidth: None,
    };
    if !decision.pays(policy.mode) || decision.predicted() >= decision.raw() {
        return Ok((None, start.elapsed().as_nanos() as u64));
    }
    let host = kernels::to_host(&tensor.client, &c, shape.as_slice().to_vec(), dtype)
        .map_err(|e| TransferError::Kernel(e.to_string()))?;
    Ok((Some(host), start.elapsed().as_nanos() as u64))
}

/// Uploads a compressed host copy and decompresses it on the device, on the calling thread's
/// stream, into a new float tensor of the inner backend. `None` when the backend is not a
/// CubeCL one or the dtype does not take the device codec (the caller decompresses on the
/// CPU).
pub(crate) fn decompress_fetch<B: Backend>(
    c: &Compressed,
    device: &B::Device,
) -> Option<Result<B::FloatTensorPrimitive, TransferError>> {
    if !device_codec_dtype(c.dtype) {
        return None;
    }
    each_runtime!(|R| as_device::<R, _>(device).map(|d| decompress_cube::<R, B>(c, d)))
}

fn decompress_cube<R: CubeRuntime, B: Backend>(
    c: &Compressed,
    device: &R::Device,
) -> Result<B::FloatTensorPrimitive, TransferError> {
    let _span = tracing::debug_span!("burn_swap::device_decompress", bytes = c.bytes()).entered();
    let client = R::client(device);
    let on_device =
        kernels::from_host(&client, c).map_err(|e| TransferError::Kernel(e.to_string()))?;
    let handle = kernels::decompress(&client, &on_device)
        .map_err(|e| TransferError::Kernel(e.to_string()))?;
    into_primitive::<R, B>(CubeTensor::<R>::new_contiguous(
        client,
        device.clone(),
        Shape::from(c.shape.clone()),
        handle,
        c.dtype,
    ))
}

/// A CubeCL tensor of runtime `R` as the inner backend's float primitive (which it is, when
/// the backend is `CubeBackend<R>`).
pub(crate) fn into_primitive<R: CubeRuntime, B: Backend>(
    tensor: CubeTensor<R>,
) -> Result<B::FloatTensorPrimitive, TransferError> {
    let boxed: Box<dyn Any> = Box::new(tensor);
    boxed
        .downcast::<B::FloatTensorPrimitive>()
        .map(|b| *b)
        .map_err(|_| {
            TransferError::Backend(
                "the inner backend's float tensors are not CubeCL tensors".into(),
            )
        })
}

/// The CUDA ordinal of `device`, when it is a CUDA device.
#[cfg(feature = "cuda")]
pub(crate) fn cuda_ordinal<B: Backend>(device: &B::Device) -> Option<usize> {
    as_device::<cubecl::cuda::CudaRuntime, _>(device).map(|d| d.index)
}
