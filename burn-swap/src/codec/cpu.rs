//! The CPU codec, used on the generic path.
//!
//! Compression walks elements in groups of 32 (one mask word). Each element is written to
//! the output at the current position whether or not it is zero, and the position advances
//! by the element's width only when it is nonzero: no branch per element. Decompression
//! writes each mask word's set bits (found with `trailing_zeros`) into a zeroed buffer. Large
//! tensors are split into parts of whole mask words, one per thread; the parts' values are
//! concatenated in order (compression) or located by a prefix sum of the parts' bit counts
//! (decompression), so the result is the same bytes as a single pass.

use burn_std::Bytes;

use super::CodecError;

/// An empty vector with room for `n` elements of `T`, or the typed error when host memory
/// cannot hold them (the allocation is tried, not assumed: a full host is an error, not an
/// abort).
fn reserved<T>(n: usize) -> Result<Vec<T>, CodecError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| CodecError::HostAlloc {
        bytes: n.saturating_mul(size_of::<T>()),
    })?;
    Ok(v)
}

/// `n` zeroed elements of `T` (see [`reserved`]).
fn zeroed<T: bytemuck::Zeroable + Clone>(n: usize) -> Result<Vec<T>, CodecError> {
    let mut v = reserved(n)?;
    v.resize(n, T::zeroed());
    Ok(v)
}

/// Tensors of at least this many bytes are split over threads.
const PARALLEL_BYTES: usize = 4 << 20;

fn threads_for(bytes: usize) -> usize {
    if bytes < PARALLEL_BYTES {
        return 1;
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(bytes / (PARALLEL_BYTES / 4))
        .max(1)
}

/// Splits `n` elements into `parts` ranges of whole mask words.
fn split(n: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    let words = n.div_ceil(32);
    let per = words.div_ceil(parts.max(1)).max(1);
    (0..words)
        .step_by(per)
        .map(|w| (w * 32)..((w + per) * 32).min(n))
        .collect()
}

/// One element width's codec; `W` bytes per element.
#[inline]
fn is_zero<const W: usize>(e: &[u8]) -> bool {
    // Compared as an integer of the element's width: the compiler emits one load and compare.
    match W {
        1 => e[0] == 0,
        2 => u16::from_ne_bytes([e[0], e[1]]) == 0,
        4 => u32::from_ne_bytes([e[0], e[1], e[2], e[3]]) == 0,
        _ => e.iter().fold(0u8, |a, &b| a | b) == 0,
    }
}

fn compress_part<const W: usize>(bytes: &[u8]) -> Result<(Vec<u32>, Vec<u8>), CodecError> {
    let n = bytes.len() / W;
    let mut masks = zeroed::<u32>(n.div_ceil(32))?;
    let mut out = zeroed::<u8>(n * W)?;
    let mut pos = 0;
    for (group, mask) in bytes.chunks(32 * W).zip(masks.iter_mut()) {
        let mut m = 0u32;
        for (j, e) in group.chunks_exact(W).enumerate() {
            let nonzero = !is_zero::<W>(e);
            // `pos <= j`-th element's offset, so the write stays inside `out`.
            out[pos..pos + W].copy_from_slice(e);
            pos += W * nonzero as usize;
            m |= (nonzero as u32) << j;
        }
        *mask = m;
    }
    out.truncate(pos);
    Ok((masks, out))
}

fn decompress_part<const W: usize>(masks: &[u32], values: &[u8], out: &mut [u8]) {
    let mut pos = 0;
    for (chunk, &mask) in out.chunks_mut(32 * W).zip(masks) {
        match mask {
            // A word of zeros: the output is zeroed already.
            0 => {}
            // A dense word: one copy of 32 elements.
            u32::MAX if chunk.len() == 32 * W => {
                chunk.copy_from_slice(&values[pos..pos + 32 * W]);
                pos += 32 * W;
            }
            _ => {
                let count = mask.count_ones() as usize * W;
                let src = &values[pos..pos + count];
                let (mut m, mut k) = (mask, 0);
                while m != 0 {
                    let j = m.trailing_zeros() as usize;
                    let e: &[u8; W] = src[k..k + W].try_into().expect("W bytes");
                    chunk[j * W..(j + 1) * W].copy_from_slice(e);
                    k += W;
                    m &= m - 1;
                }
                pos += count;
            }
        }
    }
}

fn compress_w<const W: usize>(bytes: &[u8]) -> Result<(Vec<u32>, Vec<u8>), CodecError> {
    let n = bytes.len() / W;
    let threads = threads_for(bytes.len());
    if threads == 1 {
        return compress_part::<W>(bytes);
    }
    let parts = split(n, threads);
    let results: Vec<(Vec<u32>, Vec<u8>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .iter()
            .map(|r| {
                let slice = &bytes[r.start * W..r.end * W];
                scope.spawn(move || compress_part::<W>(slice))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a codec thread does not panic"))
            .collect::<Result<_, _>>()
    })?;
    let mut masks = reserved::<u32>(n.div_ceil(32))?;
    let mut values = reserved::<u8>(results.iter().map(|r| r.1.len()).sum())?;
    for (m, v) in results {
        masks.extend_from_slice(&m);
        values.extend_from_slice(&v);
    }
    Ok((masks, values))
}

/// Decompresses into a buffer of elements of `T` (`W` bytes), so that the result is aligned
/// for its dtype as allocated and needs no copy to become a tensor's bytes.
fn decompress_w<T: bytemuck::Pod + Send + Sync, const W: usize>(
    masks: &[u32],
    values: &[u8],
    n: usize,
) -> Result<Bytes, CodecError> {
    let mut elems = zeroed::<T>(n)?;
    let out: &mut [u8] = bytemuck::cast_slice_mut(&mut elems);
    let threads = threads_for(n * W);
    if threads == 1 {
        decompress_part::<W>(masks, values, out);
        return Ok(Bytes::from_elems(elems));
    }
    let parts = split(n, threads);
    std::thread::scope(|scope| {
        let mut rest = out;
        let mut value_at = 0;
        for r in &parts {
            let (mine, tail) = rest.split_at_mut((r.end - r.start) * W);
            rest = tail;
            let words = &masks[r.start / 32..r.end.div_ceil(32)];
            let count: usize = words.iter().map(|m| m.count_ones() as usize).sum();
            let vals = &values[value_at..value_at + count * W];
            value_at += count * W;
            scope.spawn(move || decompress_part::<W>(words, vals, mine));
        }
    });
    Ok(Bytes::from_elems(elems))
}

/// Compresses `bytes` of elements of `w` bytes (1, 2, 4 or 8) into a bitmask and the
/// nonzero elements' bytes.
/// Fails only when host memory cannot hold the result.
pub fn compress(bytes: &[u8], w: usize) -> Result<(Vec<u32>, Vec<u8>), CodecError> {
    match w {
        1 => compress_w::<1>(bytes),
        2 => compress_w::<2>(bytes),
        4 => compress_w::<4>(bytes),
        8 => compress_w::<8>(bytes),
        _ => unreachable!("widths are checked by `codec::width`"),
    }
}

/// Decompresses `n` elements of `w` bytes; the caller has checked that the bitmask's bits
/// match the values. Fails only when host memory cannot hold the result.
pub fn decompress(masks: &[u32], values: &[u8], n: usize, w: usize) -> Result<Bytes, CodecError> {
    match w {
        1 => decompress_w::<u8, 1>(masks, values, n),
        2 => decompress_w::<u16, 2>(masks, values, n),
        4 => decompress_w::<u32, 4>(masks, values, n),
        8 => decompress_w::<u64, 8>(masks, values, n),
        _ => unreachable!("widths are checked by `codec::width`"),
    }
}

/// One pass without threads, for the tests that compare it with the split one.
#[cfg(test)]
pub fn compress_part_for_test(bytes: &[u8], w: usize) -> Result<(Vec<u32>, Vec<u8>), CodecError> {
    match w {
        1 => compress_part::<1>(bytes),
        2 => compress_part::<2>(bytes),
        4 => compress_part::<4>(bytes),
        _ => compress_part::<8>(bytes),
    }
}

#[cfg(test)]
mod tests {
    /// An allocation host memory cannot hold is the typed error naming the bytes, not an
    /// abort.
    #[test]
    fn a_refused_host_allocation_is_a_typed_error() {
        let n = usize::MAX / 4;
        match super::zeroed::<u32>(n) {
            Err(super::CodecError::HostAlloc { bytes }) => assert_eq!(bytes, usize::MAX - 3),
            other => panic!("expected HostAlloc, got {:?}", other.map(|v| v.len())),
        }
        assert_eq!(super::zeroed::<u16>(3).unwrap(), vec![0; 3]);
    }
}
