//! Ops that burn-router would decompose: they run natively on the inner backend, with their
//! inputs and outputs kept in the swap client's books.

use burn_backend::{DType, ExecutionError, QTensorPrimitive, Shape, TensorData, TensorMetadata};
use burn_ir::{BackendIr, TensorHandle, TensorIr, TensorStatus};
use burn_router::{RouterTensor, RunnerClient};
use burn_std::future::DynFut;
use std::cell::RefCell;

use super::{SwapClient, SwapQTensor};
use crate::exec::engine::Engine;

/// One native op: collect the inputs from Burn ([`NativeOp::ir`]), then [`NativeOp::run`] the
/// inner backend's op with the device's engine locked throughout, as for any other op, so that
/// no other thread can move an input between the moment it is made resident and its use.
pub(crate) struct NativeOp<I: BackendIr> {
    name: &'static str,
    client: SwapClient<I>,
    inputs: Vec<TensorIr>,
    /// Its outputs' bytes, when known from its arguments.
    expected: Option<u64>,
}

thread_local! {
    /// Tensor lists that native ops of this thread used and gave back: a native op's inputs
    /// and outputs are listed in them, so that no op allocates a list of its own (one list
    /// per op in flight on the thread, kept for the next ones).
    static SPARE_LISTS: RefCell<Vec<Vec<TensorIr>>> = const { RefCell::new(Vec::new()) };
}

/// An empty tensor list, one given back earlier when there is one.
fn spare_list() -> Vec<TensorIr> {
    SPARE_LISTS
        .try_with(|spare| spare.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Gives a tensor list back for the next native op of this thread.
fn give_back(mut list: Vec<TensorIr>) {
    list.clear();
    // While the thread's locals are being torn down the list is simply freed.
    let _ = SPARE_LISTS.try_with(|spare| spare.borrow_mut().push(list));
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
            inputs: spare_list(),
            expected: None,
        }
    }

    /// Gives its outputs' size, known from its arguments (an `arange`'s range, a `full`'s
    /// shape, an `unfold`'s kernel): room is made for exactly that before it runs.
    pub fn with_output_bytes(mut self, bytes: u64) -> Self {
        self.expected = Some(bytes);
        self
    }

    /// Takes an input tensor from Burn (with its read-only or last-use status).
    pub fn ir(&mut self, tensor: impl Into<RouterTensor<SwapClient<I>>>) -> TensorIr {
        let ir = tensor.into().into_ir();
        self.inputs.push(ir.clone());
        ir
    }

    /// Fetches the inputs and makes room for the outputs (failing the op like any other when
    /// the budget cannot hold it), runs `f`, and records the op.
    pub fn run<R>(self, f: impl FnOnce(&mut NativeCtx<'_, I>) -> R) -> R {
        self.client.check_usable();
        let mut engine = self.client.engine();
        if let Err(error) = engine.native_prepare(self.name, &self.inputs, self.expected) {
            engine.abandon_op();
            drop(engine);
            super::client::fail(error)
        }
        let clock = engine.start_op_clock();
        let mut ctx = NativeCtx {
            engine: &mut engine,
            client: &self.client,
            outputs: spare_list(),
        };
        let out = f(&mut ctx);
        let outputs = ctx.outputs;
        let finished = engine.native_finish(self.name, &self.inputs, &outputs, clock);
        drop(engine);
        give_back(outputs);
        if let Err(error) = finished {
            super::client::fail(error)
        }
        out
    }
}

impl<I: BackendIr> Drop for NativeOp<I> {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.inputs));
    }
}

impl<I: BackendIr> NativeCtx<'_, I> {
    fn handle(&mut self, ir: TensorIr) -> TensorHandle<I::Handle> {
        let handle = self.engine.native_take(&ir);
        TensorHandle {
            handle,
            shape: ir.shape,
        }
    }

    pub fn float(&mut self, ir: TensorIr) -> I::FloatTensorPrimitive {
        I::float_tensor(self.handle(ir))
    }

    pub fn int(&mut self, ir: TensorIr) -> I::IntTensorPrimitive {
        I::int_tensor(self.handle(ir))
    }

    pub fn bool(&mut self, ir: TensorIr) -> I::BoolTensorPrimitive {
        I::bool_tensor(self.handle(ir))
    }

    pub fn quantized(&mut self, ir: TensorIr) -> I::QuantizedTensorPrimitive {
        I::quantized_tensor(self.handle(ir))
    }

    fn output(
        &mut self,
        handle: I::Handle,
        shape: Shape,
        dtype: DType,
    ) -> RouterTensor<SwapClient<I>> {
        let id = self
            .engine
            .native_output(handle, crate::exec::shape_of(&shape), dtype);
        self.outputs.push(TensorIr {
            id,
            shape: crate::exec::shape_of(&shape),
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

    pub fn quantized_out(&mut self, tensor: I::QuantizedTensorPrimitive) -> SwapQTensor<I> {
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        let (acc, propagation) = (tensor.acc_precision(), tensor.propagation());
        let out = self.output(I::quantized_tensor_handle(tensor), shape, dtype);
        SwapQTensor::new(out, acc, propagation)
    }
}

/// Reads a tensor's data as the inner backend holds it (burn-router would convert it to the
/// backend's default element type).
///
/// The read holds a clone of the tensor until the engine has taken it: burn-router counts a
/// tensor's holders, and `into_ir` counts this one out before the read reaches the engine, so
/// another thread dropping the last other clone in that moment (a model's parameter the
/// training thread replaced while a checkpointer thread reads it) would free the tensor first
/// and the read would find nothing. Held, the read is a shared one, and the last holder's drop
/// frees the tensor after it. Every op's gate (`super::in_flight`) now covers that moment for
/// all ops, and drops inside an op are held back until it ends (`in_flight::must_wait`);
/// the held clone stays for reads as the simplest guarantee of the three: with it, the count
/// cannot reach zero before the engine has the read.
pub(crate) fn read<I: BackendIr>(
    tensor: RouterTensor<SwapClient<I>>,
) -> DynFut<Result<TensorData, ExecutionError>> {
    let client = tensor.client.clone();
    let held = tensor.clone();
    let future = client.read_tensor_async(tensor.into_ir());
    drop(held);
    future
}

/// Moves a quantized tensor to `device`: nothing to do on its own device; elsewhere its data
/// (values and scales) is read and written there, which gives the same tensor.
pub(crate) fn q_to_device<I: BackendIr>(
    tensor: SwapQTensor<I>,
    device: &I::Device,
) -> SwapQTensor<I> {
    use burn_backend::ops::QTensorOps;
    use burn_router::RunnerClient;
    if tensor.tensor.client.device() == *device {
        return tensor;
    }
    let data = burn_std::reader::try_read_sync(<crate::backend::Swap<I> as QTensorOps<
        crate::backend::Swap<I>,
    >>::q_into_data(tensor));
    match data {
        Some(Ok(data)) => {
            <crate::backend::Swap<I> as QTensorOps<crate::backend::Swap<I>>>::q_from_data(
                data, device,
            )
        }
        other => super::client::fail(crate::error::SwapError::FetchFailed {
            tensor: 0,
            bytes: 0,
            reason: match other {
                Some(Err(error)) => {
                    format!("reading a quantized tensor to move it failed: {error}")
                }
                _ => "this platform cannot block on the read of a quantized tensor".into(),
            },
        }),
    }
}

/// The outputs' size of the native ops whose size follows from their arguments.
pub(crate) mod output_bytes {
    use burn_backend::ops::{ConvTransposeOptions, UnfoldOptions};
    use burn_backend::quantization::QuantScheme;
    use burn_backend::{DType, Shape};
    use core::ops::Range;

    /// A tensor of `shape` and `dtype`.
    pub fn shape(shape: &Shape, dtype: DType) -> u64 {
        (shape.num_elements() * dtype.size()) as u64
    }

    /// `select(x, dim, indices)`: `x` with dimension `dim` as long as `indices` (longer than
    /// `x`'s when rows are picked more than once); counted as [`crate::exec::bytes_of`] counts a
    /// tensor of `dtype`, a quantized one's values and parameters included.
    pub fn select(x: &Shape, dtype: DType, dim: usize, indices: &Shape) -> u64 {
        let mut dims = x.as_slice().to_vec();
        if let Some(d) = dims.get_mut(dim) {
            *d = indices.num_elements();
        }
        crate::exec::bytes_of_dims(&dims, dtype)
    }

    /// A tensor of `shape` quantized by `scheme`: its stored values and quantization
    /// parameters.
    pub fn quantized(shape: &Shape, scheme: &QuantScheme) -> u64 {
        crate::exec::bytes_of(shape, DType::QFloat(*scheme))
    }

    /// `q_expand(x, shape)` of a quantized `x` of `dtype`: quantized per block, it is made
    /// anew at `shape` (its blocks cannot broadcast as a view: the backends that implement it
    /// dequantize, expand and quantize again), values and parameters; quantized per tensor,
    /// it is a view of `x`, no larger than `x`.
    pub fn quantized_expand(x: &Shape, shape: &Shape, dtype: DType) -> u64 {
        use burn_backend::quantization::QuantLevel;
        match dtype {
            DType::QFloat(scheme) if matches!(scheme.level, QuantLevel::Block(_)) => {
                crate::exec::bytes_of(shape, dtype)
            }
            _ => crate::exec::bytes_of(x, dtype),
        }
    }

    /// `gather(dim, x, indices)`: a tensor of `indices`' shape and `x`'s `dtype`.
    pub fn gather(indices: &Shape, dtype: DType) -> u64 {
        crate::exec::bytes_of(indices, dtype)
    }

    /// An op over operands of `shapes` broadcast to one another (a dimension of 1 takes the
    /// others' size; no operand: one element), making elements of `dtype`. For the ops that
    /// make bools, which can be wider than what they compare (CubeCL's `u32` bools from `f16`
    /// values) and, broadcast, larger than every operand.
    pub fn broadcast(shapes: &[&Shape], dtype: DType) -> u64 {
        let rank = shapes.iter().map(|s| s.num_dims()).max().unwrap_or(0);
        let elements: usize = (0..rank)
            .map(|d| {
                shapes
                    .iter()
                    .filter_map(|s| {
                        let dims = s.as_slice();
                        (d + dims.len()).checked_sub(rank).map(|i| dims[i])
                    })
                    .max()
                    .unwrap_or(1)
            })
            .product();
        (elements * dtype.size()) as u64
    }

    /// `arange(range, step)`: one element per step in the range.
    pub fn arange(range: &Range<i64>, step: usize, dtype: DType) -> u64 {
        let span = range.end.saturating_sub(range.start).max(0) as u64;
        let step = step.max(1) as u64;
        span.div_ceil(step) * dtype.size() as u64
    }

    /// `rfft(x, dim, n)`: real and imaginary parts, `n / 2 + 1` bins along `dim` (`n` the
    /// signal's length when not given).
    pub fn rfft(x: &Shape, dtype: DType, dim: usize, n: Option<usize>) -> u64 {
        let len = n.unwrap_or_else(|| x.as_slice().get(dim).copied().unwrap_or(0));
        2 * along(x, dtype, dim, len / 2 + 1)
    }

    /// `irfft(re, im, dim, n)`: a signal of `n` samples along `dim` (`2 (bins - 1)` when not
    /// given).
    pub fn irfft(x: &Shape, dtype: DType, dim: usize, n: Option<usize>) -> u64 {
        let bins = x.as_slice().get(dim).copied().unwrap_or(0);
        along(x, dtype, dim, n.unwrap_or(2 * bins.saturating_sub(1)))
    }

    /// A tensor of `x`'s shape but for dimension `dim`, of length `len`.
    fn along(x: &Shape, dtype: DType, dim: usize, len: usize) -> u64 {
        let dims = x.as_slice();
        let others: usize = (0..dims.len())
            .filter(|&d| d != dim)
            .map(|d| dims[d])
            .product();
        (others * len * dtype.size()) as u64
    }

    /// `conv_transposeNd_x_backward(weight [C_in, C_out / groups, k..], output_grad [N,
    /// C_out, out..])`: the input's gradient, `[N, C_in, in..]`, each `in` what the forward
    /// pass's `out = (in - 1) stride - 2 padding + dilation (k - 1) + padding_out + 1` came
    /// from. Larger than both inputs when the convolution narrows many channels to few.
    pub fn conv_transpose_x<const D: usize>(
        weight: &Shape,
        output_grad: &Shape,
        dtype: DType,
        options: &ConvTransposeOptions<D>,
    ) -> u64 {
        let (w, g) = (weight.as_slice(), output_grad.as_slice());
        if w.len() != D + 2 || g.len() != D + 2 {
            return shape(weight, dtype).max(shape(output_grad, dtype));
        }
        let mut elements = g[0] * w[0];
        for i in 0..D {
            let reach = options.dilation[i] * w[2 + i].saturating_sub(1);
            let span = (g[2 + i] + 2 * options.padding[i])
                .saturating_sub(reach + options.padding_out[i] + 1);
            elements *= span / options.stride[i].max(1) + 1;
        }
        (elements * dtype.size()) as u64
    }

    /// `unfold4d(x [N, C, H, W], kernel)`: `[N, C·kh·kw, L]`, `L` the kernel's positions.
    pub fn unfold4d(x: &Shape, dtype: DType, kernel: [usize; 2], options: &UnfoldOptions) -> u64 {
        let dims = x.as_slice();
        if dims.len() != 4 {
            return shape(x, dtype);
        }
        let positions = |i: usize| {
            let size = dims[2 + i] + 2 * options.padding[i];
            let reach = options.dilation[i] * kernel[i].saturating_sub(1) + 1;
            size.checked_sub(reach)
                .map_or(0, |room| room / options.stride[i].max(1) + 1)
        };
        let elements = dims[0] * dims[1] * kernel[0] * kernel[1] * positions(0) * positions(1);
        (elements * dtype.size()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::output_bytes;
    use burn_backend::ops::ConvTransposeOptions;
    use burn_backend::{DType, Shape};
    use burn_std::BoolStore;

    #[test]
    fn comparisons_are_sized_by_their_broadcast_shape_and_bool_width() {
        let column = Shape::from(vec![64, 1]);
        let row = Shape::from(vec![1, 64]);
        let native = DType::Bool(BoolStore::Native);
        assert_eq!(output_bytes::broadcast(&[&column, &row], native), 64 * 64);
        // CubeCL's u32 bools: four bytes each, twice an f16's width.
        let u32s = DType::Bool(BoolStore::U32);
        assert_eq!(output_bytes::broadcast(&[&column], u32s), 64 * 4);
        // A lower-rank operand aligns with the trailing dimensions.
        let bias = Shape::from(vec![8]);
        let x = Shape::from(vec![3, 1, 8]);
        assert_eq!(output_bytes::broadcast(&[&x, &bias], native), 24);
        // No operand (an `any` over a whole tensor): one element.
        assert_eq!(output_bytes::broadcast(&[], u32s), 4);
    }

    #[test]
    fn a_transposed_convolutions_input_gradient_is_sized_from_its_output() {
        // Stride 2, padding 1, output padding 1, kernel 3: 8 -> 16, so 16 comes from 8.
        let weight = Shape::from(vec![32, 4, 3, 3]);
        let grad = Shape::from(vec![2, 4, 16, 16]);
        let options = ConvTransposeOptions::new([2, 2], [1, 1], [1, 1], [1, 1], 1);
        assert_eq!(
            output_bytes::conv_transpose_x(&weight, &grad, DType::F32, &options),
            (2 * 32 * 8 * 8 * 4) as u64
        );
        // Dilation 2, kernel 3, no padding, stride 1: out = in + 4.
        let weight = Shape::from(vec![6, 1, 3]);
        let grad = Shape::from(vec![1, 1, 14]);
        let options = ConvTransposeOptions::new([1], [0], [0], [2], 1);
        assert_eq!(
            output_bytes::conv_transpose_x(&weight, &grad, DType::F16, &options),
            (6 * 10 * 2) as u64
        );
    }
}
