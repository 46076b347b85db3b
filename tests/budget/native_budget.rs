//! Ops that run natively on the inner backend keep the budget: room is made for their outputs
//! at their true size before they run (`arange`, `full`, `unfold4d`, `rfft`, `irfft`, a
//! transposed convolution's input gradient, comparisons that broadcast), so
//! nothing exceeds the budget, even for an instant; an output larger than the whole budget is
//! refused with the typed error. And small programs of views (meshgrid-like `expand`,
//! `swap_dims`, `slice`, then `scatter`) run under budgets barely above their largest op.

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::module::unfold4d;
use burn::tensor::ops::{ConvTransposeOptions, UnfoldOptions};
use burn::tensor::{Int, Tensor, TensorData, TensorPrimitive, backend::Backend};
use burn_swap::{Swap, SwapConfig, SwapError};

type S = Swap<Flex>;

/// Fills the device with `n` float tensors of 64 bytes each.
fn ballast<B: Backend>(n: usize, device: &B::Device) -> Vec<Tensor<B, 1>> {
    (0..n)
        .map(|i| Tensor::from_data(TensorData::new(vec![i as f32; 16], [16]), device))
        .collect()
}

/// Runs `f` under `budget`, with the ballast resident first, and checks that the counted
/// peak stayed within the budget and the values are the plain backend's.
fn under_budget<T: PartialEq + std::fmt::Debug>(
    budget: u64,
    ballast_tensors: usize,
    plain: impl Fn(&FlexDevice) -> T,
    swapped: impl Fn(&FlexDevice) -> T,
) -> burn_swap::Report {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
    burn_swap::reset_counters(&device);
    let weight = ballast::<S>(ballast_tensors, &device);
    let got = swapped(&device);
    let report = burn_swap::report(&device).unwrap();
    drop(weight);
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    assert_eq!(got, plain(&device));
    assert!(
        report.memory.peak_bytes <= budget,
        "peak over the budget\n{report}"
    );
    assert_eq!(report.memory.budget_overshoots, 0, "{report}");
    report
}

#[test]
fn arange_makes_room_for_its_output_before_it_runs() {
    // 100 ints (400 or 800 bytes), under a 1 KiB budget with 640 bytes of ballast resident.
    fn run<B: Backend>(device: &B::Device) -> Vec<i64> {
        let t = Tensor::<B, 1, Int>::arange(0..100, device);
        let stepped = Tensor::<B, 1, Int>::arange_step(0..100, 7, device);
        let mut out: Vec<i64> = t.into_data().convert::<i64>().to_vec().unwrap();
        out.extend(
            stepped
                .into_data()
                .convert::<i64>()
                .to_vec::<i64>()
                .unwrap(),
        );
        out
    }
    let report = under_budget(1024, 10, run::<Flex>, run::<S>);
    assert!(report.transfers.offloads > 0, "{report}");
}

#[test]
fn full_makes_room_for_its_output_before_it_runs() {
    fn run<B: Backend>(device: &B::Device) -> Vec<i64> {
        let t = Tensor::<B, 2, Int>::full([10, 10], 7, device);
        t.into_data().convert::<i64>().to_vec().unwrap()
    }
    under_budget(1024, 10, run::<Flex>, run::<S>);
}

#[test]
fn arange_larger_than_the_budget_is_refused_with_the_typed_error() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::budget_bytes(1024)).unwrap();
    let result = std::panic::catch_unwind(|| {
        let _ = Tensor::<S, 1, Int>::arange(0..1000, &device);
    });
    let resident = burn_swap::memory(&device).unwrap().resident_bytes;
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let error = result.expect_err("a 1,000-element arange under 1 KiB must fail");
    match error.downcast_ref::<SwapError>() {
        Some(SwapError::OpExceedsBudget { needed, budget, .. }) => {
            assert_eq!(*budget, 1024);
            assert!(*needed >= 4000, "needed {needed}");
        }
        other => panic!("expected OpExceedsBudget, got {other:?}"),
    }
    assert!(resident <= 1024, "{resident} bytes resident");
}

#[test]
fn unfold4d_makes_room_for_its_output_before_it_runs() {
    // [1, 1, 6, 6] (144 bytes) unfolds to [1, 9, 16] (576 bytes).
    fn run<B: Backend>(device: &B::Device) -> Vec<f32> {
        let x: Vec<f32> = (0..36).map(|i| i as f32).collect();
        let x = Tensor::<B, 4>::from_data(TensorData::new(x, [1, 1, 6, 6]), device);
        let options = UnfoldOptions::new([1, 1], [0, 0], [1, 1]);
        unfold4d(x, [3, 3], options).into_data().to_vec().unwrap()
    }
    under_budget(1100, 6, run::<Flex>, run::<S>);
}

#[test]
fn a_transposed_convolution_narrowing_channels_makes_room_for_its_input_gradient() {
    // The input's gradient of a transposed convolution from 16 channels to 1 is 16 times its
    // output gradient and larger than its weight: [1, 16, 4, 4] (1,024 bytes) from a
    // [16, 1, 3, 3] weight (576) and a [1, 1, 4, 4] gradient (64); and [1, 16, 8] (512) from
    // [16, 1, 3] (192) and [1, 1, 8] (32).
    fn float<B: Backend, const D: usize>(
        dims: [usize; D],
        device: &B::Device,
    ) -> burn::tensor::ops::FloatTensor<B> {
        let n: usize = dims.iter().product();
        let values: Vec<f32> = (0..n).map(|i| ((i * 5) % 7) as f32 - 3.0).collect();
        Tensor::<B, D>::from_data(TensorData::new(values, dims), device)
            .into_primitive()
            .tensor()
    }
    fn run<B: Backend>(device: &B::Device) -> Vec<f32> {
        let wide = B::conv_transpose2d_x_backward(
            float::<B, 4>([16, 1, 3, 3], device),
            float::<B, 4>([1, 1, 4, 4], device),
            ConvTransposeOptions::new([1, 1], [1, 1], [0, 0], [1, 1], 1),
        );
        let long = B::conv_transpose1d_x_backward(
            float::<B, 3>([16, 1, 3], device),
            float::<B, 3>([1, 1, 8], device),
            ConvTransposeOptions::new([1], [1], [0], [1], 1),
        );
        let wide = Tensor::<B, 4>::from_primitive(TensorPrimitive::Float(wide));
        let long = Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(long));
        assert_eq!(wide.dims(), [1, 16, 4, 4]);
        assert_eq!(long.dims(), [1, 16, 8]);
        let mut out: Vec<f32> = wide.into_data().to_vec().unwrap();
        out.extend(long.into_data().to_vec::<f32>().unwrap());
        out
    }
    let report = under_budget(1800, 10, run::<Flex>, run::<S>);
    assert!(report.transfers.offloads > 0, "{report}");
}

#[test]
fn a_broadcast_comparison_makes_room_for_its_output() {
    // A column [64, 1] against a row [1, 64] (256 bytes each): 4,096 bools, and their
    // exclusive or with a row of bools, as large.
    fn run<B: Backend>(device: &B::Device) -> Vec<bool> {
        let v: Vec<f32> = (0..64).map(|i| (i % 9) as f32).collect();
        let column =
            Tensor::<B, 1>::from_data(TensorData::new(v.clone(), [64]), device).reshape([64, 1]);
        let row = Tensor::<B, 1>::from_data(TensorData::new(v, [64]), device).reshape([1, 64]);
        let differ = column.clone().not_equal(row.clone());
        let flags = row.greater_elem(4.0);
        let mixed = differ.clone().bool_xor(flags);
        let mut out: Vec<bool> = differ.into_data().to_vec().unwrap();
        out.extend(mixed.into_data().to_vec::<bool>().unwrap());
        out
    }
    let report = under_budget(9000, 100, run::<Flex>, run::<S>);
    assert!(report.transfers.offloads > 0, "{report}");
}

#[test]
fn rfft_and_irfft_run_through_swap_within_the_budget() {
    fn run<B: Backend>(device: &B::Device) -> Vec<f32> {
        let x: Vec<f32> = (0..64).map(|i| ((i * 7) % 11) as f32).collect();
        let x = Tensor::<B, 2>::from_data(TensorData::new(x, [4, 16]), device);
        let (re, im) = burn::tensor::signal::rfft(x, 1, None);
        let back = burn::tensor::signal::irfft(re.clone(), im.clone(), 1, None);
        let mut out: Vec<f32> = re.into_data().to_vec().unwrap();
        out.extend(im.into_data().to_vec::<f32>().unwrap());
        out.extend(back.into_data().to_vec::<f32>().unwrap());
        out
    }
    under_budget(1200, 8, run::<Flex>, run::<S>);
}

#[test]
fn meshgrid_like_views_run_under_a_budget_just_above_their_largest_op() {
    // Views of views (expand, swap_dims, slice) feeding arithmetic and a scatter: every
    // tensor must be able to leave, by offload or by recomputation.
    fn run<B: Backend>(device: &B::Device) -> Vec<f32> {
        let xs = Tensor::<B, 1>::from_data(
            TensorData::new((0..16).map(|i| i as f32).collect::<Vec<_>>(), [16]),
            device,
        );
        let ys = xs.clone() * 0.5;
        let gx = xs.reshape([1, 16]).expand([16, 16]);
        let gy = ys.reshape([16, 1]).expand([16, 16]);
        let grid = gx.clone() * gy.clone().swap_dims(0, 1) + gy;
        let corner = grid.clone().slice([2..10, 3..11]);
        let indices = Tensor::<B, 2, Int>::from_data(
            TensorData::new((0..64).map(|i| (i % 8) as i64).collect::<Vec<_>>(), [8, 8]),
            device,
        );
        let scattered = Tensor::<B, 2>::zeros([8, 8], device).scatter(
            1,
            indices,
            corner.clone(),
            burn::tensor::IndexingUpdateOp::Add,
        );
        let det_like = corner.clone().swap_dims(0, 1).matmul(corner) - scattered;
        let mut out: Vec<f32> = det_like.into_data().to_vec().unwrap();
        out.extend(grid.sum_dim(0).into_data().to_vec::<f32>().unwrap());
        out
    }
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    let unbudgeted = run::<S>(&device);
    let report = burn_swap::report(&device).unwrap();
    drop(_guard);
    assert_eq!(unbudgeted, run::<Flex>(&device));
    let smallest = report.workload.largest_op_bytes;
    under_budget(smallest + 1024, 4, run::<Flex>, run::<S>);
}
