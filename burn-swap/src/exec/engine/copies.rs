//! What moves a device's bytes: the transfer workers, the peers offloads may go to, and the
//! prefetches waiting for room.

use std::sync::Arc;
use std::time::Instant;

use burn_ir::{BackendIr, TensorId};

use crate::exec::counters::Counters;
use crate::exec::link_probe::ProbeRoute;
use crate::exec::peers::PeerPool;
use crate::exec::transfer::Transfers;

/// The copies of a device.
pub(super) struct Copies<B: BackendIr> {
    /// The send and receive workers.
    pub transfers: Transfers<B>,
    /// The peers offloads go to, when configured.
    pub peers: Option<Arc<PeerPool>>,
    /// Prefetches that found no room yet, retried after each op.
    pub deferred: Vec<TensorId>,
}

impl<B: BackendIr> Copies<B> {
    /// Queues a copy on a transfer worker with `enqueue`, counting the op thread's time
    /// doing so as a hand-over (`Counters::add_handover`).
    pub fn hand_over<T>(
        &mut self,
        counters: &mut Counters,
        enqueue: impl FnOnce(&mut Transfers<B>) -> T,
    ) -> T {
        let start = Instant::now();
        let queued = enqueue(&mut self.transfers);
        counters.add_handover(start.elapsed().as_nanos() as u64);
        queued
    }

    /// Where the probe's copies go: as planned offloads go.
    pub fn probe_route(&self, device: &B::Device) -> ProbeRoute<B> {
        ProbeRoute {
            device: device.clone(),
            peers: self.peers.clone(),
            pool: self.transfers.shared_pool(),
        }
    }
}
