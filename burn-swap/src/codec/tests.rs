//! Property tests of the CPU codec: random tensors over dtypes, lengths and zero fractions,
//! special values included, round-trip bit for bit.

use super::*;

use crate::rng::{SplitMix64 as Rng, random_tensor as tensor};

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
    let mut rng = Rng::new(7);
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
    let mut rng = Rng::new(11);
    for (dtype, zeros) in [(DType::F32, 0.5), (DType::F16, 0.9), (DType::I64, 0.1)] {
        let n = (5 << 20) / dtype.size() + 7;
        let data = tensor(&mut rng, dtype, n, zeros);
        let c = compress(&data).unwrap();
        let (masks, values) = cpu::compress_part_for_test(&data.bytes, dtype.size()).unwrap();
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
fn the_sample_estimates_the_zero_fraction() {
    let mut rng = Rng::new(3);
    let data = tensor(&mut rng, DType::F32, 100_000, 0.7);
    let s = zero_fraction_sample(&data.bytes, 4, 4096);
    assert!((s - 0.7).abs() < 0.03, "{s}");
    assert_eq!(zero_fraction_sample(&[], 4, 16), 0.0);
}
