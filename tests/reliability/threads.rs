//! Ops arrive from several threads at once, and drops from the dropping thread: under a tight
//! budget, with offloads racing uses, every value still equals Flex's.

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData, activation};
use burn_swap::{Swap, SwapConfig};
use burn_swap_harness::data::XorShift;

type S = Swap<Flex>;

/// IR ops (matmul, add) and native ops (sigmoid, softmax) in a chain.
fn work<B: Backend>(seed: u64, device: &B::Device) -> TensorData {
    let mut rng = XorShift::new(seed);
    let w = Tensor::<B, 2>::from_data(TensorData::new(rng.vec_f32(256, 0.5), [16, 16]), device);
    let mut x = Tensor::<B, 2>::from_data(TensorData::new(rng.vec_f32(256, 1.0), [16, 16]), device);
    for _ in 0..200 {
        let h = activation::sigmoid(x.clone().matmul(w.clone()));
        x = activation::softmax(h + x, 1);
    }
    x.into_data()
}

#[test]
fn concurrent_ops_under_a_budget_keep_values() {
    let device = FlexDevice;
    let seeds: Vec<u64> = (0..4).collect();
    let expected: Vec<TensorData> = seeds.iter().map(|&s| work::<Flex>(s, &device)).collect();

    let _guard = burn_swap_harness::swap_device_lock();
    // The largest op (a 16×16 matmul) needs 3 KiB; each thread holds about 4 KiB at a time,
    // so offloads race the other threads' uses all along.
    let budget = 3 * 1024 + 512;
    burn_swap::configure(&device, SwapConfig::budget_bytes(budget)).unwrap();
    burn_swap::reset_counters(&device);
    for _round in 0..3 {
        let results: Vec<TensorData> = std::thread::scope(|scope| {
            let handles: Vec<_> = seeds
                .iter()
                .map(|&s| scope.spawn(move || work::<S>(s, &FlexDevice)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (want, got) in expected.iter().zip(&results) {
            assert_eq!(&want.bytes[..], &got.bytes[..]);
        }
    }
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    assert!(report.memory.peak_bytes <= budget, "{report}");
    assert!(report.transfers.offloads > 0, "{report}");
}

/// One device, four threads at once under a budget: a model trains on one; another
/// evaluates (its own chain of ops, read back); a third makes tensors and hands them to
/// short-lived threads that drop them; a fourth reconfigures the budget back and forth and
/// reads the report. No deadlock (a watchdog fails the test after five minutes), training
/// and evaluation bit-identical to Flex's, the counted peak within the larger budget.
#[test]
fn training_beside_readers_droppers_and_reconfiguration() {
    use burn::backend::Autodiff;
    use burn_swap::Policy;
    use burn_swap_harness::models::MlpConfig;
    use burn_swap_harness::workload::Workload;
    use std::sync::mpsc;
    use std::time::Duration;

    let device = FlexDevice;
    let workload = Workload::Mlp(MlpConfig::small());
    let steps = 12;
    let plain = workload.train::<Autodiff<Flex>>(&device, steps);
    let evaluated: Vec<TensorData> = (0..4).map(|s| work::<Flex>(s, &device)).collect();

    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    burn_swap::reset_counters(&device);
    workload.train::<Autodiff<S>>(&device, 2);
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;
    let (high, low) = (peak / 2, peak / 3);
    let config = |budget| SwapConfig::budget_bytes(budget).with_policy(Policy::Planned);
    burn_swap::configure(&device, config(high)).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);

    let (done, watchdog) = mpsc::channel();
    std::thread::spawn(move || {
        let results = std::thread::scope(|scope| {
            let trainer = scope.spawn(|| workload.train::<Autodiff<S>>(&FlexDevice, steps));
            let evaluator = scope.spawn(|| {
                (0..4)
                    .map(|s| work::<S>(s, &FlexDevice))
                    .collect::<Vec<_>>()
            });
            let dropper = scope.spawn(|| {
                for i in 0..64 {
                    let t = Tensor::<S, 1>::from_data(
                        TensorData::new(vec![i as f32; 256], [256]),
                        &FlexDevice,
                    );
                    let (give, take) = mpsc::channel::<Tensor<S, 1>>();
                    let holder = std::thread::spawn(move || drop(take.recv()));
                    give.send(t * 2.0).unwrap();
                    holder.join().unwrap();
                }
            });
            let reconfigurer = scope.spawn(|| {
                let mut refused = 0;
                for k in 0..20 {
                    let budget = if k % 2 == 0 { low } else { high };
                    // All or nothing: a budget that cannot be reached now is refused, and
                    // the one in force stays.
                    if burn_swap::configure(&FlexDevice, config(budget)).is_err() {
                        refused += 1;
                    }
                    let _ = burn_swap::report(&FlexDevice);
                    std::thread::sleep(Duration::from_millis(2));
                }
                burn_swap::configure(&FlexDevice, config(high)).unwrap();
                refused
            });
            dropper.join().unwrap();
            let refused = reconfigurer.join().unwrap();
            (trainer.join().unwrap(), evaluator.join().unwrap(), refused)
        });
        let _ = done.send(results);
    });
    let (trained, evaluated_swapped, refused) = watchdog
        .recv_timeout(Duration::from_secs(300))
        .expect("no result within five minutes: a deadlock, or a thread panicked");
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    trained.assert_same(&plain, "training beside other threads");
    for (want, got) in evaluated.iter().zip(&evaluated_swapped) {
        assert_eq!(&want.bytes[..], &got.bytes[..]);
    }
    assert!(report.memory.peak_bytes <= high, "{report}");
    assert!(
        report.transfers.offloads + report.transfers.recomputes > 0,
        "{report}"
    );
    println!("reconfigurations refused: {refused} of 20");
}

/// 64 elements, each `i`: the tensor of race `i`.
fn filled(i: usize) -> Tensor<S, 1> {
    Tensor::from_data(TensorData::new(vec![i as f32; 64], [64]), &FlexDevice)
}

/// Runs `races` uses (`use_it`: a read, an op), each of a tensor `make` gives, while another
/// thread drops the tensor's only other clone at the same moment and a third keeps the engine
/// busy with long ops (so that the use and the drop queue for it together and either may go
/// first).
fn race_drops(
    races: usize,
    make: impl Fn(usize) -> Tensor<S, 1>,
    use_it: impl Fn(usize, Tensor<S, 1>),
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};
    let barrier = Arc::new(Barrier::new(2));
    let (give, take) = std::sync::mpsc::channel::<Tensor<S, 1>>();
    let dropper = {
        let barrier = barrier.clone();
        std::thread::spawn(move || {
            while let Ok(clone) = take.recv() {
                barrier.wait();
                drop(clone);
            }
        })
    };
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let a = Tensor::<S, 2>::ones([192, 192], &FlexDevice);
            while !stop.load(Ordering::Relaxed) {
                let _ = a.clone().matmul(a.clone()).sum().into_scalar();
            }
        })
    };
    for i in 0..races {
        let t = make(i);
        give.send(t.clone()).unwrap();
        barrier.wait();
        use_it(i, t);
    }
    stop.store(true, Ordering::Relaxed);
    drop(give);
    dropper.join().unwrap();
    busy.join().unwrap();
}

/// A read racing another thread's drop of the tensor's last other clone (a checkpointer
/// reading a parameter the training thread has just replaced): burn-router counts the read's
/// handle out before the read reaches the engine, so the drop could free the tensor first and
/// the read find nothing ("Should have handle"). Hundreds of races beside a thread that keeps
/// the engine busy, each read whole; then the same on quantized tensors' reads.
#[test]
fn a_read_racing_the_drop_of_the_last_other_clone_finds_its_tensor() {
    use burn::tensor::backend::{BackendTypes, QTensorPrimitive};
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    race_drops(400, filled, |i, t| {
        let read: Vec<f32> = t.into_data().to_vec().unwrap();
        assert_eq!(read, vec![i as f32; 64], "race {i}");
    });
    let scheme =
        <<S as BackendTypes>::QuantizedTensorPrimitive as QTensorPrimitive>::default_scheme();
    race_drops(
        200,
        |i| filled(i).quantize_dynamic(&scheme),
        |i, t| assert_eq!(t.into_data().num_elements(), 64, "quantized race {i}"),
    );
}

/// Any op racing another thread's drop of its input's last other clone (the training
/// thread's optimizer step reading its moment estimates while a checkpointer thread lets go
/// of the copy it saved: seen in the Learner test, "Should have handle for tensor"): the op
/// counts its input out before it reaches the engine, and the drop must wait for it
/// (`backend/in_flight.rs`). Hundreds of races beside a thread that keeps the engine busy;
/// each op's result read whole.
#[test]
fn an_op_racing_the_drop_of_the_last_other_clone_of_its_input_finds_it() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    race_drops(600, filled, |i, t| {
        let read: Vec<f32> = (t * 2.0).into_data().to_vec().unwrap();
        assert_eq!(read, vec![2.0 * i as f32; 64], "race {i}");
    });
}
