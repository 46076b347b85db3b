//! Ops that burn-router would decompose: they run natively on the inner backend, with their
//! inputs and outputs kept in the swap client's books.

use burn_backend::{ExecutionError, TensorData, TensorMetadata};
use burn_ir::{BackendIr, TensorHandle, TensorIr, TensorStatus};
use burn_router::{RouterTensor, RunnerClient};
use burn_std::future::DynFut;

use super::SwapClient;

/// One native op in progress: collect the inputs ([`NativeOp::ir`]), make them resident and
/// make room ([`NativeOp::prepare`]), take the inner tensors, run, register the outputs, and
/// [`NativeOp::finish`] to record it in the trace.
pub(crate) struct NativeOp<I: BackendIr> {
    name: &'static str,
    client: SwapClient<I>,
    inputs: Vec<TensorIr>,
    outputs: Vec<TensorIr>,
}

impl<I: BackendIr> NativeOp<I> {
    pub fn new(name: &'static str, client: SwapClient<I>) -> Self {
        Self {
            name,
            client,
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Takes an input tensor from Burn (with its read-only or last-use status).
    pub fn ir(&mut self, tensor: RouterTensor<SwapClient<I>>) -> TensorIr {
        let ir = tensor.into_ir();
        self.inputs.push(ir.clone());
        ir
    }

    /// Fetches the inputs and makes room for the outputs; fails the op like any other when
    /// the budget cannot hold it.
    pub fn prepare(&mut self) {
        let result = {
            let mut engine = self.client.engine();
            let result = engine.native_prepare(self.name, &self.inputs);
            if result.is_err() {
                engine.abandon_op();
            }
            result
        };
        if let Err(error) = result {
            super::client::fail(error)
        }
    }

    fn handle(&self, ir: &TensorIr) -> TensorHandle<I::Handle> {
        TensorHandle {
            handle: self.client.engine().native_take(ir),
            shape: ir.shape.clone(),
        }
    }

    pub fn float(&self, ir: TensorIr) -> I::FloatTensorPrimitive {
        I::float_tensor(self.handle(&ir))
    }

    pub fn int(&self, ir: TensorIr) -> I::IntTensorPrimitive {
        I::int_tensor(self.handle(&ir))
    }

    pub fn bool(&self, ir: TensorIr) -> I::BoolTensorPrimitive {
        I::bool_tensor(self.handle(&ir))
    }

    fn output(
        &mut self,
        handle: I::Handle,
        shape: burn_backend::Shape,
        dtype: burn_backend::DType,
    ) -> RouterTensor<SwapClient<I>> {
        let id = self
            .client
            .engine()
            .native_output(handle, shape.clone(), dtype);
        self.outputs.push(TensorIr {
            id,
            shape: shape.clone(),
            status: TensorStatus::NotInit,
            dtype,
        });
        RouterTensor::new(id, shape, dtype, self.client.clone())
    }

    pub fn float_out(&mut self, tensor: I::FloatTensorPrimitive) -> RouterTensor<SwapClient<I>> {
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        self.output(I::float_tensor_handle(tensor), shape, dtype)
    }

    pub fn int_out(&mut self, tensor: I::IntTensorPrimitive) -> RouterTensor<SwapClient<I>> {
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        self.output(I::int_tensor_handle(tensor), shape, dtype)
    }

    pub fn bool_out(&mut self, tensor: I::BoolTensorPrimitive) -> RouterTensor<SwapClient<I>> {
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        self.output(I::bool_tensor_handle(tensor), shape, dtype)
    }

    /// Records the op in the trace.
    pub fn finish(self) {
        self.client
            .engine()
            .native_finish(self.name, &self.inputs, &self.outputs);
    }
}

/// Reads a tensor's data as the inner backend holds it (burn-router would convert it to the
/// backend's default element type).
pub(crate) fn read<I: BackendIr>(
    tensor: RouterTensor<SwapClient<I>>,
) -> DynFut<Result<TensorData, ExecutionError>> {
    let client = tensor.client.clone();
    client.read_tensor_async(tensor.into_ir())
}
