//! Where each tensor of a device is: the residency table.

use burn_backend::{DType, Shape, TensorData};
use burn_ir::{OperationIr, TensorId, TensorIr, TensorStatus};
use hashbrown::HashMap;

/// A tensor's dimensions, kept inline up to rank 6 so that recording a tensor copies a few
/// words instead of cloning a `Shape`; turned back into a `Shape` only when a tensor moves.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Dims {
    Inline { rank: u8, dims: [usize; 6] },
    Heap(Box<[usize]>),
}

impl Dims {
    #[inline]
    pub fn from_slice(dims: &[usize]) -> Self {
        if dims.len() <= 6 {
            let mut inline = [0; 6];
            inline[..dims.len()].copy_from_slice(dims);
            Dims::Inline {
                rank: dims.len() as u8,
                dims: inline,
            }
        } else {
            Dims::Heap(dims.into())
        }
    }

    pub fn as_slice(&self) -> &[usize] {
        match self {
            Dims::Inline { rank, dims } => &dims[..*rank as usize],
            Dims::Heap(dims) => dims,
        }
    }

    pub fn to_shape(&self) -> Shape {
        Shape::from(self.as_slice().to_vec())
    }
}

/// The state of a tensor (seed 000, claim 5).
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
}

impl State {
    /// Whether the device holds the tensor's bytes in the handle container now.
    pub fn on_device(&self) -> bool {
        matches!(self, State::Resident | State::Offloading)
    }
}

/// A tensor's bytes off the device: in host memory, or split across peers.
pub(crate) enum HostCopy {
    /// As read.
    Raw(TensorData),
    /// Zero-value compressed (`crate::compress`).
    Compressed(crate::compress::Compressed),
    /// Split across peers, the rest on the host (`super::peers`).
    Peers(Box<super::peers::PeerCopy>),
}

impl HostCopy {
    /// Bytes it occupies in host memory (peers' pieces are counted by their peers).
    pub fn bytes(&self) -> u64 {
        match self {
            HostCopy::Raw(data) => data.bytes.len() as u64,
            HostCopy::Compressed(c) => c.bytes(),
            HostCopy::Peers(p) => p.host_bytes(),
        }
    }

    /// The tensor's data, decompressed or brought back from its peers when needed.
    pub fn into_data(self) -> Result<TensorData, crate::compress::CodecError> {
        match self {
            HostCopy::Raw(data) => Ok(data),
            HostCopy::Compressed(c) => crate::compress::decompress(&c),
            HostCopy::Peers(p) => p.receive(),
        }
    }

    /// Bytes it moved off the device (to the host and to peers), compressed or not.
    pub fn stored_bytes(&self) -> u64 {
        match self {
            HostCopy::Peers(p) => p.stored_bytes(),
            other => other.bytes(),
        }
    }

    /// Whether it is zero-value compressed.
    pub fn compressed(&self) -> bool {
        match self {
            HostCopy::Raw(_) => false,
            HostCopy::Compressed(_) => true,
            HostCopy::Peers(p) => p.compressed(),
        }
    }

    /// A copy of the tensor's data.
    pub fn to_data(&self) -> Result<TensorData, crate::compress::CodecError> {
        match self {
            HostCopy::Raw(data) => Ok(data.clone()),
            HostCopy::Compressed(c) => crate::compress::decompress(c),
            HostCopy::Peers(p) => p.receive(),
        }
    }
}

/// How to make a tensor again: its producing op, replayed with every input read-only, and
/// those inputs, which the recipe keeps alive (pins).
pub(crate) struct Recipe {
    pub op: OperationIr,
    pub inputs: Vec<TensorId>,
}

/// What the executor knows of one live tensor.
pub(crate) struct Entry {
    pub bytes: u64,
    pub dims: Dims,
    pub dtype: DType,
    /// Global index of the last op that made or used it.
    pub last_use: u64,
    pub state: State,
    /// How to recompute it, when the plan drops it.
    pub recipe: Option<Box<Recipe>>,
    /// Recipes that need it as an input.
    pub pins: u32,
    /// Burn is done with it (dropped or consumed it); only recipes keep it.
    pub orphan: bool,
    /// Its layout may be strided: a fetch would not restore it, so it is never offloaded
    /// (see `exec::layout`).
    pub strided: bool,
    /// For a strided tensor under a budget: the op that made it, to become its recipe if it
    /// must leave while its inputs are still there.
    pub view_op: Option<Box<OperationIr>>,
}

impl Entry {
    pub fn new(bytes: u64, dims: Dims, dtype: DType, last_use: u64) -> Self {
        Self {
            bytes,
            dims,
            dtype,
            last_use,
            state: State::Resident,
            recipe: None,
            pins: 0,
            orphan: false,
            strided: false,
            view_op: None,
        }
    }

    pub fn ir(&self, id: TensorId, status: TensorStatus) -> TensorIr {
        TensorIr {
            id,
            shape: self.dims.to_shape(),
            status,
            dtype: self.dtype,
        }
    }
}

/// Every live tensor of a device, by id.
#[derive(Default)]
pub(crate) struct Residency {
    pub entries: HashMap<TensorId, Entry>,
}

impl Residency {
    pub fn get(&self, id: &TensorId) -> Option<&Entry> {
        self.entries.get(id)
    }

    pub fn get_mut(&mut self, id: &TensorId) -> Option<&mut Entry> {
        self.entries.get_mut(id)
    }

    pub fn insert(&mut self, id: TensorId, entry: Entry) -> Option<Entry> {
        self.entries.insert(id, entry)
    }

    pub fn remove(&mut self, id: &TensorId) -> Option<Entry> {
        self.entries.remove(id)
    }

    pub fn is_offloaded(&self, id: &TensorId) -> bool {
        matches!(
            self.entries.get(id),
            Some(Entry {
                state: State::Offloaded(_),
                ..
            })
        )
    }

    /// Whether the tensor must be brought back (fetched, waited for, or recomputed) before
    /// an op can use it.
    pub fn is_absent(&self, id: &TensorId) -> bool {
        self.entries.get(id).is_some_and(|e| !e.state.on_device())
    }

    pub fn is_pinned(&self, id: &TensorId) -> bool {
        self.entries.get(id).is_some_and(|e| e.pins > 0)
    }
}
