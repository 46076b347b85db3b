//! What moves a device's bytes: the transfer workers, the peers offloads may go to, and the
//! prefetches waiting for room.

use std::sync::Arc;

use burn_ir::{BackendIr, TensorId};

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
