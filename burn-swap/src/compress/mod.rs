//! Seed 002 (claims 7, 9, 10): zero-value compression of tensors before they leave the
//! device, and decompression when they come back.
//!
//! # Format
//!
//! A tensor of `n` elements of `w` bytes becomes a [`Compressed`]: a **bitmask** of `n` bits
//! in little-endian `u32` words (bit `i % 32` of word `i / 32` is set when element `i` is
//! nonzero), and the **packed values**: the bytes of the nonzero elements, in element order.
//! An element is zero when all its bytes are zero: `-0.0` (sign bit set), NaNs with any
//! payload, infinities and denormals are nonzero and kept bit for bit. The format does not
//! depend on how the work was split: the CPU codec (`compress::cpu`) and the kernels produce the
//! same bytes.
//!
//! Sizes: `4 · ceil(n / 32) + w · nonzeros` bytes, against `w · n` raw; with a zero fraction
//! `s` the ratio raw / compressed tends to `w / (1/8 + (1 - s) · w)`. On dense data it
//! expands by `1 / (8 w)`, so [`Decision`] compresses only when it pays.

pub(crate) mod cpu;

use burn_backend::{DType, TensorData};
use serde::{Deserialize, Serialize};

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
    let (bitmask, values) = cpu::compress(&data.bytes, w);
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
    let bytes = cpu::decompress(&c.bitmask, &c.values, n, w);
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

/// When compression is used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Compression {
    /// Never.
    Off,
    /// When the compressed form is at most `max_ratio` of the raw bytes (estimated from a
    /// sample of the tensor, then checked on the result: a tensor that would not shrink is
    /// moved raw).
    On {
        /// Largest compressed / raw size accepted, in `(0, 1]`.
        max_ratio: f64,
    },
    /// [`Compression::On`], and only when compressing, moving and decompressing is predicted
    /// faster than moving raw, at the measured link bandwidth and codec throughput.
    Auto {
        /// Largest compressed / raw size accepted, in `(0, 1]`.
        max_ratio: f64,
    },
}

impl Compression {
    /// The default size threshold: compress when it saves at least a fifth.
    pub const DEFAULT_MAX_RATIO: f64 = 0.8;

    /// The name used in `BURN_SWAP_COMPRESS`.
    pub fn name(&self) -> &'static str {
        match self {
            Compression::Off => "off",
            Compression::On { .. } => "on",
            Compression::Auto { .. } => "auto",
        }
    }
}

/// The inputs of the per-tensor decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Elements.
    pub elements: usize,
    /// Bytes per element.
    pub width: usize,
    /// Estimated fraction of zero elements.
    pub zero_fraction: f64,
    /// Link bandwidth in bytes per second (one direction), if measured.
    pub link_bandwidth: Option<f64>,
    /// Codec throughput in raw bytes per second (compress plus decompress), if measured.
    pub codec_bandwidth: Option<f64>,
}

impl Decision {
    /// Raw bytes.
    pub fn raw(&self) -> f64 {
        (self.elements * self.width) as f64
    }

    /// Predicted compressed bytes.
    pub fn predicted(&self) -> f64 {
        let nonzeros = (1.0 - self.zero_fraction) * self.elements as f64;
        4.0 * self.elements.div_ceil(32) as f64 + nonzeros * self.width as f64
    }

    /// Whether to compress under `policy`: a pure function of the estimate.
    pub fn pays(&self, policy: Compression) -> bool {
        let ratio = self.predicted() / self.raw().max(1.0);
        match policy {
            Compression::Off => false,
            Compression::On { max_ratio } => self.elements > 0 && ratio <= max_ratio,
            Compression::Auto { max_ratio } => {
                if self.elements == 0 || ratio > max_ratio {
                    return false;
                }
                match (self.link_bandwidth, self.codec_bandwidth) {
                    (Some(link), Some(codec)) => {
                        // Both ways: raw over the link, against codec time plus the smaller
                        // transfer.
                        let raw = self.raw();
                        2.0 * raw / link >= raw / codec + 2.0 * self.predicted() / link
                    }
                    _ => true,
                }
            }
        }
    }
}

/// What the offload path needs to decide per tensor: the mode and the measured rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Policy {
    pub mode: Compression,
    /// Link bandwidth, bytes per second (the slower direction).
    pub link_bandwidth: Option<f64>,
    /// Codec throughput in raw bytes per second (compress plus decompress).
    pub codec_bandwidth: Option<f64>,
}

/// Elements sampled to estimate a tensor's zero fraction.
const SAMPLES: usize = 4096;

/// Compresses `data` when `policy` says it pays (from a sample of its zero fraction) and
/// the result is smaller; returns the data as it is otherwise. Also returns the nanoseconds
/// spent compressing (zero when it was not tried).
pub(crate) fn pack(data: TensorData, policy: &Policy) -> (crate::exec::residency::HostCopy, u64) {
    use crate::exec::residency::HostCopy;
    if policy.mode == Compression::Off {
        return (HostCopy::Raw(data), 0);
    }
    let Ok(w) = width(data.dtype) else {
        return (HostCopy::Raw(data), 0);
    };
    let start = std::time::Instant::now();
    let decision = Decision {
        elements: data.bytes.len() / w,
        width: w,
        zero_fraction: zero_fraction_sample(&data.bytes, w, SAMPLES),
        link_bandwidth: policy.link_bandwidth,
        codec_bandwidth: policy.codec_bandwidth,
    };
    if !decision.pays(policy.mode) {
        return (HostCopy::Raw(data), start.elapsed().as_nanos() as u64);
    }
    let _span = tracing::debug_span!("burn_swap::compress", bytes = data.bytes.len()).entered();
    match compress(&data) {
        Ok(c) if c.bytes() < data.bytes.len() as u64 => {
            (HostCopy::Compressed(c), start.elapsed().as_nanos() as u64)
        }
        _ => (HostCopy::Raw(data), start.elapsed().as_nanos() as u64),
    }
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
