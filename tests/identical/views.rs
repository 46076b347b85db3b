//! Buffers, not tensors: a view (transposed, swapped, permuted, flipped, expanded, sliced,
//! reshaped, unfolded) shares the buffer of the tensor it was made from, and the books count that
//! buffer once, for as long as one of them holds it. Under a budget, a shared buffer leaves
//! whole (its dense holders by offload, its strided ones by recomputation, or, when one of
//! them has no op to replay, the buffer as one copy that brings every holder back as the
//! view it was); a strided view with a buffer of its own and no op to replay leaves by an
//! offload of the buffer with its layout; everything computed from the views is the plain
//! backend's, bit for bit.

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::{Distribution, Tensor, TensorData, backend::Backend};
use burn_swap::{Swap, SwapConfig};

type S = Swap<Flex>;

/// A [rows, cols] float tensor with distinct values.
fn matrix<B: Backend>(rows: usize, cols: usize, device: &B::Device) -> Tensor<B, 2> {
    let values: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 37) % 101) as f32 / 7.0 - 5.0)
        .collect();
    Tensor::from_data(TensorData::new(values, [rows, cols]), device)
}

fn resident(device: &FlexDevice) -> u64 {
    burn_swap::memory(device).map_or(0, |m| m.resident_bytes)
}

#[test]
fn a_view_costs_no_bytes_of_its_own() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    let base = resident(&device);
    // 64 x 64 f32: 16 KiB.
    let x = matrix::<S>(64, 64, &device);
    let row = matrix::<S>(1, 64, &device);
    let with_x = resident(&device);
    assert_eq!(with_x - base, 16384 + 256);
    let views = vec![
        x.clone().swap_dims(0, 1),
        x.clone().permute([1, 0]),
        x.clone().flip([0]),
        x.clone().slice([8..40, 0..64]),
        x.clone().narrow(1, 16, 8),
        x.clone().reshape([32, 128]).slice([0..16, 0..128]),
        row.clone().expand([64, 64]),
        x.clone().chunk(4, 0).remove(2),
    ];
    assert_eq!(
        resident(&device),
        with_x,
        "views of x and of a row, alive at once, counted once"
    );
    let report = burn_swap::report(&device).unwrap();
    assert_eq!(
        report.memory.peak_bytes, with_x,
        "not even for an instant\n{report}"
    );
    // Burn lets go of x: its views still hold its whole buffer.
    drop(x);
    drop(row);
    assert_eq!(resident(&device), with_x);
    drop(views);
    assert_eq!(resident(&device), base);
}

#[test]
fn a_slice_of_a_consumed_tensor_holds_its_whole_buffer() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let base = resident(&device);
    // The slice is all that is left of x, and it keeps x's 16 KiB alive.
    let corner = matrix::<S>(64, 64, &device).slice([0..2, 0..2]);
    assert_eq!(resident(&device) - base, 16384);
    drop(corner);
    assert_eq!(resident(&device), base);
}

/// Builds views of a few activations, keeps them alive across unrelated work that needs
/// their room, then uses them: matmuls on transposed and flipped operands, broadcasts on
/// expanded ones.
fn program<B: Backend>(device: &B::Device) -> Vec<f32> {
    let a = matrix::<B>(48, 48, device);
    let b = (a.clone() * 0.5).exp() - 1.0;
    let at = a.clone().swap_dims(0, 1);
    let bf = b.clone().flip([1]);
    let a_rows = a.clone().reshape([96, 24]);
    let col = b.clone().slice([0..48, 5..6]).expand([48, 48]);
    // Burn's transpose (the swap of the last two dimensions) makes a view like the others.
    let bt = b.clone().transpose();
    // Unrelated work that needs the room those hold.
    let mut filler = Tensor::<B, 2>::random([48, 48], Distribution::Default, device) * 0.0;
    for i in 0..6 {
        filler = filler + matrix::<B>(48, 48, device).sin() * (i as f32);
    }
    let out = at.matmul(bf) + col * filler.tanh() - bt * 0.25;
    let mut values: Vec<f32> = out.into_data().to_vec().unwrap();
    values.extend(a_rows.sum_dim(1).into_data().to_vec::<f32>().unwrap());
    values.extend(b.mean().into_data().to_vec::<f32>().unwrap());
    drop(a);
    values
}

#[test]
fn shared_buffers_leave_whole_under_a_budget_bit_for_bit() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    // Seeded below: the generator is shared with the other tests of this binary.
    let _rng = burn_swap_harness::rng_lock();
    <Flex as Backend>::seed(&device, 7);
    let plain = program::<Flex>(&device);
    // Unbudgeted through Swap: the peak and the minimum, as counted.
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    <S as Backend>::seed(&device, 7);
    assert_eq!(program::<S>(&device), plain);
    let unbudgeted = burn_swap::report(&device).unwrap();
    let (peak, minimum) = (
        unbudgeted.memory.peak_bytes,
        unbudgeted.workload.minimum_budget_bytes,
    );
    // Every view and its source can leave: the smallest budget is the largest op's own
    // bytes, and the run trains under it.
    assert_eq!(
        minimum, unbudgeted.workload.largest_op_bytes,
        "{unbudgeted}"
    );
    assert!(minimum < peak, "{unbudgeted}");
    for budget in [(peak + minimum) / 2, minimum] {
        burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
        burn_swap::reset_counters(&device);
        <S as Backend>::seed(&device, 7);
        let got = program::<S>(&device);
        let report = burn_swap::report(&device).unwrap();
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        assert_eq!(got, plain, "at {budget} of {peak} bytes");
        assert!(report.memory.peak_bytes <= budget, "{report}");
        assert_eq!(report.memory.budget_overshoots, 0, "{report}");
        assert!(
            report.transfers.offloads + report.transfers.evictions > 0,
            "{report}"
        );
    }
}

/// A view made again by recomputation can leave again the same way: it keeps its op, and
/// the tensor it is made from stays in the books while it lives.
#[test]
fn a_recomputed_view_can_leave_again() {
    fn run<B: Backend>(device: &B::Device) -> Vec<f32> {
        // `x` is consumed by the reshape, the reshape by the transpose: only the view and the
        // buffer it holds are left, and room is needed three times while it lives.
        let x = matrix::<B>(32, 32, device);
        let view = x.reshape([16, 64]).swap_dims(0, 1);
        let mut out = Vec::new();
        for round in 0..3 {
            let other = matrix::<B>(32, 32, device) * (round as f32 + 1.0);
            let more = other.clone().exp();
            out.extend(more.sum().into_data().to_vec::<f32>().unwrap());
            out.extend(
                other
                    .reshape([16, 64])
                    .matmul(view.clone())
                    .sum()
                    .into_data()
                    .to_vec::<f32>()
                    .unwrap(),
            );
        }
        out
    }
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let plain = run::<Flex>(&device);
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    assert_eq!(run::<S>(&device), plain);
    let unbudgeted = burn_swap::report(&device).unwrap();
    let budget = unbudgeted.workload.minimum_budget_bytes;
    assert!(budget < unbudgeted.memory.peak_bytes, "{unbudgeted}");
    burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
    burn_swap::reset_counters(&device);
    let got = run::<S>(&device);
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    assert_eq!(got, plain);
    assert!(report.memory.peak_bytes <= budget, "{report}");
    assert!(
        report.transfers.recomputes >= 2,
        "the view left more than once\n{report}"
    );
}

/// Views made before any budget was set, of matrices they consumed, keep no op to be
/// replayed: a transpose, and a flipped permutation. Under a budget set afterwards, room for
/// new work is made by offloading their buffers with their layouts; each comes back as the
/// same view, and what is computed from it is Flex's, bit for bit.
#[test]
fn views_made_before_the_budget_leave_with_their_layout() {
    use burn_swap_harness::verify::{VIEWS_BUDGET, check_views_made_before_a_budget};
    let _guard = burn_swap_harness::swap_device_lock();
    check_views_made_before_a_budget::<Flex>(&FlexDevice, SwapConfig::budget_bytes(VIEWS_BUDGET));
}

/// Two views sharing the buffer of a matrix that is gone (a transpose and a flip), then a
/// budget under which that buffer must leave, whole, while new work runs; one of the views is
/// dropped while the buffer is away (the one whose offload carried it, or the other), and the
/// other, brought back, computes what Flex computes.
fn views_dropped_while_away<B: Backend>(
    device: &B::Device,
    drop_first: bool,
    budget: impl Fn(),
) -> Vec<u32> {
    let square = |k: usize| -> Tensor<B, 2> {
        let values: Vec<f32> = (0..32 * 32)
            .map(|i| ((i * 37 + k * 11) % 101) as f32 / 7.0 - 5.0)
            .collect();
        Tensor::from_data(TensorData::new(values, [32, 32]), device)
    };
    let shared = square(0);
    let transposed = shared.clone().swap_dims(0, 1);
    let flipped = shared.flip([1]);
    budget();
    let product = square(1).matmul(square(2));
    let kept = if drop_first {
        drop(transposed);
        flipped
    } else {
        drop(flipped);
        transposed
    };
    let out = kept.matmul(product.clone()) - product;
    let values = out.into_data().to_vec::<f32>().expect("f32 values");
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn a_buffer_that_left_whole_loses_nothing_when_its_holders_are_dropped_away() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    for drop_first in [true, false] {
        let plain = views_dropped_while_away::<Flex>(&device, drop_first, || ());
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        let budget = 3 * 4096 + 1024;
        let swapped = views_dropped_while_away::<S>(&device, drop_first, || {
            burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
            burn_swap::reset_counters(&device);
        });
        let report = burn_swap::report(&device).unwrap();
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        assert_eq!(swapped, plain, "dropping the first view: {drop_first}");
        assert!(report.memory.peak_bytes <= budget, "{report}");
        assert_eq!(report.transfers.whole_buffer_offloads, 1, "{report:?}");
        let memory = burn_swap::memory(&device).unwrap();
        assert_eq!(
            (memory.resident_bytes, memory.host_bytes),
            (0, 0),
            "nothing is left behind"
        );
    }
}
