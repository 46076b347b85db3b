//! Peer offload over any backend's devices: the tensor sliced on its device and the pieces
//! moved with the backend's own `to_device`, brought back and concatenated in offset order.

use std::sync::Arc;

use super::*;

/// The generic route of device peers (any backend, Burn's `to_device`): the tensor flattened
/// and sliced into the advisor's pieces on its device, each moved to its peer device with
/// `to_device` (at once, one sender per destination). `None`: not a float tensor, or the peers
/// could not take all of it (the caller takes the host route).
pub(crate) fn send_backend<B: burn_ir::BackendIr>(
    handle: B::Handle,
    shape: &burn_backend::Shape,
    dtype: burn_backend::DType,
    home: &B::Device,
    pool: &Arc<PeerPool>,
) -> Option<PeerCopy> {
    use burn_backend::Device;
    if !dtype.is_float() {
        return None;
    }
    let width = dtype.size().max(1);
    let n = shape.num_elements();
    let flat = B::float_reshape(
        B::float_tensor(burn_ir::TensorHandle {
            handle,
            shape: shape.clone(),
        }),
        burn_backend::Shape::new([n]),
    );
    let home_id = home.to_id();
    pool.send_device(
        n * width,
        width as u64,
        shape.clone(),
        dtype,
        |index, offset, bytes| {
            let (start, end) = (offset / width, (offset + bytes) / width);
            let piece = B::float_slice(
                flat.clone(),
                &[burn_backend::Slice::new(
                    start as isize,
                    Some(end as isize),
                    1,
                )],
            );
            let index = u16::try_from(index).map_err(|_| {
                crate::exec::transfer_error::TransferError::Peer(format!(
                    "device index {index} out of range"
                ))
            })?;
            let peer = B::Device::from_id(burn_backend::DeviceId::new(home_id.type_id, index));
            let moved = B::float_to_device(piece, &peer);
            Ok(PieceData::Backend {
                tensor: Box::new(moved),
                read: read_float::<B>,
            })
        },
    )
}

/// A piece's bytes read back through the backend (for reads of an offloaded tensor).
fn read_float<B: burn_ir::BackendIr>(
    tensor: &(dyn core::any::Any + Send + Sync),
) -> Option<Vec<u8>> {
    tensor
        .downcast_ref::<B::FloatTensorPrimitive>()
        .and_then(|t| burn_std::reader::try_read_sync(B::float_into_data(t.clone())))
        .and_then(Result::ok)
        .map(|data| data.bytes.to_vec())
}

/// The reverse route of [`send_backend`]: every piece moved back to `home` with
/// `to_device`, in offset order, concatenated and given the tensor's shape. `None` when the
/// pieces are not the generic route's.
pub(crate) fn receive_backend<B: burn_ir::BackendIr>(
    copy: &PeerCopy,
    home: &B::Device,
) -> Option<B::FloatTensorPrimitive> {
    let mut pieces: Vec<&Piece> = copy.pieces.iter().collect();
    pieces.sort_by_key(|p| p.offset);
    let mut parts = Vec::with_capacity(pieces.len());
    for piece in pieces {
        let PieceData::Backend { tensor, .. } = &piece.data else {
            return None;
        };
        let tensor = tensor.downcast_ref::<B::FloatTensorPrimitive>()?.clone();
        let start = Instant::now();
        parts.push(B::float_to_device(tensor, home));
        copy.pool.note_device_fetch(piece.peer, piece.len, start);
    }
    let flat = if parts.len() == 1 {
        parts.pop()?
    } else {
        B::float_cat(parts, 0)
    };
    Some(B::float_reshape(flat, copy.shape.clone()))
}
