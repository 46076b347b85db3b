//! The CubeCL fast path, on CubeCL's wgpu runtime (CI runs it on a software Vulkan driver;
//! the same code serves CUDA): training through `Autodiff<Swap<CubeWgpu>>` is bit-identical
//! to `Autodiff<CubeWgpu>` under budgets, with offloads compressed by the device kernels
//! before the copy and decompressed on the device after it, and the report gives the
//! allocator's own figures. Without a wgpu adapter the tests say so and pass, unless
//! `BURN_SWAP_REQUIRE_KERNELS=1` (set by `.ci/run`).
#![cfg(feature = "wgpu")]

use burn::backend::Autodiff;
use burn_swap::unstable::CubeWgpu;
use burn_swap::unstable::faults::{self, Hook};
use burn_swap::{Compression, Policy, Swap, SwapConfig};
use burn_swap_harness::models::{ConvNetConfig, MlpConfig};
use burn_swap_harness::train::Outcome;
use burn_swap_harness::verify::{assert_budgeted_run, quiet_injected_panics, run_configured};
use burn_swap_harness::workload::{train_convnet, train_mlp};
use cubecl::wgpu::WgpuDevice;

type Plain = Autodiff<CubeWgpu>;
type Swapped = Autodiff<Swap<CubeWgpu>>;

const STEPS: usize = 6;

/// Whether a wgpu adapter exists (else the tests are skipped, or fail when required).
fn adapter() -> bool {
    burn_swap_harness::wgpu_adapter(&WgpuDevice::DefaultDevice)
}

fn check(name: &str, train: impl Fn(bool) -> Outcome, compression: Compression) {
    let device = WgpuDevice::DefaultDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let plain = train(false);
    let plain_usage = burn_swap::unstable::allocator_usage::<CubeWgpu>(&device)
        .expect("a CubeCL backend gives its allocator's figures");
    assert!(plain_usage.reserved > 0);

    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    assert_eq!(train(true), plain, "{name} unbudgeted");
    let report = burn_swap::report(&device).unwrap();
    let peak = report.memory.peak_bytes;
    let allocator = report
        .device
        .allocator_peak
        .expect("the allocator's peak on CubeCL");
    assert!(
        allocator.in_use >= report.memory.resident_bytes,
        "{report:?}"
    );

    for (policy, fraction) in [(Policy::Planned, 0.5), (Policy::OffloadOnly, 0.25)] {
        let budget = (peak as f64 * fraction) as u64;
        let what = format!("{name}, {} at {fraction}", policy.name());
        let config = SwapConfig::budget_bytes(budget)
            .with_policy(policy)
            .with_compression(compression)
            .with_transfer_jitter(200)
            .with_plans_judged(false);
        let (swapped, report) = run_configured(&device, config, || train(true));
        assert_budgeted_run(&what, &plain, &swapped, &report, budget);
        let total = report
            .device
            .allocator_peak
            .expect("the allocator's peak")
            .reserved;
        // Each stream's peak is at least what it reserved when last read, and their sum (each
        // pool set once) at least the total's peak: the total at any read is their sum then.
        let streams = &report.device.allocator_streams;
        assert!(!streams.is_empty(), "{what}: no stream listed");
        assert!(
            streams.iter().all(|s| s.peak_reserved >= s.usage.reserved),
            "{what}: {streams:?}"
        );
        let peaks: u64 = streams
            .iter()
            .filter(|s| !s.shared)
            .map(|s| s.peak_reserved)
            .sum();
        assert!(
            peaks >= total,
            "{what}: streams' peaks {peaks} under the total's {total}"
        );
        if compression != Compression::Off {
            assert!(
                report.compression.compressed_offloads > 0,
                "{what}: nothing compressed\n{report}"
            );
            // The device kernels compressed offloads and decompressed fetches (the planned
            // copies' and the reactive fallback's alike).
            assert!(
                report.compression.device_compressed_offloads > 0
                    && report.compression.device_decompressed_fetches > 0,
                "{what}: the device codec did not run\n{report:?}"
            );
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

#[test]
fn mlp_on_cubecl_is_bit_identical() {
    if !adapter() {
        return;
    }
    let device = WgpuDevice::DefaultDevice;
    let config = MlpConfig::small();
    check(
        "mlp",
        |swap| {
            if swap {
                train_mlp::<Swapped>(&config, &device, STEPS)
            } else {
                train_mlp::<Plain>(&config, &device, STEPS)
            }
        },
        Compression::Off,
    );
}

#[test]
fn convnet_on_cubecl_with_device_compression_is_bit_identical() {
    if !adapter() {
        return;
    }
    let device = WgpuDevice::DefaultDevice;
    let config = ConvNetConfig::small();
    check(
        "convnet",
        |swap| {
            if swap {
                train_convnet::<Swapped>(&config, &device, STEPS)
            } else {
                train_convnet::<Plain>(&config, &device, STEPS)
            }
        },
        Compression::On { max_ratio: 0.9 },
    );
}

/// The defaults as shipped on a CubeCL backend (`SwapConfig::budget_bytes` alone: the
/// planned policy, plans made on the planner thread and judged): on the MLP at half its
/// peak, a plan is made for the training step, takes over, and is followed to the end, bit
/// for bit, the counted peak within the budget. Checked to fail with a judge that declines
/// every plan (`plan::payoff::pays` returning false).
///
/// A judged plan is declined where its measured iterations cost more than the fallback's,
/// which on the software driver, with the other tests of this binary taking the two CPUs in
/// turns, happened once in a full `.ci/run` on the 2-vCPU VM (6.19 ms of waits per iteration
/// against the fallback's 4.90, 2026-12-07) and never alone: the run is made up to three times, every run
/// bit for bit, and one must follow its plan to the end. A judge that always declines still
/// fails it.
#[test]
fn a_plan_is_made_and_followed_under_the_defaults_on_cubecl() {
    if !adapter() {
        return;
    }
    let device = WgpuDevice::DefaultDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let config = MlpConfig::small();
    let steps = 16;
    let plain = train_mlp::<Plain>(&config, &device, steps);
    let (_, unbudgeted) = run_configured(&device, SwapConfig::default(), || {
        train_mlp::<Swapped>(&config, &device, 3)
    });
    let budget = unbudgeted.memory.peak_bytes / 2;
    const RUNS: usize = 3;
    for run in 1..=RUNS {
        let (swapped, report) = run_configured(&device, SwapConfig::budget_bytes(budget), || {
            train_mlp::<Swapped>(&config, &device, steps)
        });
        burn_swap::configure(&device, SwapConfig::default()).unwrap();
        assert_budgeted_run("mlp under the defaults", &plain, &swapped, &report, budget);
        if report.plan.declines.count > 0 && run < RUNS {
            println!(
                "mlp on wgpu, run {run}: the plan was declined by its measured cost, run again:                  {:?}",
                report.plan.declines.latest
            );
            continue;
        }
        burn_swap_harness::verify::assert_plan_followed_to_the_end("mlp on wgpu", &report, steps);
        break;
    }
}

/// A write back that the backend fails after taking the bytes (as CubeCL's allocation
/// panics when the device is out of memory) loses nothing: burn-swap lent the backend the
/// host copy's bytes and kept the copy, so the tensor stays offloaded, whole, and its next
/// use fetches it again, on the op's path (reactive) and the receive worker's (planned).
/// Reads that find the pinned pool exhausted (CubeCL's fallback to pageable memory) go on
/// the same way. The report counts the host copies in pinned memory (wgpu's mapped buffers)
/// apart.
#[test]
fn a_backend_write_that_fails_after_taking_the_bytes_loses_nothing() {
    if !adapter() {
        return;
    }
    quiet_injected_panics();
    let device = WgpuDevice::DefaultDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let config = MlpConfig::small();
    let plain = train_mlp::<Plain>(&config, &device, STEPS);
    let (_, unbudgeted) = run_configured(&device, SwapConfig::default(), || {
        train_mlp::<Swapped>(&config, &device, STEPS)
    });
    let budget = unbudgeted.memory.peak_bytes / 3;
    for policy in [Policy::Reactive, Policy::OffloadOnly] {
        let what = format!(
            "{} at 1/3, one backend write in four failing",
            policy.name()
        );
        faults::clear();
        faults::seed(7);
        let hooks = [Hook::BackendWrite, Hook::PinnedPool];
        let before = hooks.map(faults::injected);
        for hook in hooks {
            faults::set_rate(hook, 250_000);
        }
        let (swapped, report) = run_configured(
            &device,
            SwapConfig::budget_bytes(budget).with_policy(policy),
            || train_mlp::<Swapped>(&config, &device, STEPS),
        );
        faults::clear();
        let [writes, pools] = [0, 1].map(|i| faults::injected(hooks[i]) - before[i]);
        assert_budgeted_run(&what, &plain, &swapped, &report, budget);
        assert!(
            writes > 0 && pools > 0,
            "{what}: {writes}, {pools}\n{report}"
        );
        // Every failed write left its tensor offloaded and was counted, but for a prefetch
        // whose tensor Burn dropped while it was in flight (on the receive worker only).
        let counted = report.transfers.failed_fetches;
        match policy {
            Policy::Reactive => assert_eq!(counted, writes, "{what}\n{report}"),
            _ => assert!(counted > 0 && counted <= writes, "{what}\n{report}"),
        }
        assert!(
            report.memory.peak_pinned_host_bytes > 0
                && report.memory.peak_pinned_host_bytes <= report.memory.peak_host_bytes,
            "{what}: pinned host bytes\n{report:?}"
        );
        let memory = burn_swap::memory(&device).unwrap();
        assert_eq!(
            (memory.host_bytes, memory.pinned_host_bytes),
            (0, 0),
            "{what}: left on the host"
        );
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

/// Op costs are device time on an asynchronous backend: under a budget, the profiled
/// iteration waits for each op's kernels, so a large matmul is profiled at the time it takes
/// to run, not at its launch (which returns at once; the read after it would otherwise be
/// charged with the matmul's time).
#[test]
fn a_large_matmul_is_profiled_at_its_device_time() {
    use burn::tensor::{Distribution, Tensor};
    use burn_swap::unstable::CubeWgpu as Inner;
    if !adapter() {
        return;
    }
    let device = WgpuDevice::DefaultDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    const N: usize = 384;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    // The plain backend: the matmul's launch, and its launch until done.
    let a = Tensor::<Inner, 2>::random([N, N], Distribution::Default, &device);
    let b = Tensor::<Inner, 2>::random([N, N], Distribution::Default, &device);
    let (mut launch, mut run) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        <Inner as burn::tensor::backend::Backend>::sync(&device).unwrap();
        let start = std::time::Instant::now();
        let c = a.clone().matmul(b.clone());
        launch.push(start.elapsed().as_secs_f64());
        <Inner as burn::tensor::backend::Backend>::sync(&device).unwrap();
        run.push(start.elapsed().as_secs_f64());
        drop(c);
    }
    // The profiled matmul is compared with the fastest plain run: the other tests of this
    // file run on the same two cores meanwhile (the software Vulkan driver computes on the
    // CPU), which can only slow a run down.
    let fastest = run.iter().copied().fold(f64::INFINITY, f64::min);
    let (launch, run) = (median(launch), median(run));
    assert!(
        run > 4.0 * launch,
        "the matmul must take longer to run ({run:.6} s) than to launch ({launch:.6} s) for \
         this test to tell them apart"
    );

    // Under burn-swap, with a budget the loop fits in: the same matmul, then a read.
    type S = Swap<Inner>;
    burn_swap::configure(&device, SwapConfig::budget_bytes(64 << 20)).unwrap();
    burn_swap::restart_trace(&device);
    let a = Tensor::<S, 2>::random([N, N], Distribution::Default, &device);
    let b = Tensor::<S, 2>::random([N, N], Distribution::Default, &device);
    for _ in 0..8 {
        let c = a.clone().matmul(b.clone());
        let _ = c.sum().into_data();
    }
    let trace = burn_swap::trace(&device).expect("the loop's period was detected");
    let profile = burn_swap::unstable::profile(&device).expect("a profiled iteration");
    let at = trace
        .ops
        .iter()
        .position(|op| op.kind.contains("Matmul"))
        .unwrap_or_else(|| {
            panic!(
                "no matmul in {:?}",
                trace.ops.iter().map(|o| &o.kind).collect::<Vec<_>>()
            )
        });
    let profiled = profile.op_nanos[at] as f64 * 1e-9;
    println!(
        "matmul {N}x{N}: launch {launch:.6} s, run {run:.6} s (fastest {fastest:.6} s), \
         profiled {profiled:.6} s"
    );
    assert!(
        profiled > 0.5 * fastest && profiled > 2.0 * launch,
        "profiled {profiled:.6} s against a fastest run of {fastest:.6} s (median {run:.6} s) \
         and a launch of {launch:.6} s"
    );
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

/// Strided tensors with no op to replay on a CubeCL backend: views made before any budget was
/// set of matrices they consumed (a transpose, and a flipped permutation: CubeCL copies a
/// flip, so the latter is a strided result of its own). Under a budget set afterwards they
/// leave by an offload of their handle's bytes, with device compression when it pays, and
/// come back with their shape and strides: bit for bit, offloads only.
#[test]
fn strided_tensors_leave_with_their_layout_on_cubecl() {
    use burn_swap_harness::verify::{VIEWS_BUDGET, check_views_made_before_a_budget};
    if !adapter() {
        return;
    }
    let _guard = burn_swap_harness::swap_device_lock();
    let config =
        SwapConfig::budget_bytes(VIEWS_BUDGET).with_compression(Compression::On { max_ratio: 1.0 });
    check_views_made_before_a_budget::<CubeWgpu>(&WgpuDevice::DefaultDevice, config);
}

/// Each device has an engine and a budget of its own, as each GPU of a multi-GPU server
/// (data parallelism gives each worker one): two wgpu devices (the default and the CPU
/// device; on a software Vulkan driver both are the one adapter, each with a client and an
/// allocator of its own) train at once on two threads, one at half and one at a quarter of
/// its own unbudgeted peak. Each is bit-identical to the unwrapped run on its device, each
/// holds its own budget, and each device's report counts only its own moves.
#[test]
fn two_devices_keep_budgets_of_their_own() {
    let devices = [WgpuDevice::DefaultDevice, WgpuDevice::Cpu];
    if !devices.iter().all(burn_swap_harness::wgpu_adapter) {
        return;
    }
    let _guard = burn_swap_harness::swap_device_lock();
    let config = MlpConfig::small();
    let both = |swap: bool| -> Vec<Outcome> {
        std::thread::scope(|scope| {
            let workers: Vec<_> = devices
                .iter()
                .map(|device| {
                    scope.spawn(move || {
                        if swap {
                            train_mlp::<Swapped>(&config, device, STEPS)
                        } else {
                            train_mlp::<Plain>(&config, device, STEPS)
                        }
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        })
    };
    let plain = both(false);

    for device in &devices {
        burn_swap::configure(device, SwapConfig::default()).unwrap();
        burn_swap::restart_trace(device);
        burn_swap::reset_counters(device);
    }
    assert_eq!(both(true), plain, "unbudgeted");
    let peaks = devices
        .each_ref()
        .map(|device| burn_swap::report(device).unwrap().memory.peak_bytes);

    let budgets = [peaks[0] / 2, peaks[1] / 4];
    for (device, budget) in devices.iter().zip(budgets) {
        burn_swap::configure(device, SwapConfig::budget_bytes(budget)).unwrap();
        burn_swap::restart_trace(device);
        burn_swap::reset_counters(device);
    }
    let outcomes = both(true);
    for (i, device) in devices.iter().enumerate() {
        let report = burn_swap::report(device).unwrap();
        assert_budgeted_run(
            &format!("{device:?} at {} of its peak {}", budgets[i], peaks[i]),
            &plain[i],
            &outcomes[i],
            &report,
            budgets[i],
        );
        // The budget binds on each device by its own measure: a quarter moves more.
        if i == 1 {
            let half = burn_swap::report(&devices[0]).unwrap();
            assert!(
                report.memory.peak_bytes < half.memory.peak_bytes,
                "the quarter-budget device peaks lower: {} vs {}",
                report.memory.peak_bytes,
                half.memory.peak_bytes
            );
        }
    }
    for device in &devices {
        burn_swap::configure(device, SwapConfig::default()).unwrap();
    }
}

/// Trains `train` unwrapped (`false`) and under burn-swap (`true`), the latter unbudgeted
/// and then under each policy at each fraction of its counted peak, and checks each budgeted
/// run: bit for bit, counted peak within the budget, and the allocator's reserved peak over
/// every stream burn-swap uses within `verify::reserved_bound` (the budget, 2% of it and
/// 64 KiB); at half the peak below what the unwrapped run reserves.
///
/// The bound: every buffer is an allocation of its own exact size under a budget
/// (`exec::pools`); idle buffers are given back before an op that would pass the budget with
/// them; room is made for what an op reserves beyond its outputs (its temporaries, learned
/// the first time an op of its shape runs: `exec::temporaries`). What is left is the first
/// run of each op shape, whose temporaries are not known yet, and the transfer workers'
/// own buffers while a copy runs (the device codec's masks and packed values, at most a
/// tensor's bytes and an eighth), and an op whose own inputs, outputs and temporaries exceed
/// the budget; 2% of the budget and 64 KiB is the bound issue 71 set, above the 0.92-1.09x
/// measured here (2026-12-07).
fn check_reserved(
    name: &str,
    train: impl Fn(bool) -> Outcome,
    policies: &[Policy],
    fractions: &[f64],
) {
    use burn::tensor::backend::Backend as _;
    let device = WgpuDevice::DefaultDevice;
    let clean = || <Swap<CubeWgpu> as burn::tensor::backend::Backend>::memory_cleanup(&device);
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    clean();
    CubeWgpu::memory_cleanup(&device);
    let plain = train(false);
    // The unwrapped run's pools never give a page back during training: what they hold at
    // the end is their peak.
    let plain_reserved = burn_swap::unstable::allocator_usage::<CubeWgpu>(&device)
        .expect("the allocator's figures")
        .reserved;
    let (unbudgeted, report) = run_configured(&device, SwapConfig::default(), || train(true));
    assert_eq!(unbudgeted, plain, "{name} unbudgeted");
    let peak = report.memory.peak_bytes;
    let mut over = Vec::new();
    for &policy in policies {
        for &fraction in fractions {
            let budget = (peak as f64 * fraction) as u64;
            burn_swap::configure(&device, SwapConfig::default()).unwrap();
            clean();
            let config = SwapConfig::budget_bytes(budget).with_policy(policy);
            let (swapped, report) = run_configured(&device, config, || train(true));
            let what = format!("{name}, {} at {fraction} ({budget} bytes)", policy.name());
            assert_eq!(swapped.loss_bits(), plain.loss_bits(), "{what}: losses");
            assert_eq!(swapped, plain, "{what}: parameters");
            assert!(report.memory.peak_bytes <= budget, "{what}\n{report}");
            let reserved = report
                .device
                .allocator_peak
                .expect("the allocator's figures")
                .reserved;
            let bound = burn_swap_harness::verify::reserved_bound(budget);
            println!(
                "{what}: reserved peak {reserved} ({:.3}x the budget), unwrapped reserved \
                 {plain_reserved}, cleanups {}, over: {:?}",
                reserved as f64 / budget as f64,
                report.device.allocator_cleanups,
                report.device.reserved_over,
            );
            if reserved > bound {
                over.push(format!(
                    "{what}: the allocator reserved {reserved} bytes, over its bound of \
                     {bound}\n{report}"
                ));
            }
            if fraction == 0.5 {
                assert!(
                    reserved < plain_reserved,
                    "{what}: reserved {reserved} bytes, the unwrapped run {plain_reserved}\n{report}"
                );
            }
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    assert!(over.is_empty(), "{}", over.join("\n"));
}

/// What the device reserves stays within the budget, not only what burn-swap counts: the
/// suite's five models (MLP, conv net, transformer, BatchNorm CNN, LSTM) at three quarters,
/// half and a quarter of their counted peak, under `planned` and `offload-only`
/// ([`check_reserved`]).
#[test]
fn reserved_bytes_follow_the_budget_on_cubecl() {
    use burn_swap_harness::verify::small_models;
    if !adapter() {
        return;
    }
    let device = WgpuDevice::DefaultDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    for model in small_models() {
        check_reserved(
            model.name(),
            |swap| {
                if swap {
                    model.train::<Swapped>(&device, STEPS)
                } else {
                    model.train::<Plain>(&device, STEPS)
                }
            },
            &[Policy::Planned, Policy::OffloadOnly],
            &[0.75, 0.5, 0.25],
        );
    }
}

/// The same at a size where CubeCL's pages do not dominate: an MLP of four 1024-wide layers
/// at batch 1024 (a counted peak near 88 MiB, in pages of 8, 32 and 128 MiB on the software
/// driver) at three quarters, half and a quarter of its counted peak under `planned` and
/// `offload-only` (0.92-1.00x the budget, 2026-12-07), and at half its peak below what its
/// unwrapped run reserves.
#[test]
fn a_large_mlp_reserves_within_its_budget() {
    if !adapter() {
        return;
    }
    let device = WgpuDevice::DefaultDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let config = MlpConfig {
        d_in: 1024,
        hidden: 1024,
        depth: 4,
        d_out: 16,
        batch: 1024,
        seed: 3,
    };
    check_reserved(
        "mlp 1024x4, batch 1024",
        |swap| {
            if swap {
                train_mlp::<Swapped>(&config, &device, 3)
            } else {
                train_mlp::<Plain>(&config, &device, 3)
            }
        },
        &[Policy::Planned, Policy::OffloadOnly],
        &[0.75, 0.5, 0.25],
    );
}

/// The layer's books stay level over training steps under a budget: on CubeCL, where an
/// elementwise op keeps a strided input's layout, an optimizer's state updated through such
/// ops made each step's tensor a recipe input of the next one's, kept as an orphan with a
/// recipe of its own: 7 more tensors in the books (and device buffers) every step on the conv
/// net (2026-12-07). Each model trains 24 steps, bit for bit, and the books are read after
/// steps 8, 16 and 24: the tensors they hold, those kept for recipes and the handles must not
/// grow.
#[test]
fn the_books_stay_level_over_budgeted_steps_on_cubecl() {
    use burn_swap_harness::models::{BnCnnConfig, LstmNetConfig};
    use burn_swap_harness::workload::Workload;
    if !adapter() {
        return;
    }
    let device = WgpuDevice::DefaultDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    const LONG: usize = 24;
    for (model, policy, fraction) in [
        (
            Workload::ConvNet(ConvNetConfig::small()),
            Policy::Planned,
            0.5,
        ),
        (
            Workload::BnCnn(BnCnnConfig::small()),
            Policy::OffloadOnly,
            0.25,
        ),
        (Workload::Lstm(LstmNetConfig::small()), Policy::Planned, 0.5),
    ] {
        let plain = model.train::<Plain>(&device, LONG);
        let (_, report) = run_configured(&device, SwapConfig::default(), || {
            model.train::<Swapped>(&device, 4)
        });
        let budget = (report.memory.peak_bytes as f64 * fraction) as u64;
        let config = SwapConfig::budget_bytes(budget).with_policy(policy);
        let mut books = Vec::new();
        let (swapped, report) = run_configured(&device, config, || {
            model.train_with::<Swapped>(&device, LONG, &mut |step, _| {
                if (step + 1) % 8 == 0 {
                    let m = burn_swap::report(&device).unwrap().memory;
                    books.push((m.tracked_tensors, m.kept_for_recipes, m.device_handles));
                }
            })
        });
        let what = format!("{}, {} at {fraction}", model.name(), policy.name());
        assert_budgeted_run(&what, &plain, &swapped, &report, budget);
        let first = books[0];
        assert!(
            books
                .iter()
                .all(|b| b.0 <= first.0 && b.1 <= first.1 && b.2 <= first.0),
            "{what}: (tensors, kept for recipes, handles) after steps 8, 16, 24: {books:?}"
        );
        assert_eq!(
            report.memory.tracked_tensors, 0,
            "{what}: all dropped\n{report}"
        );
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}
