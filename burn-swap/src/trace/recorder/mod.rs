//! The recorder: an append-only log of the ops of one device, in flat arenas so that recording
//! an op allocates nothing once the arenas have grown, and bounded so that a long training run
//! keeps only the last few iterations.

use super::model::{IterationPeak, OpEvents, Trace};
use super::signature;
use burn_backend::DType;
use burn_ir::{TensorId, TensorIr, TensorStatus};
use core::cell::Cell;
use core::hash::Hasher;
use kinds::KindTable;
use std::ops::Range;

/// Ops kept before the log is compacted (at least three periods are always kept).
const DEFAULT_WINDOW: usize = 1 << 17;
/// Per-iteration peaks kept for the report.
const KEPT_ITERATION_PEAKS: usize = 64;

/// One recorded op.
#[derive(Debug, Clone)]
pub(crate) struct OpRecord {
    kind: u32,
    signature: u64,
    inputs: Range<u32>,
    outputs: Range<u32>,
    nanos: u64,
    /// Bytes live (resident or offloaded) just before the op.
    live_before: u64,
    /// Counted resident bytes while the op ran (inputs and outputs together).
    resident_during: u64,
    /// Bytes the device held beyond the books while it ran (its temporaries).
    beyond: u64,
    events: OpEvents,
    /// Recorded without its tensors (see [`Recorder::set_lean`]).
    lean: bool,
}

#[derive(Debug, Clone)]
struct TensorRef {
    id: TensorId,
    /// Its dtype, by index in [`Recorder`]'s `dtypes` (a `DType` is 32 bytes, for the
    /// quantization scheme only `QFloat` carries: the log is half as large this way).
    dtype: u16,
    bytes: u64,
    dims: Range<u32>,
    last_use: bool,
    /// An output that shares a buffer (see [`Recorder::mark_output_shares`]).
    shares: bool,
    /// For such an output: the place, among its op's inputs, of the tensor whose buffer it
    /// holds ([`NO_SOURCE`] when none is known).
    view_of: u8,
}

/// [`TensorRef::view_of`] when the buffer's tensor is not known.
const NO_SOURCE: u8 = u8::MAX;

/// What the executor tells the recorder about one op, besides the op itself.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OpCounters {
    pub nanos: u64,
    pub live_before: u64,
    pub resident_during: u64,
    /// Bytes the device holds beyond the books while the op runs (its temporaries, as
    /// learned from the allocator: `exec::temporaries`).
    pub beyond: u64,
    pub events: OpEvents,
}

/// The op being recorded.
#[derive(Default)]
struct Draft {
    kind: u32,
    hasher: signature::FxHasher,
    inputs: Range<u32>,
    outputs_start: u32,
    /// The op's tensors are hashed into its signature but not kept.
    lean: bool,
}

/// Where an op stands in its iteration ([`Recorder::place_of_last`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// Its position in the iteration (0 for the iteration's first op).
    pub position: usize,
    /// Whether the schedule holds up to it; `false` inside a short break that may still
    /// rejoin it, where the op is the one a period before.
    pub verified: bool,
}

/// Where iterations begin, once a period was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Schedule {
    period: usize,
    /// Global op index of the boundary that starts iteration `first_iteration`.
    anchor: u64,
    /// The number of the iteration that starts at `anchor`.
    first_iteration: u64,
    /// Global op index from which the stream is periodic.
    periodic_from: u64,
    /// One past the last global op index known to keep the period.
    verified_end: u64,
}

impl Schedule {
    /// Ops of the window that the periodic stretch covers.
    fn cover(&self, base: u64) -> u64 {
        self.verified_end
            .saturating_sub(self.periodic_from.max(base))
    }
}

/// The op log of one device.
pub(crate) struct Recorder {
    /// Global index of `ops[0]`.
    base: u64,
    ops: Vec<OpRecord>,
    tensors: Vec<TensorRef>,
    dims: Vec<usize>,
    /// The dtypes of the logged tensors, each once, in the order first seen.
    dtypes: Vec<DType>,
    kinds: KindTable,
    window: usize,
    schedule: Option<Schedule>,
    /// Peaks of complete iterations that have been summarised, newest last.
    peaks: Vec<IterationPeak>,
    /// Global index up to which iterations were summarised into `peaks`.
    summarised_to: u64,
    /// Global index and window length at the last analysis.
    analysed_at: u64,
    analysed_len: usize,
    /// Global index where the current run of ops matching the op one period earlier began.
    run_start: u64,
    draft: Draft,
    /// Ops are timed up to this global index (exclusive) while the period holds.
    timed_until: u64,
    /// Global index of the next iteration boundary while the period holds.
    next_boundary: u64,
    /// The latest time measured for each op slot of the iteration.
    slot_nanos: Vec<u64>,
    /// Start of the iteration being timed, and whether one full iteration has been timed
    /// under the current schedule.
    timing_from: u64,
    profiled: bool,
    /// Whether iterations may be recorded lean (see [`Recorder::set_lean`]).
    lean: bool,
    /// While the schedule holds and `lean` is set, ops are recorded in full up to this global
    /// index (exclusive): the iterations that planning would read.
    full_until: u64,
    /// The periods of schedules held before (the latest [`RECALLED`]), each with the ops
    /// matched in a row at it since the schedule in force broke: a schedule that comes back
    /// (another sequence length, a GAN's other step) is taken up again as soon as one
    /// iteration of it matched the one before, without waiting for the next analysis.
    recalled: Vec<Recalled>,
    /// One iteration of each schedule held before (the latest [`RECALLED`], by content),
    /// kept when the schedule broke: a schedule that comes back after others (a sampler
    /// drawing batch lengths at random) is recognised by the first ops of its iteration.
    iterations: Vec<Iteration>,
    /// How the schedule in force was recognised, while its first iteration runs: its ops
    /// are checked against the iteration kept (the ops a period before are another
    /// schedule's).
    recognised: Option<Recognition>,
    /// The boundary of the iteration the schedule in force broke in, while it is watched
    /// for a schedule kept before (see `recognise`).
    candidate: Option<u64>,
    /// The content of the last complete iteration, with its global range: read several
    /// times at each iteration end (the plan's key, its judgement), hashed once.
    content: Cell<Option<(Range<u64>, u64)>>,
    /// The schedule, as `(period, anchor)`, whose first complete iteration has cleared the
    /// kept and recalled schedules that are loops inside it (see `forget_inner_loops`).
    cleared_for: Option<(usize, u64)>,
    /// Global index before which no recalled period is tried again (see `recall`): a try
    /// reads the whole window, so tries are spaced by a quarter of it.
    recall_after: u64,
    /// Log entries read off the per-op fast path (analyses, a broken schedule's checks, kept
    /// iterations compared, compaction), since the recorder began: the work that grows with
    /// the log, which the op's path must amortise to a bounded cost per op
    /// ([`Recorder::reads`]).
    reads: Cell<u64>,
}

/// One complete iteration of a schedule, from its boundary: its op signatures and its
/// content (see [`Recorder::schedule_content`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Iteration {
    signatures: Vec<u64>,
    content: u64,
}

/// A schedule taken up by the first ops of its iteration (see `recognise`).
#[derive(Debug, Clone)]
struct Recognition {
    /// The iteration kept of it that they matched.
    iteration: Iteration,
    /// The global index of the op it was recognised at.
    at: u64,
    /// The global index of the boundary its iteration began at.
    from: u64,
}

/// Periods of earlier schedules watched while the schedule in force does not hold.
const RECALLED: usize = 8;

/// The period of an earlier schedule, and the ops matched at it in a row.
#[derive(Debug, Clone, Copy)]
struct Recalled {
    period: usize,
    matched: usize,
    /// Global index of the op last compared (a gap restarts the count).
    last: u64,
}

/// At most this many ops differing from the op a period before, followed by
/// [`SWAP_RESUME`] that match, leave the schedule in force (see `verify_last`).
const SWAP_OPS: usize = 4;
/// A longer stretch of differing ops leaves the schedule in force when it is the same ops
/// as the stretch a period before in another order, and at most a period divided by this
/// long (see `reordered`).
const REORDER_FRACTION: usize = 2;
/// Matching ops after a short difference that resume the schedule in force.
const SWAP_RESUME: usize = 16;
/// Ops of an iteration that departs from the schedule in force, matching an iteration kept
/// from another schedule, after which that schedule is taken up (see `recognise`).
const RECOGNISED_AFTER: usize = 16;

/// Whether two runs of op signatures hold the same ops, in any order.
fn same_ops(a: impl Iterator<Item = u64>, b: impl Iterator<Item = u64>) -> bool {
    let (mut a, mut b): (Vec<u64>, Vec<u64>) = (a.collect(), b.collect());
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

/// Under [`Recorder::set_lean`], at most one pair of iterations in this many is recorded
/// with its tensors.
const LEAN_EVERY: usize = 16;
/// Ops before the first analysis.
const FIRST_ANALYSIS: usize = 64;
/// Once the period holds, one iteration in this many has its ops timed (the others reuse the
/// times of their slot): the profiled iterations, kept fresh.
const TIMED_ITERATION_EVERY: u64 = 16;

impl Default for Recorder {
    fn default() -> Self {
        Self::with_window(DEFAULT_WINDOW)
    }
}

impl Recorder {
    /// A recorder that keeps about `window` ops (never fewer than three periods).
    pub(crate) fn with_window(window: usize) -> Self {
        Self {
            base: 0,
            ops: Vec::new(),
            tensors: Vec::new(),
            dtypes: Vec::new(),
            dims: Vec::new(),
            kinds: KindTable::default(),
            window: window.max(16),
            schedule: None,
            peaks: Vec::new(),
            summarised_to: 0,
            analysed_at: 0,
            analysed_len: 0,
            run_start: 0,
            draft: Draft::default(),
            timed_until: 0,
            next_boundary: 0,
            slot_nanos: Vec::new(),
            timing_from: 0,
            profiled: false,
            lean: false,
            full_until: 0,
            recalled: Vec::new(),
            iterations: Vec::new(),
            recognised: None,
            candidate: None,
            content: Cell::new(None),
            cleared_for: None,
            recall_after: 0,
            reads: Cell::new(0),
        }
    }

    /// Lets the recorder keep only two iterations in a row out of every few in full once the
    /// schedule holds and an iteration was profiled under it: the others keep each op's
    /// kind, signature and counters (what checks the schedule and counts the peaks) but not
    /// its tensors. The executor sets it while no budget is set: nothing is planned then,
    /// and the plan of a budget set later reads the last complete iteration recorded in
    /// full, the same ops on the same shapes as the latest, the schedule having held. Saves
    /// the tensor log's memory traffic on every op (*Measurements*, "Lean recording").
    pub(crate) fn set_lean(&mut self, lean: bool) {
        self.lean = lean;
    }

    /// Whether the op about to begin is recorded without its tensors.
    #[inline]
    fn records_lean(&self) -> bool {
        self.lean && self.profiled && self.next_index() >= self.full_until && self.healthy()
    }

    /// Log entries read off the per-op fast path since the recorder began (see `reads`).
    pub(crate) fn reads(&self) -> u64 {
        self.reads.get()
    }

    /// Counts `n` log entries read off the per-op fast path.
    #[inline]
    pub(super) fn read(&self, n: usize) {
        self.reads.set(self.reads.get() + n as u64);
    }

    /// Global index the next op will get.
    pub(crate) fn next_index(&self) -> u64 {
        self.base + self.ops.len() as u64
    }

    /// Starts recording an op of kind `key`; `name` is called only the first time the kind
    /// is seen. Follow with [`Recorder::input`]s, [`Recorder::outputs_follow`],
    /// [`Recorder::output`]s and [`Recorder::end`].
    #[inline]
    pub(crate) fn begin(&mut self, key: u64, name: impl FnOnce() -> String) {
        let kind = self.kinds.intern(key, name);
        let start = self.tensors.len() as u32;
        let mut hasher = signature::FxHasher::default();
        hasher.write_u64(key);
        self.draft = Draft {
            kind,
            hasher,
            inputs: start..start,
            outputs_start: start,
            lean: self.records_lean(),
        };
    }

    /// Hashes a tensor into the op's signature and, unless the op is recorded lean, logs it:
    /// the hash inline (every op), the log out of line (the iterations recorded in full).
    #[inline(always)]
    fn push_tensor(&mut self, t: &TensorIr, bytes: u64) {
        let dims = t.shape.as_slice();
        signature::hash_tensor(&mut self.draft.hasher, t.dtype, dims);
        if !self.draft.lean {
            self.log_tensor(t, dims, bytes);
        }
    }

    #[inline(never)]
    fn log_tensor(&mut self, t: &TensorIr, dims: &[usize], bytes: u64) {
        let dims_start = self.dims.len() as u32;
        self.dims.extend_from_slice(dims);
        let dtype = self.dtype_index(t.dtype);
        self.tensors.push(TensorRef {
            id: t.id,
            dtype,
            bytes,
            dims: dims_start..self.dims.len() as u32,
            last_use: t.status == TensorStatus::ReadWrite,
            shares: false,
            view_of: NO_SOURCE,
        });
    }

    /// The index of `dtype` in `dtypes`, added if new (a run has a handful: the search is
    /// over them). Past `u16::MAX` distinct dtypes, which no run has, the last index stands
    /// for the rest.
    fn dtype_index(&mut self, dtype: DType) -> u16 {
        if let Some(i) = self.dtypes.iter().position(|d| *d == dtype) {
            return i as u16;
        }
        if self.dtypes.len() <= u16::MAX as usize {
            self.dtypes.push(dtype);
        }
        (self.dtypes.len() - 1) as u16
    }

    /// The dtype of a logged tensor, by its index.
    #[cfg(test)]
    fn dtype_of(&self, t: &TensorRef) -> DType {
        self.dtypes[t.dtype as usize]
    }

    /// Records an input of the op begun last.
    #[inline]
    pub(crate) fn input(&mut self, t: &TensorIr, bytes: u64) {
        self.push_tensor(t, bytes);
    }

    /// Records the tensor a `Drop` lets go of: logged as the op's input, but left out of its
    /// signature, so that every drop is the same op wherever it stands. Burn's autodiff drops
    /// a step's graph in an order that changes from step to step; with their shapes hashed,
    /// those drops broke the schedule at every step (the plan's steps waited until it
    /// resumed), and a loop whose drops never came twice in one order had no period at all.
    #[inline]
    pub(crate) fn dropped(&mut self, t: &TensorIr, bytes: u64) {
        if !self.draft.lean {
            self.log_tensor(t, t.shape.as_slice(), bytes);
        }
    }

    /// Marks the end of the inputs.
    #[inline]
    pub(crate) fn outputs_follow(&mut self) {
        let end = self.tensors.len() as u32;
        self.draft.inputs.end = end;
        self.draft.outputs_start = end;
        self.draft.hasher.write_u8(0xff);
    }

    /// Records an output of the op begun last.
    #[inline]
    pub(crate) fn output(&mut self, t: &TensorIr, bytes: u64) {
        self.push_tensor(t, bytes);
    }

    /// Marks output `k` of the op recorded last as sharing a buffer, or strided without a
    /// layout that comes back (the executor sees that only after the op ran): planners do
    /// not plan to offload it ([`crate::trace::TensorTrace::shares_buffer`]). `source`: the
    /// input whose buffer it holds, when known ([`crate::trace::TensorTrace::view_of`]).
    pub(crate) fn mark_output_shares(&mut self, k: usize, source: Option<TensorId>) {
        if let Some(output) = self.last_output(k) {
            output.shares = true;
        }
        if let Some(source) = source {
            self.mark_output_source(k, source);
        }
    }

    /// Marks output `k` of the op recorded last as made in the buffer of its input `source`
    /// ([`crate::trace::TensorTrace::view_of`]): a view, or the buffer of an input the op
    /// consumed, which the output now holds alone (no bytes of its own were made for it).
    pub(crate) fn mark_output_source(&mut self, k: usize, source: TensorId) {
        let Some(op) = self.ops.last() else {
            return;
        };
        let inputs = &self.tensors[op.inputs.start as usize..op.inputs.end as usize];
        let Some(place) = inputs
            .iter()
            .position(|t| t.id == source)
            .and_then(|place| u8::try_from(place).ok())
            .filter(|&place| place != NO_SOURCE)
        else {
            return;
        };
        if let Some(output) = self.last_output(k) {
            output.view_of = place;
        }
    }

    /// Output `k` of the op recorded last.
    fn last_output(&mut self, k: usize) -> Option<&mut TensorRef> {
        let op = self.ops.last()?;
        let at = op.outputs.start as usize + k;
        if at >= op.outputs.end as usize {
            return None;
        }
        self.tensors.get_mut(at)
    }

    /// Drops the op begun last (it failed and never ran).
    pub(crate) fn abort(&mut self) {
        let start = self.draft.inputs.start as usize;
        if let Some(first) = self.tensors.get(start) {
            self.dims.truncate(first.dims.start as usize);
        }
        self.tensors.truncate(start);
    }

    /// Ends the op begun last.
    #[inline]
    pub(crate) fn end(&mut self, c: OpCounters) {
        let draft = &self.draft;
        let op = OpRecord {
            kind: draft.kind,
            signature: core::hash::Hasher::finish(&draft.hasher),
            inputs: draft.inputs.clone(),
            outputs: draft.outputs_start..self.tensors.len() as u32,
            nanos: c.nanos,
            live_before: c.live_before,
            resident_during: c.resident_during,
            beyond: c.beyond,
            events: c.events,
            lean: draft.lean,
        };
        self.ops.push(op);
        self.verify_last();
        self.track_boundary();
        if self.needs_analysis() {
            self.analyse();
        }
        if self.ops.len() >= self.window {
            self.compact();
        }
    }

    /// Where the op recorded last stands in its iteration: while the schedule holds up to it,
    /// and also inside a short break that may still rejoin the schedule at the same
    /// alignment (a few ops swapped, or a stretch reordered, such as the autodiff graph's
    /// drops, whose order changes from step to step; see `verify_schedule`), for an op that
    /// is the one a period before. Without the second, an executor following a plan would
    /// skip the plan's steps from the break until [`SWAP_RESUME`] ops have matched again.
    #[inline]
    pub(crate) fn place_of_last(&self) -> Option<Place> {
        let s = self.schedule?;
        let last = self.next_index().checked_sub(1)?;
        if last < s.anchor {
            return None;
        }
        let position = ((last - s.anchor) % s.period as u64) as usize;
        if s.verified_end == last + 1 {
            return Some(Place {
                position,
                verified: true,
            });
        }
        self.rejoinable_break(s, last).then_some(Place {
            position,
            verified: false,
        })
    }

    /// Whether the schedule `s`, broken before op `last`, may still rejoin at its alignment
    /// and `last` is the op a period before: the differing stretch is no longer than a
    /// resume accepts, and the matching run after it has not yet reached the length at
    /// which the resume is judged (it would hold again by then, or never).
    #[inline(never)]
    fn rejoinable_break(&self, s: Schedule, last: u64) -> bool {
        let p = s.period;
        let differing = self.run_start.saturating_sub(s.verified_end);
        let matched = (last + 1).saturating_sub(self.run_start);
        let Some(local) = last.checked_sub(self.base).map(|l| l as usize) else {
            return false;
        };
        p > 2 * SWAP_RESUME
            && differing <= SWAP_OPS.max(p / REORDER_FRACTION) as u64
            && matched < SWAP_RESUME as u64
            && local >= p
            && local < self.ops.len()
            && self.ops[local].signature == self.ops[local - p].signature
    }

    /// Whether the op recorded last may be the last of an iteration of the schedule in
    /// force: false only where it is not (the next boundary the recorder tracks for timing
    /// is not a period after it), with no division, so that the executor can pass over the
    /// ops between iteration ends while no plan is in force.
    #[inline]
    pub(crate) fn may_end_iteration(&self) -> bool {
        self.schedule
            .is_some_and(|s| self.next_boundary == self.next_index() + s.period as u64)
    }

    /// The schedule in force, as `(period, anchor)`, profiled or not.
    #[inline]
    pub(crate) fn schedule_key(&self) -> Option<(usize, u64)> {
        self.schedule.map(|s| (s.period, s.anchor))
    }

    /// The schedule in force, as `(period, anchor)`, once an iteration under it was timed
    /// from its first op (so that a trace of it carries every op's time) and while it holds.
    #[inline]
    pub(crate) fn profiled_schedule(&self) -> Option<(usize, u64)> {
        let s = self.schedule?;
        (self.profiled && self.healthy()).then_some((s.period, s.anchor))
    }

    /// What the schedule in force does, as one hash: the op signatures of its last complete
    /// iteration from its boundary, in order (those that compute: see below). A schedule
    /// that comes back (found again after another ran, or resynchronised after a one-off
    /// op) hashes the same, its boundary being placed by the same rule. While the schedule
    /// was recognised by an iteration kept before and its own first is not complete, that
    /// iteration's content; `None` before an iteration is complete.
    pub(crate) fn schedule_content(&self) -> Option<u64> {
        if let Some(recognised) = &self.recognised {
            // Recognised by an iteration kept before, its own first not complete yet.
            return Some(recognised.iteration.content);
        }
        let (_, _, range) = self.last_complete()?;
        // The ops of a complete iteration never change: its content is hashed once.
        if let Some((hashed, content)) = self.content.take() {
            let same = hashed == range;
            self.content.set(Some((hashed, content)));
            if same {
                return Some(content);
            }
        }
        let local = (range.start - self.base) as usize..(range.end - self.base) as usize;
        self.read(local.len());
        let movable = self.kinds.movable();
        let mut hasher = signature::FxHasher::default();
        hasher.write_usize(local.len());
        for op in &self.ops[local] {
            // Uploads, reads and drops are left out: the schedule allows them to move
            // (`reordered`; another thread's reads, the order autodiff drops its graph in).
            if !movable[op.kind as usize] {
                hasher.write_u64(op.signature);
            }
        }
        let content = hasher.finish();
        self.content.set(Some((range, content)));
        Some(content)
    }

    /// Whether the schedule in force was recognised at the op recorded last, by an
    /// iteration kept before (see `recognise`): the executor takes the plan kept for it
    /// there and then, not at the iteration's end.
    pub(crate) fn recognised_at_last(&self) -> bool {
        self.recognised
            .as_ref()
            .is_some_and(|r| r.at + 1 == self.next_index())
    }

    /// The detected period, if any.
    pub(crate) fn period(&mut self) -> Option<usize> {
        self.refresh();
        self.schedule.map(|s| s.period)
    }

    /// Peaks of the complete iterations seen so far (the last few).
    pub(crate) fn iteration_peaks(&mut self) -> Vec<IterationPeak> {
        self.refresh();
        self.summarise();
        self.peaks.clone()
    }

    /// The trace of the last complete iteration recorded with its tensors (the last complete
    /// iteration unless iterations are recorded lean: then one of the last few, the schedule
    /// having held since), or `None` before two iterations were seen.
    pub(crate) fn trace(&mut self) -> Option<Trace> {
        self.refresh();
        let (s, iteration, range) = self.last_full()?;
        Some(self.trace_of(range, Some(s.period), iteration, s.periodic_from))
    }

    /// Ops in the window.
    #[cfg(test)]
    pub(crate) fn window_len(&self) -> usize {
        self.ops.len()
    }

    /// The trace of every op in the window, without iteration structure (for dynamic graphs,
    /// and for tests of hand-built graphs). Where iterations were recorded lean, the last
    /// stretch of ops recorded with their tensors: those after the last lean op, or, while the
    /// latest ops are lean, the last stretch before them.
    pub(crate) fn trace_all(&mut self) -> Trace {
        self.refresh();
        let period = self.schedule.map(|s| s.period);
        let periodic_from = self.schedule.map(|s| s.periodic_from).unwrap_or(0);
        let end = self
            .ops
            .iter()
            .rposition(|o| !o.lean)
            .map_or(0, |last| last + 1);
        let start = self.ops[..end]
            .iter()
            .rposition(|o| o.lean)
            .map_or(0, |lean| lean + 1);
        let range = self.base + start as u64..self.base + end as u64;
        self.trace_of(range, period, 0, periodic_from)
    }
}

mod analysis;
mod compaction;
mod derive;
mod kinds;
mod schedule;
mod timing;

#[cfg(test)]
mod tests;
