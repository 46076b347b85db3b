//! Peer offload: the memory manager and the transmitter.
//!
//! - The **memory manager** ([`PeerPool::reserve`], [`Piece`]'s drop) keeps each peer's
//!   free memory and the destination-space table of an offloaded tensor: per piece, the
//!   peer, the offset in the tensor and the size ([`PeerCopy`]). A piece's space goes back
//!   to its peer when the piece is dropped (fetched, or the tensor dropped while offloaded).
//!   A reservation that fails (a peer filled up since the advisor looked) never loses data:
//!   the advisor is asked again without that peer, and what no peer takes stays on the host.
//! - The **transmitter** ([`PeerPool::send`], [`PeerPool::receive`]) runs on the send and
//!   receive workers, isolated from compute: it cuts a tensor into its pieces and copies them
//!   to all their peers at once (one thread per destination, the stream-per-peer of the
//!   seed), and on fetch reassembles them by the reverse route recorded at offload.
//!
//! The peers are simulated ([`crate::config::PeerSpec`]): their bytes live in host memory,
//! each piece's copy is paced to its link's bandwidth, and capacities are enforced as a peer
//! device's free memory would be. The advisor ([`crate::plan::advisor`]) decides the split.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use burn_backend::TensorData;

use super::transfer_error::TransferError;
use crate::config::PeerSpec;
use crate::plan::advisor::{self, Advice, Destination};
use crate::report::PeerStat;

/// What one peer did, for the report.
#[derive(Debug, Default)]
struct PeerCounters {
    used: AtomicU64,
    peak_used: AtomicU64,
    sent_bytes: AtomicU64,
    sent_nanos: AtomicU64,
    fetched_bytes: AtomicU64,
    fetched_nanos: AtomicU64,
    pieces: AtomicU64,
}

/// The simulated peers of one device, their free memory and their counters.
#[derive(Debug)]
pub(crate) struct PeerPool {
    /// The peers as configured.
    configured: Vec<PeerSpec>,
    /// The peers as used (measured bandwidths filled in).
    specs: Vec<PeerSpec>,
    counters: Vec<PeerCounters>,
    /// Offloads that put some or all of their bytes on the host for lack of peer room.
    fallbacks: AtomicU64,
}

/// Why a tensor split across peers could not be brought back whole. Its pieces stay where
/// they are until the copy is dropped.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ReceiveError {
    /// A piece could not be read back from its peer, or read back at another length.
    #[error(
        "the piece of {len} bytes at byte {offset} on peer {peer} could not be read back: {reason}"
    )]
    Piece {
        /// The peer's index.
        peer: usize,
        /// Its place in the tensor's bytes.
        offset: usize,
        /// Its length.
        len: usize,
        /// What failed.
        reason: String,
    },
    /// The bytes came back but do not decompress.
    #[error(transparent)]
    Codec(#[from] crate::codec::CodecError),
}

/// A copy that could not be brought back from its peers fails the transfer that needed it.
impl From<ReceiveError> for TransferError {
    fn from(error: ReceiveError) -> Self {
        match error {
            ReceiveError::Codec(error) => TransferError::Codec(error),
            piece => TransferError::Peer(piece.to_string()),
        }
    }
}

/// Where a piece's bytes are.
pub(crate) enum PieceData {
    /// In host memory (a simulated peer).
    Host(Vec<u8>),
    /// In a buffer of a peer CUDA device, allocated by that device's own allocator.
    #[cfg(feature = "cuda")]
    Device(cuda::DeviceSlot),
    /// A tensor of the inner backend on the peer device (the generic route, `to_device`),
    /// and how to read its bytes back without knowing the backend here (`None`: the read
    /// failed).
    Backend {
        tensor: Box<dyn core::any::Any + Send + Sync>,
        read: fn(&(dyn core::any::Any + Send + Sync)) -> Option<Vec<u8>>,
    },
}

impl core::fmt::Debug for PieceData {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PieceData::Host(b) => write!(f, "Host({} bytes)", b.len()),
            #[cfg(feature = "cuda")]
            PieceData::Device(d) => write!(f, "Device(cuda:{})", d.ordinal),
            PieceData::Backend { .. } => write!(f, "Backend"),
        }
    }
}

/// A piece of a tensor held by a peer: a row of the destination-space table (peer, offset
/// in the tensor, size, where). Its space goes back to the peer when it is dropped.
#[derive(Debug)]
pub(crate) struct Piece {
    pub peer: usize,
    pub offset: usize,
    pub len: usize,
    pub data: PieceData,
    pool: Arc<PeerPool>,
}

impl Drop for Piece {
    fn drop(&mut self) {
        self.pool.counters[self.peer]
            .used
            .fetch_sub(self.len as u64, Ordering::AcqRel);
    }
}

/// What the bytes spread across the peers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Payload {
    /// The tensor's bytes as they are.
    Raw,
    /// A zero-value compressed tensor: `mask_words` bitmask words (little-endian), then the
    /// packed values.
    Compressed { mask_words: usize },
}

/// An offloaded tensor split across peers (and the host for what they could not take): the
/// destination-space table of the seed, and the route back.
#[derive(Debug)]
pub(crate) struct PeerCopy {
    shape: burn_backend::Shape,
    dtype: burn_backend::DType,
    payload: Payload,
    len: usize,
    pieces: Vec<Piece>,
    /// Bytes kept on the host, with their offset in the tensor.
    host: Option<(usize, Vec<u8>)>,
    pool: Arc<PeerPool>,
}

impl PeerCopy {
    /// Bytes held in host memory.
    pub fn host_bytes(&self) -> u64 {
        self.host.as_ref().map_or(0, |h| h.1.len() as u64)
    }

    /// Bytes held by peers.
    #[cfg(test)]
    pub fn peer_bytes(&self) -> u64 {
        self.pieces.iter().map(|p| p.len as u64).sum()
    }

    /// The pieces, in offset order.
    #[cfg(feature = "cuda")]
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Bytes of the whole tensor.
    #[cfg(feature = "cuda")]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The pool its pieces belong to.
    pub fn pool(&self) -> &PeerPool {
        &self.pool
    }

    /// Its shape and dtype.
    #[cfg(feature = "cuda")]
    pub fn meta(&self) -> (&burn_backend::Shape, burn_backend::DType) {
        (&self.shape, self.dtype)
    }

    /// The tensor, brought back from its peers ([`PeerPool::receive`]) and decompressed
    /// when it went compressed.
    pub fn receive(&self) -> Result<TensorData, ReceiveError> {
        let bytes = self.pool.receive(self)?;
        match self.payload {
            Payload::Raw => Ok(TensorData::from_bytes_vec(
                bytes,
                self.shape.clone(),
                self.dtype,
            )),
            Payload::Compressed { mask_words } => {
                let (mask, values) = bytes.split_at(4 * mask_words);
                let c = crate::codec::Compressed {
                    shape: self.shape.as_slice().to_vec(),
                    dtype: self.dtype,
                    bitmask: mask
                        .chunks_exact(4)
                        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                        .collect(),
                    values: values.to_vec(),
                };
                Ok(crate::codec::decompress(&c)?)
            }
        }
    }

    /// Bytes it moved off the device (to peers and host), compressed or not.
    pub fn stored_bytes(&self) -> u64 {
        self.len as u64
    }

    /// Whether it went compressed.
    pub fn compressed(&self) -> bool {
        matches!(self.payload, Payload::Compressed { .. })
    }
}

impl PeerPool {
    /// The pool of `specs`, or `None` when there are none. A device peer gets the link
    /// bandwidth `measure` finds for its ordinal when none was given, and its capacity capped
    /// at the free memory `measure` finds.
    pub fn new(
        specs: &[PeerSpec],
        measure: impl Fn(usize) -> Option<(f64, u64)>,
    ) -> Option<Arc<Self>> {
        if specs.is_empty() {
            return None;
        }
        let configured = specs.to_vec();
        let mut specs = configured.clone();
        for spec in &mut specs {
            if let Some(ordinal) = spec.device {
                let measured = measure(ordinal);
                if spec.bandwidth <= 0.0 {
                    spec.bandwidth = measured.map_or(1.0, |m| m.0);
                }
                if let Some((_, free)) = measured {
                    spec.capacity_bytes = spec.capacity_bytes.min(free);
                }
            }
        }
        Some(Arc::new(Self {
            configured,
            counters: specs.iter().map(|_| PeerCounters::default()).collect(),
            specs,
            fallbacks: AtomicU64::new(0),
        }))
    }

    /// Whether the peers are these.
    pub fn is(&self, specs: &[PeerSpec]) -> bool {
        self.configured == specs
    }

    /// What the advisor sees: each peer's free memory and link bandwidth.
    fn destinations(&self, excluded: &[usize]) -> Vec<Destination> {
        self.specs
            .iter()
            .zip(&self.counters)
            .enumerate()
            .map(|(i, (spec, c))| Destination {
                free_bytes: if excluded.contains(&i) {
                    0
                } else {
                    spec.capacity_bytes
                        .saturating_sub(c.used.load(Ordering::Acquire))
                },
                bandwidth: spec.bandwidth,
            })
            .collect()
    }

    /// The memory manager: takes `bytes` of peer `peer`'s space, or says it is full.
    fn reserve(&self, peer: usize, bytes: u64) -> bool {
        if crate::exec::faults::take(crate::exec::faults::Hook::PeerReserve) {
            return false;
        }
        let c = &self.counters[peer];
        let capacity = self.specs[peer].capacity_bytes;
        let taken = c
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + bytes <= capacity).then_some(used + bytes)
            });
        match taken {
            Ok(before) => {
                c.peak_used.fetch_max(before + bytes, Ordering::AcqRel);
                true
            }
            Err(_) => false,
        }
    }

    /// The coordinator: asks the advisor for the split of `len` bytes (in elements of `align`
    /// bytes; `host_bandwidth` for the fallback) and reserves each share with the memory
    /// manager; a peer that filled up meanwhile is left out and the advisor asked again.
    /// Returns `(peer, offset, bytes)` per piece, in offset order (the rest, from the last
    /// offset on, is the host's), or `None` when no peer takes any of it.
    fn plan(
        &self,
        len: usize,
        align: u64,
        host_bandwidth: f64,
    ) -> Option<Vec<(usize, usize, usize)>> {
        let room: u64 = self.destinations(&[]).iter().map(|d| d.free_bytes).sum();
        if room < len as u64 {
            // Some of it, or all, goes to the host for lack of peer room.
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
        let mut excluded = Vec::new();
        let shares = loop {
            let advice = advisor::advise(
                len as u64,
                align,
                None,
                &self.destinations(&excluded),
                Some(host_bandwidth),
            );
            let Advice::Offload { peers, .. } = advice else {
                return None;
            };
            if peers.is_empty() {
                return None;
            }
            let mut taken = Vec::new();
            let mut full = None;
            for &(peer, bytes) in &peers {
                if self.reserve(peer, bytes) {
                    taken.push((peer, bytes));
                } else {
                    full = Some(peer);
                    break;
                }
            }
            match full {
                None => break peers,
                Some(peer) => {
                    for (p, bytes) in taken {
                        self.release(p, bytes as usize);
                    }
                    excluded.push(peer);
                }
            }
        };
        let mut at = 0usize;
        Some(
            shares
                .into_iter()
                .map(|(peer, bytes)| {
                    let piece = (peer, at, bytes as usize);
                    at += bytes as usize;
                    piece
                })
                .collect(),
        )
    }

    /// Gives `bytes` of peer `peer`'s space back.
    fn release(&self, peer: usize, bytes: usize) {
        self.counters[peer]
            .used
            .fetch_sub(bytes as u64, Ordering::AcqRel);
    }

    /// Books a piece sent.
    fn note_sent(&self, peer: usize, bytes: usize, start: Instant) {
        let c = &self.counters[peer];
        c.sent_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        c.sent_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        c.pieces.fetch_add(1, Ordering::Relaxed);
    }

    /// Books a piece fetched.
    fn note_fetched(&self, peer: usize, bytes: usize, start: Instant) {
        let c = &self.counters[peer];
        c.fetched_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        c.fetched_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// Whether the peers are devices (copies between device buffers) rather than simulated.
    pub fn on_devices(&self) -> bool {
        self.specs.iter().all(|s| s.device.is_some())
    }

    /// Starts a new measurement: counts from zero, the peaks from what is held now.
    pub fn reset_counters(&self) {
        for c in &self.counters {
            let used = c.used.load(Ordering::Acquire);
            c.peak_used.store(used, Ordering::Release);
            for counter in [
                &c.sent_bytes,
                &c.sent_nanos,
                &c.fetched_bytes,
                &c.fetched_nanos,
                &c.pieces,
            ] {
                counter.store(0, Ordering::Relaxed);
            }
        }
        self.fallbacks.store(0, Ordering::Relaxed);
    }

    /// Offloads that put bytes on the host for lack of peer room.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// Each peer's figures.
    pub fn stats(&self) -> Vec<PeerStat> {
        self.specs
            .iter()
            .zip(&self.counters)
            .map(|(spec, c)| {
                let moved =
                    c.sent_bytes.load(Ordering::Relaxed) + c.fetched_bytes.load(Ordering::Relaxed);
                let nanos =
                    c.sent_nanos.load(Ordering::Relaxed) + c.fetched_nanos.load(Ordering::Relaxed);
                PeerStat {
                    name: spec.name.clone(),
                    capacity_bytes: spec.capacity_bytes,
                    held_bytes: c.used.load(Ordering::Relaxed),
                    peak_held_bytes: c.peak_used.load(Ordering::Relaxed),
                    sent_bytes: c.sent_bytes.load(Ordering::Relaxed),
                    fetched_bytes: c.fetched_bytes.load(Ordering::Relaxed),
                    pieces: c.pieces.load(Ordering::Relaxed),
                    bandwidth: if nanos == 0 {
                        0.0
                    } else {
                        moved as f64 / (nanos as f64 * 1e-9)
                    },
                }
            })
            .collect()
    }
}

mod backend;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod transmit;

pub(crate) use backend::{receive_backend, send_backend};

#[cfg(test)]
mod tests;
