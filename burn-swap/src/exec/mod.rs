//! Execution: the per-device engine that runs every op on the inner backend, keeps the
//! residency table and the counted bytes, and carries out offloads and fetches.
//!
//! The engine decides no policy: when an op would exceed the budget it asks
//! [`crate::plan::reactive`] which tensors to move, then moves them.

pub(crate) mod engine;
mod host;
mod layout;
pub(crate) mod residency;
mod transfer;

use burn_backend::{DType, Shape};

/// Bytes of a tensor of this shape and dtype, as burn-swap counts them.
pub(crate) fn bytes_of(shape: &Shape, dtype: DType) -> u64 {
    (shape.num_elements() * dtype.size()) as u64
}

/// Total memory of the device when the backend can tell it. The generic path cannot, so a
/// budget given as a fraction of device memory is refused there with a typed error.
pub(crate) fn device_memory<B: burn_backend::Backend>(_device: &B::Device) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::host::faults;
    use crate::{Swap, SwapConfig};
    use burn::backend::Flex;
    use burn::backend::flex::FlexDevice;
    use burn::tensor::{Tensor, TensorData};

    type S = Swap<Flex>;

    fn tensor(seed: f32, device: &FlexDevice) -> Tensor<S, 1> {
        let values: Vec<f32> = (0..256).map(|i| seed + i as f32 * 0.5).collect();
        Tensor::from_data(TensorData::new(values, [256]), device)
    }

    fn values(t: &Tensor<S, 1>) -> Vec<f32> {
        t.clone().into_data().to_vec().unwrap()
    }

    #[test]
    fn failed_offloads_never_lose_data() {
        let device = FlexDevice;
        // Four tensors of 1 KiB fit; the fifth needs one offloaded.
        crate::configure(&device, SwapConfig::budget_bytes(4 * 1024)).unwrap();
        let kept: Vec<Tensor<S, 1>> = (0..4).map(|i| tensor(i as f32, &device)).collect();
        let expected: Vec<Vec<f32>> = kept.iter().map(values).collect();
        crate::reset_counters(&device);

        // The first choice fails: it stays resident and the next candidate goes instead.
        faults::fail_next(1);
        let fifth = tensor(10.0, &device);
        let report = crate::report(&device).unwrap();
        assert_eq!(report.failed_offloads, 1);
        assert_eq!(report.offloads, 1);
        assert!(report.peak_bytes <= 4 * 1024);

        // Every offload fails: the op cannot get room and fails with the transfer error,
        // and no tensor loses a value.
        faults::fail_next(usize::MAX);
        let failed = std::panic::catch_unwind(|| tensor(20.0, &FlexDevice));
        faults::fail_next(0);
        let message = failed.expect_err("no room without offloads");
        let message = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(message.contains("offload of tensor"), "{message}");
        assert!(message.contains("injected offload failure"), "{message}");

        crate::configure(&device, SwapConfig::default()).unwrap();
        for (t, want) in kept.iter().zip(&expected) {
            assert_eq!(&values(t), want);
        }
        assert_eq!(values(&fifth)[0], 10.0);
    }
}
