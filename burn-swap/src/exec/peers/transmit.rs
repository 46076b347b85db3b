//! The transmitter of peer offload: pieces of a tensor copied to all their peers at once (one sender
//! per destination), and brought back by the route recorded at offload.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use burn_backend::TensorData;

use super::*;

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
        c: crate::codec::Compressed,
        host_bandwidth: f64,
    ) -> Result<PeerCopy, crate::codec::Compressed> {
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
        copy: impl Fn(
            usize,
            usize,
            usize,
        ) -> Result<PieceData, crate::exec::transfer_error::TransferError>
        + Sync,
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
        move_piece: impl Fn(
            usize,
            usize,
            usize,
        ) -> Result<PieceData, crate::exec::transfer_error::TransferError>
        + Sync,
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
    /// route recorded at offload, and reassembles the bytes; a piece that cannot be read back
    /// whole is an error naming it (the copy is untouched: it may be tried again). The
    /// pieces' space goes back to their peers when `copy` is dropped.
    pub(super) fn receive(&self, copy: &PeerCopy) -> Result<Vec<u8>, ReceiveError> {
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
        let results: Vec<Result<(), ReceiveError>> = std::thread::scope(|scope| {
            let workers: Vec<_> = slots
                .into_iter()
                .map(|(piece, slot)| (piece, scope.spawn(move || self.receive_piece(piece, slot))))
                .collect();
            workers
                .into_iter()
                .map(|(piece, worker)| {
                    worker.join().unwrap_or_else(|_| {
                        Err(piece_error(piece, "the read panicked".to_string()))
                    })
                })
                .collect()
        });
        results.into_iter().collect::<Result<(), _>>()?;
        Ok(out)
    }

    /// Brings one piece's bytes back into `slot` (its place in the tensor's bytes).
    fn receive_piece(&self, piece: &Piece, slot: &mut [u8]) -> Result<(), ReceiveError> {
        let start = Instant::now();
        let read = match &piece.data {
            PieceData::Host(bytes) => {
                let read = fill(slot, Ok(bytes.as_slice()), piece);
                pace(start, slot.len(), self.specs[piece.peer].bandwidth);
                read
            }
            // A device piece is brought back by the device route (see `cubecl_fast_path::peer_receive`,
            // `peers::receive_backend`); here, through the host, unpaced.
            #[cfg(feature = "cuda")]
            PieceData::Device(d) => {
                fill(slot, d.to_host().as_deref().map_err(String::clone), piece)
            }
            PieceData::Backend { tensor, read } => fill(
                slot,
                read(tensor.as_ref())
                    .as_deref()
                    .ok_or_else(|| "the inner backend refused the read".to_string()),
                piece,
            ),
        };
        if read.is_ok() {
            self.note_fetched(piece.peer, slot.len(), start);
        }
        read
    }
}

/// Copies a piece's bytes read back into its slot, when they were read and are whole.
fn fill(slot: &mut [u8], bytes: Result<&[u8], String>, piece: &Piece) -> Result<(), ReceiveError> {
    match bytes {
        Ok(bytes) if bytes.len() == slot.len() => {
            slot.copy_from_slice(bytes);
            Ok(())
        }
        Ok(bytes) => Err(piece_error(
            piece,
            format!("{} bytes came back", bytes.len()),
        )),
        Err(reason) => Err(piece_error(piece, reason)),
    }
}

/// The error naming `piece`.
fn piece_error(piece: &Piece, reason: String) -> ReceiveError {
    ReceiveError::Piece {
        peer: piece.peer,
        offset: piece.offset,
        len: piece.len,
        reason,
    }
}
