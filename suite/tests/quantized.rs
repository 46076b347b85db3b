//! Quantized tensors run through `Swap<Flex>` as on `Flex` (burn-router leaves `QTensorOps`
//! unimplemented; burn-swap runs them natively on the inner backend): quantize, dequantize,
//! reshape and views of quantized tensors, reading their data, and ops through dequantization,
//! bit for bit, with no budget and under one that makes the float tensors around them leave.

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::quantization::{QuantScheme, QuantStore};
use burn::tensor::{Tensor, TensorData, backend::Backend};
use burn_swap::{Swap, SwapConfig};

type S = Swap<Flex>;

fn program<B: Backend>(device: &B::Device) -> (Vec<u32>, TensorData) {
    let scheme = QuantScheme::default().with_store(QuantStore::Native);
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
    let _guard = burn_swap_suite::swap_device_lock();
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
            assert!(report.peak_bytes <= budget, "{report}");
            assert!(report.offloads > 0, "{report}");
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}
