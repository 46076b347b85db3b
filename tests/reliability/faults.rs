//! Nothing lost under faults: failures injected at every transfer point (reading a tensor
//! off the device, host allocation, compression, the write back, decompression, a transfer
//! worker's job panicking, peer copies and reservations) leave each tensor whole where it was, so training stays
//! bit-identical to the unwrapped backend and the budget holds. Faults are injected in
//! debug builds only (the tests' profile); the hooks are process-wide, so every test here
//! holds the device lock.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::ElementConversion;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use burn_swap::unstable::faults::{self, Hook};
use burn_swap::{Compression, PeerSpec, Policy, Swap, SwapConfig};
use burn_swap_harness::models::{BnCnnConfig, Mlp, MlpConfig, TransformerConfig};
use burn_swap_harness::train::{Outcome, init_mlp, parameters};
use burn_swap_harness::verify::{assert_budgeted_run, quiet_injected_panics, run_configured};
use burn_swap_harness::workload::Workload;

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

/// The unbudgeted counted peak of a workload's run, and the plain run's outcome.
fn plain_and_peak(workload: &Workload, steps: usize) -> (Outcome, u64) {
    let device = FlexDevice;
    let plain = workload.train::<Plain>(&device, steps);
    let (_, report) = run_configured(&device, SwapConfig::default(), || {
        workload.train::<Swapped>(&device, steps)
    });
    (plain, report.memory.peak_bytes)
}

/// Writes back that fail leave the tensor offloaded with its copy whole: the next use
/// fetches it again, on the planned path (the receive worker) and on the op's path alike.
#[test]
fn a_failed_fetch_keeps_the_tensor() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let workload = Workload::Mlp(MlpConfig::small());
    let steps = 8;
    let (plain, peak) = plain_and_peak(&workload, steps);
    for policy in [Policy::Reactive, Policy::OffloadOnly] {
        for compression in [Compression::Off, Compression::On { max_ratio: 1.0 }] {
            let budget = peak / 3;
            let what = format!("{} at 1/3, {compression:?}", policy.name());
            faults::clear();
            let before = faults::injected(Hook::Upload);
            // Every fourth write back fails, from the first.
            faults::set_rate(Hook::Upload, 250_000);
            let config = SwapConfig::budget_bytes(budget)
                .with_policy(policy)
                .with_compression(compression);
            let (swapped, report) = run_configured(&device, config, || {
                workload.train::<Swapped>(&device, steps)
            });
            faults::clear();
            let injected = faults::injected(Hook::Upload) - before;
            assert_budgeted_run(&what, &plain, &swapped, &report, budget);
            assert!(injected > 0, "{what}: no fault injected");
            assert_eq!(
                report.transfers.failed_fetches, injected,
                "{what}\n{report}"
            );
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

/// The soak CI runs: random faults at every hook (1% of the passes each) with transfer
/// jitter, compression and simulated peers, on an MLP, a transformer and a BatchNorm CNN
/// under each policy, 500 steps of each (71 s on the 2-vCPU VM, 2026-12-07: as many as fit
/// in two minutes of CI; 13,364 faults survived): losses and parameters
/// bit-identical to the unwrapped run, the budget held, every injected fault survived, and
/// nothing left on the device or the host once the run's tensors are dropped. (The
/// 1,000-step run is the book's *Reliability* page.)
#[test]
fn training_survives_random_faults_at_every_transfer_point() {
    soak(500, 10_000);
}

/// The long soak, recorded in the book's *Reliability* page: 1,000 steps of each model under
/// each policy (`cargo test --test reliability -- --ignored --nocapture thousand_steps`).
#[test]
#[ignore = "the long soak (minutes): run by hand for the book"]
fn training_survives_random_faults_for_a_thousand_steps() {
    soak(1000, 10_000);
}

/// Random faults at every hook, `per_million` passes in a million each.
fn soak(steps: usize, per_million: u64) {
    quiet_injected_panics();
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let workloads = [
        Workload::Mlp(MlpConfig::small()),
        Workload::Transformer(TransformerConfig::small()),
        Workload::BnCnn(BnCnnConfig::small()),
    ];
    let peers = || vec![PeerSpec::simulated("peer", 1 << 30, 50e9)];
    let policies = [
        Policy::Reactive,
        Policy::Planned,
        Policy::OffloadOnly,
        Policy::RecomputeOnly,
    ];
    let mut survived = [0u64; Hook::ALL.len()];
    for workload in &workloads {
        let (plain, peak) = plain_and_peak(workload, steps);
        for (k, policy) in policies.into_iter().enumerate() {
            let budget = peak / 2;
            let what = format!("{} under {} at 1/2", workload.name(), policy.name());
            let before = Hook::ALL.map(faults::injected);
            faults::clear();
            faults::seed(k as u64 + 1);
            for hook in Hook::ALL {
                faults::set_rate(hook, per_million);
            }
            // Planned on the op thread: the plan steers from the same iteration in every
            // run, so that faults hit its copies whatever the planner thread's pace.
            let mut config = SwapConfig::budget_bytes(budget)
                .with_policy(policy)
                .with_compression(Compression::On { max_ratio: 1.0 })
                .with_transfer_jitter(100)
                .with_background_planning(false);
            if k % 2 == 1 {
                config = config.with_peers(peers());
            }
            // Planned copies on the workers under `offload-only` (a free hand-over), where
            // the measured one decides under `planned` (on this machine's small tensors,
            // mostly on the op thread): faults hit both paths.
            let handover = (policy == Policy::OffloadOnly).then_some(0.0);
            burn_swap::unstable::set_handover_seconds(handover);
            if handover.is_some() {
                // Random worker faults are few and vary with what ran before in the process
                // (4 to 10 over the soak run alone, 1 to 3 after the file's other tests, none
                // once in CI): the first worker pass of each run handed to the workers fails
                // for certain, so that the hook is always exercised.
                faults::force(Hook::WorkerPanic, 1);
            }
            let (swapped, report) = run_configured(&device, config, || {
                workload.train::<Swapped>(&device, steps)
            });
            burn_swap::unstable::set_handover_seconds(None);
            faults::clear();
            assert_eq!(swapped.loss_bits(), plain.loss_bits(), "{what}\n{report}");
            assert_eq!(swapped, plain, "{what}: parameters");
            assert!(report.memory.peak_bytes <= budget, "{what}\n{report}");
            // The run's tensors are gone with its model: nothing stays on either side.
            let memory = burn_swap::memory(&device).unwrap();
            assert_eq!(
                (memory.resident_bytes, memory.host_bytes),
                (0, 0),
                "{what}: left behind\n{report}"
            );
            for (i, hook) in Hook::ALL.into_iter().enumerate() {
                survived[i] += faults::injected(hook) - before[i];
            }
        }
    }
    let by_hook: Vec<(&str, u64)> = Hook::ALL
        .iter()
        .zip(survived)
        .map(|(h, n)| (h.name(), n))
        .collect();
    println!("{steps} steps per run: faults survived per hook: {by_hook:?}");
    // Every hook but the pinned pool's: Flex reads into no pinned memory
    // (`tests/budget/cube.rs` injects it on wgpu).
    for (name, n) in &by_hook {
        assert!(
            *n > 0 || *name == Hook::PinnedPool.name(),
            "no {name} fault was injected: {by_hook:?}"
        );
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

/// One run of the panic test: an MLP trained for 8 steps with Adam, where user code panics
/// in step 4 after its forward and backward ops were recorded (caught with `catch_unwind`;
/// the step's loss and gradients are dropped during unwinding); the losses of the other
/// steps and the final parameters.
fn train_through_a_panic<B: AutodiffBackend>(device: &B::Device) -> (Vec<u32>, Vec<TensorData>) {
    let config = MlpConfig::small();
    let mut model = init_mlp::<B>(&config, device, 42);
    let mut optimizer = AdamConfig::new().init::<B, Mlp<B>>();
    let mut losses = Vec::new();
    for step in 0..8 {
        if step == 4 {
            let m = &model;
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let loss = m.loss(&config, step, device);
                let grads = loss.backward();
                let _kept = (loss, grads);
                panic!("user code fails mid-step");
            }));
            assert!(caught.is_err());
            continue;
        }
        let loss = model.loss(&config, step, device);
        let value: f32 = loss.clone().into_scalar().elem();
        losses.push(value.to_bits());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(1e-3, model, grads);
    }
    (losses, parameters(&model))
}

/// A panic mid-step: the engine's books stay consistent (what the unwinding dropped is
/// released, and nothing is left once the model and optimizer go), the budget holds, and
/// the steps after it train exactly as the unwrapped backend does after the same panic.
#[test]
fn a_panic_mid_step_keeps_the_books_and_the_training() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let plain = train_through_a_panic::<Plain>(&device);
    let (_, unbudgeted) = run_configured(&device, SwapConfig::default(), || {
        Workload::Mlp(MlpConfig::small()).train::<Swapped>(&device, 2)
    });
    let budget = unbudgeted.memory.peak_bytes / 3;
    for policy in [Policy::Reactive, Policy::Planned] {
        let what = format!("{} at 1/3", policy.name());
        burn_swap::configure(
            &device,
            SwapConfig::budget_bytes(budget).with_policy(policy),
        )
        .unwrap();
        burn_swap::restart_trace(&device);
        burn_swap::reset_counters(&device);
        let swapped = train_through_a_panic::<Swapped>(&device);
        let report = burn_swap::report(&device).unwrap();
        assert_eq!(swapped.0, plain.0, "{what}: losses\n{report}");
        assert!(swapped.1 == plain.1, "{what}: parameters");
        assert!(report.memory.peak_bytes <= budget, "{what}\n{report}");
        assert!(
            report.transfers.offloads + report.transfers.recomputes > 0,
            "{what}\n{report}"
        );
        let memory = burn_swap::memory(&device).unwrap();
        assert_eq!(
            (memory.resident_bytes, memory.host_bytes),
            (0, 0),
            "{what}: left behind\n{report}"
        );
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

/// Bounded host memory: under a host budget no offload takes the host store past it (the
/// tensor stays, or leaves by recomputation), training stays bit-identical; when neither the
/// device nor the host has room, the op fails with `SwapError::HostFull` naming both
/// budgets, and the tensors the unwinding dropped leave nothing behind.
#[test]
fn the_host_budget_holds_and_a_full_host_is_a_typed_error() {
    let _guard = burn_swap_harness::swap_device_lock();
    let device = FlexDevice;
    let workload = Workload::Mlp(MlpConfig::small());
    let steps = 6;
    let (plain, peak) = plain_and_peak(&workload, steps);
    let budget = peak / 3;
    let config = SwapConfig::budget_bytes(budget).with_policy(Policy::Reactive);
    let (_, free) = run_configured(&device, config.clone(), || {
        workload.train::<Swapped>(&device, steps)
    });
    let needed = free.memory.peak_host_bytes;

    // Below what the run took freely: it trains bit for bit within both budgets, or (when
    // what could leave otherwise ran out: the free run's host peak varies with how the
    // transfers fall, 8% between a quiet and a loaded machine) fails with the typed error
    // naming both; the host budget holds either way.
    let host_budget = needed * 9 / 10;
    let run = std::panic::catch_unwind(|| {
        run_configured(
            &device,
            config.clone().with_host_budget(host_budget),
            || workload.train::<Swapped>(&device, steps),
        )
    });
    match run {
        Ok((swapped, report)) => {
            assert_budgeted_run("host budget 90%", &plain, &swapped, &report, budget);
            assert!(report.memory.peak_host_bytes <= host_budget, "{report}");
            assert_eq!(report.memory.host_budget_bytes, Some(host_budget));
        }
        Err(payload) => match payload.downcast_ref::<burn_swap::SwapError>() {
            Some(burn_swap::SwapError::HostFull { host, .. }) => {
                assert!(*host <= host_budget)
            }
            other => panic!("expected success or HostFull at 90%, got {other:?}"),
        },
    }

    let host_budget = needed / 4;
    let failed = std::panic::catch_unwind(|| {
        run_configured(
            &device,
            config.clone().with_host_budget(host_budget),
            || workload.train::<Swapped>(&device, steps),
        )
    });
    let payload = failed.expect_err("a quarter of the host bytes it needs cannot do");
    match payload.downcast_ref::<burn_swap::SwapError>() {
        Some(burn_swap::SwapError::HostFull {
            bytes,
            host,
            host_budget: named,
            budget: named_budget,
            ..
        }) => {
            assert_eq!((*named, *named_budget), (host_budget, budget));
            assert!(*host <= host_budget && host + bytes > host_budget);
        }
        other => panic!("expected HostFull, got {other:?}"),
    }
    let memory = burn_swap::memory(&device).unwrap();
    assert_eq!((memory.resident_bytes, memory.host_bytes), (0, 0));
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}
