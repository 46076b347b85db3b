//! Lean recording: what a trace keeps when most ops are recorded without their tensors.

use super::*;

/// A trace with tensor ids replaced by their index in the trace and the iteration's place
/// left out: what two iterations of one loop share.
fn shape_of(trace: &Trace) -> Trace {
    let index: HashMap<u64, u64> = trace
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id, i as u64))
        .collect();
    let mut t = trace.clone();
    t.iteration = 0;
    t.first_op = 0;
    for op in &mut t.ops {
        for id in op.inputs.iter_mut().chain(op.outputs.iter_mut()) {
            *id = index[id];
        }
    }
    for (i, tensor) in t.tensors.iter_mut().enumerate() {
        tensor.id = i as u64;
    }
    t
}

/// Iterations of 20 chained ops, the last output carried into the next iteration.
fn iterations(r: &mut Recorder, id: &mut u64, n: usize) {
    for _ in 0..n {
        for i in 0..20 {
            op(r, id, i, 4 + i as usize);
        }
    }
}

#[test]
fn lean_recording_keeps_a_full_iteration_to_trace_and_records_less() {
    let (mut full, mut lean) = (Recorder::with_window(4096), Recorder::with_window(4096));
    lean.set_lean(true);
    let (mut a, mut b) = (0, 0);
    iterations(&mut full, &mut a, 60);
    iterations(&mut lean, &mut b, 60);
    let (want, got) = (full.trace().unwrap(), lean.trace().unwrap());
    assert_eq!(want.iteration, 59);
    assert!(
        got.iteration < want.iteration && got.iteration + 16 >= want.iteration,
        "an iteration of the last few: {}",
        got.iteration
    );
    assert!(
        got.tensors.iter().any(|t| t.wraps_to.is_some()),
        "the carried tensor is linked to the iteration before"
    );
    assert_eq!(shape_of(&got), shape_of(&want));
    assert!(
        lean.tensors.len() * 2 < full.tensors.len(),
        "lean iterations keep no tensors: {} against {}",
        lean.tensors.len(),
        full.tensors.len()
    );
    assert_eq!(lean.iteration_peaks(), full.iteration_peaks());

    // A budget set later: recording in full again, the earlier full iteration is traced
    // until two in a row were recorded in full (the carried tensors link to the one before),
    // then the latest.
    lean.set_lean(false);
    for more in [1, 2] {
        iterations(&mut full, &mut a, 1);
        iterations(&mut lean, &mut b, 1);
        let (want, got) = (full.trace().unwrap(), lean.trace().unwrap());
        assert_eq!(shape_of(&got), shape_of(&want));
        assert_eq!(got.iteration == want.iteration, more == 2);
    }
}

#[test]
fn lean_recording_in_a_small_window_always_has_a_trace() {
    let mut r = Recorder::with_window(256);
    r.set_lean(true);
    let mut id = 0;
    let mut reference = None;
    for k in 0..400 {
        iterations(&mut r, &mut id, 1);
        assert!(r.window_len() <= 2 * 256, "the window stays bounded");
        if k < 8 {
            continue;
        }
        let trace = r.trace().expect("a full iteration stays in the window");
        assert!(trace.iteration + 8 > k, "{} at {k}", trace.iteration);
        let shape = shape_of(&trace);
        assert_eq!(reference.get_or_insert_with(|| shape.clone()), &shape);
    }
    assert!(r.ops.iter().any(|o| o.lean), "some iterations were lean");
}

#[test]
fn the_window_trace_under_lean_recording_holds_only_ops_recorded_in_full() {
    let mut r = Recorder::with_window(4096);
    r.set_lean(true);
    let mut id = 0;
    iterations(&mut r, &mut id, 40);
    assert!(r.ops.last().unwrap().lean, "the latest iteration is lean");
    let trace = r.trace_all();
    assert!(
        trace.ops.len() >= 40,
        "at least the last full pair: {}",
        trace.ops.len()
    );
    assert!(
        trace
            .ops
            .iter()
            .all(|o| o.inputs.len() == 1 && o.outputs.len() == 1),
        "every op with its tensors"
    );
    // Ops recorded in full after lean ones: the window trace is those.
    r.set_lean(false);
    iterations(&mut r, &mut id, 1);
    assert_eq!(r.trace_all().ops.len(), 20);
}

#[test]
fn logged_tensors_keep_their_dtypes_by_index() {
    // A tensor in the log names its dtype by index (32 bytes less per tensor); the trace
    // gives each its own back, quantized ones with their scheme.
    assert!(
        size_of::<TensorRef>() <= 32,
        "{} bytes",
        size_of::<TensorRef>()
    );
    let quantized = DType::QFloat(burn_backend::quantization::QuantScheme::default());
    let dtypes = [
        DType::F32,
        DType::I64,
        quantized,
        DType::F32,
        DType::Bool(burn_backend::BoolStore::Native),
    ];
    let mut r = Recorder::default();
    r.begin(1, || "k1".to_string());
    for (i, dtype) in dtypes.into_iter().enumerate() {
        let t = TensorIr {
            id: TensorId::new(i as u64 + 1),
            shape: Shape::from(vec![2]),
            status: TensorStatus::ReadOnly,
            dtype,
        };
        r.input(&t, 8);
    }
    assert_eq!(r.dtypes.len(), 4, "each dtype once");
    for (t, dtype) in r.tensors.iter().zip(dtypes) {
        assert_eq!(r.dtype_of(t), dtype);
    }
}
