//! The budget holds from the moment it is set, and values survive the moves it causes.

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::{Tensor, TensorData};
use burn_swap::{Policy, Swap, SwapConfig};

type S = Swap<Flex>;

/// Room made for an op frees some headroom beyond the op's need, so that a run of ops each
/// a little short of room does not search the books once per op: 256 outputs of 256 B kept
/// under a 16 KiB budget, about 192 of them finding it full, a sixteenth of the budget (four
/// outputs) freed each time.
#[test]
fn room_made_for_an_op_leaves_headroom_for_the_next_ones() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let budget = 16 * 1024;
    let config = SwapConfig::budget_bytes(budget).with_policy(Policy::Reactive);
    burn_swap::configure(&device, config).unwrap();
    let x = Tensor::<S, 1>::from_data(TensorData::new(vec![1.0f32; 64], [64]), &device);
    burn_swap::reset_counters(&device);
    let kept: Vec<Tensor<S, 1>> = (0..256).map(|i| x.clone() * i as f32).collect();
    let report = burn_swap::report(&device).unwrap();
    let searches = report.transfers.room_searches;
    assert!(
        (24..=96).contains(&searches),
        "{searches} searches for about 192 ops short of room\n{report}"
    );
    assert!(report.memory.peak_bytes <= budget, "{report}");
    for (i, t) in kept.iter().enumerate() {
        let values: Vec<f32> = t.clone().into_data().to_vec().unwrap();
        assert_eq!(values, vec![i as f32; 64]);
    }
    drop((x, kept));
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

#[test]
fn budget_never_exceeded_after_lowering_it() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let tensors: Vec<Tensor<S, 1>> = (0..8)
        .map(|i| Tensor::from_data(TensorData::new(vec![i as f32; 256], [256]), &device))
        .collect();
    let before = burn_swap::memory(&device).unwrap().resident_bytes;
    assert!(before >= 8 * 1024);

    // Lowering the budget below what is resident offloads at once.
    burn_swap::configure(&device, SwapConfig::budget_bytes(3 * 1024)).unwrap();
    burn_swap::reset_counters(&device);
    let memory = burn_swap::memory(&device).unwrap();
    assert!(memory.resident_bytes <= 3 * 1024, "{memory:?}");
    assert!(memory.host_bytes >= 5 * 1024, "{memory:?}");

    // Reading every tensor (offloaded ones from host memory) keeps the budget and the values.
    for (i, t) in tensors.iter().enumerate() {
        let doubled: Vec<f32> = (t.clone() * 2.0).into_data().to_vec().unwrap();
        assert_eq!(doubled, vec![2.0 * i as f32; 256]);
    }
    let report = burn_swap::report(&device).unwrap();
    assert!(report.memory.peak_bytes <= 3 * 1024, "{report}");
    assert!(report.transfers.fetches > 0);
    // The exposed wait by cause adds up to the whole; these fetches were made on the ops'
    // path (nothing fetched ahead without a plan).
    let w = report.transfers.exposed_wait;
    let parts = w.fetch_seconds + w.prefetch_seconds + w.room_seconds + w.offload_seconds;
    assert!(
        (parts - report.transfers.exposed_wait_seconds).abs()
            <= 1e-9 * report.transfers.exposed_wait_seconds.max(1.0),
        "{w:?} against {}",
        report.transfers.exposed_wait_seconds
    );
    assert!(w.fetch_seconds > 0.0, "{w:?}");
    // The fallback chose what left to make room for the fetches: that search is counted.
    assert!(report.transfers.room_search_seconds > 0.0, "{report}");
    drop(tensors);
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}
