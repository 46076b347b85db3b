//! Property tests: random programs of tensor ops and views (transposes, flips, permutes,
//! slices, expands, narrows and cats, broadcasts against reductions, matmuls, elementwise
//! ops, native ops on views, reshapes of views, slice assignments, masked fills, gathers,
//! selects, sorts, 3-D expands, drops) give
//! through `Swap<Flex>` the bits they give on `Flex`, with no budget and under a random
//! budget between the smallest the unbudgeted run's report names and its peak, under each
//! policy, and again with faults at every transfer point; the counted peak stays within the
//! budget (and, in these debug builds, the engine checks the budget after every op).

use burn::backend::Autodiff;
use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::IndexingUpdateOp;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData, backend::Backend};
use burn_swap::{Policy, Swap, SwapConfig};
use proptest::prelude::*;

type S = Swap<Flex>;

const N: usize = 8;

/// One step of a program: an op code and three operands, each taken modulo what it picks
/// from (a tensor of the pool, a dimension, a row).
type Step = (u8, u8, u8, u8);

/// Runs a program on backend `B` and returns every value it leaves, in order.
fn run<B: Backend>(program: &[Step], device: &B::Device) -> Vec<u32> {
    let seed = |k: usize| -> Tensor<B, 2> {
        let values: Vec<f32> = (0..N * N)
            .map(|i| (((i * 31 + k * 17) % 23) as f32 - 11.0) / 5.0)
            .collect();
        Tensor::from_data(TensorData::new(values, [N, N]), device)
    };
    let mut pool: Vec<Tensor<B, 2>> = (0..4).map(seed).collect();
    for &(op, a, b, c) in program {
        if pool.is_empty() {
            pool.push(seed(op as usize));
        }
        let pick = |i: u8| i as usize % pool.len();
        let x = pool[pick(a)].clone();
        let y = pool[pick(b)].clone();
        let dim = c as usize % 2;
        let row = c as usize % N;
        let out = match op % 25 {
            0 => x + y,
            1 => x * y,
            2 => x.matmul(y) / N as f32,
            3 => x.transpose(),
            4 => x.flip([dim as isize]),
            5 => x.permute([1, 0]),
            6 => x.clone().slice([row..row + 1, 0..N]).expand([N, N]) + y,
            7 => x.clone() - x.mean_dim(dim),
            8 => x.tanh(),
            9 => Tensor::cat(vec![x.narrow(0, 0, N / 2), y.narrow(0, N / 2, N / 2)], 0),
            10 => x.swap_dims(0, 1).matmul(y.flip([dim as isize])) / N as f32,
            11 => x.clone().narrow(1, row / 2, N / 2).repeat_dim(1, 2) * y,
            12 => {
                // Drops a tensor of the pool.
                pool.remove(pick(a));
                continue;
            }
            13 => x.exp().clamp(-4.0, 4.0) - y.sum_dim(dim),
            14 => x.transpose().matmul(y) / N as f32,
            // Native ops (run on the inner backend) on views and on dense tensors.
            15 => burn::tensor::activation::softmax(x, dim),
            16 => x.transpose().flip([dim as isize]) * y,
            17 => burn::tensor::activation::relu(x.transpose()) - y.permute([1, 0]),
            // A reshape of a view (a copy), an assignment into a slice, a masked fill.
            18 => x.reshape([N / 2, 2 * N]).swap_dims(0, 1).reshape([N, N]),
            19 => x.slice_assign([0..N / 2, 0..N], y.slice([N / 2..N, 0..N])),
            20 => x.mask_fill(y.greater_elem(0.0), 0.5),
            // Int tensors (an argmax, an arange: native), gathers and selects by them, a sort
            // (native), a 3-D expand of a view reduced back.
            21 => x.gather(1, y.argmax(1).repeat_dim(1, N)),
            22 => x.sort(dim),
            23 => {
                let rows = Tensor::<B, 1, burn::tensor::Int>::arange(0..N as i64, device);
                x.select(0, rows.flip([0]))
            }
            _ => x
                .transpose()
                .unsqueeze_dim::<3>(0)
                .expand([2, N, N])
                .sum_dim(0)
                .squeeze_dim::<2>(0),
        };
        pool.push(out);
        if pool.len() > 10 {
            pool.remove(0);
        }
    }
    pool.into_iter()
        .flat_map(|t| t.into_data().to_vec::<f32>().unwrap())
        .map(f32::to_bits)
        .collect()
}

/// Trains with a program: three parameters start the pool, the program's ops (each with a
/// backward pass: convolutions, pools, interpolation, attention, embeddings, norms,
/// cumulative sums, masked and indexed writes, on dense tensors and on views) extend it, the
/// loss weighs everything left, and three steps of gradient descent follow. Returns the bits
/// of every loss, gradient and updated parameter.
fn train<B: AutodiffBackend>(program: &[Step], device: &B::Device) -> Vec<u32> {
    use burn::tensor::module::{attention, avg_pool2d, conv2d, embedding, interpolate, max_pool2d};
    use burn::tensor::ops::{
        AttentionModuleOptions, ConvOptions, InterpolateMode, InterpolateOptions,
    };
    let square = |k: usize| -> TensorData {
        let values: Vec<f32> = (0..N * N)
            .map(|i| (((i * 29 + k * 13) % 19) as f32 - 9.0) / 7.0)
            .collect();
        TensorData::new(values, [N, N])
    };
    let as_image = |t: Tensor<B, 2>| t.reshape([1, 1, N, N]);
    let from_image = |t: Tensor<B, 4>| t.reshape([N, N]);
    let mut params: Vec<Tensor<B, 2>> = (0..3)
        .map(|k| Tensor::from_data(square(k), device).require_grad())
        .collect();
    let mut bits = Vec::new();
    for _ in 0..3 {
        let mut pool = params.clone();
        for &(op, a, b, c) in program {
            if pool.is_empty() {
                pool.push(params[op as usize % params.len()].clone());
            }
            let pick = |i: u8| i as usize % pool.len();
            let x = pool[pick(a)].clone();
            let y = pool[pick(b)].clone();
            let dim = c as usize % 2;
            let row = c as usize % N;
            let out = match op % 24 {
                0 => x * y.tanh(),
                1 => x.matmul(y.transpose()) / N as f32,
                2 => x.clone().slice([row..row + 1, 0..N]).expand([N, N]) * y.flip([dim as isize]),
                3 => {
                    // A layer norm along `dim` of a transposed view.
                    let x = x.transpose();
                    let mean = x.clone().mean_dim(dim);
                    let var = x.clone().var(dim);
                    (x - mean) / (var + 1e-5).sqrt()
                }
                4 => burn::tensor::activation::log_softmax(x.permute([1, 0]), dim) * y,
                5 => burn::tensor::activation::sigmoid(x.narrow(1, 0, N / 2))
                    .repeat_dim(1, 2)
                    .mul(y),
                6 => {
                    pool.remove(pick(a));
                    continue;
                }
                7 => {
                    let weight = y.slice([0..3, 0..3]).reshape([1, 1, 3, 3]);
                    let options = ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
                    from_image(conv2d(as_image(x.transpose()), weight, None, options))
                }
                8 => from_image(max_pool2d(
                    as_image(x),
                    [3, 3],
                    [1, 1],
                    [1, 1],
                    [1, 1],
                    false,
                )),
                9 => from_image(avg_pool2d(
                    as_image(x.flip([0])),
                    [3, 3],
                    [1, 1],
                    [1, 1],
                    true,
                    false,
                )),
                10 => {
                    let corner = x.slice([0..N / 2, N / 2..N]).reshape([1, 1, N / 2, N / 2]);
                    let options = InterpolateOptions::new(InterpolateMode::Bilinear);
                    from_image(interpolate(corner, [N, N], options)) + y
                }
                11 => {
                    let (max, _) = x.clone().max_dim_with_indices(dim);
                    x - max
                }
                12 => x.cumsum(dim) / N as f32,
                13 => x
                    .clone()
                    .mask_where(y.clone().greater_elem(0.0), y.transpose()),
                14 => {
                    let rows = y.argmax(1).reshape([N]);
                    x.clone()
                        .select_assign(0, rows, x.transpose() * 0.5, IndexingUpdateOp::Add)
                }
                15 => {
                    let indices = y.argmin(1).reshape([1, N]);
                    embedding(x, indices).reshape([N, N])
                }
                16 => {
                    let options = AttentionModuleOptions::default();
                    let out = attention(
                        as_image(x.clone()),
                        as_image(y),
                        as_image(x),
                        None,
                        None,
                        options,
                    );
                    from_image(out)
                }
                17 => x
                    .clone()
                    .slice_assign([0..N / 2, 0..N], y.slice([N / 2..N, 0..N]).exp()),
                18 => Tensor::stack::<3>(vec![x, y.transpose()], 0)
                    .mean_dim(0)
                    .reshape([N, N]),
                19 => x.gather(1, y.argmax(1).repeat_dim(1, N)) * 2.0,
                20 => x.sort(dim) - y.detach(),
                21 => x.powf_scalar(2.0) / 4.0 + y.clamp(-1.0, 1.0),
                22 => burn::tensor::activation::gelu(x.swap_dims(0, 1)) - y.sum_dim(dim),
                _ => {
                    x.unsqueeze_dim::<3>(0)
                        .expand([2, N, N])
                        .sum_dim(0)
                        .squeeze_dim::<2>(0)
                        * y.mean().unsqueeze::<2>()
                }
            };
            pool.push(out);
            if pool.len() > 10 {
                pool.remove(0);
            }
        }
        let loss = pool
            .into_iter()
            .enumerate()
            .map(|(k, t)| (t * ((k % 3) as f32 + 0.5) / 64.0).sum())
            .reduce(|a, b| a + b)
            .unwrap();
        bits.extend(
            loss.clone()
                .into_data()
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits()),
        );
        let grads = loss.backward();
        params = params
            .into_iter()
            .map(|p| {
                let grad = p
                    .grad(&grads)
                    .unwrap_or_else(|| p.clone().inner().zeros_like());
                bits.extend(
                    grad.to_data()
                        .to_vec::<f32>()
                        .unwrap()
                        .iter()
                        .map(|v| v.to_bits()),
                );
                Tensor::from_inner(p.inner() - grad * 0.05).require_grad()
            })
            .collect();
    }
    for p in params {
        bits.extend(
            p.into_data()
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits()),
        );
    }
    bits
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(any::<Step>(), 4..48)
}

/// One case: the program through `Swap<Flex>` unbudgeted, then at a budget `fraction` of
/// the way from the minimum its report names to its peak under policy `policy`; with
/// `stress`, offloads are compressed, transfers jittered and 2% of the passes through every
/// fault hook fail (faults exist in debug builds, the tests' profile).
fn check(
    program: &[Step],
    fraction: f64,
    policy: usize,
    stress: bool,
) -> Result<(), TestCaseError> {
    check_with(
        || run::<Flex>(program, &FlexDevice),
        || run::<S>(program, &FlexDevice),
        fraction,
        policy,
        stress,
    )
}

/// [`check`] for any pair of runs: `plain` on Flex, `swapped` the same through `Swap<Flex>`.
fn check_with(
    plain: impl Fn() -> Vec<u32>,
    swapped: impl Fn() -> Vec<u32> + std::panic::RefUnwindSafe,
    fraction: f64,
    policy: usize,
    stress: bool,
) -> Result<(), TestCaseError> {
    use burn_swap::unstable::faults::{self, Hook};
    let device = FlexDevice;
    // Flex itself panics on some programs (burn-flex 0.21's SIMD row sums over a flipped
    // view's first dim, "src too short"): nothing to compare those with.
    let Ok(plain) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&plain)) else {
        return Err(TestCaseError::reject("Flex itself panics on this program"));
    };
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    // A previous case may have left tensors behind (see below): counted in this run's peak.
    let before = burn_swap::memory(&device).map_or(0, |m| m.resident_bytes);
    prop_assert_eq!(&swapped(), &plain, "unbudgeted");
    let unbudgeted = burn_swap::report(&device).unwrap();
    let (minimum, peak) = (
        unbudgeted.workload.minimum_budget_bytes,
        unbudgeted.memory.peak_bytes,
    );
    prop_assert!(minimum >= unbudgeted.workload.largest_op_bytes && minimum <= peak);
    // What the unbudgeted run left behind (Burn's autodiff may keep a tensor of a graph
    // alive past its backward pass) is on the device before the budgeted run starts, and
    // may share a buffer with a view no budget can move: the budget makes room for it.
    let left = unbudgeted.memory.resident_bytes;
    let budget = minimum + left + ((peak - minimum) as f64 * fraction) as u64;
    let policy = Policy::ALL[policy];
    // Recomputation pins its recipes' inputs on top of the minimum (see the book).
    let budget = if policy == Policy::RecomputeOnly {
        budget.max(peak / 2)
    } else {
        budget
    };
    let mut config = SwapConfig::budget_bytes(budget).with_policy(policy);
    if stress {
        config = config
            .with_compression(burn_swap::Compression::On { max_ratio: 1.0 })
            .with_transfer_jitter(20);
        burn_swap_harness::verify::quiet_injected_panics();
        for hook in Hook::ALL {
            faults::set_rate(hook, 20_000);
        }
    }
    burn_swap::configure(&device, config).unwrap();
    burn_swap::reset_counters(&device);
    let swapped = std::panic::catch_unwind(&swapped);
    faults::clear();
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let swapped = swapped.map_err(|_| {
        TestCaseError::fail(format!(
            "{} at {budget} of {peak} bytes failed\n{report}",
            policy.name()
        ))
    })?;
    prop_assert_eq!(&swapped, &plain, "{} at {} bytes", policy.name(), budget);
    prop_assert!(
        report.memory.peak_bytes <= budget,
        "peak over the budget\n{}",
        report
    );
    // Without a budget this run would reach the unbudgeted run's peak; when tensors were left
    // behind, Burn may let go of them at any step, and that peak says less.
    if budget < peak && before == 0 && left == 0 {
        // Something had to leave for the run to stay under its peak (a tensor evicted and
        // never needed again is neither fetched nor recomputed).
        prop_assert!(
            report.transfers.offloads + report.transfers.recomputes + report.transfers.evictions
                > 0,
            "{}",
            report
        );
    }
    Ok(())
}

/// The cases per property: `PROPTEST_CASES` when set, else 48.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

proptest! {
    // 48 cases in CI; `PROPTEST_CASES=1000` for a longer run by hand.
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_programs_are_bit_identical_under_random_budgets(
        program in steps(),
        fraction in 0.0f64..1.0,
        policy in 0usize..4,
    ) {
        check(&program, fraction, policy, false)?;
    }

    /// The same under faults at every transfer point, with compression and jitter: a failed
    /// transfer leaves each tensor (and each view's buffer) whole.
    #[test]
    fn random_programs_survive_faults_at_every_transfer_point(
        program in steps(),
        fraction in 0.0f64..1.0,
        policy in 0usize..4,
    ) {
        check(&program, fraction, policy, true)?;
    }

    /// Training: every op's backward pass through `Autodiff<Swap<Flex>>`, three steps of
    /// gradient descent, losses, gradients and parameters bit-identical to `Autodiff<Flex>`,
    /// at the minimum budget or above it, with or without faults at every transfer point.
    #[test]
    fn random_training_programs_are_bit_identical_under_random_budgets(
        program in steps(),
        fraction in prop_oneof![Just(0.0f64), 0.0f64..1.0],
        policy in 0usize..4,
        stress in any::<bool>(),
    ) {
        check_with(
            || train::<Autodiff<Flex>>(&program, &FlexDevice),
            || train::<Autodiff<S>>(&program, &FlexDevice),
            fraction,
            policy,
            stress,
        )?;
    }
}
