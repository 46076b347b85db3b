//! Measuring the copy throughput between the device and host memory (the trial run
//! measures the links too): round trips of temporary tensors through the transfer workers,
//! outside the books. The probe sizes are `plan::profile::probe_sizes`'.

use std::time::Instant;

use burn_backend::TensorData;
use burn_ir::{BackendIr, TensorIr, TensorStatus};

use super::Engine;
use crate::exec::link_probe;
use crate::exec::transfer::{self, Done};
use crate::plan::compression;
use crate::plan::profile::{self, CopySample, Links, OnThread};

/// The hand-over time that the links report instead of the one measured
/// (`unstable::set_handover_seconds`), in nanoseconds; `u64::MAX` for none.
pub(crate) static HANDOVER_OVERRIDE: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(u64::MAX);

/// The links that every engine plans with instead of measuring them
/// (`unstable::set_links`): tests pin them so that a plan does not depend on how fast the
/// machine copied when the links were measured.
pub(crate) static PINNED_LINKS: std::sync::Mutex<Option<Links>> = std::sync::Mutex::new(None);

impl<B: BackendIr> Engine<B> {
    /// The copy throughput between device and host, measured on first request with
    /// temporary tensors that fit in the budget's headroom, through the transfer workers (the
    /// path planned transfers take, hand-over latency included) or, when they cannot run, on
    /// this thread. The planners read them; the reactive policy does not (its choices are
    /// the same whatever was measured: `plan::reactive::LinkModel`). Where too few probe
    /// sizes fit (a budget the fallback keeps nearly full) or the measurement failed, the
    /// links the workers' own copies show so far (not kept: a later request probes again);
    /// `None` when they have not copied both ways yet.
    pub fn links(&mut self) -> Option<Links> {
        let pinned = PINNED_LINKS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if pinned.is_some() {
            return pinned;
        }
        if self.machine.links.is_none() {
            let headroom = self
                .budget()
                .map_or(u64::MAX, |b| b.saturating_sub(self.resident()));
            let Some(sizes) = profile::probe_sizes(headroom) else {
                return self.machine.observed.links();
            };
            let measured = match self.measure_worker_links(&sizes) {
                Some((mut links, handover_seconds)) => {
                    // The same copies on the op thread, for the planner to weigh against the
                    // hand-over (none when they cannot be measured: every copy goes to a
                    // worker then).
                    links.on_thread = link_probe::measure_links(&mut self.handles, &sizes)
                        .ok()
                        .map(|here| OnThread {
                            handover_seconds,
                            to_host: here.to_host,
                            to_device: here.to_device,
                        });
                    Ok(links)
                }
                None => link_probe::measure_links(&mut self.handles, &sizes),
            };
            match measured {
                Ok(links) => self.keep_measured_links(links),
                Err(error) => {
                    tracing::warn!(%error, "burn-swap: could not measure copy throughput");
                    return self.machine.observed.links();
                }
            }
        }
        let mut links = self.machine.links.clone();
        let handover = HANDOVER_OVERRIDE.load(std::sync::atomic::Ordering::Relaxed);
        if handover != u64::MAX
            && let Some(here) = links.as_mut().and_then(|l| l.on_thread.as_mut())
        {
            here.handover_seconds = handover as f64 * 1e-9;
        }
        links
    }

    /// Keeps the links measured: the planners read them from now on (the reactive policy's
    /// scores do not; see `plan::reactive::LinkModel`).
    pub(super) fn keep_measured_links(&mut self, links: Links) {
        self.machine.links = Some(links);
    }

    /// [`Engine::measure_worker_links`] for the given sizes, outside the budget (the caller
    /// makes sure they fit on the device).
    pub fn measure_transfers(&mut self, sizes: &[u64]) -> Option<Links> {
        self.measure_worker_links(sizes).map(|(links, _)| links)
    }

    /// Times round trips of temporary tensors (outside the books) through the send and
    /// receive workers, the fastest of three per size, with the median time the op thread
    /// took to hand a copy over; `None` when a worker is unavailable. Each fetch is timed
    /// until its bytes are on the device.
    fn measure_worker_links(&mut self, sizes: &[u64]) -> Option<(Links, f64)> {
        let _span = tracing::debug_span!("burn_swap::measure_links", sizes = sizes.len()).entered();
        // Transfers in flight first, so that each measured one is alone.
        self.settle_everything();
        let mut links = Links {
            to_host: Vec::new(),
            to_device: Vec::new(),
            on_thread: None,
        };
        let mut handovers = Vec::with_capacity(6 * sizes.len());
        for &bytes in sizes {
            let elements = (bytes / 4) as usize;
            let (mut down, mut up) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..3 {
                let (d, u, handover) = self.round_trip(elements)?;
                down = down.min(d);
                up = up.min(u);
                handovers.extend(handover);
            }
            let bytes = 4 * elements as u64;
            links.to_host.push(CopySample {
                bytes,
                seconds: down,
            });
            links.to_device.push(CopySample { bytes, seconds: up });
        }
        handovers.sort_by(f64::total_cmp);
        let handover = handovers.get(handovers.len() / 2).copied().unwrap_or(0.0);
        Some((links, handover))
    }

    /// One round trip of a temporary tensor of `elements` zeros through the workers: the
    /// seconds out and back, and the seconds this thread took to hand each copy over.
    fn round_trip(&mut self, elements: usize) -> Option<(f64, f64, [f64; 2])> {
        let device = self.handles.device().clone();
        let ir = self
            .handles
            .upload(TensorData::new(vec![0f32; elements], [elements]));
        let read = TensorIr {
            status: TensorStatus::ReadOnly,
            ..ir.clone()
        };
        let handle = self.handles.handle(&read);
        let start = Instant::now();
        let route = transfer::Route {
            compression: compression::Policy::off(),
            device: device.clone(),
            peers: self.copies.peers.clone(),
        };
        let queued =
            self.copies
                .transfers
                .offload(ir.id, handle, ir.shape.clone(), ir.dtype, route);
        let handed_out = start.elapsed().as_secs_f64();
        let done = if queued {
            self.copies.transfers.next()
        } else {
            None
        };
        self.handles.remove(&ir.id);
        // A probe's copy that fails is a failed transfer like any other (the report counts
        // it); its tensor was a temporary, so nothing is lost.
        let copy = match done {
            Some(Done::Offloaded {
                result: Ok(copy), ..
            }) => copy,
            Some(Done::Offloaded { result: Err(_), .. }) => {
                self.history.counters.failed_offloads += 1;
                return None;
            }
            _ => return None,
        };
        let down = start.elapsed().as_secs_f64();
        let start = Instant::now();
        if self
            .copies
            .transfers
            .fetch(ir.id, copy, device, true)
            .is_err()
        {
            return None;
        }
        let handed_back = start.elapsed().as_secs_f64();
        let handle = match self.copies.transfers.next() {
            Some(Done::Fetched {
                result: Ok(handle), ..
            }) => handle,
            Some(Done::Fetched { result: Err(_), .. }) => {
                self.history.counters.failed_fetches += 1;
                return None;
            }
            _ => return None,
        };
        let up = start.elapsed().as_secs_f64();
        drop(handle);
        Some((down, up, [handed_out, handed_back]))
    }
}
