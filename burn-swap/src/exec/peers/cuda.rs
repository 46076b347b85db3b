//! Peer copies on CUDA: a float tensor's bytes split across peer devices straight from its
//! own buffer (no host bounce), each piece in memory the peer's own CubeCL allocator gives,
//! and brought back the same way.

use burn_backend::{Backend, DType, Shape};
use burn_cubecl::tensor::CubeTensor;
use cubecl::Runtime;

use super::{PeerCopy, PeerPool, PieceData};
use crate::exec::cubecl_fast_path::{as_cube, as_device, into_primitive};
use crate::exec::transfer_error::TransferError;

/// A piece of an offloaded tensor in a peer device's memory, allocated by that device's own
/// CubeCL allocator (so it counts there); freed when dropped.
pub(crate) struct DeviceSlot {
    client: cubecl::client::ComputeClient<cubecl::cuda::CudaRuntime>,
    handle: cubecl::server::Handle,
    /// The peer's CUDA ordinal.
    pub ordinal: usize,
}

impl DeviceSlot {
    /// The piece's bytes read back to the host (the slow way back, for reads of an offloaded
    /// tensor).
    pub fn to_host(&self) -> Result<Vec<u8>, String> {
        cubecl::future::block_on(self.client.read_async(vec![self.handle.clone()]))
            .map_err(|e| format!("{e:?}"))
            .and_then(|mut b| b.pop().map(|b| b.to_vec()).ok_or_else(|| "no bytes".into()))
    }
}

/// The transmitter of peer offload on CUDA: the bytes of a float tensor split across peer devices by
/// peer copies from its own buffer (no host bounce), as the advisor splits them. `None`:
/// not a CUDA tensor, or the peers could not take all of it (the caller takes the host
/// route; the tensor's buffer is untouched either way).
pub(crate) fn peer_send<B: Backend>(
    tensor: &B::FloatTensorPrimitive,
    shape: &Shape,
    dtype: DType,
    pool: &std::sync::Arc<PeerPool>,
) -> Option<PeerCopy> {
    use cubecl::cuda::{CudaDevice, CudaRuntime};
    let t = as_cube::<CudaRuntime, _>(tensor).filter(|t| t.is_contiguous())?;
    let len = shape.num_elements() * dtype.size();
    let home = t.device.index;
    pool.send_device(
        len,
        dtype.size().max(1) as u64,
        shape.clone(),
        dtype,
        |ordinal, offset, bytes| {
            let client = CudaRuntime::client(&CudaDevice { index: ordinal });
            let handle = client.empty(bytes);
            crate::gpu::cuda::peer::copy_between(
                crate::gpu::cuda::peer::Range {
                    client: &client,
                    handle: &handle,
                    ordinal,
                    offset: 0,
                },
                crate::gpu::cuda::peer::Range {
                    client: &t.client,
                    handle: &t.handle,
                    ordinal: home,
                    offset: offset as u64,
                },
                bytes,
            )
            .map_err(|e| TransferError::Peer(e.to_string()))?;
            Ok(PieceData::Device(DeviceSlot {
                client,
                handle,
                ordinal,
            }))
        },
    )
}

/// The reverse route: a tensor split across peer devices brought back into a new buffer on
/// `device` by peer copies, piece by piece as recorded at offload. `None` when `device` is
/// not a CUDA device or a piece is not on one.
pub(crate) fn peer_receive<B: Backend>(
    copy: &PeerCopy,
    device: &B::Device,
) -> Option<Result<B::FloatTensorPrimitive, TransferError>> {
    use cubecl::cuda::CudaRuntime;
    let d = as_device::<CudaRuntime, _>(device)?;
    let pool = copy.pool();
    let (shape, dtype) = copy.meta();
    let client = CudaRuntime::client(d);
    let handle = client.empty(copy.len());
    let result = std::thread::scope(|scope| {
        let jobs: Vec<_> = copy
            .pieces()
            .iter()
            .map(|piece| {
                let (client, handle) = (&client, &handle);
                scope.spawn(move || {
                    let PieceData::Device(slot) = &piece.data else {
                        return Err(TransferError::Peer("a piece is not on a device".into()));
                    };
                    let start = std::time::Instant::now();
                    crate::gpu::cuda::peer::copy_between(
                        crate::gpu::cuda::peer::Range {
                            client,
                            handle,
                            ordinal: d.index,
                            offset: piece.offset as u64,
                        },
                        crate::gpu::cuda::peer::Range {
                            client: &slot.client,
                            handle: &slot.handle,
                            ordinal: slot.ordinal,
                            offset: 0,
                        },
                        piece.len,
                    )
                    .map_err(|e| TransferError::Peer(e.to_string()))?;
                    pool.note_device_fetch(piece.peer, piece.len, start);
                    Ok(())
                })
            })
            .collect();
        jobs.into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err(TransferError::Peer("a peer copy panicked".into())))
            })
            .collect::<Result<Vec<()>, TransferError>>()
    });
    if let Err(e) = result {
        return Some(Err(e));
    }
    Some(into_primitive::<CudaRuntime, B>(
        CubeTensor::<CudaRuntime>::new_contiguous(client, d.clone(), shape.clone(), handle, dtype),
    ))
}
