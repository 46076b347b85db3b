//! Every op family through `Swap<Flex>` gives the same bytes as `Flex` alone: float, int and
//! bool ops, float ops on views of every kind, module ops and their gradients, activations,
//! random, data in and out, sync. Each
//! family runs twice: unbudgeted, and under a budget so tight that tensors are offloaded and
//! fetched back between ops.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::module;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{Bool, Distribution, Int, Tensor, TensorData, activation};
use burn_swap::{Swap, SwapConfig};
use burn_swap_harness::data::XorShift;

type S = Swap<Flex>;

/// The outputs of a family: compared as dtype, shape and bytes.
type Outputs = Vec<TensorData>;

fn floats<B: Backend, const D: usize>(
    seed: u64,
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D> {
    let n = shape.iter().product();
    Tensor::from_data(
        TensorData::new(XorShift::new(seed).vec_f32(n, 2.0), shape),
        device,
    )
}

fn ints<B: Backend, const D: usize>(
    seed: u64,
    shape: [usize; D],
    modulo: i64,
    device: &B::Device,
) -> Tensor<B, D, Int> {
    let mut rng = XorShift::new(seed);
    let n = shape.iter().product();
    let values: Vec<i64> = (0..n)
        .map(|_| (rng.next_u64() % modulo as u64) as i64)
        .collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

fn float_ops<B: Backend>(device: &B::Device) -> Outputs {
    let a = floats::<B, 2>(1, [8, 16], device);
    let b = floats::<B, 2>(2, [8, 16], device);
    let w = floats::<B, 2>(3, [16, 4], device);
    let mut out = vec![
        (a.clone() + b.clone()).into_data(),
        (a.clone() - b.clone()).into_data(),
        (a.clone() * b.clone()).into_data(),
        (a.clone() / (b.clone().abs() + 1.0)).into_data(),
        a.clone().matmul(w.clone()).into_data(),
        a.clone().exp().into_data(),
        (a.clone().abs() + 1e-3).log().into_data(),
        a.clone().abs().sqrt().into_data(),
        a.clone().abs().powf_scalar(1.5).into_data(),
        a.clone().sin().into_data(),
        a.clone().cos().into_data(),
        a.clone().tanh().into_data(),
        a.clone().erf().into_data(),
        a.clone().clamp(-0.5, 0.5).into_data(),
        a.clone().recip().into_data(),
        a.clone().sum().into_data(),
        a.clone().mean_dim(1).into_data(),
        a.clone().max_dim(0).into_data(),
        a.clone().min().into_data(),
        a.clone().argmax(1).into_data(),
        a.clone().cumsum(1).into_data(),
        a.clone().sort(1).into_data(),
        Tensor::cat(vec![a.clone(), b.clone()], 0).into_data(),
        a.clone().slice([2..6, 4..12]).into_data(),
        a.clone()
            .slice_assign([0..2, 0..4], floats::<B, 2>(4, [2, 4], device))
            .into_data(),
        a.clone().reshape([4, 32]).into_data(),
        a.clone().transpose().into_data(),
        a.clone().flip([0, 1]).into_data(),
        floats::<B, 3>(5, [2, 3, 4], device)
            .permute([2, 0, 1])
            .into_data(),
        floats::<B, 2>(6, [1, 16], device)
            .expand([8, 16])
            .into_data(),
        a.clone().greater(b.clone()).into_data(),
        a.clone().equal_elem(0.0).into_data(),
        a.clone().lower_equal_elem(0.25).into_data(),
    ];
    let idx = ints::<B, 2>(7, [8, 16], 8, device);
    out.push(a.clone().gather(0, idx.clone()).into_data());
    out.push(
        a.clone()
            .scatter(0, idx, b.clone(), burn::tensor::IndexingUpdateOp::Add)
            .into_data(),
    );
    let rows = ints::<B, 1>(8, [5], 8, device);
    out.push(a.clone().select(0, rows.clone()).into_data());
    out.push(
        a.clone()
            .select_assign(
                0,
                rows,
                floats::<B, 2>(9, [5, 16], device),
                burn::tensor::IndexingUpdateOp::Add,
            )
            .into_data(),
    );
    let mask = a.clone().greater_elem(0.0);
    out.push(a.clone().mask_where(mask.clone(), b.clone()).into_data());
    out.push(a.mask_fill(mask, 3.5).into_data());
    out
}

/// Float ops again, on inputs that are views of every kind (swap_dims, permute then reshape,
/// flip, slice, narrow, chunk, expand, unfold): elementwise, broadcasts against reductions,
/// matmuls on either side, scans, sorts, cat, slice_assign, gather, softmax, comparisons.
fn view_ops<B: Backend>(device: &B::Device) -> Outputs {
    let views: Vec<Tensor<B, 2>> = vec![
        floats::<B, 2>(51, [16, 8], device).swap_dims(0, 1),
        floats::<B, 3>(52, [8, 2, 8], device)
            .permute([0, 2, 1])
            .reshape([8, 16]),
        floats::<B, 2>(53, [16, 8], device).transpose().flip([1]),
        floats::<B, 2>(54, [12, 20], device).slice([2..10, 3..19]),
        floats::<B, 2>(55, [8, 32], device).narrow(1, 8, 16),
        floats::<B, 2>(56, [8, 48], device).chunk(3, 1).remove(1),
        floats::<B, 2>(57, [1, 16], device).expand([8, 16]),
        floats::<B, 1>(58, [23], device).unfold(0, 16, 1),
    ];
    let mut out = Vec::new();
    for (i, v) in views.into_iter().enumerate() {
        let flipped = i == 2;
        let seed = 100 + 10 * i as u64;
        let b = floats::<B, 2>(seed, [8, 16], device);
        let w = floats::<B, 2>(seed + 1, [16, 4], device);
        out.extend([
            (v.clone() + b.clone()).into_data(),
            (v.clone() * b.clone()).exp().into_data(),
            v.clone().matmul(w).into_data(),
            b.clone().swap_dims(0, 1).matmul(v.clone()).into_data(),
            // burn-flex 0.21's SIMD row sums (Burn's default features build Flex with them)
            // panic on the flipped view's dim 0 ("src too short"): its other dim there.
            v.clone().sum_dim(if flipped { 1 } else { 0 }).into_data(),
            (v.clone() - v.clone().mean_dim(1)).into_data(),
            v.clone().cumsum(1).into_data(),
            v.clone().sort(1).into_data(),
            v.clone().max_dim(0).into_data(),
            v.clone().tanh().into_data(),
            Tensor::cat(vec![v.clone(), b], 0).into_data(),
            v.clone().reshape([16, 8]).into_data(),
            v.clone()
                .slice_assign([0..2, 0..4], floats::<B, 2>(seed + 2, [2, 4], device))
                .into_data(),
            v.clone()
                .gather(1, ints::<B, 2>(seed + 3, [8, 16], 16, device))
                .into_data(),
            activation::softmax(v.clone(), 1).into_data(),
            v.greater_elem(0.0).into_data(),
        ]);
    }
    out
}

fn int_ops<B: Backend>(device: &B::Device) -> Outputs {
    let a = ints::<B, 2>(11, [6, 10], 100, device);
    let b = ints::<B, 2>(12, [6, 10], 7, device) + 1;
    vec![
        (a.clone() + b.clone()).into_data(),
        (a.clone() * b.clone()).into_data(),
        (a.clone() / b.clone()).into_data(),
        a.clone().remainder(b.clone()).into_data(),
        a.clone().sum_dim(1).into_data(),
        a.clone().max().into_data(),
        a.clone().cumsum(0).into_data(),
        a.clone().float().into_data(),
        a.clone().greater_equal(b.clone()).into_data(),
        a.clone().reshape([10, 6]).transpose().into_data(),
        Tensor::<B, 1, Int>::arange(0..17, device).into_data(),
        a.argsort(1).into_data(),
    ]
}

fn bool_ops<B: Backend>(device: &B::Device) -> Outputs {
    let a = floats::<B, 2>(21, [5, 7], device).greater_elem(0.0);
    let b = floats::<B, 2>(22, [5, 7], device).lower_elem(0.3);
    vec![
        a.clone().bool_not().into_data(),
        a.clone().bool_and(b.clone()).into_data(),
        a.clone().bool_or(b.clone()).into_data(),
        a.clone().int().into_data(),
        a.clone().float().into_data(),
        a.clone().any().into_data(),
        a.clone().all_dim(1).into_data(),
        a.clone().argwhere().into_data(),
        Tensor::<B, 2, Bool>::cat(vec![a, b], 1).into_data(),
    ]
}

fn activations<B: Backend>(device: &B::Device) -> Outputs {
    let x = floats::<B, 2>(31, [6, 12], device);
    // All alive at once before reading, so that the tight budget has to offload.
    let outputs = [
        activation::relu(x.clone()),
        activation::gelu(x.clone()),
        activation::sigmoid(x.clone()),
        activation::silu(x.clone()),
        activation::softmax(x.clone(), 1),
        activation::log_softmax(x.clone(), 1),
        activation::leaky_relu(x.clone(), 0.1),
        activation::hard_sigmoid(x.clone(), 0.2, 0.5),
        activation::log_sigmoid(x.clone()),
        activation::softplus(x, 1.0),
    ];
    outputs.into_iter().map(|t| t.into_data()).collect()
}

/// Module ops forward and backward (through autodiff), so their gradients are covered too.
fn module_ops<B: AutodiffBackend>(device: &B::Device) -> Outputs {
    let x = floats::<B, 4>(41, [2, 3, 8, 8], device).require_grad();
    let w = floats::<B, 4>(42, [4, 3, 3, 3], device).require_grad();
    let bias = floats::<B, 1>(43, [4], device).require_grad();
    let conv = module::conv2d(
        x.clone(),
        w.clone(),
        Some(bias.clone()),
        ConvOptions::new([1, 1], [1, 1], [1, 1], 1),
    );
    let wt = floats::<B, 4>(44, [4, 2, 3, 3], device).require_grad();
    let deconv = module::conv_transpose2d(
        conv.clone(),
        wt.clone(),
        None,
        ConvTransposeOptions::new([2, 2], [1, 1], [1, 1], [1, 1], 1),
    );
    let maxp = module::max_pool2d(conv.clone(), [2, 2], [2, 2], [0, 0], [1, 1], false);
    let avgp = module::avg_pool2d(conv.clone(), [2, 2], [2, 2], [0, 0], true, false);
    let adapt = module::adaptive_avg_pool2d(conv.clone(), [3, 3]);
    let near = module::interpolate(
        conv.clone(),
        [12, 12],
        InterpolateOptions::new(InterpolateMode::Nearest),
    );
    let bilinear = module::interpolate(
        conv.clone(),
        [5, 5],
        InterpolateOptions::new(InterpolateMode::Bilinear),
    );
    let x1 = floats::<B, 3>(45, [2, 3, 16], device).require_grad();
    let w1 = floats::<B, 3>(46, [5, 3, 3], device).require_grad();
    let conv1 = module::conv1d(
        x1.clone(),
        w1.clone(),
        None,
        ConvOptions::new([2], [1], [1], 1),
    );
    let emb_w = floats::<B, 2>(47, [10, 6], device).require_grad();
    let emb = module::embedding(emb_w.clone(), ints::<B, 2>(48, [2, 5], 10, device));

    let loss = deconv.clone().sum()
        + maxp.clone().powf_scalar(2.0).sum()
        + avgp.clone().sum()
        + adapt.clone().sum()
        + near.clone().mean()
        + bilinear.clone().sum()
        + conv1.clone().sum()
        + emb.clone().sum();
    let grads = loss.backward();
    let mut out = vec![
        conv.into_data(),
        deconv.into_data(),
        maxp.into_data(),
        avgp.into_data(),
        adapt.into_data(),
        near.into_data(),
        bilinear.into_data(),
        conv1.into_data(),
        emb.into_data(),
    ];
    for g in [x.grad(&grads), w.grad(&grads), wt.grad(&grads)] {
        out.push(g.expect("gradient").into_data());
    }
    out.push(bias.grad(&grads).expect("gradient").into_data());
    out.push(x1.grad(&grads).expect("gradient").into_data());
    out.push(w1.grad(&grads).expect("gradient").into_data());
    out.push(emb_w.grad(&grads).expect("gradient").into_data());
    out
}

fn random_ops<B: Backend>(device: &B::Device) -> Outputs {
    let _guard = burn_swap_harness::rng_lock();
    B::seed(device, 1234);
    // Keep all of them alive before reading, so that the tight budget has to offload.
    let a = Tensor::<B, 2>::random([7, 9], Distribution::Default, device);
    let b = Tensor::<B, 2>::random([4, 4], Distribution::Normal(0.0, 2.0), device);
    let c = Tensor::<B, 1>::random([33], Distribution::Bernoulli(0.3), device);
    let d = Tensor::<B, 2, Int>::random([3, 5], Distribution::Uniform(0.0, 10.0), device);
    vec![a.into_data(), b.into_data(), c.into_data(), d.into_data()]
}

fn data_in_out<B: Backend>(device: &B::Device) -> Outputs {
    B::sync(device).unwrap();
    let half = TensorData::new(
        vec![
            burn::tensor::f16::from_f32(1.5),
            burn::tensor::f16::from_f32(-0.0),
        ],
        [2],
    );
    // All alive at once before reading, so that the tight budget has to offload; reads of
    // offloaded tensors are served from host memory.
    let specials = TensorData::new(vec![f32::NAN, -0.0, f32::INFINITY, 1e-40], [4]);
    let floats = [
        Tensor::<B, 1>::from_data(specials, device).reshape([2, 2]),
        Tensor::<B, 2>::zeros([3, 3], device),
        Tensor::<B, 2>::ones([2, 3], device),
        Tensor::<B, 2>::full([2, 2], 7.25, device).to_device(device),
        Tensor::<B, 1>::from_data(half, device).reshape([1, 2]),
    ];
    let ints = [
        Tensor::<B, 2, Int>::from_data(
            TensorData::new(vec![i32::MIN as i64, 0, 3, i32::MAX as i64], [2, 2]),
            device,
        ),
        Tensor::<B, 2, Int>::zeros([2, 2], device).to_device(device),
    ];
    let bools =
        Tensor::<B, 1, Bool>::from_data(TensorData::new(vec![true, false, true], [3]), device);
    B::sync(device).unwrap();
    let mut out: Outputs = floats.into_iter().map(|t| t.into_data()).collect();
    out.extend(ints.into_iter().map(|t| t.into_data()));
    out.push(bools.into_data());
    out
}

fn same(name: &str, plain: Outputs, swapped: Outputs) {
    assert_eq!(plain.len(), swapped.len(), "{name}: number of outputs");
    for (i, (p, s)) in plain.iter().zip(&swapped).enumerate() {
        assert_eq!(p.dtype, s.dtype, "{name}[{i}]: dtype");
        assert_eq!(p.shape, s.shape, "{name}[{i}]: shape");
        assert_eq!(&p.bytes[..], &s.bytes[..], "{name}[{i}]: bytes");
    }
}

/// Runs a family on `Flex` and on `Swap<Flex>`: unbudgeted, then under the tightest budget
/// it can run under (the minimum the unbudgeted run's report names: its largest single op,
/// plus what could not leave beside it), which forces offloads between ops.
fn check(name: &str, plain: fn(&FlexDevice) -> Outputs, swapped: fn(&FlexDevice) -> Outputs) {
    let device = FlexDevice;
    let expected = plain(&device);
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    same(name, expected.clone(), swapped(&device));
    let unbudgeted = burn_swap::report(&device).unwrap();
    let tight_budget = unbudgeted.workload.minimum_budget_bytes;
    assert!(tight_budget >= unbudgeted.workload.largest_op_bytes);
    assert!(
        unbudgeted.memory.peak_bytes > tight_budget,
        "{name}: nothing to offload"
    );

    burn_swap::configure(&device, SwapConfig::budget_bytes(tight_budget)).unwrap();
    burn_swap::reset_counters(&device);
    let result = swapped(&device);
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    same(&format!("{name} under {tight_budget} B"), expected, result);
    assert!(
        report.memory.peak_bytes <= tight_budget,
        "{name}: peak {} over budget\n{report}",
        report.memory.peak_bytes
    );
    assert!(
        report.transfers.offloads > 0,
        "{name}: the tight budget forced no offload"
    );
}

#[test]
fn float_ops_match() {
    check("float", float_ops::<Flex>, float_ops::<S>);
}

#[test]
fn ops_on_views_match() {
    check("view ops", view_ops::<Flex>, view_ops::<S>);
}

#[test]
fn int_ops_match() {
    check("int", int_ops::<Flex>, int_ops::<S>);
}

#[test]
fn bool_ops_match() {
    check("bool", bool_ops::<Flex>, bool_ops::<S>);
}

#[test]
fn activations_match() {
    check("activation", activations::<Flex>, activations::<S>);
}

#[test]
fn module_ops_and_their_gradients_match() {
    check(
        "module",
        module_ops::<Autodiff<Flex>>,
        module_ops::<Autodiff<S>>,
    );
}

#[test]
fn random_ops_match() {
    check("random", random_ops::<Flex>, random_ops::<S>);
}

#[test]
fn data_in_and_out_match() {
    check("data", data_in_out::<Flex>, data_in_out::<S>);
}

/// Moving a tensor between devices takes its handle out of one swap client and registers it
/// with another (here the same Flex device, the only one the CPU has, through the channel's
/// move path that `to_device` takes between distinct devices): values, books and trace agree.
#[test]
fn moving_a_tensor_through_the_channel_keeps_values_and_books() {
    use burn::tensor::TensorPrimitive;
    use burn_router::RunnerChannel;
    use burn_swap::unstable::SwapChannel;

    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let values = TensorData::new(XorShift::new(9).vec_f32(64, 1.0), [8, 8]);
    let t = Tensor::<S, 2>::from_data(values.clone(), &device);
    let before = burn_swap::memory(&device).unwrap().resident_bytes;
    burn_swap::restart_trace(&device);

    let primitive = t.into_primitive().tensor();
    let moved = SwapChannel::<Flex>::change_client_backend(primitive, &device);
    let t = Tensor::<S, 2>::from_primitive(TensorPrimitive::Float(moved));
    assert_eq!(burn_swap::memory(&device).unwrap().resident_bytes, before);

    let kinds: Vec<String> = burn_swap::unstable::trace_window(&device)
        .unwrap()
        .ops
        .iter()
        .map(|o| o.kind.clone())
        .collect();
    assert_eq!(kinds, ["Depart", "Arrive"]);
    let back = t.into_data();
    assert_eq!(&back.bytes[..], &values.bytes[..]);
}
