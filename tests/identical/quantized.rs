//! Quantized tensors run through `Swap<Flex>` as on `Flex` (burn-router leaves `QTensorOps`
//! unimplemented; burn-swap runs them natively on the inner backend): quantize, dequantize,
//! reshape and views of quantized tensors, reading their data, and ops through dequantization,
//! bit for bit, with no budget and under one that makes the float tensors around them leave;
//! quantized weights that do not fit leave the device as their data and come back; a quantized
//! select or expand that outgrows its input makes room for what it makes before it runs.
//! Each backend quantizes with its own default scheme: `Swap<Flex>`'s is Flex's.

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::backend::{Backend, BackendTypes, QTensorPrimitive};
use burn::tensor::quantization::QuantScheme;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use burn_swap::{Swap, SwapConfig};

type S = Swap<Flex>;

/// The default scheme of backend `B`'s quantized tensors.
fn default_scheme<B: Backend>() -> QuantScheme {
    <<B as BackendTypes>::QuantizedTensorPrimitive as QTensorPrimitive>::default_scheme()
}

fn program<B: Backend>(device: &B::Device) -> (Vec<u32>, TensorData) {
    let scheme = default_scheme::<B>();
    let values: Vec<f32> = (0..256)
        .map(|i| ((i * 13 % 29) as f32 - 14.0) / 3.0)
        .collect();
    let x = Tensor::<B, 2>::from_data(TensorData::new(values, [16, 16]), device);
    let q = x.clone().quantize_dynamic(&scheme);
    let data = q.clone().into_data();
    let moved = q.clone().reshape([8, 32]).swap_dims(0, 1).dequantize();
    let product = q.clone().dequantize().matmul(x.clone());
    let sliced = q.slice([2..6, 0..16]).dequantize() + x.slice([2..6, 0..16]);
    let mut out: Vec<f32> = moved.into_data().to_vec().unwrap();
    out.extend(product.into_data().to_vec::<f32>().unwrap());
    out.extend(sliced.into_data().to_vec::<f32>().unwrap());
    (out.into_iter().map(f32::to_bits).collect(), data)
}

#[test]
fn quantized_ops_run_through_swap_bit_for_bit() {
    let device = FlexDevice;
    let (plain, plain_data) = program::<Flex>(&device);
    let _guard = burn_swap_harness::swap_device_lock();
    for budget in [None, Some(4096)] {
        let config = budget.map_or_else(SwapConfig::default, SwapConfig::budget_bytes);
        burn_swap::configure(&device, config).unwrap();
        burn_swap::reset_counters(&device);
        let (swapped, data) = program::<S>(&device);
        let report = burn_swap::report(&device).unwrap();
        assert_eq!(swapped, plain, "budget {budget:?}");
        assert_eq!(data.bytes[..], plain_data.bytes[..], "budget {budget:?}");
        assert_eq!(data.dtype, plain_data.dtype);
        if let Some(budget) = budget {
            assert!(report.memory.peak_bytes <= budget, "{report}");
            assert!(report.transfers.offloads > 0, "{report}");
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

#[test]
fn swap_quantizes_as_its_inner_backend() {
    // burn-router's default (`QuantScheme::default()`) packs values in u32 words; Flex stores
    // them natively. `Swap<Flex>` must answer Flex's.
    assert_eq!(default_scheme::<S>(), default_scheme::<Flex>());
    assert_ne!(default_scheme::<Flex>(), QuantScheme::default());
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let x = Tensor::<Flex, 1>::from_floats([1.0, -2.0, 3.5, 0.25], &device);
    let plain = x
        .quantize_dynamic(&default_scheme::<Flex>())
        .into_primitive();
    let x = Tensor::<S, 1>::from_floats([1.0, -2.0, 3.5, 0.25], &device);
    let swapped = x.quantize_dynamic(&default_scheme::<S>()).into_primitive();
    let (TensorPrimitive::QFloat(plain), TensorPrimitive::QFloat(swapped)) = (plain, swapped)
    else {
        panic!("quantize_dynamic gave a float tensor");
    };
    assert_eq!(swapped.scheme(), plain.scheme());
    assert_eq!(swapped.acc_precision(), plain.acc_precision());
    assert_eq!(swapped.propagation(), plain.propagation());
}

/// A quantized tensor counts its stored values and its quantization parameters: 4,096 i8
/// values and one f32 scale per tensor, or one per 32-value block.
#[test]
fn a_quantized_tensor_counts_its_values_and_parameters() {
    use burn::tensor::quantization::{BlockSize, QuantLevel};
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let values: Vec<f32> = (0..4096)
        .map(|i| ((i * 7 % 61) as f32 - 30.0) / 8.0)
        .collect();
    let x = Tensor::<S, 2>::from_data(TensorData::new(values, [64, 64]), &device);
    let per_tensor = default_scheme::<S>();
    let per_block = per_tensor.with_level(QuantLevel::Block(BlockSize::new([32])));
    for (scheme, scales) in [(per_tensor, 1), (per_block, 4096 / 32)] {
        let before = burn_swap::memory(&device).unwrap().resident_bytes;
        let q = x.clone().quantize_dynamic(&scheme);
        let after = burn_swap::memory(&device).unwrap().resident_bytes;
        assert_eq!(after - before, 4096 + 4 * scales, "{scheme:?}");
        let data = q.into_data();
        assert_eq!(data.bytes.len() as u64, 4096 + 4 * scales, "{scheme:?}");
    }
}

/// Runs `swapped` under `budget` bytes with `floats` float tensors of 64 bytes resident
/// beside it: its data is `plain`'s bit for bit, the budget holds without an overshoot, and
/// room was made by offloading.
fn makes_room_beside_floats(
    plain: fn(&FlexDevice) -> TensorData,
    swapped: fn(&FlexDevice) -> TensorData,
    budget: u64,
    floats: usize,
) {
    let device = FlexDevice;
    let plain = plain(&device);
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
    burn_swap::reset_counters(&device);
    let ballast: Vec<Tensor<S, 1>> = (0..floats)
        .map(|i| Tensor::from_data(TensorData::new(vec![i as f32; 16], [16]), &device))
        .collect();
    let swapped = swapped(&device);
    let report = burn_swap::report(&device).unwrap();
    drop(ballast);
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    assert_eq!(swapped.bytes[..], plain.bytes[..]);
    assert_eq!(swapped.dtype, plain.dtype);
    assert!(report.memory.peak_bytes <= budget, "{report}");
    assert_eq!(report.memory.budget_overshoots, 0, "{report}");
    assert!(report.transfers.offloads > 0, "{report}");
}

/// A quantized select that picks rows more than once makes more than its input holds (64
/// rows of a 16-row table: 1,028 bytes from 260): room is made for all of it before it runs,
/// so the budget holds with float tensors resident beside it.
#[test]
fn a_quantized_select_makes_room_for_rows_picked_more_than_once() {
    use burn::tensor::Int;
    fn run<B: Backend>(device: &B::Device) -> TensorData {
        let values: Vec<f32> = (0..256)
            .map(|i| ((i * 11 % 23) as f32 - 11.0) / 4.0)
            .collect();
        let x = Tensor::<B, 2>::from_data(TensorData::new(values, [16, 16]), device);
        let q = x.quantize_dynamic(&default_scheme::<B>());
        let rows: Vec<i64> = (0..64).map(|i| (i * 7) % 16).collect();
        let rows = Tensor::<B, 1, Int>::from_data(TensorData::new(rows, [64]), device);
        let picked = q.select(0, rows);
        assert_eq!(picked.dims(), [64, 16]);
        picked.into_data()
    }
    makes_room_beside_floats(run::<Flex>, run::<S>, 2600, 20);
}

/// A block-quantized expand (the backend's `q_expand`) of one row to 64 is made anew (Flex
/// dequantizes, expands and quantizes again): 1,280 bytes (64 × 16 values, 64 block
/// scales) from 20. Room is made for its output before it runs, so the budget holds with
/// float tensors resident beside it (without the op's own size, room was made for its
/// input's 20 bytes and the budget broke).
#[test]
fn a_quantized_expand_makes_room_for_what_it_broadcasts() {
    use burn::tensor::Shape;
    use burn::tensor::quantization::{BlockSize, QuantLevel};
    fn run<B: Backend>(device: &B::Device) -> TensorData {
        let values: Vec<f32> = (0..16).map(|i| (i as f32 - 7.0) / 4.0).collect();
        let x = Tensor::<B, 2>::from_data(TensorData::new(values, [1, 16]), device);
        let scheme = default_scheme::<B>().with_level(QuantLevel::Block(BlockSize::new([16])));
        let q = x.quantize_dynamic(&scheme);
        // The backend's op (`Tensor::expand` dequantizes first).
        let TensorPrimitive::QFloat(q) = q.into_primitive() else {
            panic!("quantize_dynamic gave a float tensor");
        };
        let wide = B::q_expand(q, Shape::new([64, 16]));
        let wide = Tensor::<B, 2>::from_primitive(TensorPrimitive::QFloat(wide));
        assert_eq!(wide.dims(), [64, 16]);
        wide.into_data()
    }
    makes_room_beside_floats(run::<Flex>, run::<S>, 3000, 40);
}

/// Quantized weights that do not fit beside what uses them leave and come back: four
/// quantized [32, 32] matrices (1,028 bytes each per tensor, 1,152 per 32-value block),
/// each dequantized in turn (4,096 bytes) to multiply the activations, three times over,
/// under a 7,000-byte budget: the quantized tensors must leave as their data (values and
/// quantization parameters) and come back under their ids. Bit for bit, every policy,
/// compression off and on, within the budget; the weights' data read at the end too.
#[test]
fn quantized_weights_leave_and_come_back_bit_for_bit() {
    use burn::tensor::quantization::{BlockSize, QuantLevel};
    use burn_swap::{Compression, Policy};
    fn run<B: Backend>(device: &B::Device, scheme: &QuantScheme) -> (Vec<u32>, Vec<TensorData>) {
        let weights: Vec<_> = (0..4)
            .map(|k| {
                let values: Vec<f32> = (0..1024)
                    .map(|i| (((i * 17 + k * 5) % 41) as f32 - 20.0) / 64.0)
                    .collect();
                Tensor::<B, 2>::from_data(TensorData::new(values, [32, 32]), device)
                    .quantize_dynamic(scheme)
            })
            .collect();
        let values: Vec<f32> = (0..128).map(|i| ((i % 9) as f32 - 4.0) / 4.0).collect();
        let mut x = Tensor::<B, 2>::from_data(TensorData::new(values, [4, 32]), device);
        for _ in 0..3 {
            for w in &weights {
                x = x.matmul(w.clone().dequantize()).tanh();
            }
        }
        let out = x.into_data().to_vec::<f32>().unwrap();
        let data = weights.into_iter().map(|w| w.into_data()).collect();
        (out.into_iter().map(f32::to_bits).collect(), data)
    }
    let device = FlexDevice;
    let per_tensor = default_scheme::<Flex>();
    let per_block = per_tensor.with_level(QuantLevel::Block(BlockSize::new([32])));
    let _guard = burn_swap_harness::swap_device_lock();
    for scheme in [per_tensor, per_block] {
        let (plain, plain_data) = run::<Flex>(&device, &scheme);
        for policy in Policy::ALL {
            for compression in [Compression::Off, Compression::On { max_ratio: 1.0 }] {
                let what = format!("{scheme:?}, {}, {compression:?}", policy.name());
                let budget = 7000;
                let config = SwapConfig::budget_bytes(budget)
                    .with_policy(policy)
                    .with_compression(compression);
                burn_swap::configure(&device, config).unwrap();
                burn_swap::reset_counters(&device);
                let (swapped, data) = run::<S>(&device, &scheme);
                let report = burn_swap::report(&device).unwrap();
                assert_eq!(swapped, plain, "{what}");
                for (got, want) in data.iter().zip(&plain_data) {
                    assert_eq!(got.bytes[..], want.bytes[..], "{what}");
                    assert_eq!(got.dtype, want.dtype, "{what}");
                }
                assert!(report.memory.peak_bytes <= budget, "{what}\n{report}");
                assert_eq!(report.memory.budget_overshoots, 0, "{what}\n{report}");
                assert!(report.transfers.fetches > 0, "{what}\n{report}");
            }
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}
