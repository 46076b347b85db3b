//! The inner allocator's pools as burn-swap uses them: what the device *reserves*, kept under
//! the budget on CubeCL backends (CUDA, wgpu); nothing here does anything elsewhere.
//!
//! CubeCL keeps one set of memory pools per stream, and runs each OS thread's work on a stream
//! of its own, so the op threads (compute) and the two transfer workers each reserve device
//! memory of their own. By default a pool carves buffers out of large pages that stay
//! reserved until an explicit cleanup finds them wholly free (on CUDA the pages follow the
//! card: a quarter of its memory and down by quarters). Three mechanisms keep the reserved
//! bytes near the counted ones:
//!
//! - **Every stream read once** ([`Pools::sample`]): the compute streams' figures are read
//!   after each op, the workers' after each of their jobs ([`WorkerPools`]); streams whose ids
//!   CubeCL maps to one pool set (`[streaming] max_streams`) are added once.
//! - **Exact-size buffers under a budget**: while a budget is set, every stream burn-swap
//!   runs device work on allocates each buffer at its own size (CubeCL's persistent
//!   allocation mode, which Burn uses for parameters), so that a budget is not rounded up to
//!   pages; a free buffer serves the next buffer of its size, which a training loop asks for
//!   again every iteration.
//! - **Cleanup when over**: when the reserved bytes of all streams exceed the budget after an
//!   op, every stream's idle buffers and free pages are given back (and not again until the
//!   reserved bytes grow past what that cleanup left, so that a budget below what the live
//!   buffers need does not clean after every op).
//!
//! Values are untouched: where a buffer lives never changes what is computed in it.

use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use crate::report::{AllocatorUsage, StreamRole, StreamUsage};
use burn_backend::Backend;
use cubecl::stream_id::StreamId;

/// The workers' side, shared with their threads: the mode their streams should allocate in,
/// and each worker's stream and figures as it last read them.
pub(crate) struct WorkerPools {
    /// Exact-size allocation wanted (a budget is set).
    exact: AtomicBool,
    /// Per worker (send, receive): its stream id (`u64::MAX` until known), bytes in use,
    /// reserved and of padding, and the mode its stream was last set to (0 never, 1 exact, 2
    /// shared pages).
    stream: [AtomicU64; 2],
    in_use: [AtomicU64; 2],
    reserved: [AtomicU64; 2],
    padding: [AtomicU64; 2],
    /// The most each worker's stream reserved when read, since the last reset.
    peak_reserved: [AtomicU64; 2],
    mode: [AtomicU8; 2],
}

impl Default for WorkerPools {
    fn default() -> Self {
        Self {
            exact: AtomicBool::new(false),
            stream: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
            in_use: Default::default(),
            reserved: Default::default(),
            padding: Default::default(),
            peak_reserved: Default::default(),
            mode: Default::default(),
        }
    }
}

/// The index of a worker in [`WorkerPools`]' arrays.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Worker {
    Send = 0,
    Receive = 1,
}

impl WorkerPools {
    /// Run by a worker before a job on `device`: its stream set to the mode wanted, when it
    /// is not in it yet.
    pub fn enter<B: Backend>(&self, worker: Worker, device: &B::Device) {
        let i = worker as usize;
        let wanted = if self.exact.load(Ordering::Relaxed) {
            1
        } else {
            2
        };
        let set = self.mode[i].load(Ordering::Relaxed);
        // Never set and shared pages wanted: the stream is in CubeCL's default already.
        if set != wanted && !(set == 0 && wanted == 2) {
            if set_exact::<B>(device, wanted == 1).is_none() {
                return;
            }
            self.mode[i].store(wanted, Ordering::Relaxed);
        }
    }

    /// Run by a worker after a job on `device`: its stream's figures, for the compute side to
    /// add up.
    pub fn note<B: Backend>(&self, worker: Worker, device: &B::Device) {
        let i = worker as usize;
        if let Some(usage) = usage::<B>(device) {
            self.stream[i].store(StreamId::current().value, Ordering::Relaxed);
            self.store(worker, usage);
            self.peak_reserved[i].fetch_max(usage.reserved, Ordering::Relaxed);
        }
    }

    /// The most `worker`'s stream reserved when read since the last reset.
    fn peak(&self, worker: Worker) -> u64 {
        self.peak_reserved[worker as usize].load(Ordering::Relaxed)
    }

    /// A worker's stream and figures, once it has read them.
    fn read(&self, worker: Worker) -> Option<(u64, AllocatorUsage)> {
        let i = worker as usize;
        let stream = self.stream[i].load(Ordering::Relaxed);
        (stream != u64::MAX).then(|| {
            (
                stream,
                AllocatorUsage {
                    in_use: self.in_use[i].load(Ordering::Relaxed),
                    reserved: self.reserved[i].load(Ordering::Relaxed),
                    padding: self.padding[i].load(Ordering::Relaxed),
                },
            )
        })
    }

    fn store(&self, worker: Worker, usage: AllocatorUsage) {
        let i = worker as usize;
        self.in_use[i].store(usage.in_use, Ordering::Relaxed);
        self.reserved[i].store(usage.reserved, Ordering::Relaxed);
        self.padding[i].store(usage.padding, Ordering::Relaxed);
    }
}

/// A compute stream seen by the engine, with its figures as last read and whether it was set
/// to exact-size allocation.
#[derive(Debug, Clone, Copy)]
struct Compute {
    stream: u64,
    usage: AllocatorUsage,
    /// The most it reserved when read after an op, since the last reset.
    peak_reserved: u64,
    exact: bool,
}

/// The compute side of one device's pools, owned by its engine.
#[derive(Debug, Default)]
pub(crate) struct Pools {
    /// The op threads' streams seen (usually one).
    compute: Vec<Compute>,
    /// Exact-size allocation wanted (a budget is set).
    exact: bool,
    /// Reserved bytes of all streams right after the last cleanup: the next one waits until
    /// they grow past this and the budget.
    after_cleanup: u64,
    /// Cleanups made because the reserved bytes exceeded the budget.
    pub cleanups: u64,
    /// CubeCL's pool sets per device (0 until read).
    sets: u64,
}

impl Pools {
    /// Whether streams should allocate exact-size buffers (a budget is set); the workers
    /// follow at their next job, the compute streams at their next op.
    pub fn set_exact<B: Backend>(
        &mut self,
        exact: bool,
        workers: &WorkerPools,
        device: &B::Device,
    ) {
        if exact && !exact_taken() {
            tracing::warn!(
                "burn-swap: CubeCL's `[memory] persistent_memory` is \"disabled\" (cubecl.toml), \
                 so the allocator carves buffers out of pages that stay reserved, and what the \
                 device reserves may exceed the budget by up to a page per stream; remove the \
                 setting to keep reserved bytes under the budget"
            );
        }
        self.exact = exact;
        workers.exact.store(exact, Ordering::Relaxed);
        // The configuring thread is usually the one that runs the ops next.
        self.here::<B>(device);
        for c in &mut self.compute {
            if c.exact != exact && on_stream(c.stream, || set_exact::<B>(device, exact)).is_some() {
                c.exact = exact;
            }
        }
        self.after_cleanup = 0;
    }

    /// Reads the allocator after an op on the calling thread: its stream's figures, with the
    /// workers' as they last read them. Sets a compute stream seen for the first time to the
    /// mode wanted. When the reserved bytes of all streams exceed `budget` (and grew since
    /// the last cleanup), cleans every stream and reads them again. Returns the total of the
    /// streams as read (each pool set once: what the device held, for the peak) and as
    /// left (after a cleanup), and what the calling thread's stream reserved as read;
    /// `None` when the backend has no allocator figures.
    pub fn sample<B: Backend>(
        &mut self,
        device: &B::Device,
        workers: &WorkerPools,
        budget: Option<u64>,
    ) -> Option<(AllocatorUsage, AllocatorUsage, u64)> {
        let (here, read) = self.read_here::<B>(device, workers)?;
        match budget {
            Some(budget) if read.reserved > budget.max(self.after_cleanup) => {
                Some((read, self.cleanup_for_budget::<B>(device, workers), here))
            }
            _ => Some((read, read, here)),
        }
    }

    /// Reads the calling thread's stream now (an op is about to run on it) and returns what
    /// it reserves, with the total of all streams (the others as last read).
    pub fn read_here<B: Backend>(
        &mut self,
        device: &B::Device,
        workers: &WorkerPools,
    ) -> Option<(u64, AllocatorUsage)> {
        let at = self.here::<B>(device);
        let usage = usage::<B>(device)?;
        let stream = &mut self.compute[at];
        stream.usage = usage;
        stream.peak_reserved = stream.peak_reserved.max(usage.reserved);
        Some((usage.reserved, self.total(workers)))
    }

    /// What the calling thread's stream reserved when last read (after any cleanup).
    pub fn here_as_read(&self) -> u64 {
        let here = StreamId::current().value;
        self.compute
            .iter()
            .find(|c| c.stream == here)
            .map_or(0, |c| c.usage.reserved)
    }

    /// The calling thread's compute stream: its index in `compute`, added (and set to the
    /// mode wanted) when seen for the first time.
    fn here<B: Backend>(&mut self, device: &B::Device) -> usize {
        let here = StreamId::current().value;
        if let Some(at) = self.compute.iter().position(|c| c.stream == here) {
            return at;
        }
        let exact = self.exact && set_exact::<B>(device, true).is_some();
        self.compute.push(Compute {
            stream: here,
            usage: AllocatorUsage::default(),
            peak_reserved: 0,
            exact,
        });
        self.compute.len() - 1
    }

    /// [`Pools::cleanup`] for the budget (after an op that left the reserved bytes over it,
    /// or before one that would take them over with the idle buffers kept): counted, and
    /// remembered as what the last cleanup left.
    pub fn cleanup_for_budget<B: Backend>(
        &mut self,
        device: &B::Device,
        workers: &WorkerPools,
    ) -> AllocatorUsage {
        self.cleanups += 1;
        let left = self.cleanup::<B>(device, workers);
        self.after_cleanup = left.reserved;
        left
    }

    /// Gives every stream's idle buffers and free pages back, reads each stream again, and
    /// returns their total (each pool set once).
    pub fn cleanup<B: Backend>(
        &mut self,
        device: &B::Device,
        workers: &WorkerPools,
    ) -> AllocatorUsage {
        let _span = tracing::debug_span!("burn_swap::allocator_cleanup").entered();
        for c in &mut self.compute {
            if let Some(usage) = on_stream(c.stream, || {
                clean::<B>(device);
                usage::<B>(device)
            }) {
                c.usage = usage;
            }
        }
        for worker in [Worker::Send, Worker::Receive] {
            if let Some((stream, _)) = workers.read(worker)
                && let Some(usage) = on_stream(stream, || {
                    clean::<B>(device);
                    usage::<B>(device)
                })
            {
                workers.store(worker, usage);
            }
        }
        self.total(workers)
    }

    /// Every stream burn-swap ran device work on, with its figures as last read and its
    /// peak (for the report).
    pub fn streams(&self, workers: &WorkerPools) -> Vec<StreamUsage> {
        let sets = pool_sets();
        let all: Vec<_> = self.each_stream(workers).collect();
        let peak = |role: StreamRole, stream: u64| match role {
            StreamRole::Compute => self
                .compute
                .iter()
                .find(|c| c.stream == stream)
                .map_or(0, |c| c.peak_reserved),
            StreamRole::Send => workers.peak(Worker::Send),
            StreamRole::Receive => workers.peak(Worker::Receive),
        };
        all.iter()
            .enumerate()
            .map(|(i, &(role, stream, usage))| StreamUsage {
                role,
                stream,
                shared: all[..i].iter().any(|s| s.1 % sets == stream % sets),
                usage,
                peak_reserved: peak(role, stream),
            })
            .collect()
    }

    /// Starts the streams' peaks afresh (with the report's counters).
    pub fn reset_peaks(&mut self, workers: &WorkerPools) {
        for c in &mut self.compute {
            c.peak_reserved = c.usage.reserved;
        }
        for worker in [Worker::Send, Worker::Receive] {
            let now = workers.read(worker).map_or(0, |(_, u)| u.reserved);
            workers.peak_reserved[worker as usize].store(now, Ordering::Relaxed);
        }
    }

    /// The compute streams, then each worker's once it has read its figures.
    fn each_stream<'a>(
        &'a self,
        workers: &'a WorkerPools,
    ) -> impl Iterator<Item = (StreamRole, u64, AllocatorUsage)> + 'a {
        let compute = self
            .compute
            .iter()
            .map(|c| (StreamRole::Compute, c.stream, c.usage));
        let workers = [
            (Worker::Send, StreamRole::Send),
            (Worker::Receive, StreamRole::Receive),
        ]
        .into_iter()
        .filter_map(|(worker, role)| {
            workers
                .read(worker)
                .map(|(stream, usage)| (role, stream, usage))
        });
        compute.chain(workers)
    }

    /// The figures of every pool set burn-swap's streams use, each added once (read after
    /// every op: no allocation; the streams are a handful).
    fn total(&mut self, workers: &WorkerPools) -> AllocatorUsage {
        if self.sets == 0 {
            self.sets = pool_sets();
        }
        let sets = self.sets;
        let mut sum = AllocatorUsage::default();
        for (i, (_, stream, usage)) in self.each_stream(workers).enumerate() {
            let counted = self
                .each_stream(workers)
                .take(i)
                .any(|(_, other, _)| other % sets == stream % sets);
            if !counted {
                sum = sum + usage;
            }
        }
        sum
    }
}

/// Runs `f` with the calling thread's CubeCL work on stream `stream` (its pools, its mode).
fn on_stream<T>(stream: u64, f: impl FnOnce() -> Option<T>) -> Option<T> {
    StreamId { value: stream }.executes(f)
}

/// Whether CubeCL takes the switch to exact-size allocation (see `cubecl_fast_path::exact_allocations_taken`).
fn exact_taken() -> bool {
    super::cubecl_fast_path::exact_allocations_taken()
}

/// The number of pool sets per device CubeCL keeps (1 where there is no CubeCL runtime).
fn pool_sets() -> u64 {
    super::cubecl_fast_path::pool_sets()
}

fn usage<B: Backend>(device: &B::Device) -> Option<AllocatorUsage> {
    super::allocator_usage::<B>(device)
}

fn clean<B: Backend>(device: &B::Device) {
    super::allocator_cleanup::<B>(device)
}

fn set_exact<B: Backend>(device: &B::Device, exact: bool) -> Option<()> {
    super::cubecl_fast_path::set_exact_allocations::<B>(device, exact)
}
