//! Measuring the links the planners read: the copy throughput between the device and host
//! memory along the inner backend's own data path (offloads go through `transfer::copy_out`
//! and back through `transfer::write`, on every thread), and what handing a copy to a worker
//! thread costs.
//!
//! The probe runs on the send worker, beside the ops ([`run_on_worker`]: the engine queues
//! it and counts its temporary tensors in the books until its copies are made:
//! `Engine::links_beside`), or on the op's thread where no worker could start. Each size is
//! copied out and back three times, the fastest kept ([`copies`]). A copy made on a worker
//! also waits for the worker to wake: a hand-over to a parked thread is timed apart
//! ([`handover`]), once the temporaries are gone, and added to the workers' samples.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use burn_backend::{DType, Shape, TensorData};
use burn_ir::BackendIr;

use super::host_buffer_pool::HostPool;
use super::peers::PeerPool;
use super::transfer::{self, Errand, TransferError};
use crate::plan::compression;
use crate::plan::profile::{CopySample, Links, OnThread};

/// Hand-overs timed, the median kept.
const HANDOVERS: usize = 9;

/// How long the helper thread is left idle before each hand-over, so that it has parked
/// (as an idle worker has) rather than spinning on its queue.
const PARK: Duration = Duration::from_micros(100);

/// What handing a job to a parked thread costs, as [`handover`] measures it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Handover {
    /// Seconds the sending thread spends in the send (queueing the job, waking the thread).
    pub send_seconds: f64,
    /// Seconds from the send's start until the woken thread runs.
    pub wake_seconds: f64,
}

/// Times [`HANDOVERS`] hand-overs to a helper thread parked on a queue, as a transfer job is
/// handed to an idle worker: the median time of the send, and the median time until the
/// helper runs. `None` when no thread could start.
pub(crate) fn handover() -> Option<Handover> {
    let (to_helper, jobs) = mpsc::channel::<Instant>();
    let (to_prober, woken) = mpsc::channel::<Instant>();
    let helper = std::thread::Builder::new()
        .name("burn-swap-handover".into())
        .spawn(move || {
            for _sent in jobs {
                if to_prober.send(Instant::now()).is_err() {
                    return;
                }
            }
        })
        .ok()?;
    let mut sends = Vec::with_capacity(HANDOVERS);
    let mut wakes = Vec::with_capacity(HANDOVERS);
    for _ in 0..HANDOVERS {
        std::thread::sleep(PARK);
        let start = Instant::now();
        if to_helper.send(start).is_err() {
            break;
        }
        sends.push(start.elapsed().as_secs_f64());
        let Ok(ran) = woken.recv() else {
            break;
        };
        wakes.push(ran.saturating_duration_since(start).as_secs_f64());
    }
    drop(to_helper);
    let _ = helper.join();
    Some(Handover {
        send_seconds: median(&mut sends)?,
        wake_seconds: median(&mut wakes)?,
    })
}

fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// A copy of the probe that failed, and which way it went.
#[derive(Debug)]
pub(crate) struct ProbeFailed {
    /// It was a copy back to the device (else one off it).
    pub to_device: bool,
    pub error: TransferError,
}

/// Where the probe's copies go: as planned offloads go (the peers that may take them, the
/// pool of raw host copies on a host-memory backend), never compressed.
pub(crate) struct ProbeRoute<B: BackendIr> {
    pub device: B::Device,
    pub peers: Option<Arc<PeerPool>>,
    pub pool: Option<Arc<HostPool>>,
}

/// What the probe tells the engine while it runs on the send worker, in this order.
pub(crate) enum ProbeNews {
    /// The copies are made: the temporary tensors are off the device (the hand-over is
    /// timed after, with none held).
    CopiesMade,
    /// The links, or the copy that failed.
    Done(Result<Links, ProbeFailed>),
}

/// The probe's copies, the fastest of three per size, each way.
pub(crate) struct ProbeCopies {
    out: Vec<CopySample>,
    back: Vec<CopySample>,
}

/// Copies temporary `f32` tensors of each size in `sizes` (bytes) off the device and back,
/// three times each, the fastest kept. Outside the books: the caller counts the largest
/// size until this returns (one temporary is on the device at a time).
pub(crate) fn copies<B: BackendIr>(
    route: &ProbeRoute<B>,
    sizes: &[u64],
) -> Result<ProbeCopies, ProbeFailed> {
    let _span = tracing::debug_span!("burn_swap::measure_links", sizes = sizes.len()).entered();
    let mut out = Vec::with_capacity(sizes.len());
    let mut back = Vec::with_capacity(sizes.len());
    for &bytes in sizes {
        let elements = (bytes / 4) as usize;
        let (mut down, mut up) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..3 {
            let (d, u) = round_trip(route, elements)?;
            down = down.min(d);
            up = up.min(u);
        }
        let bytes = 4 * elements as u64;
        out.push(CopySample {
            bytes,
            seconds: down,
        });
        back.push(CopySample { bytes, seconds: up });
    }
    Ok(ProbeCopies { out, back })
}

impl ProbeCopies {
    /// The links the copies show: the copies themselves are the op thread's samples, the same
    /// copies plus the wake-up of a parked worker the workers'. With `handover` (the probe
    /// ran on a worker), the op thread's share of a copy handed to a worker too; without,
    /// the workers' samples are the copies alone and no op thread figures are given.
    pub fn links(self, handover: Option<Handover>) -> Links {
        let wake = handover.map_or(0.0, |h| h.wake_seconds);
        let on_worker = |samples: &[CopySample]| {
            samples
                .iter()
                .map(|s| CopySample {
                    bytes: s.bytes,
                    seconds: s.seconds + wake,
                })
                .collect()
        };
        Links {
            to_host: on_worker(&self.out),
            to_device: on_worker(&self.back),
            on_thread: handover.map(|h| OnThread {
                handover_seconds: h.send_seconds,
                to_host: self.out,
                to_device: self.back,
            }),
        }
    }
}

/// The probe of `sizes` over `route` as an errand for the send worker, and where it reports.
pub(crate) fn errand<B: BackendIr>(
    route: ProbeRoute<B>,
    sizes: Vec<u64>,
) -> (Errand<B>, mpsc::Receiver<ProbeNews>) {
    let (news, receive) = mpsc::channel();
    let errand = Errand {
        device: route.device.clone(),
        work: Box::new(move || run_on_worker::<B>(&route, &sizes, &news)),
    };
    (errand, receive)
}

/// The probe as the send worker runs it: the copies, news that they are made (the engine
/// takes the temporaries out of its books), then the hand-over timed and the links.
pub(crate) fn run_on_worker<B: BackendIr>(
    route: &ProbeRoute<B>,
    sizes: &[u64],
    news: &mpsc::Sender<ProbeNews>,
) {
    let copies = copies(route, sizes);
    let _ = news.send(ProbeNews::CopiesMade);
    let links = copies.map(|c| c.links(handover()));
    let _ = news.send(ProbeNews::Done(links));
}

/// One temporary tensor of `elements` zeros made on the device, copied off it as an offload
/// copies (its device copy then dropped) and written back as a fetch writes, waiting until
/// its bytes are there: the seconds of each copy.
fn round_trip<B: BackendIr>(
    route: &ProbeRoute<B>,
    elements: usize,
) -> Result<(f64, f64), ProbeFailed> {
    let failed = |to_device: bool| move |error: TransferError| ProbeFailed { to_device, error };
    let data = TensorData::new(vec![0f32; elements], [elements]);
    let handle = B::float_tensor_handle(B::float_from_data(data, &route.device));
    B::sync(&route.device).map_err(|e| failed(true)(e.into()))?;
    let start = Instant::now();
    let (copy, _, _) = transfer::copy_out::<B>(
        handle,
        Shape::new([elements]),
        DType::F32,
        &compression::CompressionPolicy::off(),
        route.peers.as_ref(),
        &route.device,
        route.pool.as_deref(),
    )
    .map_err(failed(false))?;
    let down = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let written = transfer::write::<B>(&route.device, copy, true)
        .map_err(|(error, _)| failed(true)(error))?;
    let up = start.elapsed().as_secs_f64();
    drop(written);
    Ok((down, up))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-over is timed from both sides: the send returns before the woken thread is
    /// known to run, and both take some time.
    #[test]
    fn a_handover_is_timed_from_both_sides() {
        let h = handover().expect("a helper thread starts");
        assert!(h.send_seconds > 0.0 && h.wake_seconds > 0.0, "{h:?}");
        assert!(h.wake_seconds < 1.0, "{h:?}");
    }
}
