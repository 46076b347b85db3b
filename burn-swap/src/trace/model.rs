//! The trace of one iteration: ops in order and, per tensor, its producer, accesses and end of
//! life, all as op indices relative to the iteration's first op.

use serde::{Deserialize, Serialize};

/// How an op used an input tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AccessKind {
    /// Read; the tensor lives on after the op.
    Read,
    /// Read for the last time: the op consumed the tensor (Burn's `ReadWrite` status), which is
    /// how saved activations usually end their life in backward.
    LastUse,
}

/// One access of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    /// Index of the op, relative to the iteration's first op.
    pub op: usize,
    /// Read or last use.
    pub kind: AccessKind,
}

/// How a tensor's life ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndKind {
    /// Consumed by its last user.
    LastUse,
    /// Dropped explicitly (a `Drop` op) without being consumed.
    Drop,
}

/// The end of a tensor's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    /// Index of the op (the last user, or the `Drop` op).
    pub op: usize,
    /// Last use or drop.
    pub kind: EndKind,
}

/// The position of a tensor in the iteration, the same in every iteration while tensor ids are
/// new each time: the tensor of iteration `k + 1` with the same slot is "the same" tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Slot {
    /// Output `index` of op `op`.
    Output {
        /// The producing op.
        op: usize,
        /// Which of its outputs.
        index: usize,
    },
    /// Made before the iteration (a parameter, an optimizer state): input `index` of `op`,
    /// its first use in the iteration.
    Input {
        /// The first op that uses it.
        op: usize,
        /// Which of its inputs.
        index: usize,
    },
}

/// What the executor moved around one op: offloads and fetches it started or made, and
/// recomputations, just before the op ran or right after the previous one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpEvents {
    /// Offloads (to host) started or made.
    pub offloads: u16,
    /// Fetches (from host) started or made.
    pub fetches: u16,
    /// Tensors recomputed.
    pub recomputes: u16,
}

/// One op of the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpTrace {
    /// Index relative to the iteration's first op.
    pub index: usize,
    /// The op kind, e.g. `Float.Matmul`, `NumericFloat.Add`, `Drop`, `Read`.
    pub kind: String,
    /// Kind, dtypes and shapes hashed: equal in every iteration.
    pub signature: u64,
    /// Input tensor ids (as numbers).
    pub inputs: Vec<u64>,
    /// Output tensor ids.
    pub outputs: Vec<u64>,
    /// Wall time of the op on the inner backend, in nanoseconds (launch time on asynchronous
    /// backends). Zero when not measured.
    pub nanos: u64,
    /// Counted resident bytes while the op ran.
    pub resident_bytes: u64,
    /// Bytes the device held beyond the counted ones while the op ran: its temporaries (a
    /// convolution's unfolded input, a reduction's partial sums), learned from the
    /// allocator on CubeCL backends, zero elsewhere. Planners keep room for them.
    #[serde(default)]
    pub temporaries: u64,
    /// What the executor moved around the op.
    #[serde(default)]
    pub events: OpEvents,
}

/// One tensor of the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorTrace {
    /// The tensor id in this iteration.
    pub id: u64,
    /// Its position, stable across iterations.
    pub slot: Slot,
    /// Shape.
    pub shape: Vec<usize>,
    /// Data type, as Burn names it.
    pub dtype: String,
    /// Size in bytes.
    pub bytes: u64,
    /// The op that produced it, `None` when it was made before the iteration.
    pub producer: Option<usize>,
    /// Every access by an op in the iteration, in order.
    pub accesses: Vec<Access>,
    /// End of life, `None` when it lives past the iteration.
    pub end: Option<End>,
    /// For a tensor that lives past the iteration: the index (in this trace) of the tensor
    /// that the previous iteration made in the same slot, which this iteration received as
    /// an input. Its accesses are where this tensor will be used in the next iteration (a
    /// parameter or an optimizer state carried from step to step). `None` when unknown.
    #[serde(default)]
    pub wraps_to: Option<usize>,
    /// Made sharing its buffer with another tensor (a view the backend made in place), or
    /// strided with a layout that would not come back from the host: it cannot leave the
    /// device by an offload of its own, only by recomputation (the executor would refuse
    /// the offload, and the budget would then fall to the fallback).
    #[serde(default)]
    pub shares_buffer: bool,
    /// A view: the id of the tensor (one of its producer's inputs) whose buffer it holds on
    /// the device. That buffer stays there while the view lives, after its own tensor's end;
    /// the view adds no bytes of its own (the simulator counts the buffer once,
    /// `plan::simulate`). Also set for an output made in the buffer of an input its op
    /// consumed, which it then holds alone. `None` for a tensor with a buffer of its own, or
    /// when its source is not known.
    #[serde(default)]
    pub view_of: Option<u64>,
}

/// The counted peak of one complete iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterationPeak {
    /// Iteration number (0 is the first iteration of the periodic stretch).
    pub iteration: u64,
    /// Its counted resident peak, in bytes.
    pub peak_bytes: u64,
}

/// The trace of one iteration (or of a whole window of ops, for graphs that do not repeat).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The detected period in ops, `None` if the stream never repeated.
    pub period: Option<usize>,
    /// Which iteration this is.
    pub iteration: u64,
    /// Global index of its first op (ops are numbered from the device's first op).
    pub first_op: u64,
    /// Global index from which the op stream is periodic (ops before it are warm-up).
    pub periodic_from: u64,
    /// Counted resident peak over the iteration.
    pub peak_bytes: u64,
    /// Ops in order.
    pub ops: Vec<OpTrace>,
    /// Tensors in order of first appearance.
    pub tensors: Vec<TensorTrace>,
}

impl Trace {
    /// Each tensor's index in [`Trace::tensors`], by id.
    pub fn tensor_indices(&self) -> hashbrown::HashMap<u64, usize> {
        self.tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id, i))
            .collect()
    }

    /// The trace as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a trace is plain data and always serialises")
    }

    /// The tensor with the given slot.
    pub fn tensor_at(&self, slot: Slot) -> Option<&TensorTrace> {
        self.tensors.iter().find(|t| t.slot == slot)
    }

    /// The tensor with the given id.
    pub fn tensor(&self, id: u64) -> Option<&TensorTrace> {
        self.tensors.iter().find(|t| t.id == id)
    }
}
