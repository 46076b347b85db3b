//! Burn's data-parallel training over `Swap`, as Burn's own collective tests run it on the
//! CPU: two workers (threads), each with a copy of the model and its own shard of every
//! batch, average their gradients with burn-collective's all-reduce after each backward and
//! take the same optimizer step. Under budgets of a half and a quarter of the unbudgeted
//! peak, every worker's losses and final parameters equal those of the same run on `Flex` bit
//! for bit, the two workers' models stay equal, and the device's counted peak stays within
//! the budget.
//!
//! On `Flex` both workers share one device (`FlexDevice`), hence one engine and one budget.
//! On GPUs each worker has a device of its own and each device its own engine and budget
//! (`tests/budget/cube.rs::two_devices_keep_budgets_of_their_own` shows that on two wgpu devices;
//! CubeCL's wgpu runtime has no device-to-device collective for Burn's all-reduce). The
//! book's *Peer-GPU offload* page works the sizes out for an 8-GPU server.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::ElementConversion;
use burn::tensor::backend::AutodiffBackend;
use burn_collective::{CollectiveConfig, PeerId, ReduceOperation};
use burn_swap::{Policy, Swap, SwapConfig};
use burn_swap_harness::models::{Mlp, MlpConfig};
use burn_swap_harness::train::{Outcome, init_mlp, parameters};

const WORKERS: usize = 2;
const STEPS: usize = 6;

fn config() -> MlpConfig {
    MlpConfig {
        d_in: 64,
        hidden: 128,
        depth: 3,
        d_out: 8,
        batch: 32,
        seed: 5,
    }
}

/// One worker: batches `WORKERS * step + rank` (its shard), gradients averaged over the
/// workers before each Adam step.
fn worker<B: AutodiffBackend>(rank: usize, mut model: Mlp<B>, device: &B::Device) -> Outcome {
    let config = config();
    let peer = PeerId::from(rank);
    let collective = CollectiveConfig::default().with_num_devices(WORKERS);
    burn_collective::register::<B::InnerBackend>(peer, device.clone(), collective)
        .expect("the worker joins the collective");
    let mut optimizer = AdamConfig::new().init::<B, Mlp<B>>();
    let mut losses = Vec::with_capacity(STEPS);
    for step in 0..STEPS {
        let loss = model.loss(&config, WORKERS * step + rank, device);
        losses.push(loss.clone().into_scalar().elem());
        let grads = GradientsParams::from_grads(loss.backward(), &model)
            .all_reduce::<B::InnerBackend>(peer, ReduceOperation::Mean)
            .expect("the gradients are all-reduced");
        model = optimizer.step(1e-3, model, grads);
    }
    burn_collective::finish_collective::<B::InnerBackend>(peer)
        .expect("the worker leaves the collective");
    Outcome {
        losses,
        params: parameters(&model),
    }
}

/// Both workers from one initial model made on the first device, worker `rank` on
/// `devices[rank]`; their outcomes in rank order.
fn data_parallel<B: AutodiffBackend>(devices: &[B::Device; WORKERS]) -> Vec<Outcome>
where
    Mlp<B>: Send,
{
    burn_collective::reset_collective::<B::InnerBackend>();
    let model = init_mlp::<B>(&config(), &devices[0], 17);
    std::thread::scope(|scope| {
        let workers: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(rank, device)| {
                // Each worker's copy gets autodiff nodes of its own (as Burn's DDP learner
                // does): clones would share the parameters' graph across the threads.
                let model = model.clone().fork(device);
                scope.spawn(move || worker::<B>(rank, model, device))
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker panicked"))
            .collect()
    })
}

#[test]
fn data_parallel_training_under_a_budget_is_bit_identical_to_flex() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let devices = [device; WORKERS];
    let expected = data_parallel::<Autodiff<Flex>>(&devices);
    assert_eq!(
        expected[0].params, expected[1].params,
        "Flex: the two workers' models after the same averaged steps"
    );
    assert_ne!(
        expected[0].losses, expected[1].losses,
        "the workers train on different shards"
    );

    // The unbudgeted peak of the same run through Swap, then a half and a quarter of it.
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    let unbudgeted = data_parallel::<Autodiff<Swap<Flex>>>(&devices);
    for (rank, (want, got)) in expected.iter().zip(&unbudgeted).enumerate() {
        want.assert_same(got, &format!("no budget, worker {rank}"));
    }
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;

    for (policy, fraction) in [
        (Policy::Reactive, 2),
        (Policy::Planned, 2),
        (Policy::Planned, 4),
    ] {
        let budget = peak / fraction;
        let swap = SwapConfig::budget_bytes(budget).with_policy(policy);
        burn_swap::configure(&device, swap).unwrap();
        burn_swap::reset_counters(&device);
        let outcomes = data_parallel::<Autodiff<Swap<Flex>>>(&devices);
        let report = burn_swap::report(&device).unwrap();
        for (rank, (want, got)) in expected.iter().zip(&outcomes).enumerate() {
            want.assert_same(
                got,
                &format!("{policy:?} at 1/{fraction} of the peak, worker {rank}"),
            );
        }
        eprintln!(
            "{policy:?} at 1/{fraction}: unbudgeted peak {peak} B, budget {budget} B, peak {} B, {} offloads, \
             {} recomputes",
            report.memory.peak_bytes, report.transfers.offloads, report.transfers.recomputes
        );
        assert!(report.memory.peak_bytes <= budget, "{policy:?}: {report}");
        assert!(
            report.transfers.offloads + report.transfers.recomputes > 0,
            "{policy:?}: {report}"
        );
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let memory = burn_swap::memory(&device).unwrap();
    assert_eq!(memory.host_bytes, 0, "nothing is left on the host");
}
