//! One live tensor in the books: its state, what makes it again, and the facts kept of it.

use burn_backend::DType;
use burn_ir::{OperationIr, TensorId, TensorIr, TensorStatus};

use super::HostCopy;
use crate::exec::dims::Dims;

/// The state of a tensor.
pub(crate) enum State {
    /// On the device, in the inner backend's handle container.
    Resident,
    /// On the device, and being copied to the host by the send worker: usable as resident;
    /// the device copy is released when the copy has completed.
    Offloading,
    /// In host memory, raw or compressed; the device holds nothing of it.
    Offloaded(Box<HostCopy>),
    /// Being copied back by the receive worker: its device bytes are counted already; a use
    /// waits for the copy.
    Fetching,
    /// Dropped from the device; rematerialised from its recipe before its next use.
    Evicted,
    /// Its bytes are gone (a fetch failed and it has no recipe): a use is an error.
    Lost,
}

impl State {
    /// Whether the device holds the tensor's bytes in the handle container now.
    pub fn on_device(&self) -> bool {
        matches!(self, State::Resident | State::Offloading)
    }
}

/// How to make a tensor again: its producing op, replayed with every input read-only, and
/// those inputs, which the recipe keeps alive (pins).
pub(crate) struct Recipe {
    pub op: OperationIr,
    pub inputs: Vec<TensorId>,
}

/// What a strided view could be made again from, had a budget been in force when it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Remake {
    /// From this tensor, while it is in the books.
    From(TensorId),
    /// From the dense tensor its op consumed, which its recipe would have kept (pinned).
    Pinned,
}

/// What the executor knows of one live tensor. Its size and state are read through
/// [`Entry::bytes`] and [`Entry::state`] and change only through [`Residency`]'s transitions.
///
/// Every op moves an entry into the table and one out of it: the entry is kept to 120 bytes
/// (a move of a larger one is a call to `memcpy`), its dtype in a byte and the facts that
/// only strided tensors and whole-buffer offloads have in a box of their own ([`Rare`]).
pub(crate) struct Entry {
    pub(super) bytes: u64,
    /// Global index of the last op that made or used it.
    pub last_use: u64,
    pub(super) state: State,
    pub dims: Dims,
    /// How to recompute it, when the plan drops it.
    pub recipe: Option<Box<Recipe>>,
    /// What few entries have; `None` while it would be all empty.
    rare: Option<Box<Rare>>,
    /// Recipes that need it as an input (changed through [`Residency::pin`] and
    /// [`Residency::unpin`], which count the pinned entries).
    pub(super) pins: u32,
    /// The shared buffer it holds on the device (0: a buffer of its own, counted as `bytes`).
    pub(super) buffer: u32,
    /// The buffer it shares in the unwrapped run, whether or not it holds it now (0: none
    /// known): holders of one keep it when they leave the device and come back apart, so that
    /// an op consuming one of them still sees it shared (see [`Residency::shares_origin`]).
    pub(super) origin: u32,
    dtype: PackedDType,
    /// Burn is done with it (dropped or consumed it); only recipes keep it.
    pub orphan: bool,
    /// Its layout may be strided: a fetch of its values would not restore it, so it is
    /// offloaded only when [`Entry::restorable`] (see `exec::layout`).
    pub strided: bool,
    /// For a strided tensor with a buffer of its own: the backend can copy that buffer off
    /// the device and make the same view of it again when it comes back (`exec::layout::
    /// storage`), so that it may leave by offload like a dense one.
    pub restorable: bool,
}

/// The facts of an [`Entry`] that only some tensors have.
#[derive(Default)]
struct Rare {
    /// A quantized tensor's dtype (its scheme does not fit [`PackedDType`]).
    quantized: Option<DType>,
    /// For a strided tensor under a budget: the op that made it, to become its recipe if it
    /// must leave while its inputs are still there.
    view_op: Option<Box<OperationIr>>,
    /// For a strided tensor made by a view op: what it could be made again from, under a
    /// budget (the report's minimum budget counts it as able to leave while it can).
    view_source: Option<Remake>,
    /// While a strided tensor's buffer is off the device: the layout that makes it again.
    kept_layout: Option<Box<crate::exec::layout::Kept>>,
    /// While a shared buffer is off the device as one copy: the holder that carries it, or a
    /// holder that comes back with it (see [`Group`]).
    group: Option<Box<Group>>,
}

impl Rare {
    #[cold]
    #[inline(never)]
    fn quantized(dtype: DType) -> Option<Box<Self>> {
        Some(Box::new(Self {
            quantized: Some(dtype),
            ..Self::default()
        }))
    }
}

/// A dtype in one byte: Burn's `DType` takes 32 for the quantization scheme only
/// `QFloat` carries, which [`Rare`] keeps instead.
#[derive(Clone, Copy, PartialEq, Eq)]
struct PackedDType(u8);

/// The dtypes [`PackedDType`] stands for, by their byte (`QUANTIZED` for the rest).
pub(super) const PLAIN_DTYPES: [DType; 16] = [
    DType::F64,
    DType::F32,
    DType::Flex32,
    DType::F16,
    DType::BF16,
    DType::I64,
    DType::I32,
    DType::I16,
    DType::I8,
    DType::U64,
    DType::U32,
    DType::U16,
    DType::U8,
    DType::Bool(burn_backend::BoolStore::Native),
    DType::Bool(burn_backend::BoolStore::U8),
    DType::Bool(burn_backend::BoolStore::U32),
];

impl PackedDType {
    const QUANTIZED: Self = Self(u8::MAX);

    #[inline]
    fn pack(dtype: DType) -> Self {
        use burn_backend::BoolStore;
        Self(match dtype {
            DType::F64 => 0,
            DType::F32 => 1,
            DType::Flex32 => 2,
            DType::F16 => 3,
            DType::BF16 => 4,
            DType::I64 => 5,
            DType::I32 => 6,
            DType::I16 => 7,
            DType::I8 => 8,
            DType::U64 => 9,
            DType::U32 => 10,
            DType::U16 => 11,
            DType::U8 => 12,
            DType::Bool(BoolStore::Native) => 13,
            DType::Bool(BoolStore::U8) => 14,
            DType::Bool(BoolStore::U32) => 15,
            DType::QFloat(_) => return Self::QUANTIZED,
        })
    }
}

impl Entry {
    /// This entry, sharing the buffer `origin` of the unwrapped run (0: none known).
    pub fn in_origin(mut self, origin: u32) -> Self {
        self.origin = origin;
        self
    }

    /// A resident tensor of `dims` and `dtype`, made or used last by op `last_use`.
    pub fn new(dims: Dims, dtype: DType, last_use: u64) -> Self {
        let bytes = crate::exec::bytes_of_dims(dims.as_slice(), dtype);
        Self::sized(bytes, dims, dtype, last_use)
    }

    /// [`Entry::new`] with its size computed already (the op path has it).
    #[inline(always)]
    pub fn sized(bytes: u64, dims: Dims, dtype: DType, last_use: u64) -> Self {
        debug_assert_eq!(bytes, crate::exec::bytes_of_dims(dims.as_slice(), dtype));
        let packed = PackedDType::pack(dtype);
        Self {
            bytes,
            last_use,
            state: State::Resident,
            dims,
            recipe: None,
            rare: if packed == PackedDType::QUANTIZED {
                Rare::quantized(dtype)
            } else {
                None
            },
            pins: 0,
            buffer: 0,
            origin: 0,
            dtype: packed,
            orphan: false,
            strided: false,
            restorable: false,
        }
    }

    /// Its dtype.
    #[inline]
    pub fn dtype(&self) -> DType {
        match PLAIN_DTYPES.get(self.dtype.0 as usize) {
            Some(dtype) => *dtype,
            None => self
                .rare
                .as_ref()
                .and_then(|rare| rare.quantized)
                .expect("a quantized entry keeps its dtype"),
        }
    }

    fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// For a strided tensor under a budget: the op that made it, to become its recipe if it
    /// must leave while its inputs are still there.
    pub fn view_op(&self) -> Option<&OperationIr> {
        self.rare.as_ref()?.view_op.as_deref()
    }

    pub fn set_view_op(&mut self, op: Option<Box<OperationIr>>) {
        if op.is_some() || self.rare.is_some() {
            self.rare_mut().view_op = op;
        }
    }

    pub fn take_view_op(&mut self) -> Option<Box<OperationIr>> {
        self.rare.as_mut()?.view_op.take()
    }

    /// For a strided tensor made by a view op: what it could be made again from, under a
    /// budget (the report's minimum budget counts it as able to leave while it can).
    pub fn view_source(&self) -> Option<Remake> {
        self.rare.as_ref()?.view_source
    }

    pub fn set_view_source(&mut self, source: Option<Remake>) {
        if source.is_some() || self.rare.is_some() {
            self.rare_mut().view_source = source;
        }
    }

    /// While a strided tensor's buffer is off the device: the layout that makes it again.
    pub fn kept_layout(&self) -> Option<&crate::exec::layout::Kept> {
        self.rare.as_ref()?.kept_layout.as_deref()
    }

    pub fn set_kept_layout(&mut self, kept: Option<Box<crate::exec::layout::Kept>>) {
        if kept.is_some() || self.rare.is_some() {
            self.rare_mut().kept_layout = kept;
        }
    }

    pub fn take_kept_layout(&mut self) -> Option<Box<crate::exec::layout::Kept>> {
        self.rare.as_mut()?.kept_layout.take()
    }

    /// While a shared buffer is off the device as one copy: the holder that carries it, or a
    /// holder that comes back with it (see [`Group`]).
    pub fn group(&self) -> Option<&Group> {
        self.rare.as_ref()?.group.as_deref()
    }

    pub fn group_mut(&mut self) -> Option<&mut Group> {
        self.rare.as_mut()?.group.as_deref_mut()
    }

    pub fn set_group(&mut self, group: Option<Box<Group>>) {
        if group.is_some() || self.rare.is_some() {
            self.rare_mut().group = group;
        }
    }

    pub fn take_group(&mut self) -> Option<Box<Group>> {
        self.rare.as_mut()?.group.take()
    }

    /// Its size: the bytes of its values (the device may count them in a shared buffer; see
    /// [`Residency::counted`]).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether, strided, it may leave by an offload of its buffer with its layout: the
    /// backend can make the view again ([`Entry::restorable`]) and the buffer is its own. Not
    /// a holder of a shared buffer (even its last one on the device): a copy of its own comes
    /// back apart from the other holders, and Flex and CubeCL write in place into a buffer
    /// only one tensor holds, with other kernels and other bits than out of place (found by
    /// the random training programs: NaN signs changed).
    pub fn leaves_with_layout(&self) -> bool {
        self.restorable && self.shared().is_none()
    }

    /// While it is off the device with a shared buffer that left whole ([`Group`]): the
    /// tensor whose fetch brings that buffer back (`id` itself for the carrier).
    pub fn carrier(&self, id: TensorId) -> Option<TensorId> {
        match self.group()? {
            Group::Carrier { .. } => Some(id),
            Group::Member { carrier } => Some(*carrier),
        }
    }

    /// The shared buffer it holds on the device, if any.
    pub fn shared(&self) -> Option<u32> {
        (self.buffer != 0).then_some(self.buffer)
    }

    /// The device bytes counted for it alone: its size, or nothing when a shared buffer
    /// counts them.
    pub(super) fn own(&self) -> u64 {
        if self.buffer == 0 { self.bytes } else { 0 }
    }

    /// Where it is.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Where it was, for an entry out of the books.
    pub fn into_state(self) -> State {
        self.state
    }

    pub fn ir(&self, id: TensorId, status: TensorStatus) -> TensorIr {
        TensorIr {
            id,
            shape: self.dims.to_shape(),
            status,
            dtype: self.dtype(),
        }
    }
}

/// A shared buffer that left the device as one copy, its holders' layouts kept: the buffer
/// comes back whole and every holder is made again as a view of it, so that they share it
/// as before (a kernel that writes in place into a buffer only one tensor holds never sees
/// one of them alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Group {
    /// The holder whose offload carries the buffer (its host copy is the whole buffer): the
    /// other holders still in the books, and the buffer's size on the device, which its fetch
    /// makes room for.
    Carrier {
        members: Vec<TensorId>,
        buffer_bytes: u64,
    },
    /// A holder that is off the device until its carrier comes back (it pins the carrier).
    Member { carrier: TensorId },
}
