//! The trace: exact producer, access, last-use and drop indices of a hand-built graph, and
//! the period and slots of a training loop whose first iteration differs.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;
use burn_swap::trace::{Access, AccessKind, End, EndKind, Slot};
use burn_swap::{Swap, SwapConfig};
use burn_swap_harness::models::MlpConfig;
use burn_swap_harness::train::{init_mlp, train_loop};

type S = Swap<Flex>;

fn access(op: usize, kind: AccessKind) -> Access {
    Access { op, kind }
}

#[test]
fn hand_built_graph_has_exact_indices() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let a = Tensor::<S, 1>::from_data([1.0f32, 2.0, 3.0], &device);
    burn_swap::restart_trace(&device);

    // op 0: b = a + 1     (a read, kept alive by its clone)
    let b = a.clone() + 1.0;
    // op 1: c = a * b     (a's last use; b read)
    let c = a * b.clone();
    // op 2: drop b        (b ends by an explicit drop)
    drop(b);
    // op 3: d = exp(c)    (c's last use)
    let d = c.exp();
    // op 4: read d        (a read holds its tensor until the engine has it: shared)
    // op 5: drop d        (the read's hold let go: d ends by a drop)
    let values = d.into_data();
    assert_eq!(values.shape.as_slice(), &[3]);

    let trace = burn_swap::unstable::trace_window(&device).unwrap();
    let kinds: Vec<&str> = trace.ops.iter().map(|o| o.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "NumericFloat.AddScalar",
            "NumericFloat.Mul",
            "Drop",
            "Float.Exp",
            "Read",
            "Drop"
        ]
    );

    let [ta, tb, tc, td] = [0, 1, 2, 3].map(|i| &trace.tensors[i]);
    // a was made before the trace: no producer, first used by op 0.
    assert_eq!(ta.producer, None);
    assert_eq!(ta.slot, Slot::Input { op: 0, index: 0 });
    assert_eq!(
        ta.accesses,
        [access(0, AccessKind::Read), access(1, AccessKind::LastUse)]
    );
    assert_eq!(
        ta.end,
        Some(End {
            op: 1,
            kind: EndKind::LastUse
        })
    );
    assert_eq!((ta.bytes, ta.shape.as_slice()), (12, &[3][..]));

    assert_eq!(tb.producer, Some(0));
    assert_eq!(tb.slot, Slot::Output { op: 0, index: 0 });
    assert_eq!(tb.accesses, [access(1, AccessKind::Read)]);
    assert_eq!(
        tb.end,
        Some(End {
            op: 2,
            kind: EndKind::Drop
        })
    );

    assert_eq!(tc.producer, Some(1));
    assert_eq!(tc.accesses, [access(3, AccessKind::LastUse)]);
    assert_eq!(
        tc.end,
        Some(End {
            op: 3,
            kind: EndKind::LastUse
        })
    );

    assert_eq!(td.producer, Some(3));
    assert_eq!(td.accesses, [access(4, AccessKind::Read)]);
    assert_eq!(
        td.end,
        Some(End {
            op: 5,
            kind: EndKind::Drop
        })
    );
    assert_eq!(trace.tensors.len(), 4);

    // The ids in the op list are the tensors' ids.
    assert_eq!(trace.ops[1].inputs, [ta.id, tb.id]);
    assert_eq!(trace.ops[1].outputs, [tc.id]);
    // JSON round trip.
    let json = trace.to_json();
    let back: burn_swap::Trace = serde_json::from_str(&json).unwrap();
    assert_eq!(back, trace);
}

/// An op that runs natively on the inner backend (here `relu_backward`, which consumes both
/// its inputs) is traced with the bytes resident while it ran, its inputs and output at once,
/// as the counted peak has them: not with what was left after it consumed its inputs (the
/// trace's per-iteration peaks, which plans are checked against, read these).
#[test]
fn a_native_op_is_traced_with_its_inputs_and_output_at_once() {
    use burn::tensor::TensorPrimitive;
    use burn::tensor::ops::ActivationOps;
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let output = Tensor::<S, 1>::from_data([1.0f32; 256], &device);
    let grad = Tensor::<S, 1>::from_data([2.0f32; 256], &device);
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    let input_grad = S::relu_backward(
        output.into_primitive().tensor(),
        grad.into_primitive().tensor(),
    );
    let input_grad = Tensor::<S, 1>::from_primitive(TensorPrimitive::Float(input_grad));
    let report = burn_swap::report(&device).unwrap();
    let trace = burn_swap::unstable::trace_window(&device).unwrap();
    drop(input_grad);
    let op = trace
        .ops
        .iter()
        .find(|o| o.kind == "relu_backward")
        .unwrap_or_else(|| panic!("no relu_backward in {:?}", trace.ops));
    // Two inputs and one output of 1 KiB each.
    assert_eq!(op.resident_bytes, 3 * 1024, "{op:?}");
    assert_eq!(report.memory.peak_bytes, 3 * 1024, "{report}");
}

#[test]
fn period_is_the_iteration_length_despite_a_different_first_iteration() {
    let device = FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    // A budget that binds nothing: with none, most iterations are recorded without their
    // tensors and the trace is of one of the last few, not always the last.
    let config = SwapConfig::budget_bytes(1 << 40);
    burn_swap::configure(&device, config).unwrap();
    let config = MlpConfig::small();
    let model = init_mlp::<Autodiff<S>>(&config, &device, 1);
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);

    // Count the ops of each step independently of the detector.
    let mut ops_after_step = Vec::new();
    let mut traces = Vec::new();
    let steps = 8;
    train_loop(
        model,
        steps,
        1e-3,
        |m: &burn_swap_harness::models::Mlp<Autodiff<S>>, step| m.loss(&config, step, &device),
        |step, _| {
            ops_after_step.push(burn_swap::report(&device).unwrap().workload.ops);
            if step >= steps - 2 {
                traces.push(burn_swap::trace(&device).expect("a trace after several steps"));
            }
        },
    );
    let lengths: Vec<u64> = ops_after_step.windows(2).map(|w| w[1] - w[0]).collect();
    let true_period = lengths[lengths.len() - 1];
    assert!(
        lengths[1..].iter().all(|&l| l == true_period),
        "steady steps: {lengths:?}"
    );
    assert_ne!(
        ops_after_step[0], true_period,
        "the first iteration differs (Adam's state)"
    );

    let (t1, t2) = (&traces[0], &traces[1]);
    assert_eq!(t1.period, Some(true_period as usize));
    assert_eq!(t1.ops.len(), true_period as usize);
    assert_eq!(t2.iteration, t1.iteration + 1);
    assert_eq!(t2.first_op, t1.first_op + true_period);
    // Iteration k+1 has the same tensors in the same slots, with new ids.
    assert_eq!(t1.tensors.len(), t2.tensors.len());
    for (x, y) in t1.tensors.iter().zip(&t2.tensors) {
        assert_eq!((x.slot, &x.shape, x.bytes), (y.slot, &y.shape, y.bytes));
        assert_eq!(
            (x.producer, &x.accesses, x.end),
            (y.producer, &y.accesses, y.end)
        );
        assert_eq!(t2.tensor_at(x.slot).map(|t| t.id), Some(y.id));
        if x.producer.is_some() {
            assert_ne!(x.id, y.id, "tensor ids are new every iteration");
        }
    }
    let report = burn_swap::report(&device).unwrap();
    assert_eq!(report.workload.period, Some(true_period as usize));
    assert!(!report.workload.iteration_peaks.is_empty());

    // The loop has ended: the model and Adam's state were dropped, a run of drops that
    // breaks the period. The last complete iteration is still the one before it.
    let after = burn_swap::trace(&device).expect("a trace after the loop ended");
    assert_eq!(after.period, Some(true_period as usize));
    assert_eq!(after.iteration, t2.iteration);
}

/// Trains `steps` steps of the small MLP, running `extra` on the loss of the steps it
/// selects; returns the ops of each step and, after each step from the third on, the period
/// and number of the trace's iteration.
#[allow(clippy::type_complexity)]
fn train_with_extra_ops(
    steps: usize,
    extra: impl Fn(usize) -> bool,
) -> (Vec<u64>, Vec<Option<(Option<usize>, u64)>>) {
    let device = FlexDevice;
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    let config = MlpConfig::small();
    let model = init_mlp::<Autodiff<S>>(&config, &device, 2);
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    let mut ops_after_step = Vec::new();
    let mut iterations = Vec::new();
    train_loop(
        model,
        steps,
        1e-3,
        |m: &burn_swap_harness::models::Mlp<Autodiff<S>>, step| {
            let loss = m.loss(&config, step, &device);
            if extra(step) {
                let _ = (loss.clone() * 2.0).into_data();
            }
            loss
        },
        |step, _| {
            ops_after_step.push(burn_swap::report(&device).unwrap().workload.ops);
            if step >= 2 {
                iterations.push(burn_swap::trace(&device).map(|t| (t.period, t.iteration)));
            }
        },
    );
    let lengths = ops_after_step.windows(2).map(|w| w[1] - w[0]).collect();
    (lengths, iterations)
}

#[test]
fn a_one_off_insertion_keeps_the_step_period() {
    let _guard = burn_swap_harness::swap_device_lock();
    let (lengths, iterations) = train_with_extra_ops(14, |step| step == 7);
    let step_period = lengths[1];
    assert!(
        lengths.iter().any(|&l| l != step_period),
        "step 7 is longer: {lengths:?}"
    );
    let report = burn_swap::report(&FlexDevice).unwrap();
    assert_eq!(report.workload.period, Some(step_period as usize));
    // The trace stays available through the insertion, and the numbering moves on.
    let numbers: Vec<u64> = iterations.iter().flatten().map(|(_, k)| *k).collect();
    assert!(
        iterations[4..]
            .iter()
            .all(|i| i.is_some_and(|(p, _)| p == Some(step_period as usize)))
    );
    assert!(numbers.windows(2).all(|w| w[1] >= w[0]), "{numbers:?}");
    assert!(numbers.last() > numbers.first(), "{numbers:?}");
}

#[test]
fn work_recurring_every_few_steps_makes_the_period_span_them() {
    let _guard = burn_swap_harness::swap_device_lock();
    // A log every five steps: the stream repeats every five steps plus the log's ops.
    let (lengths, _) = train_with_extra_ops(16, |step| step % 5 == 4);
    let five_steps: u64 = lengths[lengths.len() - 5..].iter().sum();
    let report = burn_swap::report(&FlexDevice).unwrap();
    assert_eq!(report.workload.period, Some(five_steps as usize));
}
