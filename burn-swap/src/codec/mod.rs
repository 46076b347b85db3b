//! Zero-value compression of tensors before they leave the
//! device, and decompression when they come back: the format and the CPU codec here, the
//! same format computed on the device by CubeCL kernels in [`kernels`]. Whether a tensor is
//! compressed is decided in `plan::compression`; the executor carries both out.
//!
//! # Format
//!
//! A tensor of `n` elements of `w` bytes becomes a [`Compressed`]: a **bitmask** of `n` bits
//! in little-endian `u32` words (bit `i % 32` of word `i / 32` is set when element `i` is
//! nonzero), and the **packed values**: the bytes of the nonzero elements, in element order.
//! An element is zero when all its bytes are zero: `-0.0` (sign bit set), NaNs with any
//! payload, infinities and denormals are nonzero and kept bit for bit. The format does not
//! depend on how the work was split: the CPU codec (`codec::cpu`) and the kernels produce the
//! same bytes.
//!
//! Sizes: `4 · ceil(n / 32) + w · nonzeros` bytes, against `w · n` raw; with a zero fraction
//! `s` the ratio raw / compressed tends to `w / (1/8 + (1 - s) · w)`. On dense data it
//! expands by `1 / (8 w)`, so `plan::compression` compresses only where it pays.

pub(crate) mod cpu;
pub mod kernels;

use burn_backend::{DType, TensorData};

/// A tensor's bytes after zero-value compression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compressed {
    /// Shape of the tensor.
    pub shape: Vec<usize>,
    /// Its dtype.
    pub dtype: DType,
    /// One bit per element, set for nonzero elements; `ceil(n / 32)` words.
    pub bitmask: Vec<u32>,
    /// The nonzero elements' bytes, in order.
    pub values: Vec<u8>,
}

impl Compressed {
    /// Bytes the compressed form occupies (bitmask and values).
    pub fn bytes(&self) -> u64 {
        (4 * self.bitmask.len() + self.values.len()) as u64
    }

    /// Elements of the tensor.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the tensor uncompressed.
    pub fn raw_bytes(&self) -> u64 {
        (self.len() * self.dtype.size()) as u64
    }
}

/// Why a tensor cannot go through the codec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The dtype has no fixed element width the codec handles (quantized tensors).
    #[error("zero-value compression does not handle dtype {0:?}")]
    Dtype(DType),
    /// The bytes do not match the shape and dtype.
    #[error("{bytes} bytes do not hold {elements} elements of {width} bytes")]
    Length {
        /// Bytes given.
        bytes: usize,
        /// Elements the shape holds.
        elements: usize,
        /// Bytes per element.
        width: usize,
    },
    /// A compressed form whose bitmask and values disagree.
    #[error("corrupt compressed tensor: {0}")]
    Corrupt(String),
    /// Host memory could not hold the result (an allocation of `bytes` failed).
    #[error("host memory could not hold {bytes} bytes")]
    HostAlloc {
        /// Bytes asked for.
        bytes: usize,
    },
}

/// The element width of a dtype the codec handles: 1, 2, 4 or 8 bytes.
pub fn width(dtype: DType) -> Result<usize, CodecError> {
    match dtype {
        DType::QFloat(_) => Err(CodecError::Dtype(dtype)),
        _ => match dtype.size() {
            w @ (1 | 2 | 4 | 8) => Ok(w),
            _ => Err(CodecError::Dtype(dtype)),
        },
    }
}

/// Compresses a tensor's data on the CPU.
pub fn compress(data: &TensorData) -> Result<Compressed, CodecError> {
    let w = width(data.dtype)?;
    let n = data.shape.iter().product::<usize>();
    if data.bytes.len() != n * w {
        return Err(CodecError::Length {
            bytes: data.bytes.len(),
            elements: n,
            width: w,
        });
    }
    let (bitmask, values) = cpu::compress(&data.bytes, w)?;
    Ok(Compressed {
        shape: data.shape.to_vec(),
        dtype: data.dtype,
        bitmask,
        values,
    })
}

/// Decompresses on the CPU, bit for bit.
pub fn decompress(c: &Compressed) -> Result<TensorData, CodecError> {
    let w = width(c.dtype)?;
    let n = c.len();
    if c.bitmask.len() != n.div_ceil(32) {
        return Err(CodecError::Corrupt(format!(
            "{} mask words for {n} elements",
            c.bitmask.len()
        )));
    }
    let ones: usize = c.bitmask.iter().map(|m| m.count_ones() as usize).sum();
    if ones * w != c.values.len() || (!n.is_multiple_of(32) && c.bitmask[n / 32] >> (n % 32) != 0) {
        return Err(CodecError::Corrupt(format!(
            "{ones} mask bits for {} value bytes",
            c.values.len()
        )));
    }
    let bytes = cpu::decompress(&c.bitmask, &c.values, n, w)?;
    Ok(TensorData::from_bytes(bytes, c.shape.clone(), c.dtype))
}

/// Bytes of the compressed form of `n` elements of `w` bytes with `nonzeros` nonzero.
pub fn compressed_bytes(n: usize, w: usize, nonzeros: usize) -> u64 {
    (4 * n.div_ceil(32) + w * nonzeros) as u64
}

/// The fraction of zero elements, estimated from up to `samples` elements spread evenly
/// (all of them when the tensor is smaller).
pub fn zero_fraction_sample(bytes: &[u8], w: usize, samples: usize) -> f64 {
    let n = bytes.len() / w.max(1);
    if n == 0 {
        return 0.0;
    }
    let step = n.div_ceil(samples.max(1)).max(1);
    let (mut seen, mut zeros) = (0usize, 0usize);
    let mut i = 0;
    while i < n {
        zeros += bytes[i * w..(i + 1) * w].iter().all(|&b| b == 0) as usize;
        seen += 1;
        i += step;
    }
    zeros as f64 / seen as f64
}

/// Measures the CPU codec's throughput (raw bytes per second, compress plus decompress) on
/// 1 MiB of `f32` with half of them zero, the fastest of three.
pub(crate) fn measure_cpu_codec() -> f64 {
    let n = 1 << 18;
    let values: Vec<f32> = (0..n)
        .map(|i| if i % 2 == 0 { 0.0 } else { i as f32 })
        .collect();
    let data = TensorData::new(values, [n]);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = std::time::Instant::now();
        if let Ok(c) = compress(&data) {
            let _ = decompress(&c);
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    (4 * n) as f64 / best.max(1e-9)
}

#[cfg(test)]
mod tests;
