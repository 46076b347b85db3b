//! SplitMix64: the crate's one source of reproducible pseudo-random bits (the genetic
//! planner's choices, the ordering stress test's delays), and the random tensors of the unit
//! tests. The same numbers on every machine and every run.

/// SplitMix64 (Steele, Lea and Flood): a 64-bit state advanced by the golden ratio and
/// mixed.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)`, from the top 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A number below `n` (below 1 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() <= p
    }
}

/// The first output of a generator seeded with `seed`: a stateless hash of a key.
pub(crate) fn mix(seed: u64) -> u64 {
    SplitMix64::new(seed).next_u64()
}

#[cfg(test)]
pub(crate) use tensors::random_tensor;

#[cfg(test)]
mod tensors {
    use super::SplitMix64 as Rng;
    use burn_backend::{DType, TensorData};

    /// Bit patterns that must survive: -0.0, NaNs with payloads, infinities, denormals, the
    /// smallest and largest values, per width.
    fn specials(w: usize) -> Vec<u64> {
        match w {
            2 => vec![
                0x8000, 0x7e01, 0xfe7f, 0x7c00, 0xfc00, 0x0001, 0x8001, 0x7bff, 0x7fc1,
            ],
            4 => vec![
                0x8000_0000,
                0x7fc0_0001,
                0xffa0_beef,
                0x7f80_0000,
                0xff80_0000,
                0x0000_0001,
                0x807f_ffff,
                0x7f7f_ffff,
            ],
            8 => vec![
                0x8000_0000_0000_0000,
                0x7ff8_0000_dead_beef,
                0x7ff0_0000_0000_0000,
                0x0000_0000_0000_0001,
                u64::MAX,
            ],
            _ => vec![0x80, 0xff, 0x01],
        }
    }

    /// A random tensor of `n` elements of `dtype` with about `zeros` of them zero and a few
    /// special values.
    pub(crate) fn random_tensor(rng: &mut Rng, dtype: DType, n: usize, zeros: f64) -> TensorData {
        let w = dtype.size();
        let special = specials(w);
        let mut bytes = Vec::with_capacity(n * w);
        for _ in 0..n {
            let value = if rng.unit() < zeros {
                0
            } else if rng.unit() < 0.05 {
                special[(rng.next_u64() % special.len() as u64) as usize]
            } else {
                // Random nonzero bits of the width.
                let mask = if w == 8 {
                    u64::MAX
                } else {
                    (1u64 << (8 * w)) - 1
                };
                (rng.next_u64() & mask).max(1)
            };
            bytes.extend_from_slice(&value.to_le_bytes()[..w]);
        }
        TensorData::from_bytes_vec(bytes, vec![n], dtype)
    }
}
