//! The engine's own store of the inner backend's handles, by tensor id.
//!
//! burn-router's runner keeps its handles in a table of its own, behind a lock of its own,
//! and hands out ids from a counter it locks for; the engine already runs every op of its
//! device under its one lock, so its store needs neither: a plain map, and ids from an
//! atomic counter the clients of every device share (ids stay unique in the process).

use std::sync::atomic::{AtomicU64, Ordering};

use burn_backend::TensorData;
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor};
use burn_ir::{BackendIr, TensorHandle, TensorId, TensorIr, TensorStatus};
use hashbrown::HashMap;

/// The next tensor id handed out, shared by every device (0 is never one).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A tensor id no tensor has had before.
pub(crate) fn fresh_id() -> TensorId {
    TensorId::new(NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

/// The inner backend's handles of one device's tensors, by id.
pub(crate) struct Handles<B: BackendIr> {
    device: B::Device,
    map: HashMap<TensorId, B::Handle>,
}

impl<B: BackendIr> Handles<B> {
    pub(crate) fn new(device: B::Device) -> Self {
        Self {
            device,
            map: HashMap::new(),
        }
    }

    /// The device the handles live on.
    pub(crate) fn device(&self) -> &B::Device {
        &self.device
    }

    /// The handle of `tensor`, as its status says: a read-only use leaves it in the store
    /// (the handle is cloned, which shares the buffer), a read-write use takes it out.
    ///
    /// # Panics
    /// When the store has no handle for the tensor, or its status is `NotInit`: the engine
    /// hands the store only tensors it has booked, so either is a bug in burn-swap.
    pub(crate) fn handle(&mut self, tensor: &TensorIr) -> B::Handle {
        let found = match tensor.status {
            TensorStatus::ReadOnly => self.map.get(&tensor.id).cloned(),
            TensorStatus::ReadWrite => self.map.remove(&tensor.id),
            TensorStatus::NotInit => None,
        };
        found.unwrap_or_else(|| missing(tensor))
    }

    /// The handle under `id`, left in the store.
    pub(crate) fn get(&self, id: &TensorId) -> Option<&B::Handle> {
        self.map.get(id)
    }

    fn with_shape(&mut self, tensor: &TensorIr) -> TensorHandle<B::Handle> {
        TensorHandle {
            handle: self.handle(tensor),
            shape: crate::exec::shape_of(&tensor.shape),
        }
    }

    pub(crate) fn float(&mut self, tensor: &TensorIr) -> FloatTensor<B> {
        B::float_tensor(self.with_shape(tensor))
    }

    pub(crate) fn int(&mut self, tensor: &TensorIr) -> IntTensor<B> {
        B::int_tensor(self.with_shape(tensor))
    }

    pub(crate) fn bool(&mut self, tensor: &TensorIr) -> BoolTensor<B> {
        B::bool_tensor(self.with_shape(tensor))
    }

    pub(crate) fn quantized(&mut self, tensor: &TensorIr) -> QuantizedTensor<B> {
        B::quantized_tensor(self.with_shape(tensor))
    }

    /// Each of `tensors` as a float tensor, in order.
    pub(crate) fn floats(&mut self, tensors: &[TensorIr]) -> Vec<FloatTensor<B>> {
        tensors.iter().map(|t| self.float(t)).collect()
    }

    pub(crate) fn put_float(&mut self, id: TensorId, tensor: FloatTensor<B>) {
        self.insert(id, B::float_tensor_handle(tensor));
    }

    pub(crate) fn put_int(&mut self, id: TensorId, tensor: IntTensor<B>) {
        self.insert(id, B::int_tensor_handle(tensor));
    }

    pub(crate) fn put_bool(&mut self, id: TensorId, tensor: BoolTensor<B>) {
        self.insert(id, B::bool_tensor_handle(tensor));
    }

    /// Puts `handle` under `id` (replacing any handle there).
    pub(crate) fn insert(&mut self, id: TensorId, handle: B::Handle) {
        self.map.insert(id, handle);
    }

    /// Puts `handle` under a fresh id, which it returns.
    pub(crate) fn insert_fresh(&mut self, handle: B::Handle) -> TensorId {
        let id = fresh_id();
        self.insert(id, handle);
        id
    }

    /// Takes the handle under `id` out of the store, if there is one.
    pub(crate) fn remove(&mut self, id: &TensorId) -> Option<B::Handle> {
        self.map.remove(id)
    }

    /// Makes a tensor of `data` on the device, under a fresh id; returns it as a read-write
    /// use.
    pub(crate) fn upload(&mut self, data: TensorData) -> TensorIr {
        let (shape, dtype) = (data.shape.clone(), data.dtype);
        let handle = if dtype.is_float() {
            B::float_tensor_handle(B::float_from_data(data, &self.device))
        } else if dtype.is_int() {
            B::int_tensor_handle(B::int_from_data(data, &self.device))
        } else if dtype.is_bool() {
            B::bool_tensor_handle(B::bool_from_data(data, &self.device))
        } else {
            B::quantized_tensor_handle(B::q_from_data(data, &self.device))
        };
        let id = self.insert_fresh(handle);
        TensorIr {
            id,
            shape,
            status: TensorStatus::ReadWrite,
            dtype,
        }
    }

    /// Reads `tensor`'s data (taking it out of the store on a read-write use).
    pub(crate) fn read(
        &mut self,
        tensor: &TensorIr,
    ) -> burn_std::future::DynFut<Result<TensorData, burn_backend::ExecutionError>> {
        match tensor.dtype {
            dtype if dtype.is_float() => Box::pin(B::float_into_data(self.float(tensor))),
            dtype if dtype.is_int() => Box::pin(B::int_into_data(self.int(tensor))),
            dtype if dtype.is_bool() => Box::pin(B::bool_into_data(self.bool(tensor))),
            _ => Box::pin(B::q_into_data(self.quantized(tensor))),
        }
    }

    /// How many handles the store holds.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn missing(tensor: &TensorIr) -> ! {
    panic!(
        "burn-swap: no handle for tensor {:?} ({:?} use, {:?}, shape {:?})",
        tensor.id, tensor.status, tensor.dtype, tensor.shape
    )
}
