//! Tensors that live in host memory (Flex): their bytes copied into, and their buffers
//! recycled for, the pool of host copies.

use burn_backend::{DType, Shape, TensorData};
use burn_ir::{BackendIr, TensorHandle};

use crate::exec::host_buffer_pool::HostPool;

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
pub(super) fn copy_host_resident<T: 'static>(tensor: &T, pool: &HostPool) -> Option<TensorData> {
    let tensor = whole_flex_tensor(tensor)?;
    Some(TensorData {
        bytes: pool.copy(tensor.bytes()),
        shape: tensor.layout().shape().clone(),
        dtype: tensor.dtype(),
    })
}

/// The storage of a Flex tensor that nothing else refers to, taken whole for `pool` (see
/// [`HostPool`]); anything else is dropped as it would have been.
pub(super) fn recycle<B: BackendIr>(
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

/// Whether the inner backend's `from_data` adopts the bytes it is given as its tensor's
/// storage (Flex: an `Arc` around them, nothing that can fail), rather than copying them to
/// the device (CubeCL backends, fused backends, any other).
pub(super) fn adopts_bytes<B: BackendIr>() -> bool {
    use core::any::TypeId;
    TypeId::of::<B::FloatTensorPrimitive>() == TypeId::of::<burn::backend::flex::FlexTensor>()
}
