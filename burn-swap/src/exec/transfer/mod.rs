//! The transfer workers on the generic path, isolated from compute.
//!
//! Offload requests go on the *send* queue, prefetch requests on the *receive* queue; each
//! queue has a worker thread of its own, so that an offload and a fetch run at the same time
//! as each other and as the ops of the compute thread. A worker moves bytes through the inner
//! backend's own data path (`into_data` of a clone of the handle; `from_data` for the way
//! back) and reports on one completion queue, which the engine drains between ops. The
//! engine never drops a device copy before its offload reported success: the worker reads a
//! clone of the handle, and the engine releases its own one only on completion, so a failed
//! offload leaves the tensor resident.
//!
//! Fetched tensors come back as backend handles; the engine gives them the tensor's id.

mod copy_back;
mod copy_out;
mod host_resident;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use burn_backend::{DType, Shape};
use burn_ir::{BackendIr, TensorId};

use super::faults::{self, Hook};
use super::host_buffer_pool::HostPool;
use super::peers::PeerPool;
use super::pools::{Worker, WorkerPools};
use super::residency::HostCopy;
use crate::plan::compression::CompressionPolicy;

pub(crate) use super::transfer_error::TransferError;
use super::transfer_error::panic_message;
pub(crate) use copy_back::write;
pub(crate) use copy_out::copy_out;
use host_resident::{adopts_bytes, recycle};

/// Where an offload goes and how: the compression policy, the device it leaves, and the
/// peers that may take it.
pub(crate) struct Route<B: BackendIr> {
    pub compression: CompressionPolicy,
    pub device: B::Device,
    pub peers: Option<Arc<PeerPool>>,
}

/// An offload for the send worker.
struct OffloadJob<B: BackendIr> {
    id: TensorId,
    handle: B::Handle,
    shape: Shape,
    dtype: DType,
    route: Route<B>,
    /// The memory of raw host copies on a backend whose tensors live in host memory.
    pool: Option<Arc<HostPool>>,
    /// When it was queued.
    queued: Instant,
}

/// Work for the send worker that moves no tensor of the books (the link probe): run on the
/// worker's thread and stream between offloads, in queue order, reporting on a channel of
/// its own; a panic in it drops that channel's sender, which its receiver sees.
pub(crate) struct Errand<B: BackendIr> {
    /// The device whose stream it works on.
    pub device: B::Device,
    pub work: Box<dyn FnOnce() + Send>,
}

/// A job of the send worker.
enum SendJob<B: BackendIr> {
    Offload(OffloadJob<B>),
    Errand(Errand<B>),
}

/// A fetch for the receive worker.
struct FetchJob<B: BackendIr> {
    id: TensorId,
    copy: HostCopy,
    device: B::Device,
    /// Wait until the bytes are on the device before reporting (for timing the link; a
    /// fetch needs no such wait for correctness: the backend orders its users after it).
    sync: bool,
    /// When it was queued.
    queued: Instant,
}

/// A finished transfer.
pub(crate) enum Done<B: BackendIr> {
    /// The bytes of `id` are on the host, compressed when it paid (or the copy failed; the
    /// device copy is untouched). `codec_nanos` of `nanos` were spent compressing.
    Offloaded {
        id: TensorId,
        result: Result<HostCopy, TransferError>,
        nanos: u64,
        codec_nanos: u64,
        /// Whether the device's kernels compressed it (before the copy).
        on_device: bool,
        /// Nanoseconds from its queueing to the job's end: the queue's wait, the worker's
        /// wake-up and the job (0 for a job lost to a panic).
        queued_nanos: u64,
    },
    /// The bytes of `id` are back on the device, in a handle without an id yet, or the
    /// write failed, with the copy back when it is still whole.
    Fetched {
        id: TensorId,
        result: Result<B::Handle, TransferError>,
        copy: Option<Box<HostCopy>>,
        nanos: u64,
        codec_nanos: u64,
        /// Whether the device's kernels decompressed it (after the copy).
        on_device: bool,
        /// Nanoseconds from its queueing to the job's end (0 for a job lost to a panic).
        queued_nanos: u64,
    },
}

/// How long a finished transfer took, and whether it was a plain copy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// An offload (else a fetch).
    pub to_host: bool,
    /// The job's nanoseconds.
    pub nanos: u64,
    /// Nanoseconds from its queueing to the job's end.
    pub queued_nanos: u64,
    /// It succeeded with no codec on either side: a copy of the raw bytes, whose time is
    /// the link's.
    pub plain: bool,
}

impl<B: BackendIr> Done<B> {
    pub fn id(&self) -> TensorId {
        match self {
            Done::Offloaded { id, .. } | Done::Fetched { id, .. } => *id,
        }
    }

    /// Its [`Timing`].
    pub fn timing(&self) -> Timing {
        let (to_host, ok) = match self {
            Done::Offloaded { result, .. } => (true, result.is_ok()),
            Done::Fetched { result, .. } => (false, result.is_ok()),
        };
        let (Done::Offloaded {
            nanos,
            codec_nanos,
            on_device,
            queued_nanos,
            ..
        }
        | Done::Fetched {
            nanos,
            codec_nanos,
            on_device,
            queued_nanos,
            ..
        }) = self;
        Timing {
            to_host,
            nanos: *nanos,
            queued_nanos: *queued_nanos,
            plain: ok && *codec_nanos == 0 && !on_device,
        }
    }
}

/// The two workers of one device and their queues. Started on first use; stopped (queues
/// closed, threads joined) when dropped.
pub(crate) struct Transfers<B: BackendIr> {
    send: Option<mpsc::Sender<SendJob<B>>>,
    receive: Option<mpsc::Sender<FetchJob<B>>>,
    done: Option<mpsc::Receiver<Done<B>>>,
    workers: Vec<JoinHandle<()>>,
    in_flight: usize,
    /// The ordering stress test's maximum delay, in microseconds (0: off), shared with the
    /// workers; see [`crate::SwapConfig::transfer_jitter_micros`].
    jitter: Arc<AtomicU64>,
    /// The workers' streams: their allocation mode and the allocator's figures.
    memory: Arc<WorkerPools>,
    /// The memory of raw host copies, on a backend whose tensors live in host memory.
    pool: Option<Arc<HostPool>>,
}

impl<B: BackendIr> Default for Transfers<B> {
    fn default() -> Self {
        Self {
            send: None,
            receive: None,
            done: None,
            workers: Vec::new(),
            in_flight: 0,
            jitter: Arc::new(AtomicU64::new(0)),
            memory: Arc::default(),
            pool: adopts_bytes::<B>().then(Arc::default),
        }
    }
}

/// The delay in microseconds that a transfer keyed `seed` is held under a jitter of at most
/// `max` microseconds: SplitMix64 of the key, so that each transfer gets its own and a run
/// can be repeated.
pub(crate) fn jitter_micros(seed: u64, max: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    crate::rng::mix(seed) % (max + 1)
}

fn pause(jitter: &AtomicU64, seed: u64) {
    let micros = jitter_micros(seed, jitter.load(Ordering::Relaxed));
    if micros > 0 {
        std::thread::sleep(std::time::Duration::from_micros(micros));
    }
}

/// The key of the jitter of the receive worker's transfers (the send worker's is the id).
pub(crate) const RECEIVE_KEY: u64 = 0x9e37_79b9;

/// Copies a tensor to the host, compressed where it pays: on a CubeCL backend by the device
/// kernels before the copy (only the compressed bytes cross the link), elsewhere by the CPU
/// codec after it. Returns the copy, the nanoseconds spent on compression, and whether the
/// device compressed it.
fn send<B: BackendIr>(job: OffloadJob<B>) -> Result<(HostCopy, u64, bool), TransferError> {
    copy_out::<B>(
        job.handle,
        job.shape,
        job.dtype,
        &job.route.compression,
        job.route.peers.as_ref(),
        &job.route.device,
        job.pool.as_deref(),
    )
}

/// What both workers share with the engine: the jitter setting and the allocator figures.
type WorkerState = (Arc<AtomicU64>, Arc<WorkerPools>);

/// A job of a transfer worker.
trait Job<B: BackendIr>: Send + 'static {
    /// The tensor it moves (`None`: an errand, which reports on its own).
    fn id(&self) -> Option<TensorId>;
    /// What the engine is told of a job that a panic took before it could report.
    fn lost(id: TensorId, error: TransferError) -> Done<B>;
}

impl<B: BackendIr> Job<B> for SendJob<B> {
    fn id(&self) -> Option<TensorId> {
        match self {
            SendJob::Offload(job) => Some(job.id),
            SendJob::Errand(_) => None,
        }
    }

    /// An offload only reads the device copy: the tensor stays resident.
    fn lost(id: TensorId, error: TransferError) -> Done<B> {
        Done::Offloaded {
            id,
            result: Err(error),
            nanos: 0,
            codec_nanos: 0,
            on_device: false,
            queued_nanos: 0,
        }
    }
}

impl<B: BackendIr> Job<B> for FetchJob<B> {
    fn id(&self) -> Option<TensorId> {
        Some(self.id)
    }

    /// The copy went with the job (the engine recomputes the tensor from its recipe, or its
    /// use fails with `TensorLost`); [`receive_job`] catches every panic that could take it.
    fn lost(id: TensorId, error: TransferError) -> Done<B> {
        Done::Fetched {
            id,
            result: Err(error),
            copy: None,
            nanos: 0,
            codec_nanos: 0,
            on_device: false,
            queued_nanos: 0,
        }
    }
}

/// A worker thread named `name`: does each job of `jobs` with `work` and reports it on
/// `done` (an errand reports on its own), until either queue closes. A panic that escapes a
/// job is reported as that job's failure and the worker goes on: a worker never dies with a
/// job in flight, which would leave the engine waiting for it forever.
fn spawn_worker<J: Job<B>, B: BackendIr>(
    name: &str,
    jobs: mpsc::Receiver<J>,
    done: mpsc::Sender<Done<B>>,
    work: impl Fn(J) -> Option<Done<B>> + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for job in jobs {
                let id = job.id();
                let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(job)))
                    .unwrap_or_else(|panic| id.map(|id| J::lost(id, panic_message(panic))));
                if let Some(report) = report
                    && done.send(report).is_err()
                {
                    return;
                }
            }
        })
}

/// A worker's bookkeeping after a job (the allocator's figures, the jitter of the ordering
/// test): a panic there is caught, and the job's result is reported all the same.
fn after_job(bookkeeping: impl FnOnce()) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if faults::take(Hook::WorkerPanic) {
            panic!("injected worker panic after the job");
        }
        bookkeeping()
    }));
}

/// The send worker's job: a tensor copied off the device, compressed where it pays.
fn send_job<B: BackendIr>(job: OffloadJob<B>, (jitter, memory): &WorkerState) -> Done<B> {
    let id = job.id;
    let start = Instant::now();
    let queued = job.queued;
    let bytes = super::bytes_of(&job.shape, job.dtype);
    let _span = tracing::debug_span!("burn_swap::send", tensor = id.value(), bytes).entered();
    let device = job.route.device.clone();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if faults::take(Hook::WorkerPanic) {
            panic!("injected worker panic");
        }
        memory.enter::<B>(Worker::Send, &device);
        send::<B>(job)
    }))
    .unwrap_or_else(|panic| Err(panic_message(panic)));
    let (result, codec_nanos, on_device) = match result {
        Ok((copy, codec_nanos, on_device)) => (Ok(copy), codec_nanos, on_device),
        Err(e) => (Err(e), 0, false),
    };
    after_job(|| {
        memory.note::<B>(Worker::Send, &device);
        pause(jitter, id.value());
    });
    Done::Offloaded {
        id,
        result,
        nanos: start.elapsed().as_nanos() as u64,
        codec_nanos,
        on_device,
        queued_nanos: queued.elapsed().as_nanos() as u64,
    }
}

/// An errand on the send worker's thread, its stream in the allocation mode wanted and its
/// figures noted after, as an offload's.
fn run_errand<B: BackendIr>(errand: Errand<B>, (_, memory): &WorkerState) {
    let Errand { device, work } = errand;
    memory.enter::<B>(Worker::Send, &device);
    work();
    after_job(|| memory.note::<B>(Worker::Send, &device));
}

/// The receive worker's job: a copy written back to the device, decompressed where needed.
/// A failure hands the copy back whole (see [`write`]), a panic of the job's own included.
fn receive_job<B: BackendIr>(job: FetchJob<B>, (jitter, memory): &WorkerState) -> Done<B> {
    let FetchJob {
        id,
        copy,
        device,
        sync,
        queued,
    } = job;
    let start = Instant::now();
    let _span = tracing::debug_span!(
        "burn_swap::receive",
        tensor = id.value(),
        bytes = copy.bytes()
    )
    .entered();
    let mut slot = Some(copy);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if faults::take(Hook::WorkerPanic) {
            panic!("injected worker panic");
        }
        memory.enter::<B>(Worker::Receive, &device);
        let copy = slot.take().expect("the copy is taken once");
        write::<B>(&device, copy, sync)
    }))
    .unwrap_or_else(|panic| Err((panic_message(panic), slot.take().map(Box::new))));
    after_job(|| {
        memory.note::<B>(Worker::Receive, &device);
        pause(jitter, id.value() ^ RECEIVE_KEY);
    });
    let nanos = start.elapsed().as_nanos() as u64;
    let queued_nanos = queued.elapsed().as_nanos() as u64;
    match result {
        Ok((handle, codec_nanos, on_device)) => Done::Fetched {
            id,
            result: Ok(handle),
            copy: None,
            nanos,
            codec_nanos,
            on_device,
            queued_nanos,
        },
        Err((error, copy)) => Done::Fetched {
            id,
            result: Err(error),
            copy,
            nanos,
            codec_nanos: 0,
            on_device: false,
            queued_nanos,
        },
    }
}

impl<B: BackendIr> Transfers<B> {
    /// The workers' streams: their allocation mode and the allocator's figures.
    pub fn pools(&self) -> &WorkerPools {
        &self.memory
    }

    /// The pool of raw host copies, on a backend whose tensors live in host memory (also for
    /// the copies made on the compute thread).
    pub fn pool(&self) -> Option<&HostPool> {
        self.pool.as_deref()
    }

    /// [`Transfers::pool`], shared (for work on a worker's thread).
    pub fn shared_pool(&self) -> Option<Arc<HostPool>> {
        self.pool.clone()
    }

    /// Drops the device copy of a tensor whose offload completed: on a backend whose tensors
    /// live in host memory its buffer goes to the pool of host copies, within the room below
    /// the host copies' highest peak (`host` and `peak`: their bytes now and their peak).
    pub fn release(&self, handle: B::Handle, shape: Shape, dtype: DType, host: (u64, u64)) {
        match &self.pool {
            Some(pool) => recycle::<B>(handle, shape, dtype, pool, host),
            None => drop(handle),
        }
    }

    /// Sets the ordering stress test's maximum delay (0: off), also for workers running.
    pub fn set_jitter(&self, max_micros: u64) {
        self.jitter.store(max_micros, Ordering::Relaxed);
    }

    fn start(&mut self) {
        if self.done.is_some() {
            return;
        }
        let (done_tx, done_rx) = mpsc::channel();
        let (send_tx, send_rx) = mpsc::channel::<SendJob<B>>();
        let (receive_tx, receive_rx) = mpsc::channel::<FetchJob<B>>();
        let shared: WorkerState = (self.jitter.clone(), self.memory.clone());
        let on_send = shared.clone();
        let sender = spawn_worker(
            "burn-swap-send",
            send_rx,
            done_tx.clone(),
            move |job| match job {
                SendJob::Offload(job) => Some(send_job(job, &on_send)),
                SendJob::Errand(errand) => {
                    run_errand(errand, &on_send);
                    None
                }
            },
        );
        let receiver = spawn_worker("burn-swap-receive", receive_rx, done_tx, move |job| {
            Some(receive_job(job, &shared))
        });
        // A worker that cannot start leaves its queue closed: requests then run on the
        // compute thread (see `offload`/`fetch`).
        if let Ok(worker) = sender {
            self.workers.push(worker);
            self.send = Some(send_tx);
        }
        if let Ok(worker) = receiver {
            self.workers.push(worker);
            self.receive = Some(receive_tx);
        }
        self.done = Some(done_rx);
    }

    /// Queues an offload of a clone of `handle`, compressed on the worker when `compression`
    /// says it pays. Returns `false` (nothing queued) when the send worker is not available.
    pub fn offload(
        &mut self,
        id: TensorId,
        handle: B::Handle,
        shape: Shape,
        dtype: DType,
        route: Route<B>,
    ) -> bool {
        self.start();
        let Some(send) = &self.send else {
            return false;
        };
        let job = OffloadJob {
            id,
            handle,
            shape,
            dtype,
            route,
            pool: self.pool.clone(),
            queued: Instant::now(),
        };
        if send.send(SendJob::Offload(job)).is_err() {
            self.send = None;
            return false;
        }
        self.in_flight += 1;
        true
    }

    /// Queues an errand on the send worker, behind the offloads queued (it is not counted
    /// in flight: it reports on its own). Gives it back when the send worker is not
    /// available.
    pub fn errand(&mut self, errand: Errand<B>) -> Result<(), Errand<B>> {
        self.start();
        let Some(send) = &self.send else {
            return Err(errand);
        };
        if let Err(mpsc::SendError(SendJob::Errand(errand))) = send.send(SendJob::Errand(errand)) {
            self.send = None;
            return Err(errand);
        }
        Ok(())
    }

    /// Queues a fetch (decompressed on the worker). Gives the copy back when the receive
    /// worker is not available.
    pub fn fetch(
        &mut self,
        id: TensorId,
        copy: HostCopy,
        device: B::Device,
        sync: bool,
    ) -> Result<(), HostCopy> {
        self.start();
        let Some(receive) = &self.receive else {
            return Err(copy);
        };
        let job = FetchJob {
            id,
            copy,
            device,
            sync,
            queued: Instant::now(),
        };
        if let Err(mpsc::SendError(job)) = receive.send(job) {
            self.receive = None;
            return Err(job.copy);
        }
        self.in_flight += 1;
        Ok(())
    }

    /// Transfers queued and not yet reported.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// A finished transfer, without waiting.
    pub fn try_next(&mut self) -> Option<Done<B>> {
        let done = self.done.as_ref()?.try_recv().ok()?;
        self.in_flight -= 1;
        Some(done)
    }

    /// The next finished transfer, waiting for it; `None` when nothing is in flight.
    pub fn next(&mut self) -> Option<Done<B>> {
        if self.in_flight == 0 {
            return None;
        }
        let done = self.done.as_ref()?.recv().ok()?;
        self.in_flight -= 1;
        Some(done)
    }
}

impl<B: BackendIr> Drop for Transfers<B> {
    fn drop(&mut self) {
        self.send = None;
        self.receive = None;
        // Completions still queued are dropped with the receiver, after the workers stopped.
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests;
