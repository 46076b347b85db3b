//! A tensor's copy off the device: read, compressed where it pays, or split across peers.

use std::sync::Arc;
use std::time::Instant;

use burn_backend::{DType, Shape, TensorData};
use burn_ir::{BackendIr, TensorHandle};
use burn_std::reader::try_read_sync;

use super::TransferError;
use super::host_resident::copy_host_resident;
use crate::codec;
use crate::config::Compression;
use crate::exec::faults::{self, Hook};
use crate::exec::host_buffer_pool::HostPool;
use crate::exec::peers::PeerPool;
use crate::exec::residency::HostCopy;
use crate::plan::compression::{self, CompressionPolicy, Decision};

/// Compresses `data` on the CPU when `policy` says it pays (from a sample of its zero
/// fraction, the decision in `plan::compression`) and the result is smaller; keeps it raw
/// otherwise. Also returns the nanoseconds spent compressing (zero when it was not tried).
fn pack(data: TensorData, policy: &CompressionPolicy) -> (HostCopy, u64) {
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

pub(super) fn read<B: BackendIr>(
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

/// [`send`]'s work on any thread: the copy of a tensor (its handle) off the device. With
/// peers, split across them as the advisor says (the host keeps what they cannot
/// take); otherwise to the host, compressed where it pays (on the device for a CubeCL
/// backend). Returns the copy, the nanoseconds spent on compression, and whether the device
/// compressed it. A raw copy of a host-resident tensor takes its memory from `host_pool`
/// when one is given.
pub(crate) fn copy_out<B: BackendIr>(
    handle: B::Handle,
    shape: Shape,
    dtype: DType,
    compression: &CompressionPolicy,
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
    if crate::exec::cubecl_fast_path::COMPILED_IN && dtype.is_float() {
        let tensor = B::float_tensor(TensorHandle {
            handle: handle.clone(),
            shape: shape.clone(),
        });
        let on_device = crate::exec::cubecl_fast_path::compress_offload::<B>(
            &tensor,
            &shape,
            dtype,
            compression,
        );
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
) -> Option<crate::exec::peers::PeerCopy> {
    #[cfg(feature = "cuda")]
    if crate::exec::cuda_ordinal::<B>(device).is_some() {
        let tensor = B::float_tensor(TensorHandle {
            handle: handle.clone(),
            shape: shape.clone(),
        });
        return crate::exec::peers::cuda::peer_send::<B>(&tensor, shape, dtype, pool);
    }
    crate::exec::peers::send_backend::<B>(handle.clone(), shape, dtype, device, pool)
}
