//! Property tests: random programs of tensor ops and views (transposes, flips, permutes,
//! slices, expands, narrows and cats, broadcasts against reductions, matmuls, elementwise
//! ops, native ops on views, reshapes of views, slice assignments, masked fills, gathers,
//! selects, sorts, 3-D expands, drops) give
//! through `Swap<Flex>` the bits they give on `Flex`, with no budget and under a random
//! budget between the smallest the unbudgeted run's report names and its peak, under each
//! policy, and again with faults at every transfer point; the counted peak stays within the
//! budget (and, in these debug builds, the engine checks the budget after every op).

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
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
    use burn_swap::unstable::faults::{self, Hook};
    let device = FlexDevice;
    let plain = run::<Flex>(program, &device);
    let _guard = burn_swap_suite::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    prop_assert_eq!(&run::<S>(program, &device), &plain, "unbudgeted");
    let unbudgeted = burn_swap::report(&device).unwrap();
    let (minimum, peak) = (unbudgeted.minimum_budget_bytes, unbudgeted.peak_bytes);
    prop_assert!(minimum >= unbudgeted.largest_op_bytes && minimum <= peak);
    let budget = minimum + ((peak - minimum) as f64 * fraction) as u64;
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
        burn_swap_suite::verify::quiet_injected_panics();
        for hook in Hook::ALL {
            faults::set_rate(hook, 20_000);
        }
    }
    burn_swap::configure(&device, config).unwrap();
    burn_swap::reset_counters(&device);
    let swapped = std::panic::catch_unwind(|| run::<S>(program, &device));
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
        report.peak_bytes <= budget,
        "peak over the budget\n{}",
        report
    );
    if budget < peak {
        // Something had to leave for the run to stay under its peak (a tensor evicted and
        // never needed again is neither fetched nor recomputed).
        prop_assert!(
            report.offloads + report.recomputes + report.evictions > 0,
            "{}",
            report
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

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
}
