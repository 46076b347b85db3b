//! The reference-count simulation: predict the memory a plan needs by simulating its allocations.
//!
//! Reference counts start at each tensor's number of consumers; ops are walked in order; each
//! output gets a free block whose size is within `ratio` times its own (searched over 1, 2, 4,
//! 8 and 16), else a new block; after the op, inputs' counts are decremented and a tensor whose
//! count reaches zero returns its block to the free list. The result is the peak of the pool
//! (blocks are never returned to the system, so fragmentation shows) and the peak of live
//! bytes (what burn-swap counts).
//!
//! Buffers, not tensors: a view (a reshape, a transpose, a slice, a broadcast) holds the
//! buffer of the tensor it was made from ([`crate::trace::TensorTrace::view_of`]). The
//! tensors that hold one buffer count it once, from its first holder's birth while any of
//! them lives, as the executor counts it: a view adds no bytes, and a source that Burn
//! dropped stays on the device while a view of it lives.
//!
//! A pure function of the tensors' lifetimes: [`lifetimes`] derives them from a trace for the
//! plan that keeps everything resident; other plans (offload, recompute) hand in lifetimes
//! split where their tensors leave the device.

use crate::trace::{AccessKind, EndKind, Trace};

/// The free-block size ratios searched for the lowest peak.
pub const RATIOS: [u32; 5] = [1, 2, 4, 8, 16];

/// One stretch of device residency of one tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    /// Bytes: its own, or for a holder of a shared buffer, the buffer's.
    pub bytes: u64,
    /// The op that makes it resident (its producer, or the op a fetch lands before);
    /// `None` when it is resident when the iteration starts.
    pub from: Option<usize>,
    /// The op at whose completion its reference count reaches zero: counts one
    /// reference per consumer, and Burn adds one for an explicit drop, so this is its last
    /// consumer or its drop. `None` when it lives past the iteration.
    pub until: Option<usize>,
    /// The buffer it holds, when tensors share it: the index (in the trace's tensors) of the
    /// tensor that made it. The stretches of one buffer count its bytes once while any of
    /// them lives. `None` for a buffer of its own.
    pub buffer: Option<usize>,
}

impl Lifetime {
    /// A stretch of a buffer of its own.
    pub fn own(bytes: u64, from: Option<usize>, until: Option<usize>) -> Self {
        Self {
            bytes,
            from,
            until,
            buffer: None,
        }
    }
}

/// What a simulation predicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Simulation {
    /// The size-ratio bound used.
    pub ratio: u32,
    /// Peak of the block pool: the memory the allocator would have reserved, fragmentation
    /// included.
    pub peak_pool_bytes: u64,
    /// Peak of live bytes (inputs and outputs of an op counted together, as burn-swap
    /// counts).
    pub peak_live_bytes: u64,
    /// Blocks allocated.
    pub blocks: usize,
    /// The op at which the live peak occurs (`None`: before the first op).
    pub peak_op: Option<usize>,
}

/// The lifetimes of the plan that keeps every tensor of the trace resident from its
/// producer (or the iteration's start) to its end (or past the iteration). The holders of a
/// shared buffer (a tensor and the views made from it, and views of those) each hold it at
/// its maker's size.
pub fn lifetimes(trace: &Trace) -> Vec<Lifetime> {
    let makers = buffer_makers(trace);
    trace
        .tensors
        .iter()
        .zip(&makers)
        .map(|(t, &maker)| {
            // A tensor consumed by its last use is freed by it; one dropped explicitly is
            // freed by the drop, which holds one more reference than its readers.
            debug_assert!(t.end.is_none_or(|e| {
                e.kind == EndKind::Drop
                    || t.accesses
                        .last()
                        .is_some_and(|a| a.kind == AccessKind::LastUse)
            }));
            Lifetime {
                bytes: maker.map_or(t.bytes, |m| trace.tensors[m].bytes),
                from: t.producer,
                until: t.end.map(|e| e.op),
                buffer: maker,
            }
        })
        .collect()
}

/// Tensor `tensor`'s stretch back on the device from op `from` to the end of `whole` (its
/// lifetime when kept): recomputed, a view is made again in its source's buffer; fetched (or
/// a recomputed buffer's maker), it comes back in a buffer of its own, at its own size.
pub fn back(
    trace: &Trace,
    tensor: usize,
    whole: Lifetime,
    from: usize,
    recomputed: bool,
) -> Lifetime {
    if recomputed && whole.buffer.is_some_and(|maker| maker != tensor) {
        Lifetime {
            from: Some(from),
            ..whole
        }
    } else {
        Lifetime::own(trace.tensors[tensor].bytes, Some(from), whole.until)
    }
}

/// For each tensor of the trace, the tensor that made the buffer it holds when that buffer
/// has more than one holder (itself, for the maker), following views of views; `None` for a
/// tensor alone in its buffer.
pub fn buffer_makers(trace: &Trace) -> Vec<Option<usize>> {
    let n = trace.tensors.len();
    let mut maker: Vec<Option<usize>> = vec![None; n];
    if trace.tensors.iter().all(|t| t.view_of.is_none()) {
        return maker;
    }
    let index_of = trace.tensor_indices();
    // Tensors are listed in order of first appearance: a view's source comes before it.
    for i in 0..n {
        let Some(&source) = trace.tensors[i].view_of.and_then(|id| index_of.get(&id)) else {
            continue;
        };
        if source >= i {
            continue;
        }
        let root = maker[source].unwrap_or(source);
        maker[root] = Some(root);
        maker[i] = Some(root);
    }
    maker
}

/// The tensors that hold each shared buffer, by the index of its maker (`lifetimes`' first
/// entries, one per tensor of the trace, as [`lifetimes`] makes them).
pub fn buffer_holders(lifetimes: &[Lifetime]) -> hashbrown::HashMap<usize, Vec<usize>> {
    let mut holders: hashbrown::HashMap<usize, Vec<usize>> = hashbrown::HashMap::new();
    for (i, l) in lifetimes.iter().enumerate() {
        if let Some(maker) = l.buffer {
            holders.entry(maker).or_default().push(i);
        }
    }
    holders
}

/// Whether another holder of tensor `tensor`'s shared buffer lives at every op strictly
/// inside `gap` (op numbers past `period` lie in the next iteration): the tensor leaving the
/// device then frees nothing there.
pub fn kept_by_others(
    lifetimes: &[Lifetime],
    holders: &hashbrown::HashMap<usize, Vec<usize>>,
    tensor: usize,
    (from, to): (usize, usize),
    period: usize,
) -> bool {
    let Some(others) = lifetimes[tensor].buffer.and_then(|m| holders.get(&m)) else {
        return false;
    };
    if to < from + 2 {
        return false;
    }
    let (first, last) = (from + 1, to - 1);
    others.iter().filter(|&&h| h != tensor).any(|&h| {
        let l = lifetimes[h];
        let born = |op: usize| l.from.is_none_or(|f| f <= op);
        let alive_to = |op: usize| l.until.is_none_or(|u| u >= op);
        if last < period {
            born(first) && alive_to(last)
        } else if first >= period {
            born(first - period) && alive_to(last - period)
        } else {
            // Across the boundary: alive from `first` past the iteration's end.
            born(first) && l.until.is_none()
        }
    })
}

/// The stretches of residency of each buffer: a buffer of its own as it is; the stretches of
/// a shared buffer's holders merged where they overlap, at the buffer's size, each a buffer
/// of its own from then on (so that merging again costs nothing).
pub fn buffers(lifetimes: &[Lifetime]) -> std::borrow::Cow<'_, [Lifetime]> {
    if lifetimes.iter().all(|l| l.buffer.is_none()) {
        return std::borrow::Cow::Borrowed(lifetimes);
    }
    let mut out: Vec<Lifetime> = lifetimes
        .iter()
        .filter(|l| l.buffer.is_none())
        .copied()
        .collect();
    let mut shared: Vec<Lifetime> = lifetimes
        .iter()
        .filter(|l| l.buffer.is_some())
        .copied()
        .collect();
    // By buffer, then by birth (`None`, before the iteration, first).
    shared.sort_by_key(|l| (l.buffer, l.from.map_or(0, |f| f + 1)));
    let mut open: Option<Lifetime> = None;
    for l in shared {
        match open.as_mut() {
            Some(o) if o.buffer == l.buffer && overlaps(o.until, l.from) => {
                o.bytes = o.bytes.max(l.bytes);
                o.until = match (o.until, l.until) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
            }
            _ => {
                out.extend(open.take().map(merged));
                open = Some(l);
            }
        }
    }
    out.extend(open.map(merged));
    std::borrow::Cow::Owned(out)
}

/// A shared buffer's merged stretch, counted as a buffer of its own.
fn merged(l: Lifetime) -> Lifetime {
    Lifetime { buffer: None, ..l }
}

/// Whether a stretch born at `from` overlaps one that lives until `until` and was born no
/// later.
fn overlaps(until: Option<usize>, from: Option<usize>) -> bool {
    match (until, from) {
        (None, _) | (_, None) => true,
        (Some(until), Some(from)) => from <= until,
    }
}

/// Counted bytes live at each op of the iteration for these lifetimes (inputs and outputs
/// of an op together, as [`simulate`] counts them).
pub fn live_per_op(lifetimes: &[Lifetime], ops: usize) -> Vec<i64> {
    let mut delta = vec![0i64; ops + 1];
    for l in buffers(lifetimes).iter() {
        let from = l.from.unwrap_or(0);
        if from >= ops {
            continue;
        }
        let until = l.until.map_or(ops - 1, |u| u.min(ops - 1));
        if until < from {
            continue;
        }
        delta[from] += l.bytes as i64;
        delta[until + 1] -= l.bytes as i64;
    }
    let mut live = 0;
    delta.truncate(ops);
    for d in &mut delta {
        live += *d;
        *d = live;
    }
    delta
}

/// The simulated allocator: blocks are kept once made; freed blocks are reused.
///
/// A block is only its size, so the free list is a count of free blocks per size: the
/// block sizes are the sizes of the stretches (a new block is made at its tensor's size),
/// known before the walk and numbered in increasing order ([`Events::sizes`]).
struct Pool<'a> {
    ratio: u64,
    /// The sizes a block can have, increasing.
    sizes: &'a [u64],
    /// Free blocks of each size.
    free: Vec<u32>,
    /// One bit per size with a free block, for the search for the smallest one.
    any_free: Vec<u64>,
    /// Blocks made.
    blocks: usize,
    reserved: u64,
}

impl<'a> Pool<'a> {
    fn new(sizes: &'a [u64], ratio: u64) -> Self {
        Pool {
            ratio,
            sizes,
            free: vec![0; sizes.len()],
            any_free: vec![0; sizes.len().div_ceil(64)],
            blocks: 0,
            reserved: 0,
        }
    }

    /// The smallest size at least `size`'s (a number into `sizes`) with a free block.
    fn smallest_free(&self, size: usize) -> Option<usize> {
        let mut word = size / 64;
        let mut bits = self.any_free.get(word)? & (u64::MAX << (size % 64));
        loop {
            if bits != 0 {
                return Some(word * 64 + bits.trailing_zeros() as usize);
            }
            word += 1;
            bits = *self.any_free.get(word)?;
        }
    }

    /// A block for a tensor of size `size` (a number into `sizes`): a free one of the
    /// smallest size at least the tensor's, when that size is within `ratio` times the
    /// tensor's, else a new one. Returns the block's size.
    fn allocate(&mut self, size: usize) -> usize {
        let bytes = self.sizes[size];
        match self.smallest_free(size) {
            Some(fit) if self.sizes[fit] <= bytes.saturating_mul(self.ratio) => {
                self.free[fit] -= 1;
                if self.free[fit] == 0 {
                    self.any_free[fit / 64] &= !(1 << (fit % 64));
                }
                fit
            }
            _ => {
                self.blocks += 1;
                self.reserved += bytes;
                size
            }
        }
    }

    /// A freed block of size `size` joins the free list.
    fn release(&mut self, size: usize) {
        self.free[size] += 1;
        self.any_free[size / 64] |= 1 << (size % 64);
    }
}

/// When each buffer's stretch starts and ends: the walk [`simulate`] makes, the same for
/// every ratio.
struct Events {
    /// The stretches resident when the iteration starts.
    initial: Vec<usize>,
    /// `(op, stretch)` for the stretches made at an op of the iteration, in op order (then
    /// index order, the order in which an op makes its outputs).
    starts: Vec<(usize, usize)>,
    /// `(op, stretch)` for the stretches whose last reference an op of the iteration holds,
    /// in the same order.
    ends: Vec<(usize, usize)>,
    /// The stretches' distinct sizes, increasing.
    sizes: Vec<u64>,
    /// Each stretch's size, as a number into `sizes`.
    size_of: Vec<usize>,
}

impl Events {
    /// The events of `buffers` (stretches of buffers, as [`buffers`] makes them) over `ops`
    /// ops.
    fn of(buffers: &[Lifetime], ops: usize) -> Self {
        let mut sizes: Vec<u64> = buffers.iter().map(|l| l.bytes).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let size_of = buffers
            .iter()
            .map(|l| sizes.partition_point(|&s| s < l.bytes))
            .collect();
        let mut events = Events {
            initial: Vec::new(),
            starts: Vec::with_capacity(buffers.len()),
            ends: Vec::with_capacity(buffers.len()),
            sizes,
            size_of,
        };
        for (i, l) in buffers.iter().enumerate() {
            match l.from {
                None => events.initial.push(i),
                Some(op) if op < ops => events.starts.push((op, i)),
                Some(_) => {}
            }
            if let Some(op) = l.until
                && op < ops
            {
                events.ends.push((op, i));
            }
        }
        events.starts.sort_unstable();
        events.ends.sort_unstable();
        events
    }

    /// Walks the ops, allocating from a pool that reuses free blocks within `ratio` times a
    /// tensor's size.
    fn simulate(&self, buffers: &[Lifetime], ops: usize, ratio: u32) -> Simulation {
        let ratio = ratio.max(1);
        let mut pool = Pool::new(&self.sizes, ratio as u64);
        // The size of the block each stretch holds, while it holds one.
        let mut block_of: Vec<Option<usize>> = vec![None; buffers.len()];
        let mut live = 0u64;
        for &i in &self.initial {
            block_of[i] = Some(pool.allocate(self.size_of[i]));
            live += buffers[i].bytes;
        }
        let (starts, ends) = (&self.starts, &self.ends);
        let mut sim = Simulation {
            ratio,
            peak_pool_bytes: pool.reserved,
            peak_live_bytes: live,
            blocks: 0,
            peak_op: None,
        };
        let (mut s, mut e) = (0, 0);
        for op in 0..ops {
            while s < starts.len() && starts[s].0 == op {
                let i = starts[s].1;
                block_of[i] = Some(pool.allocate(self.size_of[i]));
                live += buffers[i].bytes;
                s += 1;
            }
            if live > sim.peak_live_bytes {
                sim.peak_live_bytes = live;
                sim.peak_op = Some(op);
            }
            sim.peak_pool_bytes = sim.peak_pool_bytes.max(pool.reserved);
            // The op is done: tensors whose last reference it held are freed.
            while e < ends.len() && ends[e].0 == op {
                let i = ends[e].1;
                live -= buffers[i].bytes;
                if let Some(block) = block_of[i].take() {
                    pool.release(block);
                }
                e += 1;
            }
        }
        sim.blocks = pool.blocks;
        sim
    }
}

/// Simulates the allocations of `lifetimes` over `ops` ops with blocks reused within
/// `ratio` times a tensor's size.
pub fn simulate(lifetimes: &[Lifetime], ops: usize, ratio: u32) -> Simulation {
    let buffers = &buffers(lifetimes)[..];
    Events::of(buffers, ops).simulate(buffers, ops, ratio)
}

/// The simulation with the bound among [`RATIOS`] that gives the lowest pool peak
/// (the smallest bound on ties).
pub fn simulate_best(lifetimes: &[Lifetime], ops: usize) -> Simulation {
    // Shared buffers merged and the walk's events sorted once for every ratio.
    let buffers = &buffers(lifetimes)[..];
    let events = Events::of(buffers, ops);
    RATIOS
        .iter()
        .map(|&r| events.simulate(buffers, ops, r))
        .min_by_key(|s| (s.peak_pool_bytes, s.ratio))
        .expect("RATIOS is not empty")
}

/// The simulation of the keep-everything plan of a trace.
pub fn simulate_trace(trace: &Trace) -> Simulation {
    simulate_best(&lifetimes(trace), trace.ops.len())
}

#[cfg(test)]
mod tests;
