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
mod tests {
    use super::*;

    fn l(bytes: u64, from: Option<usize>, until: Option<usize>) -> Lifetime {
        Lifetime::own(bytes, from, until)
    }

    /// The allocator walked the plain way: every block kept with its size, the free list
    /// searched whole for the smallest block that fits within the ratio.
    fn walked_plainly(lifetimes: &[Lifetime], ops: usize, ratio: u64) -> (u64, u64, usize) {
        let (mut sizes, mut free, mut block_of) = (Vec::new(), Vec::<usize>::new(), Vec::new());
        let (mut live, mut peak_live, mut peak_pool) = (0u64, 0u64, 0u64);
        let allocate = |bytes: u64, sizes: &mut Vec<u64>, free: &mut Vec<usize>| {
            let fit = free
                .iter()
                .enumerate()
                .filter(|&(_, &b)| sizes[b] >= bytes)
                .min_by_key(|&(_, &b)| sizes[b])
                .filter(|&(_, &b)| sizes[b] <= bytes * ratio);
            match fit {
                Some((at, _)) => free.swap_remove(at),
                None => {
                    sizes.push(bytes);
                    sizes.len() - 1
                }
            }
        };
        block_of.resize(lifetimes.len(), None);
        for (i, l) in lifetimes.iter().enumerate() {
            if l.from.is_none() {
                block_of[i] = Some(allocate(l.bytes, &mut sizes, &mut free));
                live += l.bytes;
            }
        }
        peak_live = peak_live.max(live);
        peak_pool = peak_pool.max(sizes.iter().sum());
        for op in 0..ops {
            for (i, l) in lifetimes.iter().enumerate() {
                if l.from == Some(op) {
                    block_of[i] = Some(allocate(l.bytes, &mut sizes, &mut free));
                    live += l.bytes;
                }
            }
            peak_live = peak_live.max(live);
            peak_pool = peak_pool.max(sizes.iter().sum());
            for (i, l) in lifetimes.iter().enumerate() {
                if l.until == Some(op) && block_of[i].is_some() {
                    live -= l.bytes;
                    free.extend(block_of[i].take());
                }
            }
        }
        (peak_pool, peak_live, sizes.len())
    }

    #[test]
    fn the_pool_reuses_blocks_as_a_plain_walk_over_every_free_block_does() {
        let mut rng = crate::rng::SplitMix64::new(11);
        for round in 0..40 {
            // Up to 300 distinct sizes (several words of the pool's free-size bits).
            let (ops, distinct) = (60, 1 + rng.below(300) as u64);
            let lifetimes: Vec<Lifetime> = (0..200)
                .map(|_| {
                    let from = rng.below(ops + 1);
                    let until = from + rng.below(ops);
                    l(
                        64 * (1 + rng.below(distinct as usize) as u64),
                        (from < ops).then_some(from),
                        (until < ops).then_some(until),
                    )
                })
                .collect();
            for ratio in RATIOS {
                let sim = simulate(&lifetimes, ops, ratio);
                assert_eq!(
                    (sim.peak_pool_bytes, sim.peak_live_bytes, sim.blocks),
                    walked_plainly(&lifetimes, ops, ratio as u64),
                    "round {round}, ratio {ratio}"
                );
            }
        }
    }

    #[test]
    fn chain_reuses_freed_blocks_of_equal_size() {
        // a (carried in) -> op0 -> b -> op1 -> c -> op2 -> d, each 100 bytes, each freed by
        // its consumer: at most two are live at once (an op's input and output).
        let lifetimes = [
            l(100, None, Some(0)),
            l(100, Some(0), Some(1)),
            l(100, Some(1), Some(2)),
            l(100, Some(2), None),
        ];
        let sim = simulate(&lifetimes, 3, 1);
        assert_eq!(sim.peak_live_bytes, 200);
        // op0 makes b while a lives: two blocks; op1 reuses a's block for c; op2 b's for d.
        assert_eq!(sim.peak_pool_bytes, 200);
        assert_eq!(sim.blocks, 2);
        assert_eq!(sim.peak_op, Some(0));
    }

    #[test]
    fn the_ratio_bound_decides_whether_a_larger_block_is_reused() {
        // A 400-byte tensor dies at op 0; a 100-byte one is born at op 1.
        let lifetimes = [
            l(400, None, Some(0)),
            l(100, Some(0), Some(1)),
            l(100, Some(1), None),
        ];
        // Ratio 1: the 400-byte block does not fit a 100-byte tensor exactly: new blocks.
        let exact = simulate(&lifetimes, 2, 1);
        assert_eq!((exact.peak_pool_bytes, exact.blocks), (600, 3));
        // Ratio 4: it is reused.
        let loose = simulate(&lifetimes, 2, 4);
        assert_eq!((loose.peak_pool_bytes, loose.blocks), (500, 2));
        assert_eq!(exact.peak_live_bytes, 500);
        assert_eq!(simulate_best(&lifetimes, 2).ratio, 4);
    }

    #[test]
    fn best_fit_takes_the_smallest_eligible_block() {
        // Blocks of 300 and 150 are free when a 120-byte tensor comes: ratio 4 allows both;
        // the 150 one is taken, leaving the 300 one for a 250-byte tensor.
        let lifetimes = [
            l(300, None, Some(0)),
            l(150, None, Some(0)),
            l(120, Some(1), None),
            l(250, Some(2), None),
        ];
        let sim = simulate(&lifetimes, 3, 4);
        assert_eq!((sim.peak_pool_bytes, sim.blocks), (450, 2));
    }

    #[test]
    fn tensors_that_outlive_the_iteration_are_never_freed() {
        let lifetimes = [
            l(50, None, None),
            l(70, Some(0), None),
            l(30, Some(1), Some(1)),
        ];
        let sim = simulate(&lifetimes, 2, 16);
        assert_eq!(sim.peak_live_bytes, 150);
        assert_eq!(sim.peak_pool_bytes, 150);
    }

    /// A holder of buffer 0 at 100 bytes.
    fn held(from: Option<usize>, until: Option<usize>) -> Lifetime {
        Lifetime {
            buffer: Some(0),
            ..Lifetime::own(100, from, until)
        }
    }

    #[test]
    fn a_shared_buffer_counts_once_while_any_holder_lives() {
        // A source made at op 0 and consumed at op 1 by a view of it, which lives to op 3;
        // another tensor lives at op 2 alone.
        let lifetimes = [
            held(Some(0), Some(1)),
            held(Some(1), Some(3)),
            l(50, Some(2), Some(2)),
        ];
        assert_eq!(live_per_op(&lifetimes, 4), [100, 100, 150, 100]);
        let sim = simulate(&lifetimes, 4, 1);
        assert_eq!((sim.peak_live_bytes, sim.peak_op), (150, Some(2)));
        assert_eq!((sim.peak_pool_bytes, sim.blocks), (150, 2));
        // Stretches of one buffer that do not meet are two lives of it.
        let apart = [held(Some(0), Some(0)), held(Some(2), None)];
        assert_eq!(live_per_op(&apart, 3), [100, 0, 100]);
        // Made before the iteration and held past it by a view made in it.
        let carried = [held(None, Some(0)), held(Some(0), None)];
        assert_eq!(live_per_op(&carried, 2), [100, 100]);
    }

    /// `chain(4)` with tensor 1 a view of tensor 0 and tensor 2 a view of tensor 1.
    fn views_of_views() -> Trace {
        let mut trace = crate::trace::synthetic::chain(4, |l| 100 * (l as u64 + 1), |_| 1);
        trace.tensors[1].view_of = Some(0);
        trace.tensors[2].view_of = Some(1);
        trace
    }

    #[test]
    fn views_of_views_hold_the_buffer_their_first_source_made() {
        let trace = views_of_views();
        assert_eq!(buffer_makers(&trace), [Some(0), Some(0), Some(0), None]);
        let lives = lifetimes(&trace);
        // Each holder holds it at the maker's size; the last tensor has a buffer of its own.
        assert!(
            lives[..3]
                .iter()
                .all(|l| l.bytes == 100 && l.buffer == Some(0))
        );
        assert_eq!((lives[3].bytes, lives[3].buffer), (400, None));
        // Tensor 0 dies at op 8, tensor 2 at op 6: the buffer lives from op 0 to op 8, once.
        let live = live_per_op(&lives, 9);
        assert_eq!(live[2], 100);
        assert_eq!(live[8], 100);
        assert_eq!(live[3], 500);
        // A trace without views: every tensor alone in its buffer.
        let plain = crate::trace::synthetic::chain(4, |_| 100, |_| 1);
        assert!(buffer_makers(&plain).iter().all(Option::is_none));
    }

    #[test]
    fn a_view_made_again_shares_its_source_and_a_fetched_one_is_alone() {
        let trace = views_of_views();
        let whole = lifetimes(&trace)[2];
        // Recomputed, the view is made again in its source's buffer.
        let remade = back(&trace, 2, whole, 5, true);
        assert_eq!(
            (remade.bytes, remade.buffer, remade.from),
            (100, Some(0), Some(5))
        );
        // Fetched, it comes back at its own size in a buffer of its own; so does the maker
        // of the buffer, recomputed (its views keep the old one).
        let fetched = back(&trace, 2, whole, 5, false);
        assert_eq!((fetched.bytes, fetched.buffer), (300, None));
        let maker = back(&trace, 0, lifetimes(&trace)[0], 5, true);
        assert_eq!((maker.bytes, maker.buffer), (100, None));
    }

    #[test]
    fn a_view_that_lives_through_a_gap_keeps_its_sources_buffer() {
        let trace = views_of_views();
        let lives = lifetimes(&trace);
        let holders = buffer_holders(&lives);
        assert_eq!(holders[&0], [0, 1, 2]);
        // Tensor 0 is away from op 2 to op 7: tensor 1 lives from op 1 to op 7.
        assert!(kept_by_others(&lives, &holders, 0, (1, 8), 9));
        // Tensor 2 is away from op 4 to op 5 only: tensors 0 and 1 live throughout.
        assert!(kept_by_others(&lives, &holders, 2, (3, 6), 9));
        // Tensor 1, away from op 2 to op 8: tensor 0 lives to op 8 (tensor 2 ends at 6).
        assert!(kept_by_others(&lives, &holders, 1, (1, 9), 9));
        // Not to op 9: nobody holds it there.
        assert!(!kept_by_others(&lives, &holders, 1, (1, 10), 11));
        // A tensor alone in its buffer, or a gap with no op inside it.
        assert!(!kept_by_others(&lives, &holders, 3, (4, 8), 9));
        assert!(!kept_by_others(&lives, &holders, 0, (1, 2), 9));
    }
}
