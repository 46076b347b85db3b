//! Seed 000 (CN114860461B), the memory manager and the transmitter of peer offload.
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

/// Where a piece's bytes are.
pub(crate) enum PieceData {
    /// In host memory (a simulated peer).
    Host(Vec<u8>),
    /// In a buffer of a peer CUDA device, allocated by that device's own allocator.
    #[cfg(feature = "cuda")]
    Device(super::cube::DeviceSlot),
    /// A tensor of the inner backend on the peer device (the generic route, `to_device`),
    /// and how to read its bytes back without knowing the backend here.
    Backend {
        tensor: Box<dyn core::any::Any + Send + Sync>,
        read: fn(&(dyn core::any::Any + Send + Sync)) -> Vec<u8>,
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
    pub fn receive(&self) -> Result<TensorData, crate::compress::CodecError> {
        let bytes = self.pool.receive(self);
        match self.payload {
            Payload::Raw => Ok(TensorData::from_bytes_vec(
                bytes,
                self.shape.clone(),
                self.dtype,
            )),
            Payload::Compressed { mask_words } => {
                let (mask, values) = bytes.split_at(4 * mask_words);
                let c = crate::compress::Compressed {
                    shape: self.shape.as_slice().to_vec(),
                    dtype: self.dtype,
                    bitmask: mask
                        .chunks_exact(4)
                        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                        .collect(),
                    values: values.to_vec(),
                };
                crate::compress::decompress(&c)
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

/// Sleeps until `bytes` would have crossed a link of `bandwidth` since `start` (a simulated
/// link; the configuration makes sure the bandwidth is positive and finite).
fn pace(start: Instant, bytes: usize, bandwidth: f64) {
    let seconds = bytes as f64 / bandwidth;
    if !(seconds.is_finite() && seconds > 0.0) {
        return;
    }
    let due = Duration::from_secs_f64(seconds);
    if let Some(rest) = due.checked_sub(start.elapsed()) {
        std::thread::sleep(rest);
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

    /// The coordinator and transmitter of an offload from host bytes (simulated peers):
    /// plans the split and sends the pieces to their peers at once, one sender per
    /// destination, each paced to its link. Gives the data back untouched when no peer takes
    /// any of it (the caller keeps it on the host).
    pub fn send(
        self: &Arc<Self>,
        data: TensorData,
        host_bandwidth: f64,
    ) -> Result<PeerCopy, TensorData> {
        let align = data.dtype.size().max(1) as u64;
        let (shape, dtype) = (data.shape.clone(), data.dtype);
        self.send_bytes(
            &data.bytes,
            align,
            shape,
            dtype,
            Payload::Raw,
            host_bandwidth,
        )
        .ok_or(data)
    }

    /// [`PeerPool::send`] for a compressed tensor (the codec chosen before the split): its
    /// bitmask and values travel as one buffer, split in whole words.
    pub fn send_compressed(
        self: &Arc<Self>,
        c: crate::compress::Compressed,
        host_bandwidth: f64,
    ) -> Result<PeerCopy, crate::compress::Compressed> {
        let mut bytes: Vec<u8> = Vec::with_capacity(c.bytes() as usize);
        bytes.extend(c.bitmask.iter().flat_map(|w| w.to_le_bytes()));
        bytes.extend_from_slice(&c.values);
        let payload = Payload::Compressed {
            mask_words: c.bitmask.len(),
        };
        let shape = burn_backend::Shape::from(c.shape.clone());
        self.send_bytes(&bytes, 4, shape, c.dtype, payload, host_bandwidth)
            .ok_or(c)
    }

    fn send_bytes(
        self: &Arc<Self>,
        source: &[u8],
        align: u64,
        shape: burn_backend::Shape,
        dtype: burn_backend::DType,
        payload: Payload,
        host_bandwidth: f64,
    ) -> Option<PeerCopy> {
        let len = source.len();
        if self.on_devices() {
            return None;
        }
        let offsets = self.plan(len, align, host_bandwidth)?;
        let _span =
            tracing::debug_span!("burn_swap::peer_send", bytes = len, pieces = offsets.len())
                .entered();
        let at = offsets.last().map_or(0, |&(_, o, b)| o + b);
        let host = (at < len).then(|| (at, source[at..].to_vec()));
        let pieces = self.transmit(&offsets, |peer, offset, bytes| {
            let start = Instant::now();
            let data = source[offset..offset + bytes].to_vec();
            pace(start, bytes, self.specs[peer].bandwidth);
            Ok(PieceData::Host(data))
        })?;
        Some(PeerCopy {
            shape,
            dtype,
            payload,
            len,
            pieces,
            host,
            pool: self.clone(),
        })
    }

    /// The coordinator and transmitter of an offload between devices: plans the split of a
    /// tensor of `len` bytes on the device and has `copy` move each piece (peer device index,
    /// offset, bytes) to its peer (one sender per destination, at once). Everything or
    /// nothing: when the peers cannot take all of it, or a copy fails (a peer out of
    /// memory), every piece is given back and `None` says to take the host route; the
    /// tensor's own buffer is never touched.
    pub fn send_device(
        self: &Arc<Self>,
        len: usize,
        align: u64,
        shape: burn_backend::Shape,
        dtype: burn_backend::DType,
        copy: impl Fn(usize, usize, usize) -> Result<PieceData, String> + Sync,
    ) -> Option<PeerCopy> {
        let offsets = self.plan(len, align, 1.0)?;
        let at = offsets.last().map_or(0, |&(_, o, b)| o + b);
        if at < len {
            for &(peer, _, bytes) in &offsets {
                self.release(peer, bytes);
            }
            return None;
        }
        let _span = tracing::debug_span!(
            "burn_swap::peer_send_device",
            bytes = len,
            pieces = offsets.len()
        )
        .entered();
        let pieces = self.transmit(&offsets, |peer, offset, bytes| {
            copy(self.specs[peer].device.unwrap_or(0), offset, bytes)
        })?;
        Some(PeerCopy {
            shape,
            dtype,
            payload: Payload::Raw,
            len,
            pieces,
            host: None,
            pool: self.clone(),
        })
    }

    /// The transmitter's send: each planned piece (peer, offset, bytes) moved by
    /// `move_piece` on a sender of its own, all at once, and booked. All or nothing: when a
    /// move fails (a peer out of memory), every piece is given back (the sent ones as they
    /// drop, the others' reservations here), the fallback counted, and `None` returned.
    fn transmit(
        self: &Arc<Self>,
        offsets: &[(usize, usize, usize)],
        move_piece: impl Fn(usize, usize, usize) -> Result<PieceData, String> + Sync,
    ) -> Option<Vec<Piece>> {
        let move_piece = &move_piece;
        let results: Vec<Result<Piece, (usize, usize)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = offsets
                .iter()
                .map(|&(peer, offset, bytes)| {
                    scope.spawn(move || {
                        let start = Instant::now();
                        let moved = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            move_piece(peer, offset, bytes)
                        }));
                        match moved {
                            Ok(Ok(data)) => {
                                self.note_sent(peer, bytes, start);
                                Ok(Piece {
                                    peer,
                                    offset,
                                    len: bytes,
                                    data,
                                    pool: self.clone(),
                                })
                            }
                            _ => Err((peer, bytes)),
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .zip(offsets)
                .map(|(h, &(peer, _, bytes))| h.join().unwrap_or(Err((peer, bytes))))
                .collect()
        });
        if results.iter().any(Result::is_err) {
            for r in &results {
                if let Err((peer, bytes)) = r {
                    self.release(*peer, *bytes);
                }
            }
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(results.into_iter().filter_map(Result::ok).collect())
    }

    /// Books the fetch of a device piece (the copy itself is the caller's).
    pub fn note_device_fetch(&self, peer: usize, bytes: usize, start: Instant) {
        self.note_fetched(peer, bytes, start);
    }

    /// The transmitter of a fetch: brings every piece back from its peer at once, by the
    /// route recorded at offload, and reassembles the bytes. The pieces' space goes back to
    /// their peers when `copy` is dropped.
    fn receive(&self, copy: &PeerCopy) -> Vec<u8> {
        let _span = tracing::debug_span!(
            "burn_swap::peer_receive",
            bytes = copy.len,
            pieces = copy.pieces.len()
        )
        .entered();
        let mut out = vec![0u8; copy.len];
        if let Some((offset, bytes)) = &copy.host {
            out[*offset..*offset + bytes.len()].copy_from_slice(bytes);
        }
        // Disjoint slices of the output, one per piece, filled at once.
        let mut slots: Vec<(&Piece, &mut [u8])> = Vec::with_capacity(copy.pieces.len());
        let mut rest: &mut [u8] = &mut out;
        let mut at = 0usize;
        let mut pieces: Vec<&Piece> = copy.pieces.iter().collect();
        pieces.sort_by_key(|p| p.offset);
        for piece in pieces {
            let (_, tail) = rest.split_at_mut(piece.offset - at);
            let (slot, tail) = tail.split_at_mut(piece.len);
            slots.push((piece, slot));
            rest = tail;
            at = piece.offset + piece.len;
        }
        std::thread::scope(|scope| {
            for (piece, slot) in slots {
                scope.spawn(move || {
                    let start = Instant::now();
                    match &piece.data {
                        PieceData::Host(bytes) => {
                            slot.copy_from_slice(bytes);
                            pace(start, slot.len(), self.specs[piece.peer].bandwidth);
                        }
                        // A device piece is brought back by the device route (see
                        // `cube::peer_receive`, `peers::receive_backend`); here, through the
                        // host, unpaced.
                        #[cfg(feature = "cuda")]
                        PieceData::Device(d) => slot.copy_from_slice(&d.to_host()),
                        PieceData::Backend { tensor, read } => {
                            slot.copy_from_slice(&read(tensor.as_ref()))
                        }
                    }
                    self.note_fetched(piece.peer, slot.len(), start);
                });
            }
        });
        out
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

/// The generic route of device peers (any backend, Burn's `to_device`): the tensor flattened
/// and sliced into the advisor's pieces on its device, each moved to its peer device with
/// `to_device` (at once, one sender per destination). `None`: not a float tensor, or the peers
/// could not take all of it (the caller takes the host route).
pub(crate) fn send_backend<B: burn_ir::BackendIr>(
    handle: B::Handle,
    shape: &burn_backend::Shape,
    dtype: burn_backend::DType,
    home: &B::Device,
    pool: &Arc<PeerPool>,
) -> Option<PeerCopy> {
    use burn_backend::Device;
    if !dtype.is_float() {
        return None;
    }
    let width = dtype.size().max(1);
    let n = shape.num_elements();
    let flat = B::float_reshape(
        B::float_tensor(burn_ir::TensorHandle {
            handle,
            shape: shape.clone(),
        }),
        burn_backend::Shape::new([n]),
    );
    let home_id = home.to_id();
    pool.send_device(
        n * width,
        width as u64,
        shape.clone(),
        dtype,
        |index, offset, bytes| {
            let (start, end) = (offset / width, (offset + bytes) / width);
            let piece = B::float_slice(
                flat.clone(),
                &[burn_backend::Slice::new(
                    start as isize,
                    Some(end as isize),
                    1,
                )],
            );
            let index = u16::try_from(index).map_err(|_| format!("device index {index}"))?;
            let peer = B::Device::from_id(burn_backend::DeviceId::new(home_id.type_id, index));
            let moved = B::float_to_device(piece, &peer);
            Ok(PieceData::Backend {
                tensor: Box::new(moved),
                read: read_float::<B>,
            })
        },
    )
}

/// A piece's bytes read back through the backend (for reads of an offloaded tensor).
fn read_float<B: burn_ir::BackendIr>(tensor: &(dyn core::any::Any + Send + Sync)) -> Vec<u8> {
    tensor
        .downcast_ref::<B::FloatTensorPrimitive>()
        .and_then(|t| burn_std::reader::try_read_sync(B::float_into_data(t.clone())))
        .and_then(Result::ok)
        .map(|data| data.bytes.to_vec())
        .unwrap_or_default()
}

/// The reverse route of [`send_backend`]: every piece moved back to `home` with
/// `to_device`, in offset order, concatenated and given the tensor's shape. `None` when the
/// pieces are not the generic route's.
pub(crate) fn receive_backend<B: burn_ir::BackendIr>(
    copy: &PeerCopy,
    home: &B::Device,
) -> Option<B::FloatTensorPrimitive> {
    let mut pieces: Vec<&Piece> = copy.pieces.iter().collect();
    pieces.sort_by_key(|p| p.offset);
    let mut parts = Vec::with_capacity(pieces.len());
    for piece in pieces {
        let PieceData::Backend { tensor, .. } = &piece.data else {
            return None;
        };
        let tensor = tensor.downcast_ref::<B::FloatTensorPrimitive>()?.clone();
        let start = Instant::now();
        parts.push(B::float_to_device(tensor, home));
        copy.pool.note_device_fetch(piece.peer, piece.len, start);
    }
    let flat = if parts.len() == 1 {
        parts.pop()?
    } else {
        B::float_cat(parts, 0)
    };
    Some(B::float_reshape(flat, copy.shape.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> TensorData {
        let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 3.0).collect();
        TensorData::new(values, [n])
    }

    #[test]
    fn split_sent_and_reassembled_bit_for_bit() {
        let pool = PeerPool::new(
            &[
                PeerSpec::simulated("a", 1 << 20, 40e9),
                PeerSpec::simulated("b", 1 << 20, 20e9),
                PeerSpec::simulated("c", 1 << 20, 20e9),
            ],
            |_| None,
        )
        .unwrap();
        let original = data(10_000);
        let copy = pool
            .send(original.clone(), 1e9)
            .expect("the peers have room");
        assert_eq!(copy.host_bytes(), 0);
        assert_eq!(copy.peer_bytes(), 40_000);
        let stats = pool.stats();
        // 2:1:1 by bandwidth.
        assert_eq!(
            stats.iter().map(|s| s.held_bytes).collect::<Vec<_>>(),
            vec![20_000, 10_000, 10_000]
        );
        let back = copy.receive().unwrap();
        assert_eq!(back, original);
        drop(copy);
        assert!(pool.stats().iter().all(|s| s.held_bytes == 0));
        assert!(pool.stats().iter().all(|s| s.sent_bytes == s.fetched_bytes));
    }

    #[test]
    fn a_full_peer_falls_back_without_loss() {
        let pool = PeerPool::new(
            &[
                PeerSpec::simulated("small", 8_000, 50e9),
                PeerSpec::simulated("smaller", 4_000, 50e9),
            ],
            |_| None,
        )
        .unwrap();
        // 40 000 bytes: 8 000 and 4 000 on the peers, 28 000 on the host.
        let first = pool.send(data(10_000), 1e9).unwrap();
        assert_eq!((first.peer_bytes(), first.host_bytes()), (12_000, 28_000));
        assert_eq!(pool.fallbacks(), 1);
        // Both full now: the next one stays on the host, whole and untouched.
        let second = data(500);
        let back = pool.send(second.clone(), 1e9).unwrap_err();
        assert_eq!(back, second);
        assert_eq!(pool.fallbacks(), 2);
        assert_eq!(first.receive().unwrap(), data(10_000));
        drop(first);
        // Room again.
        assert!(pool.send(data(500), 1e9).is_ok());
    }

    #[test]
    fn compressed_tensors_travel_compressed_and_come_back_bit_for_bit() {
        let pool = PeerPool::new(
            &[
                PeerSpec::simulated("a", 1 << 20, 30e9),
                PeerSpec::simulated("b", 1 << 20, 10e9),
            ],
            |_| None,
        )
        .unwrap();
        // ReLU-like: every other element zero (and one -0.0, which must survive).
        let mut values: Vec<f32> = (0..4096)
            .map(|i| if i % 2 == 0 { 0.0 } else { i as f32 * 0.5 })
            .collect();
        values[10] = -0.0;
        let original = TensorData::new(values, [64, 64]);
        let c = crate::compress::compress(&original).unwrap();
        let stored = c.bytes();
        let copy = pool.send_compressed(c, 1e9).unwrap();
        assert!(copy.compressed());
        assert_eq!(copy.stored_bytes(), stored);
        assert!(stored < original.bytes.len() as u64);
        let sent: Vec<u64> = pool.stats().iter().map(|s| s.sent_bytes).collect();
        assert_eq!(sent.iter().sum::<u64>(), stored);
        assert!(sent[0] > 2 * sent[1], "{sent:?}");
        let back = copy.receive().unwrap();
        assert_eq!(back.as_bytes(), original.as_bytes());
    }

    #[test]
    fn transfers_are_paced_to_the_link() {
        // 4 MB over a 1 GB/s link: at least 4 ms each way.
        let pool = PeerPool::new(&[PeerSpec::simulated("slow", 8 << 20, 1e9)], |_| None).unwrap();
        let start = Instant::now();
        let copy = pool.send(data(1_000_000), 1.0).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(4));
        let start = Instant::now();
        let _ = copy.receive().unwrap();
        assert!(start.elapsed() >= Duration::from_millis(4));
        let bandwidth = pool.stats()[0].bandwidth;
        assert!(bandwidth <= 1.05e9, "{bandwidth}");
    }
}
