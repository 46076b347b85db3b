//! Where each tensor of a device is: the residency table.

use burn_backend::{DType, Shape, TensorData};
use burn_ir::TensorId;
use hashbrown::HashMap;

/// A tensor's dimensions, kept inline up to rank 6 so that recording a tensor copies a few
/// words instead of cloning a `Shape`; turned back into a `Shape` only when a tensor moves.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// The state of a tensor.
///
/// The reactive executor moves tensors synchronously, so a tensor is either on the device or in
/// the host store; the asynchronous states (offloading, fetching, evicted for recomputation)
/// come with the planned executor.
pub(crate) enum State {
    /// On the device, in the inner backend's handle container.
    Resident,
    /// In host memory; the device holds nothing of it.
    Offloaded(Box<TensorData>),
}

/// What the executor knows of one live tensor.
pub(crate) struct Entry {
    pub bytes: u64,
    pub dims: Dims,
    pub dtype: DType,
    /// Global index of the last op that made or used it.
    pub last_use: u64,
    pub state: State,
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
}
