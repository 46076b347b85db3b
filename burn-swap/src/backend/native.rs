//! Ops that burn-router would decompose: they run natively on the inner backend, with their
//! inputs and outputs kept in the swap client's books.

use burn_backend::{DType, ExecutionError, Shape, TensorData, TensorMetadata};
use burn_ir::{BackendIr, TensorHandle, TensorIr, TensorStatus};
use burn_router::{RouterTensor, RunnerClient};
use burn_std::future::DynFut;

use super::SwapClient;
use crate::exec::engine::Engine;

/// One native op: collect the inputs from Burn ([`NativeOp::ir`]), then [`NativeOp::run`] the
/// inner backend's op with the device's engine locked throughout, as for any other op, so that
/// no other thread can move an input between the moment it is made resident and its use.
pub(crate) struct NativeOp<I: BackendIr> {
    name: &'static str,
    client: SwapClient<I>,
    inputs: Vec<TensorIr>,
}

/// The op in progress: turns inputs into the inner backend's tensors and registers outputs.
pub(crate) struct NativeCtx<'a, I: BackendIr> {
    engine: &'a mut Engine<I>,
    client: &'a SwapClient<I>,
    outputs: Vec<TensorIr>,
}

impl<I: BackendIr> NativeOp<I> {
    pub fn new(name: &'static str, client: SwapClient<I>) -> Self {
        Self {
            name,
            client,
            inputs: Vec::new(),
        }
    }

    /// Takes an input tensor from Burn (with its read-only or last-use status).
    pub fn ir(&mut self, tensor: RouterTensor<SwapClient<I>>) -> TensorIr {
        let ir = tensor.into_ir();
        self.inputs.push(ir.clone());
        ir
    }

    /// Fetches the inputs and makes room for the outputs (failing the op like any other when
    /// the budget cannot hold it), runs `f`, and records the op.
    pub fn run<R>(self, f: impl FnOnce(&mut NativeCtx<'_, I>) -> R) -> R {
        let mut engine = self.client.engine();
        if let Err(error) = engine.native_prepare(self.name, &self.inputs) {
            engine.abandon_op();
            drop(engine);
            super::client::fail(error)
        }
        let start = engine.times_next_op().then(std::time::Instant::now);
        let mut ctx = NativeCtx {
            engine: &mut engine,
            client: &self.client,
            outputs: Vec::new(),
        };
        let out = f(&mut ctx);
        let nanos = start.map(|s| s.elapsed().as_nanos() as u64);
        let outputs = ctx.outputs;
        engine.native_finish(self.name, &self.inputs, &outputs, nanos);
        out
    }
}

impl<I: BackendIr> NativeCtx<'_, I> {
    fn handle(&mut self, ir: &TensorIr) -> TensorHandle<I::Handle> {
        TensorHandle {
            handle: self.engine.native_take(ir),
            shape: ir.shape.clone(),
        }
    }

    pub fn float(&mut self, ir: TensorIr) -> I::FloatTensorPrimitive {
        I::float_tensor(self.handle(&ir))
    }

    pub fn int(&mut self, ir: TensorIr) -> I::IntTensorPrimitive {
        I::int_tensor(self.handle(&ir))
    }

    pub fn bool(&mut self, ir: TensorIr) -> I::BoolTensorPrimitive {
        I::bool_tensor(self.handle(&ir))
    }

    fn output(
        &mut self,
        handle: I::Handle,
        shape: Shape,
        dtype: DType,
    ) -> RouterTensor<SwapClient<I>> {
        let id = self.engine.native_output(handle, shape.clone(), dtype);
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
}

/// Reads a tensor's data as the inner backend holds it (burn-router would convert it to the
/// backend's default element type).
pub(crate) fn read<I: BackendIr>(
    tensor: RouterTensor<SwapClient<I>>,
) -> DynFut<Result<TensorData, ExecutionError>> {
    let client = tensor.client.clone();
    client.read_tensor_async(tensor.into_ir())
}
