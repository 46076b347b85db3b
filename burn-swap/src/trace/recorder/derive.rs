//! The per-tensor trace of a stretch of the log: derived on demand (for the planners and the
//! report), never on the op path. A plan's trace is derived on the planner's thread from an
//! [`Excerpt`], an owned copy of the two iterations it reads that the op's thread only copies.

use super::{OpRecord, Recorder, Schedule, TensorRef};
use crate::trace::model::{Access, AccessKind, End, EndKind, OpTrace, Slot, TensorTrace, Trace};
use burn_backend::DType;
use burn_ir::TensorId;
use hashbrown::HashMap;
use std::ops::Range;

/// The part of a log a trace is derived from: the recorder's own arenas, or an excerpt's.
#[derive(Clone, Copy)]
struct Log<'a> {
    /// Global index of `ops[0]`.
    base: u64,
    ops: &'a [OpRecord],
    /// What the ops' tensor ranges index.
    tensors: &'a [TensorRef],
    /// What the tensors' dims ranges index.
    dims: &'a [usize],
    dtypes: &'a [DType],
    kinds: &'a [String],
    schedule: Option<Schedule>,
    slot_nanos: &'a [u64],
}

/// An owned copy of the log's last complete iteration recorded in full and of the one
/// before it (which the trace reads for the tensors carried across the boundary), made on
/// the op's thread by [`Recorder::excerpt`] (copies of flat arenas, no derivation) so that
/// the trace is derived where the plan is made.
pub(crate) struct Excerpt {
    base: u64,
    ops: Vec<OpRecord>,
    tensors: Vec<TensorRef>,
    dims: Vec<usize>,
    dtypes: Vec<DType>,
    kinds: Vec<String>,
    schedule: Option<Schedule>,
    slot_nanos: Vec<u64>,
    range: Range<u64>,
    period: usize,
    iteration: u64,
    periodic_from: u64,
}

impl Excerpt {
    /// The trace of its iteration: the same as [`Recorder::trace`] when the excerpt was made.
    pub(crate) fn trace(&self) -> Trace {
        Log {
            base: self.base,
            ops: &self.ops,
            tensors: &self.tensors,
            dims: &self.dims,
            dtypes: &self.dtypes,
            kinds: &self.kinds,
            schedule: self.schedule,
            slot_nanos: &self.slot_nanos,
        }
        .trace_of(
            self.range.clone(),
            Some(self.period),
            self.iteration,
            self.periodic_from,
        )
    }
}

/// Books a tensor's use as an input of op `op`: a drop ends it; otherwise an access, which
/// ends it when it is the last use.
fn access(entry: &mut TensorTrace, op: usize, last_use: bool, is_drop: bool) {
    if is_drop {
        entry.end = Some(End {
            op,
            kind: EndKind::Drop,
        });
        return;
    }
    entry.accesses.push(Access {
        op,
        kind: if last_use {
            AccessKind::LastUse
        } else {
            AccessKind::Read
        },
    });
    if last_use {
        entry.end = Some(End {
            op,
            kind: EndKind::LastUse,
        });
    }
}

impl Recorder {
    fn log(&self) -> Log<'_> {
        Log {
            base: self.base,
            ops: &self.ops,
            tensors: &self.tensors,
            dims: &self.dims,
            dtypes: &self.dtypes,
            kinds: &self.kinds.names,
            schedule: self.schedule,
            slot_nanos: &self.slot_nanos,
        }
    }

    pub(super) fn trace_of(
        &self,
        range: Range<u64>,
        period: Option<usize>,
        iteration: u64,
        periodic_from: u64,
    ) -> Trace {
        self.log().trace_of(range, period, iteration, periodic_from)
    }

    /// An excerpt of the last complete iteration recorded in full (see [`Excerpt`]), or
    /// `None` before there is one (as [`Recorder::trace`]).
    pub(crate) fn excerpt(&mut self) -> Option<Excerpt> {
        self.refresh();
        let (s, iteration, range) = self.last_full()?;
        let from = range.start.saturating_sub(s.period as u64).max(self.base);
        let ops = &self.ops[(from - self.base) as usize..(range.end - self.base) as usize];
        let spans = ops
            .iter()
            .flat_map(|o| [o.inputs.clone(), o.outputs.clone()]);
        let t0 = spans.clone().map(|r| r.start).min().unwrap_or(0);
        let t1 = spans.map(|r| r.end).max().unwrap_or(0).max(t0);
        let tensors = &self.tensors[t0 as usize..t1 as usize];
        let d0 = tensors.iter().map(|t| t.dims.start).min().unwrap_or(0);
        let d1 = tensors
            .iter()
            .map(|t| t.dims.end)
            .max()
            .unwrap_or(0)
            .max(d0);
        let shift = |r: &Range<u32>, by: u32| r.start - by..r.end - by;
        Some(Excerpt {
            base: from,
            ops: ops
                .iter()
                .map(|o| OpRecord {
                    inputs: shift(&o.inputs, t0),
                    outputs: shift(&o.outputs, t0),
                    ..o.clone()
                })
                .collect(),
            tensors: tensors
                .iter()
                .map(|t| TensorRef {
                    dims: shift(&t.dims, d0),
                    ..t.clone()
                })
                .collect(),
            dims: self.dims[d0 as usize..d1 as usize].to_vec(),
            dtypes: self.dtypes.clone(),
            kinds: self.kinds.names.clone(),
            schedule: self.schedule,
            slot_nanos: self.slot_nanos.clone(),
            range,
            period: s.period,
            iteration,
            periodic_from: s.periodic_from,
        })
    }
}

impl Log<'_> {
    fn dtype_of(&self, t: &TensorRef) -> DType {
        self.dtypes[t.dtype as usize]
    }

    fn trace_of(
        &self,
        range: Range<u64>,
        period: Option<usize>,
        iteration: u64,
        periodic_from: u64,
    ) -> Trace {
        let local = (range.start - self.base) as usize..(range.end - self.base) as usize;
        let mut tensors: Vec<TensorTrace> = Vec::new();
        let mut index_of: HashMap<TensorId, usize> = HashMap::new();
        let mut ops = Vec::with_capacity(local.len());
        for (i, op) in self.ops[local].iter().enumerate() {
            let mut inputs = Vec::new();
            let is_drop = self.kinds[op.kind as usize] == "Drop";
            for (k, t) in self.tensors[op.inputs.start as usize..op.inputs.end as usize]
                .iter()
                .enumerate()
            {
                inputs.push(t.id.value());
                let at = *index_of.entry(t.id).or_insert_with(|| {
                    tensors.push(self.tensor_trace(t, Slot::Input { op: i, index: k }, None));
                    tensors.len() - 1
                });
                access(&mut tensors[at], i, t.last_use, is_drop);
            }
            let mut outputs = Vec::new();
            for (k, t) in self.tensors[op.outputs.start as usize..op.outputs.end as usize]
                .iter()
                .enumerate()
            {
                outputs.push(t.id.value());
                let mut output = self.tensor_trace(t, Slot::Output { op: i, index: k }, Some(i));
                output.view_of = (t.view_of != super::NO_SOURCE)
                    .then(|| inputs.get(t.view_of as usize).copied())
                    .flatten();
                tensors.push(output);
                index_of.insert(t.id, tensors.len() - 1);
            }
            let nanos = self.nanos_at(op.nanos, range.start + i as u64);
            ops.push(OpTrace {
                index: i,
                kind: self.kinds[op.kind as usize].clone(),
                signature: op.signature,
                inputs,
                outputs,
                nanos,
                resident_bytes: op.resident_during,
                temporaries: op.beyond,
                events: op.events,
            });
        }
        if let Some(p) = period
            && range.end - range.start == p as u64
        {
            self.link_carried(&range, p, &mut tensors);
        }
        Trace {
            period,
            iteration,
            first_op: range.start,
            periodic_from,
            peak_bytes: ops.iter().map(|o| o.resident_bytes).max().unwrap_or(0),
            ops,
            tensors,
        }
    }

    /// An op's time: its own, or, for an op not timed (0), its slot's in the schedule.
    fn nanos_at(&self, nanos: u64, position: u64) -> u64 {
        match (nanos, self.schedule) {
            (0, Some(s)) if self.slot_nanos.len() == s.period && position >= s.anchor => {
                self.slot_nanos[((position - s.anchor) % s.period as u64) as usize]
            }
            (nanos, _) => nanos,
        }
    }

    fn tensor_trace(&self, t: &TensorRef, slot: Slot, producer: Option<usize>) -> TensorTrace {
        TensorTrace {
            id: t.id.value(),
            slot,
            shape: self.dims[t.dims.start as usize..t.dims.end as usize].to_vec(),
            dtype: format!("{:?}", self.dtype_of(t)),
            bytes: t.bytes,
            producer,
            accesses: Vec::new(),
            end: None,
            wraps_to: None,
            shares_buffer: t.shares,
            view_of: None,
        }
    }

    /// Links each tensor of the iteration at `range` that lives past it to the tensor the
    /// previous iteration made in the same slot (see [`TensorTrace::wraps_to`]), when the
    /// previous iteration is still in the window.
    fn link_carried(&self, range: &Range<u64>, period: usize, tensors: &mut [TensorTrace]) {
        let Some(prev_start) = range.start.checked_sub(period as u64) else {
            return;
        };
        if prev_start < self.base {
            return;
        }
        let made_before: HashMap<u64, usize> = tensors
            .iter()
            .enumerate()
            .filter(|(_, t)| t.producer.is_none())
            .map(|(i, t)| (t.id, i))
            .collect();
        if made_before.is_empty() {
            return;
        }
        let by_slot: HashMap<(usize, usize), usize> = tensors
            .iter()
            .enumerate()
            .filter_map(|(i, t)| match t.slot {
                Slot::Output { op, index } if t.end.is_none() => Some(((op, index), i)),
                _ => None,
            })
            .collect();
        let local = (prev_start - self.base) as usize..(range.start - self.base) as usize;
        for (pos, op) in self.ops[local].iter().enumerate() {
            for (k, t) in self.tensors[op.outputs.start as usize..op.outputs.end as usize]
                .iter()
                .enumerate()
            {
                if let (Some(&input), Some(&out)) =
                    (made_before.get(&t.id.value()), by_slot.get(&(pos, k)))
                {
                    tensors[out].wraps_to = Some(input);
                }
            }
        }
    }
}
