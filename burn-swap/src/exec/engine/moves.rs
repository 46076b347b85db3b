//! Moves: offloads and fetches, made on the op's thread or handed to the transfer workers,
//! and how each one's completion lands in the books. Every state change goes through the
//! residency's transitions; the counters of every kind of move are kept in one place each
//! ([`Engine::land_offload`], [`Engine::land_fetch`]).

use std::time::Instant;

use burn_backend::{DType, Shape};
use burn_ir::{BackendIr, TensorId, TensorIr, TensorStatus};

use super::Engine;
use super::measured_links::LinksNow;
use crate::config::Compression;
use crate::error::SwapError;
use crate::exec::counters::Wait;
use crate::exec::layout;
use crate::exec::residency::{Group, HostCopy, State};
use crate::exec::transfer::{self, Done, Timing, TransferError};
use crate::plan::compression;

/// What a finished copy to the device cost: its time, the codec's part of it, and whether
/// the device's kernels decompressed it.
struct FetchCost {
    nanos: u64,
    codec_nanos: u64,
    on_device: bool,
}

impl<B: BackendIr> Engine<B> {
    /// Puts a tensor that is not on the device back there: a fetch in flight is waited for,
    /// an offloaded one fetched on this thread, an evicted one recomputed.
    pub(super) fn bring(&mut self, id: TensorId) -> Result<(), SwapError> {
        let mut attempts = 0;
        loop {
            let Some(entry) = self.residency.get(&id) else {
                return Ok(());
            };
            match entry.state() {
                State::Resident | State::Offloading => return Ok(()),
                State::Offloaded(_) => {
                    let bytes = self.residency.fetch_bytes(&id);
                    self.op.protect.push(id);
                    let room = self.reserve(bytes);
                    self.op.protect.pop();
                    room?;
                    attempts += 1;
                    match self.exposed(Wait::Fetch, |e| e.fetch(id)) {
                        // A failed fetch leaves the copy whole: tried again, up to a limit.
                        Err(error)
                            if attempts < super::TRANSFER_ATTEMPTS
                                && self.residency.offloaded(&id) =>
                        {
                            tracing::warn!(tensor = id.value(), %error, "burn-swap: fetching again");
                        }
                        result => return result,
                    }
                }
                // Settled: landed, or offloaded again after a failure (fetched above).
                State::Fetching => {
                    self.exposed(Wait::Prefetch, |e| e.settle_fetch_of(id));
                }
                State::Evicted => {
                    return match entry.group() {
                        Some(&Group::Member { carrier }) => self.bring_member(id, carrier),
                        _ => self.recompute(id),
                    };
                }
                State::Lost => {
                    return Err(SwapError::TensorLost {
                        tensor: id.value(),
                        bytes: entry.bytes(),
                        reason: "its bytes went with a write the backend failed, and it has no \
                                 recipe"
                            .into(),
                    });
                }
            }
        }
    }

    /// Settles transfers until the fetch of `id` has landed or failed.
    fn settle_fetch_of(&mut self, id: TensorId) {
        while matches!(
            self.residency.get(&id).map(|e| e.state()),
            Some(State::Fetching)
        ) {
            if !self.settle_next() {
                break;
            }
        }
    }

    /// Settles transfers until the one of `id` has; an error when its fetch failed.
    pub(super) fn wait_for(&mut self, id: TensorId) -> Result<(), SwapError> {
        self.settle_fetch_of(id);
        match self.residency.get(&id) {
            Some(entry) if !entry.state().on_device() => Err(SwapError::FetchFailed {
                tensor: id.value(),
                bytes: entry.bytes(),
                reason: "the receive worker could not put it back on the device".into(),
            }),
            _ => Ok(()),
        }
    }

    /// The compression policy of offloads: the configured mode and, for `Auto`, the measured
    /// link bandwidth and CPU codec throughput (`plan::compression` decides per tensor).
    fn compression_policy(&mut self) -> compression::CompressionPolicy {
        let mode = self.settings.config.compression;
        if !compression::CompressionPolicy::needs_rates(mode) {
            return compression::CompressionPolicy::new(mode, None, None);
        }
        // Not waited for: until the probe has reported, the copies seen so far.
        let links = match self.link_meter().links_beside() {
            LinksNow::Known(links) => links,
            LinksNow::Measuring => self.machine.observed.links(),
        };
        let codec_bandwidth = *self
            .machine
            .codec_bandwidth
            .get_or_insert_with(crate::codec::measure_cpu_codec);
        compression::CompressionPolicy::new(mode, links.as_ref(), Some(codec_bandwidth))
    }

    /// Offloads a resident tensor on this thread (the reactive path): the op waits for it.
    /// A failed copy leaves the tensor resident, intact.
    pub(super) fn offload(&mut self, id: TensorId) -> Result<(), SwapError> {
        let compression = self.compression_policy();
        let Some(entry) = self.residency.get(&id) else {
            return Ok(());
        };
        let bytes = entry.bytes();
        if !self
            .residency
            .host_has_room(self.settings.config.host_budget, bytes)
        {
            return Err(self.residency.host_full_for(
                id,
                bytes,
                self.settings.config.host_budget,
                self.budget(),
            ));
        }
        let _span =
            tracing::debug_span!("burn_swap::offload", tensor = id.value(), bytes).entered();
        let start = Instant::now();
        let Some((handle, shape, dtype)) = self.offload_source(id) else {
            return Err(SwapError::OffloadFailed {
                tensor: id.value(),
                bytes,
                reason: "it is a strided view whose layout would not come back".into(),
            });
        };
        let result = transfer::copy_out::<B>(
            handle,
            shape,
            dtype,
            &compression,
            self.copies.peers.as_ref(),
            self.handles.device(),
            self.copies.transfers.pool(),
        );
        let nanos = start.elapsed().as_nanos() as u64;
        self.history.counters.add_exposed(Wait::Offload, nanos);
        match result {
            Ok((copy, codec_nanos, on_device)) => {
                self.land_offload(id, copy, nanos, codec_nanos, on_device);
                self.history.events.offloads += 1;
                Ok(())
            }
            Err(error) => {
                self.history.counters.failed_offloads += 1;
                tracing::warn!(tensor = id.value(), bytes, %error, "burn-swap: offload failed; the tensor stays resident");
                Err(SwapError::OffloadFailed {
                    tensor: id.value(),
                    bytes,
                    reason: error.to_string(),
                })
            }
        }
    }

    /// An offload that completed: the host holds `copy`, so the device copy goes.
    fn land_offload(
        &mut self,
        id: TensorId,
        copy: HostCopy,
        nanos: u64,
        codec_nanos: u64,
        on_device: bool,
    ) {
        let Some(entry) = self.residency.get(&id) else {
            return;
        };
        let (raw, moved, compressed) = (entry.bytes(), copy.stored_bytes(), copy.compressed());
        let ir = entry.ir(id, TensorStatus::ReadWrite);
        let key = (self.settings.config.compression != Compression::Off)
            .then(|| (entry.dims.clone(), entry.dtype()));
        if self.residency.complete_offload(&id, copy).is_err() {
            return;
        }
        if self.copies.transfers.pool().is_some() {
            // The device copy goes to the pool of host copies (host memory on this backend),
            // within the room below the host copies' highest peak.
            let books = self.residency.books();
            let host = (books.host, books.peak_host);
            let (shape, dtype) = (ir.shape.clone(), ir.dtype);
            let ir = ir;
            let handle = self.handles.handle(&ir);
            self.copies.transfers.release(handle, shape, dtype, host);
        } else {
            self.handles.remove(&ir.id);
        }
        let c = &mut self.history.counters;
        c.offloads += 1;
        c.offloaded_bytes += raw;
        c.offload_nanos += nanos;
        c.raw_bytes += raw;
        c.moved_bytes += moved;
        c.codec_nanos += codec_nanos;
        c.compressed_offloads += u64::from(compressed);
        c.device_compressed += u64::from(on_device);
        if let Some(key) = key {
            let stat = c.moves.entry(key).or_default();
            stat.0 += 1;
            stat.1 += raw;
            stat.2 += moved;
        }
    }

    /// A fetch that completed (its bytes on the device under its id) or failed.
    fn land_fetch(&mut self, id: TensorId, result: Result<(), TransferError>, cost: FetchCost) {
        let Some(bytes) = self.residency.get(&id).map(|e| e.bytes()) else {
            return;
        };
        match result {
            Ok(()) => {
                self.residency.complete_fetch(&id);
                let c = &mut self.history.counters;
                c.fetches += 1;
                c.fetched_bytes += bytes;
                c.fetch_nanos += cost.nanos;
                c.codec_nanos += cost.codec_nanos;
                c.device_decompressed += u64::from(cost.on_device);
            }
            Err(error) => {
                self.history.counters.failed_fetches += 1;
                // The bytes went with the write the backend failed (it had taken them): the
                // tensor is recomputed at its next use when it has a recipe, else that use
                // fails.
                tracing::error!(tensor = id.value(), bytes, %error, "burn-swap: fetch failed");
                self.residency.fail_fetch(&id);
            }
        }
    }

    /// Fetches an offloaded tensor on this thread (the caller made room), decompressing it
    /// when it was compressed. A failed fetch leaves it offloaded, its copy whole (see
    /// [`transfer::write`]).
    pub(super) fn fetch(&mut self, id: TensorId) -> Result<(), SwapError> {
        let Some(copy) = self.residency.begin_fetch(&id) else {
            return Ok(());
        };
        let Some(entry) = self.residency.get(&id) else {
            return Ok(());
        };
        let (bytes, ir) = (entry.bytes(), entry.ir(id, TensorStatus::NotInit));
        let _span = tracing::debug_span!("burn_swap::fetch", tensor = id.value(), bytes).entered();
        let start = Instant::now();
        let written = transfer::write::<B>(self.handles.device(), *copy, false);
        let nanos = start.elapsed().as_nanos() as u64;
        match written {
            Ok((handle, codec_nanos, on_device)) => {
                self.land_written(id, handle, ir, (nanos, codec_nanos, on_device));
                self.history.events.fetches += 1;
                Ok(())
            }
            Err((error, copy)) => {
                let reason = error.to_string();
                self.fetch_failed(id, error, copy);
                Err(SwapError::FetchFailed {
                    tensor: id.value(),
                    bytes,
                    reason,
                })
            }
        }
    }

    /// A fetch whose bytes were written back: the handle installed under the tensor's id,
    /// and the fetch booked with its cost (nanoseconds, of them decompressing, whether the
    /// device decompressed).
    fn land_written(
        &mut self,
        id: TensorId,
        handle: B::Handle,
        ir: TensorIr,
        cost: (u64, u64, bool),
    ) {
        // A strided tensor's buffer came back: the same view of it is made again.
        let handle = match self
            .residency
            .get_mut(&id)
            .and_then(|e| e.take_kept_layout())
        {
            Some(kept) => layout::restore::<B>(handle, ir.dtype, *kept),
            None => handle,
        };
        self.handles.insert(ir.id, handle);
        let (nanos, codec_nanos, on_device) = cost;
        let cost = FetchCost {
            nanos,
            codec_nanos,
            on_device,
        };
        self.land_fetch(id, Ok(()), cost);
        self.bring_members(id);
    }

    /// A fetch that failed: with its copy whole, the tensor is offloaded again (the next use
    /// fetches it again); without, its bytes are gone (see [`Engine::land_fetch`]).
    fn fetch_failed(&mut self, id: TensorId, error: TransferError, copy: Option<Box<HostCopy>>) {
        match copy {
            Some(copy) => {
                self.history.counters.failed_fetches += 1;
                tracing::warn!(tensor = id.value(), %error, "burn-swap: fetch failed; the tensor stays offloaded, intact");
                self.residency.restore_fetch(&id, *copy);
            }
            None => {
                let cost = FetchCost {
                    nanos: 0,
                    codec_nanos: 0,
                    on_device: false,
                };
                self.land_fetch(id, Err(error), cost);
            }
        }
    }

    /// What an offload of `id` reads: the tensor itself (read-only, so that a failed copy
    /// leaves the device handle in place) or, for a strided one whose layout comes back with
    /// its buffer, that buffer as a dense tensor, the layout kept in the books until the
    /// fetch lands. `None` when it may not leave by offload (any other strided tensor: its
    /// values would come back in another layout, and some kernels give other bits on it).
    fn offload_source(&mut self, id: TensorId) -> Option<(B::Handle, Shape, DType)> {
        let entry = self.residency.get(&id)?;
        let ir = entry.ir(id, TensorStatus::ReadOnly);
        // A carrier moves its whole buffer, which its group's holders are made again over.
        let carries = matches!(entry.group(), Some(Group::Carrier { .. }));
        let (strided, with_layout) = (entry.strided, entry.leaves_with_layout());
        let ir = ir;
        let handle = self.handles.handle(&ir);
        if !strided && !carries {
            return Some((handle, ir.shape, ir.dtype));
        }
        if !with_layout && !carries {
            return None;
        }
        let (whole, shape, kept) = layout::storage::<B>(&handle, &ir.shape, ir.dtype)?;
        if !self.residency.host_has_room(
            self.settings.config.host_budget,
            crate::exec::bytes_of(&shape, ir.dtype),
        ) {
            return None;
        }
        self.residency
            .get_mut(&id)?
            .set_kept_layout(Some(Box::new(kept)));
        Some((whole, shape, ir.dtype))
    }

    /// Starts offloading a resident tensor on the send worker: it stays usable, and its device
    /// copy goes when the copy has completed. Offloads on this thread when the worker cannot
    /// take it; `false` when the tensor may not leave by offload.
    pub(super) fn start_offload(&mut self, id: TensorId) -> bool {
        let Some(entry) = self.residency.get(&id) else {
            return false;
        };
        if !matches!(entry.state(), State::Resident)
            || !self
                .residency
                .host_has_room(self.settings.config.host_budget, entry.bytes())
        {
            return false;
        }
        let Some((handle, shape, dtype)) = self.offload_source(id) else {
            return false;
        };
        let route = transfer::Route {
            compression: self.compression_policy(),
            device: self.handles.device().clone(),
            peers: self.copies.peers.clone(),
        };
        let queued = self.copies.hand_over(&mut self.history.counters, |t| {
            t.offload(id, handle, shape, dtype, route)
        });
        if !queued {
            return self.offload(id).is_ok();
        }
        self.residency.begin_offload(&id);
        self.history.events.offloads += 1;
        true
    }

    /// Offloads a resident tensor on this thread for the plan (a copy that costs the op
    /// thread less than handing it to the send worker); `false` when it may not leave by
    /// offload now. A failed copy leaves it resident, intact.
    pub(super) fn offload_here(&mut self, id: TensorId) -> bool {
        matches!(
            self.residency.get(&id).map(|e| e.state()),
            Some(State::Resident)
        ) && self.offload(id).is_ok()
    }

    /// Fetches an offloaded tensor on this thread for the plan, right before its use, when
    /// its bytes fit in the budget now (else its use brings it back, making room first). A
    /// failed fetch leaves it offloaded, its copy whole; the use reports it.
    pub(super) fn fetch_here(&mut self, id: TensorId) {
        let Some(entry) = self.residency.get(&id) else {
            return;
        };
        if !matches!(entry.state(), State::Offloaded(_))
            || self
                .budget()
                .is_some_and(|b| self.resident() + self.residency.fetch_bytes(&id) > b)
        {
            return;
        }
        let _ = self.exposed(Wait::Fetch, |e| e.fetch(id));
    }

    /// Starts fetching an offloaded tensor on the receive worker, when its bytes fit in the
    /// budget now; `false` when they do not (the caller retries later).
    pub(super) fn start_prefetch(&mut self, id: TensorId) -> bool {
        let Some(entry) = self.residency.get(&id) else {
            return true;
        };
        if !matches!(entry.state(), State::Offloaded(_)) {
            return true;
        }
        if self
            .budget()
            .is_some_and(|b| self.resident() + self.residency.fetch_bytes(&id) > b)
        {
            return false;
        }
        let Some(copy) = self.residency.begin_fetch(&id) else {
            return true;
        };
        let device = self.handles.device().clone();
        let queued = self.copies.hand_over(&mut self.history.counters, |t| {
            t.fetch(id, *copy, device, false)
        });
        if let Err(copy) = queued {
            // The receive worker is gone: fetch here (an error surfaces at the next use).
            self.residency.restore_fetch(&id, copy);
            let _ = self.fetch(id);
            return true;
        }
        self.history.events.fetches += 1;
        true
    }

    /// Settles every transfer that has finished, without waiting.
    #[inline]
    pub(super) fn poll_transfers(&mut self) {
        if self.link_probe_running() {
            self.machine
                .poll_link_probe(&mut self.residency, &mut self.history.counters);
        }
        if self.copies.transfers.in_flight() == 0 {
            return;
        }
        while let Some(done) = self.copies.transfers.try_next() {
            self.settle(done);
        }
    }

    /// Waits for the next transfer to finish and settles it; `false` when none is in flight.
    pub(super) fn settle_next(&mut self) -> bool {
        match self.copies.transfers.next() {
            Some(done) => {
                self.settle(done);
                true
            }
            None => false,
        }
    }

    /// Waits for every transfer in flight and settles them, and for the link probe (its
    /// temporaries then leave the books).
    pub(super) fn settle_everything(&mut self) {
        while self.settle_next() {}
        self.machine
            .wait_for_link_probe(&mut self.residency, &mut self.history.counters);
    }

    /// Applies a finished transfer to the books.
    fn settle(&mut self, done: Done<B>) {
        let id = done.id();
        let timing = done.timing();
        // The copy ran whether or not its tensor is still here.
        self.charge_worker_copy(id, timing);
        let Some(entry) = self.residency.get(&id) else {
            // Burn dropped it meanwhile: the worker's copy is all that is left; it goes.
            return;
        };
        match done {
            Done::Offloaded {
                result,
                nanos,
                codec_nanos,
                on_device,
                ..
            } => {
                if !matches!(entry.state(), State::Offloading) {
                    return;
                }
                let bytes = entry.bytes();
                if timing.plain {
                    let seconds = timing.queued_nanos as f64 * 1e-9;
                    self.machine.observed.note_to_host(bytes, seconds);
                }
                if self.op.protected(&id) {
                    // The op about to run reads it: the device copy stays, the host copy goes.
                    self.residency.cancel_offload(&id);
                    return;
                }
                match result {
                    Ok(copy) => self.land_offload(id, copy, nanos, codec_nanos, on_device),
                    Err(error) => {
                        self.residency.cancel_offload(&id);
                        self.history.counters.failed_offloads += 1;
                        tracing::warn!(tensor = id.value(), bytes, %error, "burn-swap: offload failed; the tensor stays resident");
                    }
                }
            }
            Done::Fetched {
                result,
                copy,
                nanos,
                codec_nanos,
                on_device,
                ..
            } => {
                if !matches!(entry.state(), State::Fetching) {
                    return;
                }
                if timing.plain {
                    let seconds = timing.queued_nanos as f64 * 1e-9;
                    self.machine.observed.note_to_device(entry.bytes(), seconds);
                }
                let ir = entry.ir(id, TensorStatus::NotInit);
                match result {
                    Ok(handle) => {
                        self.land_written(id, handle, ir, (nanos, codec_nanos, on_device));
                    }
                    Err(error) => self.fetch_failed(id, error, copy),
                }
            }
        }
    }

    /// Charges the transfer worker's copy of `id` to the iteration's cost (the clock
    /// `exec::meter` reads) where the device's memory is the host's (Flex): the copy then
    /// runs on the cores the ops run on, so a plan that moves more bytes than the fallback
    /// costs their time even when no op waits for it. On a GPU the copy engines move the
    /// bytes, and the ops pay only for what they wait.
    ///
    /// A plain copy (no codec) is charged what it costs run alone, not the time it lasted
    /// (`ObservedCopies::cpu_seconds`): a copy the ops kept off the cores, or queued behind
    /// others, lasts longer without taking more of theirs. A copy that compressed, or whose
    /// tensor is gone (its size unknown), is charged as it lasted.
    fn charge_worker_copy(&mut self, id: TensorId, timing: Timing) {
        if self.copies.transfers.pool().is_none() {
            return;
        }
        let bytes = self.residency.get(&id).map(|e| e.bytes());
        let charged = match bytes {
            Some(bytes) if timing.plain => {
                let seconds = self.machine.observed.cpu_seconds(
                    timing.to_host,
                    bytes,
                    timing.nanos as f64 * 1e-9,
                    timing.queued_nanos as f64 * 1e-9,
                );
                (seconds * 1e9) as u64
            }
            _ => timing.nanos,
        };
        self.history.counters.add_worker_copy(charged);
    }
}
