//! The recorder: an append-only log of the ops of one device, in flat arenas so that recording
//! an op allocates nothing once the arenas have grown, and bounded so that a long training run
//! keeps only the last few iterations.

use super::model::{IterationPeak, OpEvents, Trace};
use super::period;
use super::signature;
use burn_backend::DType;
use burn_ir::{TensorId, TensorIr, TensorStatus};
use core::hash::Hasher;
use hashbrown::HashMap;
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
}

/// What the executor tells the recorder about one op, besides the op itself.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OpCounters {
    pub nanos: u64,
    pub live_before: u64,
    pub resident_during: u64,
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

/// Slots of the direct-mapped cache in front of the kind table.
const KIND_CACHE: usize = 64;

/// Interned kind names, with a small direct-mapped cache in front of the map: a training
/// loop uses a few dozen kinds, so most lookups cost one compare.
struct KindTable {
    ids: HashMap<u64, u32>,
    names: Vec<String>,
    cache: [(u64, u32); KIND_CACHE],
}

impl Default for KindTable {
    fn default() -> Self {
        Self {
            ids: HashMap::new(),
            names: Vec::new(),
            cache: [(0, u32::MAX); KIND_CACHE],
        }
    }
}

impl KindTable {
    /// For each kind, whether it moves data rather than computes (`Read`, `Init`, `Drop`):
    /// ops another thread may interleave at places that vary, and autodiff drops in an
    /// order of its own.
    fn movable(&self) -> Vec<bool> {
        self.names
            .iter()
            .map(|n| matches!(n.as_str(), "Read" | "Init" | "Drop"))
            .collect()
    }

    #[inline]
    fn intern(&mut self, key: u64, name: impl FnOnce() -> String) -> u32 {
        let slot = (key >> 58) as usize % KIND_CACHE;
        let (cached_key, cached_id) = self.cache[slot];
        if cached_key == key && cached_id != u32::MAX {
            return cached_id;
        }
        let id = match self.ids.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.names.len() as u32;
                self.names.push(name());
                self.ids.insert(key, id);
                id
            }
        };
        self.cache[slot] = (key, id);
        id
    }
}

/// Where iterations begin, once a period was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Schedule {
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
/// times of their slot): the profiled iterations of seed 004, kept fresh.
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
    fn dtype_of(&self, t: &TensorRef) -> DType {
        self.dtypes[t.dtype as usize]
    }

    /// Records an input of the op begun last.
    #[inline]
    pub(crate) fn input(&mut self, t: &TensorIr, bytes: u64) {
        self.push_tensor(t, bytes);
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
    /// not plan to offload it ([`crate::trace::TensorTrace::shares_buffer`]).
    pub(crate) fn mark_output_shares(&mut self, k: usize) {
        let Some(op) = self.ops.last() else {
            return;
        };
        let at = op.outputs.start as usize + k;
        if at < op.outputs.end as usize {
            self.tensors[at].shares = true;
        }
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

    /// Extends the schedule's verified stretch by the op just recorded when it keeps the
    /// period (one comparison per op). After a break (an op inserted once, such as a
    /// periodic log read), the schedule resynchronises as soon as one full period matches
    /// again: the boundary moves with the inserted ops and the numbering continues.
    #[inline]
    fn verify_last(&mut self) {
        // The common case inline: the schedule holds up to the op before, and this op is the
        // one a period before.
        if let Some(s) = self.schedule.as_mut() {
            let local = self.ops.len() - 1;
            let last = self.base + local as u64;
            if s.verified_end == last
                && local >= s.period
                && self.ops[local].signature == self.ops[local - s.period].signature
            {
                s.verified_end = last + 1;
                return;
            }
        }
        self.verify_last_slow();
    }

    #[inline(never)]
    fn verify_last_slow(&mut self) {
        self.verify_schedule();
        self.recall();
    }

    /// Counts, for each period of an earlier schedule, the ops in a row that match the op a
    /// period before while the schedule in force does not hold; when one period has matched
    /// a full iteration, takes it up again (if it closes iterations).
    fn recall(&mut self) {
        let healthy = self.healthy();
        let local = self.ops.len() - 1;
        let index = self.base + local as u64;
        let mut due = None;
        for r in &mut self.recalled {
            let p = r.period;
            if r.last + 1 != index {
                r.matched = 0;
            }
            r.last = index;
            if !healthy && local >= p && self.ops[local].signature == self.ops[local - p].signature
            {
                r.matched += 1;
                if r.matched == p && due.is_none() {
                    due = Some(p);
                }
            } else {
                r.matched = 0;
            }
        }
        if let Some(p) = due
            && self.schedule.map(|s| s.period) != Some(p)
            && local + 1 >= 2 * p
        {
            let end = local + 1;
            let found = period::Stretch {
                period: p,
                start: end - 2 * p,
                end,
            };
            let live: Vec<u64> = self.ops.iter().map(|o| o.live_before).collect();
            self.adopt(found, &live);
        }
    }

    fn verify_schedule(&mut self) {
        let Some(s) = self.schedule else {
            return;
        };
        let last = self.base + self.ops.len() as u64 - 1;
        let local = self.ops.len() - 1;
        let p = s.period;
        if local >= p && self.ops[local].signature == self.ops[local - p].signature {
            let differed = self.run_start.saturating_sub(s.verified_end);
            // The matching run has just reached the length that resumes the schedule (the
            // only op at which the differing stretch is judged: it does not change after).
            let resumed = last + 1 - self.run_start == SWAP_RESUME as u64 && p > 2 * SWAP_RESUME;
            if s.verified_end == last
                || resumed
                    && (differed <= SWAP_OPS as u64
                        || self.reordered(s.verified_end..self.run_start, p))
            {
                // A few ops that differed from the op a period before (two swapped, such as
                // an old batch's drop and the next batch's upload; or another thread's reads,
                // such as a metrics thread's, landing among the step's ops at another place
                // each iteration), then a run that matches again at the same alignment: the
                // schedule holds on, its anchor, numbering and op times kept (and so the
                // plan made for it), instead of waiting a full period to be found again.
                if let Some(s) = self.schedule.as_mut() {
                    s.verified_end = last + 1;
                }
            } else if last + 1 - self.run_start >= p as u64 {
                self.heal(last + 1);
            }
        } else {
            self.run_start = last + 1;
        }
    }

    /// Whether the ops of the global range `stretch` are those of the range a period `p`
    /// before, in another order, and the stretch is short beside the period: the iteration
    /// did the same work, with ops of other threads interleaved differently. Runs once per
    /// break, when the matching run after it reaches [`SWAP_RESUME`] ops.
    fn reordered(&self, stretch: Range<u64>, p: usize) -> bool {
        let len = stretch.end.saturating_sub(stretch.start) as usize;
        if len == 0 || len > p / REORDER_FRACTION || stretch.start < self.base + p as u64 {
            return false;
        }
        let from = (stretch.start - self.base) as usize;
        let signatures = |at: usize| self.ops[at..at + len].iter().map(|o| o.signature);
        same_ops(signatures(from), signatures(from - p))
    }

    /// A broken schedule whose period has matched again up to `end`: the window is analysed
    /// first when an analysis is a quarter due, and the schedule resynchronises only if none
    /// explains more of it. A period inside the iteration (identical layers) breaks at every
    /// iteration's own ops and heals a block later, so it would otherwise look healthy
    /// whenever a periodic analysis came due, and the iteration's period would wait for the
    /// next doubling of the window (the benches' GPT preset: its 1,731 ops found at op 8,515
    /// instead of 6,315, after a 208-op block).
    fn heal(&mut self, end: u64) {
        let due = self.analysed_len.max(FIRST_ANALYSIS) as u64 / 4;
        if self.next_index() - self.analysed_at >= due {
            let before = self.schedule.map(|s| (s.period, s.anchor));
            self.analyse();
            if self.schedule.map(|s| (s.period, s.anchor)) != before {
                return;
            }
        }
        self.resync(end);
    }

    /// Re-anchors a broken schedule on the period that has matched again up to `end`.
    fn resync(&mut self, end: u64) {
        let Some(s) = self.schedule else {
            return;
        };
        let p = s.period;
        if end < self.base + p as u64 {
            return;
        }
        let start = (end - self.base) as usize - p;
        let live: Vec<u64> = self.ops[start..start + p]
            .iter()
            .map(|o| o.live_before)
            .collect();
        let boundary = period::phase(
            period::Periodicity {
                period: p,
                start: 0,
            },
            &live,
        );
        let done = if s.verified_end >= s.anchor + p as u64 {
            (s.verified_end - s.anchor) / p as u64
        } else {
            0
        };
        let anchor = self.base + (start + boundary) as u64;
        tracing::debug!(
            period = p,
            anchor,
            "burn-swap: training loop period resumed"
        );
        self.schedule = Some(Schedule {
            period: p,
            anchor,
            first_iteration: s.first_iteration + done,
            periodic_from: self.run_start,
            verified_end: end,
        });
        self.summarised_to = anchor;
        self.reset_timing(p);
    }

    /// Whether a full analysis is due on the per-op path: while the schedule does not hold
    /// (none yet, or broken: a one-off break resynchronises by itself, a wrong period found too
    /// early is replaced here), and at least as many ops have passed since the last analysis as
    /// the window held then, so that analyses cost `O(log n)` per op amortised.
    #[inline]
    fn needs_analysis(&self) -> bool {
        !self.healthy()
            && self.next_index() - self.analysed_at >= self.analysed_len.max(FIRST_ANALYSIS) as u64
    }

    /// Whether the schedule still holds up to the last op.
    fn healthy(&self) -> bool {
        self.schedule
            .is_some_and(|s| s.verified_end == self.next_index())
    }

    /// Whether the op about to be recorded should be timed: every op until the period is
    /// known and holds, then the ops of one iteration in [`TIMED_ITERATION_EVERY`].
    #[inline]
    pub(crate) fn timing(&self) -> bool {
        !self.healthy() || self.next_index() < self.timed_until
    }

    /// Sets the wall time of the op recorded last.
    pub(crate) fn set_last_nanos(&mut self, nanos: u64) {
        let index = self.next_index().saturating_sub(1);
        if let Some(op) = self.ops.last_mut() {
            op.nanos = nanos;
        }
        if let Some(s) = self.schedule
            && index >= s.anchor
            && self.slot_nanos.len() == s.period
        {
            self.slot_nanos[((index - s.anchor) % s.period as u64) as usize] = nanos;
        }
    }

    /// At each iteration boundary, decides whether the next iteration is timed: until one
    /// full iteration has been timed under the current schedule, then one in
    /// [`TIMED_ITERATION_EVERY`].
    #[inline]
    fn track_boundary(&mut self) {
        let index = self.next_index();
        if index < self.next_boundary {
            return;
        }
        let Some(s) = self.schedule else {
            return;
        };
        let p = s.period as u64;
        if index < s.anchor {
            self.next_boundary = s.anchor;
            return;
        }
        let k = (index - s.anchor) / p;
        let boundary = s.anchor + k * p;
        self.next_boundary = boundary + p;
        if self.timed_until == boundary
            && self.timing_from.checked_add(p) == Some(boundary)
            && self.healthy()
        {
            self.profiled = true;
        }
        if self.lean {
            // Two iterations in a row in `every` in full (a trace links the tensors an
            // iteration carries to the one before it), so that the last pair recorded so
            // stays in the newer half of the window that compaction keeps.
            let every = (self.window / (2 * s.period))
                .saturating_sub(2)
                .clamp(1, LEAN_EVERY);
            if (k + 1) % every as u64 <= 1 || !self.profiled {
                self.full_until = boundary + p;
            }
        }
        if k.is_multiple_of(TIMED_ITERATION_EVERY) || !self.profiled {
            // An iteration counts as timed only when timing covered it from its first op
            // (a schedule found mid-iteration times the rest of it, but that is partial).
            self.timing_from = if index == boundary {
                boundary
            } else {
                u64::MAX
            };
            self.timed_until = boundary + p;
        }
    }

    /// Forgets the op times of a schedule that no longer holds.
    fn reset_timing(&mut self, period: usize) {
        self.slot_nanos.clear();
        self.slot_nanos.resize(period, 0);
        self.next_boundary = 0;
        self.profiled = false;
    }

    /// Finds the period and the iteration boundaries over the current window, keeping the
    /// schedule in force unless a longer periodic stretch is found.
    pub(crate) fn analyse(&mut self) {
        if self.healthy() {
            return;
        }
        self.analysed_at = self.next_index();
        self.analysed_len = self.ops.len();
        let signatures: Vec<u64> = self.ops.iter().map(|o| o.signature).collect();
        let exact = period::detect_recent(&signatures);
        let loose = self.detect_around_movable(&signatures);
        let found = match (exact, loose) {
            (Some(e), Some(l)) if l.cover() > e.cover() => l,
            (Some(e), _) => e,
            (None, Some(l)) => l,
            (None, None) => return,
        };
        let (start, end) = (self.base + found.start as u64, self.base + found.end as u64);
        if let Some(s) = self.schedule.as_mut() {
            if s.period == found.period && start <= s.verified_end && end >= s.verified_end {
                // The same period, continuing the stretch in force: keep its numbering.
                s.verified_end = end;
                return;
            }
            if found.cover() as u64 <= s.cover(self.base) {
                return;
            }
        }
        let live: Vec<u64> = self.ops.iter().map(|o| o.live_before).collect();
        self.adopt(found, &live);
    }

    /// Takes `found` (a stretch of the window) as the schedule in force, its first boundary
    /// where the fewest bytes are live, unless it computes nothing or is a loop inside the
    /// iteration.
    fn adopt(&mut self, found: period::Stretch, live: &[u64]) {
        let start = self.base + found.start as u64;
        let end = self.base + found.end as u64;
        // A stretch that only moves data (a model's tensors let go one layer after another
        // once training is done, a loader's uploads) computes nothing: not a training loop.
        let movable = self.kinds.movable();
        let one = found.start..(found.start + found.period).min(self.ops.len());
        if self.ops[one].iter().all(|o| movable[o.kind as usize]) {
            tracing::debug!(
                period = found.period,
                "burn-swap: a periodic stretch that computes nothing passed over"
            );
            return;
        }
        let since = self
            .schedule
            .map_or(self.base, |s| s.verified_end.max(self.base));
        if !period::explains_enough(found.cover() as u64, self.next_index() - since) {
            tracing::debug!(
                period = found.period,
                cover = found.cover(),
                "burn-swap: a short periodic stretch among other ops passed over"
            );
            return;
        }
        let boundary = period::phase(
            period::Periodicity {
                period: found.period,
                start: found.start,
            },
            live,
        );
        if !self.closes_iterations(found, boundary, live) {
            // A loop inside the iteration: the schedule in force (if any) stays, and the
            // iteration's own period is found once two of them are in the window.
            tracing::debug!(
                period = found.period,
                "burn-swap: a period inside the training iteration passed over"
            );
            return;
        }
        let schedule = Schedule {
            period: found.period,
            anchor: self.base + boundary as u64,
            first_iteration: 0,
            periodic_from: start,
            verified_end: end,
        };
        tracing::debug!(
            period = found.period,
            anchor = schedule.anchor,
            "burn-swap: training loop period found"
        );
        self.summarised_to = schedule.anchor;
        self.peaks.clear();
        self.reset_timing(found.period);
        // A stretch that ends before the window does (the loose detection's last movable ops)
        // is a break whose matching run starts now: it resumes as any short difference does.
        self.run_start = if found.end < self.ops.len() {
            self.next_index()
        } else {
            start
        };
        self.schedule = Some(schedule);
        if !self.recalled.iter().any(|r| r.period == found.period) {
            if self.recalled.len() >= RECALLED {
                self.recalled.remove(0);
            }
            self.recalled.push(Recalled {
                period: found.period,
                matched: 0,
                last: 0,
            });
        }
    }

    /// Whether `found`, with its first boundary before window op `boundary`, is the training
    /// loop's iteration and not a loop inside it ([`period::closes_iterations`]).
    fn closes_iterations(&self, found: period::Stretch, boundary: usize, live: &[u64]) -> bool {
        let end = found.end.min(self.ops.len());
        let lean = self.ops[..end].iter().any(|o| o.lean);
        let lives = (!lean).then(|| self.lives(end));
        period::closes_iterations(found.period, boundary, end, live, lives.as_deref())
    }

    /// The lives of the tensors the window's first `end` ops touch, by op index in the
    /// window; uploads (`Init`, `Read`) count as made before it.
    fn lives(&self, end: usize) -> Vec<period::Life> {
        let kind = |name: &str| self.kinds.names.iter().position(|n| n == name);
        let drop = kind("Drop");
        let uploads = [kind("Init"), kind("Read")];
        let mut lives: Vec<period::Life> = Vec::new();
        let mut index_of: HashMap<TensorId, usize> = HashMap::new();
        for (i, op) in self.ops[..end].iter().enumerate() {
            let kind = Some(op.kind as usize);
            let is_drop = drop == kind;
            for t in &self.tensors[op.inputs.start as usize..op.inputs.end as usize] {
                let at = *index_of.entry(t.id).or_insert_with(|| {
                    lives.push(period::Life {
                        bytes: t.bytes,
                        made: None,
                        ended: None,
                    });
                    lives.len() - 1
                });
                if t.last_use || is_drop {
                    lives[at].ended = Some(i);
                }
            }
            let made = (!uploads.contains(&kind)).then_some(i);
            for t in &self.tensors[op.outputs.start as usize..op.outputs.end as usize] {
                index_of.insert(t.id, lives.len());
                lives.push(period::Life {
                    bytes: t.bytes,
                    made,
                    ended: None,
                });
            }
        }
        lives
    }

    /// The period of the window's ops without the ones that move data rather than compute
    /// (`Read`, `Init`, `Drop`), mapped back onto the whole window: a loop whose every
    /// iteration also holds another thread's reads or uploads (a metrics thread, a data
    /// loader's workers) at places that vary has no exact period, but its own ops do. Taken
    /// only where the iterations so found hold as many ops each and the last two are the same
    /// ops; the schedule's checks then allow their reordering (`reordered`).
    fn detect_around_movable(&self, signatures: &[u64]) -> Option<period::Stretch> {
        let movable = self.kinds.movable();
        let kept: Vec<usize> = (0..self.ops.len())
            .filter(|&i| !movable[self.ops[i].kind as usize])
            .collect();
        if kept.len() == self.ops.len() {
            return None;
        }
        let reduced: Vec<u64> = kept.iter().map(|&i| signatures[i]).collect();
        let found = period::detect_recent(&reduced)?;
        let q = found.period;
        // Iterations are measured between kept ops a period apart; another thread's op at the
        // edge can fall on either side, so a few alignments are tried.
        let last = found.end.checked_sub(1)?;
        let lowest = (found.start + 2 * q).max(last.saturating_sub(q.min(64)));
        for at in (lowest..=last).rev() {
            let p = kept[at] - kept[at - q];
            if p != kept[at - q] - kept[at - 2 * q] {
                continue;
            }
            let end = kept[at] + 1;
            let (last_two, first) = (&signatures[end - p..end], &signatures[end - 2 * p..end - p]);
            if !same_ops(last_two.iter().copied(), first.iter().copied()) {
                return None;
            }
            return Some(period::Stretch {
                period: p,
                start: kept[found.start],
                end,
            });
        }
        None
    }

    /// The period and the global range of the last complete iteration in the window.
    fn last_complete(&self) -> Option<(Schedule, u64, Range<u64>)> {
        let s = self.schedule?;
        let end = s.verified_end;
        if end < s.anchor + s.period as u64 {
            return None;
        }
        let k = (end - s.anchor) / s.period as u64 - 1;
        let start = s.anchor + k * s.period as u64;
        if start < self.base {
            return None;
        }
        Some((s, s.first_iteration + k, start..start + s.period as u64))
    }

    /// The last complete iteration whose ops, and those of the iteration before it when the
    /// window holds that one, were recorded with their tensors (see [`Recorder::set_lean`]):
    /// the last complete iteration itself unless iterations were recorded lean. Same as
    /// [`Recorder::last_complete`]'s result otherwise.
    fn last_full(&self) -> Option<(Schedule, u64, Range<u64>)> {
        let (s, iteration, last) = self.last_complete()?;
        let p = s.period as u64;
        let full = |r: Range<u64>| {
            let local = (r.start - self.base) as usize..(r.end - self.base) as usize;
            self.ops[local].iter().all(|o| !o.lean)
        };
        let mut candidate = last;
        for back in 0..=iteration - s.first_iteration {
            let before = candidate.start.saturating_sub(p);
            if full(candidate.clone()) && (before < self.base || full(before..candidate.start)) {
                return Some((s, iteration - back, candidate));
            }
            if before < self.base || before < s.anchor {
                return None;
            }
            candidate = before..candidate.start;
        }
        None
    }

    /// The period in force, in ops (0 without one).
    fn period_len(&self) -> u64 {
        self.schedule.map_or(0, |s| s.period as u64)
    }

    /// Summarises into the per-iteration peaks every complete iteration not yet summarised.
    fn summarise(&mut self) {
        let Some(s) = self.schedule else {
            return;
        };
        let p = s.period as u64;
        let end = s.verified_end;
        let mut start = self.summarised_to.max(s.anchor);
        // Align to a boundary.
        let offset = (start - s.anchor) % p;
        if offset != 0 {
            start += p - offset;
        }
        while start + p <= end {
            if start >= self.base {
                let local = (start - self.base) as usize..(start + p - self.base) as usize;
                let peak = self.ops[local]
                    .iter()
                    .map(|o| o.resident_during)
                    .max()
                    .unwrap_or(0);
                self.peaks.push(IterationPeak {
                    iteration: s.first_iteration + (start - s.anchor) / p,
                    peak_bytes: peak,
                });
            }
            start += p;
        }
        self.summarised_to = start;
        if self.peaks.len() > KEPT_ITERATION_PEAKS {
            let excess = self.peaks.len() - KEPT_ITERATION_PEAKS;
            self.peaks.drain(..excess);
        }
    }

    /// Drops old ops, keeping the last two complete iterations and the current one when the
    /// period is known, else the newer half of the window.
    fn compact(&mut self) {
        self.analyse();
        self.summarise();
        let newer_half = self.base + (self.ops.len() / 2) as u64;
        let keep_from = match self.last_complete() {
            Some((s, _, _)) if 3 * s.period > self.window => {
                // Grow the window so that it always holds three periods.
                self.window = 4 * s.period;
                return;
            }
            // Keep the last two complete iterations (and at least the newer half), unless
            // the stream left the period long ago: then the schedule is stale and only the
            // newer half is kept.
            Some((s, _, last)) => match last.start.saturating_sub(s.period as u64) {
                from if from > self.base => from.min(newer_half),
                _ => newer_half,
            },
            None => newer_half,
        };
        // Under lean recording, never the last iterations a trace can be made of (see
        // `last_full`): they lie in the newer half of the window by the choice of which are
        // recorded in full, unless the schedule broke long ago (then they go: what can still
        // be cut must be at least a quarter of the window, so that compaction stays rare).
        let keep_from = match self.last_full() {
            Some((_, _, full)) if self.lean => {
                let from = full.start.saturating_sub(self.period_len());
                if from >= self.base + (self.ops.len() / 4) as u64 {
                    keep_from.min(from)
                } else {
                    keep_from
                }
            }
            _ => keep_from,
        };
        let cut = (keep_from - self.base) as usize;
        let tensor_cut = self.ops[cut].inputs.start;
        let dims_cut = self
            .tensors
            .get(tensor_cut as usize)
            .map(|t| t.dims.start)
            .unwrap_or(self.dims.len() as u32);
        self.ops.drain(..cut);
        self.tensors.drain(..tensor_cut as usize);
        self.dims.drain(..dims_cut as usize);
        for op in &mut self.ops {
            op.inputs = op.inputs.start - tensor_cut..op.inputs.end - tensor_cut;
            op.outputs = op.outputs.start - tensor_cut..op.outputs.end - tensor_cut;
        }
        for t in &mut self.tensors {
            t.dims = t.dims.start - dims_cut..t.dims.end - dims_cut;
        }
        self.base = keep_from;
    }

    /// Analyses when the schedule does not hold; queries call this.
    fn refresh(&mut self) {
        if !self.healthy() {
            self.analyse();
        }
    }

    /// The position in the iteration of the op recorded last, while the schedule holds up to
    /// it (the op matched the one a period earlier): what the planned executor follows.
    #[inline]
    pub(crate) fn position_of_last(&self) -> Option<usize> {
        let s = self.schedule?;
        let last = self.next_index().checked_sub(1)?;
        if s.verified_end != last + 1 || last < s.anchor {
            return None;
        }
        Some(((last - s.anchor) % s.period as u64) as usize)
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
    /// op) hashes the same, its boundary being placed by the same rule; `None` before an
    /// iteration is complete.
    pub(crate) fn schedule_content(&self) -> Option<u64> {
        let (_, _, range) = self.last_complete()?;
        let local = (range.start - self.base) as usize..(range.end - self.base) as usize;
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
        Some(hasher.finish())
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

mod derive;

#[cfg(test)]
mod tests;
