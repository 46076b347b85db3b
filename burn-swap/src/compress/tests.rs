//! Property tests of the CPU codec: random tensors over dtypes, lengths and zero fractions,
//! special values included, round-trip bit for bit.

use super::*;

/// SplitMix64: reproducible random bits.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

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
fn tensor(rng: &mut Rng, dtype: DType, n: usize, zeros: f64) -> TensorData {
    let w = dtype.size();
    let special = specials(w);
    let mut bytes = Vec::with_capacity(n * w);
    for _ in 0..n {
        let value = if rng.unit() < zeros {
            0
        } else if rng.unit() < 0.05 {
            special[(rng.next() % special.len() as u64) as usize]
        } else {
            // Random nonzero bits of the width.
            let mask = if w == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * w)) - 1
            };
            (rng.next() & mask).max(1)
        };
        bytes.extend_from_slice(&value.to_le_bytes()[..w]);
    }
    TensorData::from_bytes_vec(bytes, vec![n], dtype)
}

const DTYPES: [DType; 10] = [
    DType::F64,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I64,
    DType::I32,
    DType::I16,
    DType::I8,
    DType::U8,
    DType::U32,
];

#[test]
fn round_trips_bit_for_bit_over_dtypes_lengths_and_zero_fractions() {
    let mut rng = Rng(7);
    for dtype in DTYPES {
        for n in [0, 1, 2, 31, 32, 33, 63, 64, 65, 1000, 4097] {
            for zeros in [0.0, 0.1, 0.5, 0.9, 1.0] {
                let data = tensor(&mut rng, dtype, n, zeros);
                let c = compress(&data).unwrap();
                assert_eq!(c.bitmask.len(), n.div_ceil(32));
                let nonzeros = data
                    .bytes
                    .chunks_exact(dtype.size())
                    .filter(|e| e.iter().any(|&b| b != 0))
                    .count();
                assert_eq!(c.values.len(), nonzeros * dtype.size());
                assert_eq!(c.bytes(), compressed_bytes(n, dtype.size(), nonzeros));
                let back = decompress(&c).unwrap();
                assert_eq!(back.dtype, dtype);
                assert_eq!(back.shape, data.shape);
                assert_eq!(
                    &back.bytes[..],
                    &data.bytes[..],
                    "{dtype:?} n={n} zeros={zeros}"
                );
            }
        }
    }
}

#[test]
fn large_tensors_split_over_threads_give_the_same_bytes() {
    // Above the parallel threshold, with a length that is not a multiple of a mask word.
    let mut rng = Rng(11);
    for (dtype, zeros) in [(DType::F32, 0.5), (DType::F16, 0.9), (DType::I64, 0.1)] {
        let n = (5 << 20) / dtype.size() + 7;
        let data = tensor(&mut rng, dtype, n, zeros);
        let c = compress(&data).unwrap();
        let (masks, values) = cpu::compress_part_for_test(&data.bytes, dtype.size());
        assert_eq!(c.bitmask, masks, "{dtype:?}");
        assert_eq!(c.values, values, "{dtype:?}");
        assert_eq!(&decompress(&c).unwrap().bytes[..], &data.bytes[..]);
    }
}

#[test]
fn negative_zero_and_nan_payloads_are_not_zero() {
    let values = [
        0.0f32,
        -0.0,
        f32::from_bits(0x7fc0_0123),
        0.0,
        f32::INFINITY,
    ];
    let data = TensorData::new(values.to_vec(), [5]);
    let c = compress(&data).unwrap();
    assert_eq!(c.bitmask, vec![0b10110]);
    assert_eq!(c.values.len(), 12);
    assert_eq!(&decompress(&c).unwrap().bytes[..], &data.bytes[..]);
}

#[test]
fn corrupt_and_unsupported_inputs_are_errors() {
    let data = TensorData::new(vec![1.0f32, 0.0, 2.0], [3]);
    let mut c = compress(&data).unwrap();
    c.values.pop();
    assert!(matches!(decompress(&c), Err(CodecError::Corrupt(_))));
    let mut c = compress(&data).unwrap();
    c.bitmask[0] |= 1 << 5; // a bit past the end
    assert!(matches!(decompress(&c), Err(CodecError::Corrupt(_))));
    let mut c = compress(&data).unwrap();
    c.bitmask.push(0);
    assert!(matches!(decompress(&c), Err(CodecError::Corrupt(_))));
    let bad = TensorData::from_bytes_vec(vec![0u8; 7], vec![2], DType::F32);
    assert!(matches!(compress(&bad), Err(CodecError::Length { .. })));
}

#[test]
fn the_decision_compresses_only_where_it_pays() {
    let at = |zero_fraction: f64| Decision {
        elements: 1 << 20,
        width: 4,
        zero_fraction,
        link_bandwidth: Some(10e9),
        codec_bandwidth: Some(5e9),
    };
    let on = Compression::On { max_ratio: 0.8 };
    // Dense data expands (by 1/32 for f32): never.
    assert!(!at(0.0).pays(on));
    // Half zeros: 0.5 + 1/32 of the bytes.
    assert!(at(0.5).pays(on));
    assert!((at(0.5).predicted() / at(0.5).raw() - (0.5 + 1.0 / 32.0)).abs() < 1e-9);
    // A quarter zeros: 0.78 of the bytes, just under the threshold; 0.2 is over it.
    assert!(at(0.25).pays(on));
    assert!(!at(0.2).pays(on));
    assert!(!at(0.9).pays(Compression::Off));
    // Auto: with a codec slower than the link, compressing costs more time than it saves at
    // half zeros (raw/5 + 2*0.53*raw/10 > 2*raw/10), and saves time at 95% zeros only if the
    // codec is fast enough: 2/10 >= 1/5 + 2*0.08/10 fails; with a 50 GB/s codec it pays.
    let auto = Compression::Auto { max_ratio: 0.8 };
    assert!(!at(0.5).pays(auto));
    assert!(!at(0.95).pays(auto));
    let fast = Decision {
        codec_bandwidth: Some(50e9),
        ..at(0.95)
    };
    assert!(fast.pays(auto));
    // Nothing measured: the size rule alone.
    let unmeasured = Decision {
        link_bandwidth: None,
        ..at(0.5)
    };
    assert!(unmeasured.pays(auto));
    // An empty tensor is never compressed.
    assert!(
        !Decision {
            elements: 0,
            ..at(1.0)
        }
        .pays(on)
    );
}

#[test]
fn the_sample_estimates_the_zero_fraction() {
    let mut rng = Rng(3);
    let data = tensor(&mut rng, DType::F32, 100_000, 0.7);
    let s = zero_fraction_sample(&data.bytes, 4, 4096);
    assert!((s - 0.7).abs() < 0.03, "{s}");
    assert_eq!(zero_fraction_sample(&[], 4, 16), 0.0);
}
