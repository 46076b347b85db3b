//! Deterministic synthetic data.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// A small xorshift generator: the same numbers on every machine.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from a seed (any value, zero included).
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `[-1, 1)`.
    pub fn next_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// `n` values uniform in `[-scale, scale)`.
    pub fn vec_f32(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next_f32() * scale).collect()
    }
}

/// Inputs of shape `dims` uniform in `[-1, 1)` from `seed`, in the device's default float
/// type, and one label in `0..classes` per row (from the next draws of the same seed's
/// neighbour).
pub fn labelled<B: Backend, const D: usize>(
    seed: u64,
    dims: [usize; D],
    classes: usize,
    device: &B::Device,
) -> (Tensor<B, D>, Tensor<B, 1, Int>) {
    let n = dims.iter().product();
    let x = Tensor::from_data(
        TensorData::new(XorShift::new(seed).vec_f32(n, 1.0), dims),
        device,
    );
    let y: Vec<i64> = XorShift::new(seed + 1)
        .vec_f32(dims[0], 1.0)
        .iter()
        .map(|v| (((v + 1.0) / 2.0 * classes as f32) as i64).min(classes as i64 - 1))
        .collect();
    (x, Tensor::from_data(TensorData::new(y, [dims[0]]), device))
}

/// A regression batch: inputs `[batch, d_in]` and targets `[batch, d_out]`, where the targets
/// are a fixed nonlinear function of the inputs (so that the loss goes down). Steps cycle
/// through four batches.
pub fn regression_batch(
    seed: u64,
    step: usize,
    batch: usize,
    d_in: usize,
    d_out: usize,
) -> (TensorData, TensorData) {
    let mut rng = XorShift::new(seed ^ ((step % 4) as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let x = rng.vec_f32(batch * d_in, 1.0);
    let y: Vec<f32> = (0..batch * d_out)
        .map(|i| {
            let (row, col) = (i / d_out, i % d_out);
            let a = x[row * d_in + col % d_in];
            let b = x[row * d_in + (col * 7 + 3) % d_in];
            (a * 3.0).sin() + a * b
        })
        .collect();
    (
        TensorData::new(x, [batch, d_in]),
        TensorData::new(y, [batch, d_out]),
    )
}

/// An image classification batch: images `[batch, channels, size, size]` and class labels,
/// where the class is the quadrant with the brightest mean (so that it can be learnt).
pub fn image_batch(
    seed: u64,
    step: usize,
    batch: usize,
    channels: usize,
    size: usize,
    classes: usize,
) -> (TensorData, TensorData) {
    let mut rng = XorShift::new(seed ^ 0x5bd1_e995 ^ (step as u64).wrapping_mul(0x9e37_79b9));
    let pixels = rng.vec_f32(batch * channels * size * size, 1.0);
    let half = size / 2;
    let labels: Vec<i64> = (0..batch)
        .map(|b| {
            let mut sums = [0f32; 4];
            for c in 0..channels {
                for y in 0..size {
                    for x in 0..size {
                        let q = (y >= half) as usize * 2 + (x >= half) as usize;
                        sums[q] += pixels[((b * channels + c) * size + y) * size + x];
                    }
                }
            }
            let best = (0..4)
                .max_by(|&i, &j| sums[i].total_cmp(&sums[j]))
                .unwrap_or(0);
            (best % classes) as i64
        })
        .collect();
    (
        TensorData::new(pixels, [batch, channels, size, size]),
        TensorData::new(labels, [batch]),
    )
}

/// The text corpus shipped with the repository (`harness/src/corpus.txt`, beside this reader),
/// tokenised bytewise.
pub const CORPUS: &str = include_str!("corpus.txt");

/// A next-byte prediction batch from `corpus`: inputs `[batch, seq]` (byte values) and
/// targets `[batch * seq]` (the byte after each input), from windows at positions drawn
/// from `seed` and `step`.
pub fn text_batch(
    corpus: &[u8],
    seed: u64,
    step: usize,
    batch: usize,
    seq: usize,
) -> (TensorData, TensorData) {
    let mut rng = XorShift::new(seed ^ (step as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let span = corpus.len().saturating_sub(seq + 1).max(1);
    let mut inputs = Vec::with_capacity(batch * seq);
    let mut targets = Vec::with_capacity(batch * seq);
    for _ in 0..batch {
        let start = (rng.next_u64() % span as u64) as usize;
        for k in 0..seq {
            inputs.push(corpus[(start + k) % corpus.len()] as i64);
            targets.push(corpus[(start + k + 1) % corpus.len()] as i64);
        }
    }
    (
        TensorData::new(inputs, [batch, seq]),
        TensorData::new(targets, [batch * seq]),
    )
}
