//! Which tensors may be offloaded: those whose memory layout a fetch restores.
//!
//! An offload reads a tensor's values in logical order and a fetch writes them back
//! contiguous. A tensor that is a strided view (a transposed, permuted, flipped, expanded or
//! sliced one, or an elementwise result that kept such a layout) would come back with another
//! layout, and some kernels give other bits on another layout (Flex's matmul does: its
//! summation order follows the strides). So the engine tracks, per tensor, whether its layout
//! is strided, and offloads a tensor's values only when it is dense. Under a budget, a
//! strided tensor made by a replayable op gets a recipe, and leaves by recomputation: a
//! replayed view op makes the same view again, from a source that is itself dense and may be
//! offloaded meanwhile. A strided tensor with a buffer of its own (a native op's permuted
//! output, a view whose source is gone) leaves, where the backend allows it ([`storage`]),
//! by an offload of its whole buffer, and comes back as the same view of it.
//!
//! Two sources, the first that answers wins:
//!
//! - **The backend's word** ([`probe`]): Burn's CPU backend (Flex) and its CubeCL backends
//!   tell each tensor's strides and offset, so an output that a view-like op (or an
//!   elementwise op on a strided input) may have left strided is looked at after the op ran.
//!   Most are dense: reductions, broadcasts and most elementwise kernels write fresh
//!   buffers.
//! - **A guess from the op** ([`of`]), for a backend that cannot tell (Burn's fused backends):
//!   view ops make views; an op whose output has the shape of a strided input may have kept
//!   its layout; anything else (a reduction, a broadcast, a matmul) writes a fresh buffer.

use core::any::Any;

use burn_backend::{DType, Shape};
use burn_ir::{BackendIr, BaseOperationIr, FloatOperationIr, OperationIr, TensorHandle};

/// How an op lays out its outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Newly allocated, contiguous.
    Fresh,
    /// A view of an input: possibly strided.
    View,
    /// Contiguous when every input is.
    Inherit,
}

fn base(op: &BaseOperationIr) -> Layout {
    match op {
        BaseOperationIr::SwapDims(_)
        | BaseOperationIr::Permute(_)
        | BaseOperationIr::Flip(_)
        | BaseOperationIr::Expand(_)
        | BaseOperationIr::Unfold(_)
        | BaseOperationIr::Slice(_) => Layout::View,
        BaseOperationIr::Cat(_)
        | BaseOperationIr::Empty(_)
        | BaseOperationIr::Ones(_)
        | BaseOperationIr::Zeros(_) => Layout::Fresh,
        _ => Layout::Inherit,
    }
}

/// The layout of `op`'s outputs.
pub(crate) fn of(op: &OperationIr) -> Layout {
    match op {
        OperationIr::BaseFloat(b) | OperationIr::BaseInt(b) | OperationIr::BaseBool(b) => base(b),
        OperationIr::Float(_, FloatOperationIr::Matmul(_))
        | OperationIr::Float(_, FloatOperationIr::Random(_))
        | OperationIr::Module(_)
        | OperationIr::Init(_) => Layout::Fresh,
        _ => Layout::Inherit,
    }
}

/// What the backend tells of where it holds a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probe {
    /// Its elements are in row-major order from the start of its buffer, as a fetch writes
    /// them back, so that every kernel sees the same layout after a round trip.
    pub dense: bool,
    /// Its buffer: equal for tensors that share one, while they live.
    pub buffer: usize,
    /// That buffer's size.
    pub buffer_bytes: u64,
}

/// Whether a strided tensor with a buffer of its own, as `probe` found it, can leave by an
/// offload of that buffer ([`storage`]) on the backend `teller` names. The buffer may be
/// larger than the tensor (a native op's output cut from a larger result): it moves whole,
/// and frees on the device all it held.
pub(crate) fn restorable(teller: Teller, probe: &Probe, dtype: DType) -> bool {
    !probe.dense && !matches!(dtype, DType::QFloat(_)) && teller != Teller::None
}

/// Where the backend holds the tensor of `handle` ([`Probe`]); `None` when it cannot tell.
pub(crate) fn probe<B: BackendIr>(
    handle: &B::Handle,
    shape: &Shape,
    dtype: DType,
) -> Option<Probe> {
    let handle = TensorHandle {
        handle: handle.clone(),
        shape: shape.clone(),
    };
    if dtype.is_float() {
        probe_primitive(&B::float_tensor(handle))
    } else if dtype.is_int() {
        probe_primitive(&B::int_tensor(handle))
    } else if dtype.is_bool() {
        probe_primitive(&B::bool_tensor(handle))
    } else {
        None
    }
}

/// [`probe`] of a tensor primitive of the backends that tell: Flex's, by its layout and the
/// address of its shared bytes; the CubeCL ones', by their strides and memory handle.
fn probe_primitive<T: 'static>(tensor: &T) -> Option<Probe> {
    if let Some(flex) = (tensor as &dyn Any).downcast_ref::<burn::backend::flex::FlexTensor>() {
        let bytes = flex.bytes();
        return Some(Probe {
            dense: flex.is_contiguous() && flex.layout().start_offset() == 0,
            buffer: bytes.as_ptr() as usize,
            buffer_bytes: bytes.len() as u64,
        });
    }
    if let Some((dense, buffer, buffer_bytes)) = super::cubecl_fast_path::probe(tensor) {
        return Some(Probe {
            dense,
            buffer,
            buffer_bytes,
        });
    }
    None
}

/// A strided tensor's layout while its buffer is off the device: Flex's (shape, strides in
/// elements, offset of the first element in the buffer) or a CubeCL tensor's metadata (shape
/// and strides over its handle).
pub(crate) struct Kept {
    layout: KeptLayout,
    /// The dense tensor over the whole buffer that went off the device.
    whole: Shape,
    /// Where that dense tensor starts in the device buffer, in bytes (a CubeCL handle of a
    /// slice starts past its memory's first byte).
    from: u64,
}

impl Kept {
    /// Whether the tensors of `self` and `other`, holders of one shared buffer, are made
    /// over the same dense tensor (the same bytes from the same first byte), so that one copy
    /// of it brings both back ([`crate::exec::residency::Group`]).
    pub(crate) fn same_storage(&self, other: &Kept) -> bool {
        self.whole == other.whole && self.from == other.from
    }
}

enum KeptLayout {
    Flex(burn::backend::flex::Layout),
    Cube(burn_std::Metadata),
}

/// The buffer of a strided tensor as a dense one-dimensional tensor over all of it, and the
/// layout that makes the tensor again from that buffer ([`restore`]): an offload of the
/// buffer brings back the same view, element for element and stride for stride, so that every
/// kernel sees what it saw. `None` when the backend cannot tell (Burn's fused backends), and
/// for quantized tensors.
pub(crate) fn storage<B: BackendIr>(
    handle: &B::Handle,
    shape: &Shape,
    dtype: DType,
) -> Option<(B::Handle, Shape, Kept)> {
    let handle = TensorHandle {
        handle: handle.clone(),
        shape: shape.clone(),
    };
    if dtype.is_float() {
        let (t, kept) = relaid(&B::float_tensor(handle), dtype)?;
        Some((B::float_tensor_handle(t), kept.whole.clone(), kept))
    } else if dtype.is_int() {
        let (t, kept) = relaid(&B::int_tensor(handle), dtype)?;
        Some((B::int_tensor_handle(t), kept.whole.clone(), kept))
    } else if dtype.is_bool() {
        let (t, kept) = relaid(&B::bool_tensor(handle), dtype)?;
        Some((B::bool_tensor_handle(t), kept.whole.clone(), kept))
    } else {
        None
    }
}

/// [`storage`] of one primitive: the dense tensor over its buffer, and its layout.
fn relaid<T: 'static>(tensor: &T, dtype: DType) -> Option<(T, Kept)> {
    use burn::backend::flex::{FlexTensor, Layout as FlexLayout};
    if let Some(flex) = as_flex(tensor) {
        let width = dtype.size();
        let buffer = flex.bytes().len();
        if width == 0 || !buffer.is_multiple_of(width) {
            return None;
        }
        let whole = Shape::new([buffer / width]);
        let dense = FlexTensor::from_arc(
            flex.data_arc(),
            FlexLayout::contiguous(whole.clone()),
            flex.dtype(),
        );
        let kept = Kept {
            layout: KeptLayout::Flex(flex.layout().clone()),
            whole,
            from: 0,
        };
        return Some((from_flex(dense)?, kept));
    }
    if let Some((dense, meta, whole, from)) = super::cubecl_fast_path::storage(tensor) {
        let kept = Kept {
            layout: KeptLayout::Cube(meta),
            whole,
            from,
        };
        return Some((dense, kept));
    }
    None
}

/// The tensor of `kept` made again over a buffer that came back (`handle`: the dense
/// one-dimensional tensor [`storage`] sent, written back).
pub(crate) fn restore<B: BackendIr>(handle: B::Handle, dtype: DType, kept: Kept) -> B::Handle {
    let Kept { layout, whole, .. } = kept;
    let handle = TensorHandle {
        handle,
        shape: whole,
    };
    if dtype.is_float() {
        B::float_tensor_handle(relay(B::float_tensor(handle), layout))
    } else if dtype.is_int() {
        B::int_tensor_handle(relay(B::int_tensor(handle), layout))
    } else {
        B::bool_tensor_handle(relay(B::bool_tensor(handle), layout))
    }
}

/// [`restore`] of one primitive.
fn relay<T: 'static>(tensor: T, layout: KeptLayout) -> T {
    match layout {
        KeptLayout::Flex(layout) => match into_flex(tensor) {
            Ok(flex) => from_flex(flex.with_layout(layout)).expect("the type it came as"),
            Err(tensor) => tensor,
        },
        KeptLayout::Cube(meta) => super::cubecl_fast_path::restore(tensor, meta),
    }
}

fn as_flex<T: 'static>(tensor: &T) -> Option<&burn::backend::flex::FlexTensor> {
    (tensor as &dyn Any).downcast_ref()
}

/// A Flex tensor as the primitive type `T`, when `T` is Flex's.
fn from_flex<T: 'static>(tensor: burn::backend::flex::FlexTensor) -> Option<T> {
    let boxed: Box<dyn Any> = Box::new(tensor);
    boxed.downcast::<T>().ok().map(|t| *t)
}

/// A primitive of type `T` as Flex's tensor, when `T` is Flex's; itself otherwise.
fn into_flex<T: 'static>(tensor: T) -> Result<burn::backend::flex::FlexTensor, T> {
    let boxed: Box<dyn Any> = Box::new(tensor);
    match boxed.downcast::<burn::backend::flex::FlexTensor>() {
        Ok(flex) => Ok(*flex),
        Err(boxed) => Err(*boxed.downcast::<T>().expect("the type it was boxed as")),
    }
}

/// Which backend tells the layouts ([`probe`]), found from its types before any tensor
/// exists: its view ops differ (the CPU backend flips and slices by strides; the CubeCL ones
/// copy a flip, and a slice whose offsets break the buffer alignment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Teller {
    /// A backend that cannot tell (Burn's fused backends).
    None,
    /// Burn's CPU backend.
    Flex,
    /// A CubeCL backend (CUDA, wgpu).
    Cube,
}

/// The [`Teller`] of the inner backend `B`.
pub(crate) fn teller<B: BackendIr>() -> Teller {
    use core::any::TypeId;
    if TypeId::of::<B::FloatTensorPrimitive>() == TypeId::of::<burn::backend::flex::FlexTensor>() {
        return Teller::Flex;
    }
    if super::cubecl_fast_path::is_cube::<B::FloatTensorPrimitive>() {
        return Teller::Cube;
    }
    Teller::None
}

/// Whether every output of `op` is, on the backend `teller` names, a view of its input:
/// sharing its buffer, so that room is made for no bytes of its own. A wrong answer costs
/// no more than an overshoot made good after the op (counted in the report).
/// A reshape is one when its input is dense (`inputs_strided` false).
#[inline]
pub(crate) fn aliases(op: &OperationIr, teller: Teller, inputs_strided: bool) -> bool {
    let (OperationIr::BaseFloat(b) | OperationIr::BaseInt(b) | OperationIr::BaseBool(b)) = op
    else {
        return false;
    };
    match (teller, b) {
        (Teller::None, _) => false,
        (_, BaseOperationIr::Reshape(_)) => !inputs_strided,
        (
            _,
            BaseOperationIr::SwapDims(_)
            | BaseOperationIr::Permute(_)
            | BaseOperationIr::Expand(_)
            | BaseOperationIr::Unfold(_),
        ) => true,
        (Teller::Flex, BaseOperationIr::Flip(_)) => true,
        (Teller::Flex, BaseOperationIr::Slice(slice)) => slice.ranges.iter().all(|r| r.step > 0),
        _ => false,
    }
}

/// Whether an output of `op` may share a buffer with one of its inputs: view ops, and a
/// reshape (a view of a dense input).
#[inline]
pub(crate) fn may_share(op: &OperationIr) -> bool {
    match op {
        OperationIr::BaseFloat(b) | OperationIr::BaseInt(b) | OperationIr::BaseBool(b) => {
            matches!(b, BaseOperationIr::Reshape(_)) || base(b) == Layout::View
        }
        _ => false,
    }
}

/// Whether replaying `op` makes the same values again: every IR op but random ones (and
/// `Init`, whose data is gone).
pub(crate) fn replayable(op: &OperationIr) -> bool {
    !matches!(
        op,
        OperationIr::Float(_, FloatOperationIr::Random(_))
            | OperationIr::Init(_)
            | OperationIr::Custom(_)
            | OperationIr::Drop(_)
    )
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;
    use burn::backend::flex::FlexTensor;
    use burn_backend::TensorData;
    use burn_backend::ops::FloatTensorOps;
    use burn_ir::BackendIr;

    use super::*;

    /// A strided tensor's buffer leaves as a dense one-dimensional tensor and comes back as
    /// the same view: same strides, same offset, same values (a flipped slice of a transposed
    /// matrix, and an expanded row whose buffer is smaller than the tensor).
    #[test]
    fn a_strided_tensor_comes_back_as_the_same_view_of_its_buffer() {
        let values: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
        let matrix = FlexTensor::from_data(TensorData::new(values, [4, 6]));
        let views = [
            matrix.transpose(0, 1).narrow(0, 1, 4).layout().flip(&[1]),
            matrix.narrow(0, 2, 1).layout().clone(),
        ];
        let expanded = {
            let row = matrix.narrow(0, 2, 1);
            let layout = burn::backend::flex::Layout::new(
                Shape::new([3, 6]),
                vec![0, 1],
                row.layout().start_offset(),
            );
            row.with_layout(layout)
        };
        let tensors = [
            matrix.clone().with_layout(views[0].clone()),
            matrix.clone().with_layout(views[1].clone()),
            expanded,
        ];
        for tensor in tensors {
            let (shape, dtype) = (tensor.layout().shape().clone(), tensor.dtype());
            let handle = <Flex as BackendIr>::float_tensor_handle(tensor.clone());
            let probe = probe::<Flex>(&handle, &shape, dtype).unwrap();
            assert!(restorable(Teller::Flex, &probe, dtype));
            let (whole, whole_shape, kept) = storage::<Flex>(&handle, &shape, dtype).unwrap();
            // Off the device and back, as values of a dense tensor.
            let data =
                Flex::float_into_data(<Flex as BackendIr>::float_tensor(burn_ir::TensorHandle {
                    handle: whole,
                    shape: whole_shape,
                }));
            let data = burn_std::reader::try_read_sync(data).unwrap().unwrap();
            let back = <Flex as BackendIr>::float_tensor_handle(FlexTensor::from_data(data));
            let back = <Flex as BackendIr>::float_tensor(burn_ir::TensorHandle {
                handle: restore::<Flex>(back, dtype, kept),
                shape: shape.clone(),
            });
            assert_eq!(back.layout(), tensor.layout());
            assert_eq!(back.clone().into_data(), tensor.clone().into_data());
        }
        let dense = <Flex as BackendIr>::float_tensor_handle(matrix);
        let probe = probe::<Flex>(&dense, &Shape::new([4, 6]), DType::F32).unwrap();
        assert!(
            !restorable(Teller::Flex, &probe, DType::F32),
            "a dense tensor offloads its values"
        );
        assert!(!restorable(Teller::None, &probe, DType::F32));
    }
}
