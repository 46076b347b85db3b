//! A copy written back to the device: by the device's own route (its codec kernels, peer
//! copies) or through host bytes, the copy kept until the write succeeded.

use std::time::Instant;

use burn_backend::{DType, TensorData};
use burn_ir::BackendIr;

use super::TransferError;
use super::host_resident::adopts_bytes;
use crate::exec::faults::{self, Hook};
use crate::exec::residency::HostCopy;
use crate::exec::transfer_error::panic_message;

/// A copy brought back by the device's own route, into a new tensor: a compressed host copy
/// decompressed by the device's kernels (CubeCL backends), or a tensor split across peer
/// devices brought back by peer copies (CUDA). `None` otherwise (a raw copy, another
/// backend): the caller takes the host route.
fn device_route<B: BackendIr>(
    copy: &HostCopy,
    device: &B::Device,
) -> Option<Result<B::Handle, TransferError>> {
    if let HostCopy::Compressed(c) = copy {
        return crate::exec::cubecl_fast_path::decompress_fetch::<B>(c, device)
            .map(|result| result.map(B::float_tensor_handle));
    }
    if let HostCopy::Peers(p) = copy
        && p.pool().on_devices()
    {
        #[cfg(feature = "cuda")]
        if let Some(result) = crate::exec::peers::cuda::peer_receive::<B>(p, device) {
            return Some(result.map(B::float_tensor_handle));
        }
        return crate::exec::peers::receive_backend::<B>(p, device)
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
pub(super) fn lend(data: TensorData) -> (TensorData, TensorData) {
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
