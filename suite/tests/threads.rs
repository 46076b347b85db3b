//! Ops arrive from several threads at once, and drops from the dropping thread: under a tight
//! budget, with offloads racing uses, every value still equals Flex's.

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData, activation};
use burn_swap::{Swap, SwapConfig};
use burn_swap_suite::data::XorShift;

type S = Swap<Flex>;

/// IR ops (matmul, add) and native ops (sigmoid, softmax) in a chain.
fn work<B: Backend>(seed: u64, device: &B::Device) -> TensorData {
    let mut rng = XorShift::new(seed);
    let w = Tensor::<B, 2>::from_data(TensorData::new(rng.vec_f32(256, 0.5), [16, 16]), device);
    let mut x = Tensor::<B, 2>::from_data(TensorData::new(rng.vec_f32(256, 1.0), [16, 16]), device);
    for _ in 0..200 {
        let h = activation::sigmoid(x.clone().matmul(w.clone()));
        x = activation::softmax(h + x, 1);
    }
    x.into_data()
}

#[test]
fn concurrent_ops_under_a_budget_keep_values() {
    let device = FlexDevice;
    let seeds: Vec<u64> = (0..4).collect();
    let expected: Vec<TensorData> = seeds.iter().map(|&s| work::<Flex>(s, &device)).collect();

    let _guard = burn_swap_suite::swap_device_lock();
    // The largest op (a 16×16 matmul) needs 3 KiB; each thread holds about 4 KiB at a time,
    // so offloads race the other threads' uses all along.
    let budget = 3 * 1024 + 512;
    burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
    burn_swap::reset_counters(&device);
    for _round in 0..3 {
        let results: Vec<TensorData> = std::thread::scope(|scope| {
            let handles: Vec<_> = seeds
                .iter()
                .map(|&s| scope.spawn(move || work::<S>(s, &FlexDevice)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (want, got) in expected.iter().zip(&results) {
            assert_eq!(&want.bytes[..], &got.bytes[..]);
        }
    }
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    assert!(report.peak_bytes <= budget, "{report}");
    assert!(report.offloads > 0, "{report}");
}
