//! Unit tests of the parent module.

use super::*;
use burn_backend::Shape;

/// Records one op of "kind" `kind` reading one tensor and making one, of `dims` floats.
fn op(r: &mut Recorder, id: &mut u64, kind: u64, dims: usize) {
    r.begin(kind, || format!("k{kind}"));
    let input = TensorIr {
        id: TensorId::new(*id),
        shape: Shape::from(vec![dims]),
        status: TensorStatus::ReadWrite,
        dtype: DType::F32,
    };
    r.input(&input, 4 * dims as u64);
    r.outputs_follow();
    *id += 1;
    let output = TensorIr {
        id: TensorId::new(*id),
        shape: Shape::from(vec![dims]),
        status: TensorStatus::NotInit,
        dtype: DType::F32,
    };
    r.output(&output, 4 * dims as u64);
    r.end(OpCounters {
        nanos: 0,
        live_before: 4 * dims as u64,
        resident_during: 8 * dims as u64,
        ..Default::default()
    });
}

/// Records a pseudo-op `name` (`Read`, `Init`) with at most one input and one output, each
/// `(id, floats)`.
fn named(
    r: &mut Recorder,
    name: &'static str,
    input: Option<(u64, usize)>,
    output: Option<(u64, usize)>,
) {
    let tensor = |(id, n): (u64, usize), status| TensorIr {
        id: TensorId::new(id),
        shape: Shape::from(vec![n]),
        status,
        dtype: DType::F32,
    };
    r.begin(signature::name_key(name), || name.to_string());
    if let Some(t) = input {
        r.input(&tensor(t, TensorStatus::ReadOnly), 4 * t.1 as u64);
    }
    r.outputs_follow();
    if let Some(t) = output {
        r.output(&tensor(t, TensorStatus::NotInit), 4 * t.1 as u64);
    }
    r.end(OpCounters::default());
}

#[test]
fn long_runs_stay_bounded_and_keep_their_schedule() {
    let mut r = Recorder::with_window(256);
    let mut id = 0;
    // 400 iterations of 20 ops, with one extra op every 37 iterations.
    for k in 0..400u64 {
        for i in 0..20 {
            op(&mut r, &mut id, i, 4 + i as usize);
        }
        if k % 37 == 36 {
            op(&mut r, &mut id, 99, 3);
        }
        assert!(r.window_len() <= 2 * 256, "the window stays bounded");
    }
    assert_eq!(r.period(), Some(20));
    let trace = r.trace().expect("the last complete iteration");
    assert_eq!(trace.ops.len(), 20);
    assert!(
        trace.iteration > 300,
        "numbering went on through resyncs: {}",
        trace.iteration
    );
    let peaks = r.iteration_peaks();
    assert!(!peaks.is_empty() && peaks.len() <= KEPT_ITERATION_PEAKS);
    assert!(peaks.windows(2).all(|w| w[0].iteration < w[1].iteration));
}

#[test]
fn a_stream_that_stops_repeating_stays_bounded() {
    let mut r = Recorder::with_window(256);
    let mut id = 0;
    for _ in 0..20 {
        for i in 0..10 {
            op(&mut r, &mut id, i, 8);
        }
    }
    assert_eq!(r.period(), Some(10));
    // Then no repetition at all, for a long time.
    let mut x = 1u64;
    for _ in 0..5000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        op(&mut r, &mut id, 1000 + (x >> 33), 8);
        assert!(r.window_len() <= 2 * 256);
    }
}

#[test]
fn two_ops_that_swap_places_leave_the_schedule_in_force() {
    let mut r = Recorder::with_window(4096);
    let mut id = 0;
    // Iterations of 40 ops; in every third one after the tenth, ops 7 and 8 come the other
    // way round (a drop and an upload whose order varies).
    let iteration = |r: &mut Recorder, id: &mut u64, swapped: bool| {
        for i in 0..40u64 {
            let k = match (swapped, i) {
                (true, 7) => 8,
                (true, 8) => 7,
                _ => i,
            };
            op(r, id, k, 4 + k as usize);
        }
    };
    for _ in 0..10 {
        iteration(&mut r, &mut id, false);
    }
    assert_eq!(r.period(), Some(40));
    let key = r.schedule_key();
    for k in 0..12 {
        iteration(&mut r, &mut id, k % 3 == 0);
        // From the 16th op after the swap on, the plan's position is known again.
        assert!(r.position_of_last().is_some(), "iteration {k}");
        assert_eq!(r.schedule_key(), key, "the anchor stays");
    }
    let trace = r.trace().expect("the last complete iteration");
    assert_eq!(trace.ops.len(), 40);
}

#[test]
fn another_threads_reads_landing_elsewhere_each_iteration_leave_the_schedule_in_force() {
    let mut r = Recorder::with_window(8192);
    let mut id = 0;
    // Iterations of 80 ops of the step and three reads of its outputs by a metrics thread,
    // which land among the first ops of the next step at a place that varies: 83 ops each.
    let iteration = |r: &mut Recorder, id: &mut u64, at: [u64; 3]| {
        let mut reads = 0;
        for i in 0..80u64 {
            while reads < 3 && at[reads] == i {
                op(r, id, 90, 2 + reads);
                reads += 1;
            }
            op(r, id, i, 4 + i as usize);
        }
    };
    for _ in 0..10 {
        iteration(&mut r, &mut id, [0, 0, 0]);
    }
    assert_eq!(r.period(), Some(83));
    let key = r.schedule_key();
    let places = [
        [1, 1, 1],
        [0, 3, 7],
        [5, 6, 12],
        [0, 0, 0],
        [2, 9, 9],
        [14, 15, 19],
    ];
    for (k, at) in places.iter().cycle().take(24).enumerate() {
        iteration(&mut r, &mut id, *at);
        // The step's last ops match the iteration before: the schedule holds there.
        assert!(r.position_of_last().is_some(), "iteration {k} ({at:?})");
        assert_eq!(r.schedule_key(), key, "iteration {k}: the anchor stays");
    }
    assert!(r.profiled_schedule().is_some());
}

#[test]
fn a_loop_whose_reads_never_land_twice_at_one_place_is_found() {
    let mut r = Recorder::with_window(8192);
    let mut id = 0;
    // No two iterations alike: each holds the 80 ops of the step and, at a place that moves
    // every iteration, a read (another thread's) and an upload (a loader's worker).
    let mut found_at = None;
    for k in 0..30u64 {
        let (read_at, upload_at) = ((k * 7) % 30, (k * 11 + 3) % 40);
        for i in 0..80u64 {
            if i == read_at {
                named(&mut r, "Read", Some((id, 2)), None);
            }
            if i == upload_at {
                id += 1;
                named(&mut r, "Init", None, Some((id, 16)));
            }
            op(&mut r, &mut id, i, 4 + i as usize);
        }
        if found_at.is_none() && r.profiled_schedule().is_some() {
            found_at = Some(k);
        }
    }
    assert_eq!(r.period(), Some(82));
    let found_at = found_at.expect("a profiled schedule");
    assert!(found_at <= 6, "found after {found_at} iterations");
    assert!(
        r.position_of_last().is_some(),
        "the schedule holds at the end"
    );
}

#[test]
fn a_long_stretch_of_other_ops_still_breaks_the_schedule() {
    let mut r = Recorder::with_window(8192);
    let mut id = 0;
    for _ in 0..10 {
        for i in 0..80u64 {
            op(&mut r, &mut id, i, 4 + i as usize);
        }
    }
    // Ten ops of another shape in place of ten of the step: not a reordering.
    for i in 0..80u64 {
        let dims = if (20..30).contains(&i) {
            3
        } else {
            4 + i as usize
        };
        op(&mut r, &mut id, i, dims);
    }
    assert!(r.position_of_last().is_none(), "the schedule broke");
}

#[test]
fn an_op_inserted_once_still_moves_the_anchor() {
    let mut r = Recorder::with_window(4096);
    let mut id = 0;
    for _ in 0..10 {
        for i in 0..40u64 {
            op(&mut r, &mut id, i, 4 + i as usize);
        }
    }
    let (p, anchor) = r.schedule_key().expect("a schedule");
    op(&mut r, &mut id, 99, 3);
    for _ in 0..3 {
        for i in 0..40u64 {
            op(&mut r, &mut id, i, 4 + i as usize);
        }
    }
    let (p2, anchor2) = r.schedule_key().expect("a schedule");
    assert_eq!(p2, p);
    assert_ne!(
        anchor2 % p as u64,
        anchor % p as u64,
        "re-anchored after the insertion"
    );
}

#[test]
fn identical_layers_give_way_to_the_iteration_soon() {
    // The shape of the benches' GPT preset: an iteration of eight identical blocks of 208
    // ops (a sub-period the detector sees first, within one iteration) and 67 ops of its
    // own, period 1,731, after a first stretch of 1,584 ops that differs.
    let mut r = Recorder::with_window(1 << 17);
    let mut id = 0;
    for i in 0..1584 {
        op(&mut r, &mut id, 10_000 + i, 3);
    }
    let mut found_in = None;
    for k in 0..6 {
        for _ in 0..8 {
            for i in 0..208 {
                op(&mut r, &mut id, i, 8);
            }
        }
        for i in 0..67 {
            op(&mut r, &mut id, 5_000 + i, 4);
        }
        // The schedule in force, as the engine sees it after each op (asking `period()`
        // would analyse the window on the spot).
        if found_in.is_none() && r.schedule_key().map(|(p, _)| p) == Some(1731) {
            found_in = Some(k);
        }
    }
    assert_eq!(r.period(), Some(1731));
    // Two iterations show it by the end of iteration 1. The block's period breaks at each
    // iteration's own ops and heals a block later, looking healthy whenever the periodic
    // analysis comes due: a heal analyses the window (when a quarter due), so the
    // iteration's period is in force from the first heal after it shows, in iteration 2
    // (iteration 4 before: the next doubling of the window).
    assert!(
        found_in.is_some_and(|k| k <= 2),
        "found in iteration {found_in:?}"
    );
}

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

/// A training loop as the recorder sees it, with the live bytes counted as the engine counts
/// them: ops of a kind over tensors by id, each input read or used a last time.
struct Loop {
    r: Recorder,
    next: u64,
    live: HashMap<u64, u64>,
    /// Every period the recorder held, after any op.
    periods: std::collections::BTreeSet<usize>,
}

impl Loop {
    fn new() -> Self {
        Self {
            r: Recorder::default(),
            next: 0,
            live: HashMap::new(),
            periods: Default::default(),
        }
    }

    /// Runs op `kind` over `inputs` (id, last use) making tensors of `outputs` floats.
    fn op(&mut self, kind: u64, inputs: &[(u64, bool)], outputs: &[usize]) -> Vec<u64> {
        self.op_named(kind, &format!("k{kind}"), inputs, outputs)
    }

    /// [`Loop::op`] of a kind named `name` (`Init`, `Drop`: what the engine names uploads
    /// and the tensors Burn lets go).
    fn op_named(
        &mut self,
        kind: u64,
        name: &str,
        inputs: &[(u64, bool)],
        outputs: &[usize],
    ) -> Vec<u64> {
        let live_before = self.live.values().sum();
        self.r.begin(kind, || name.to_string());
        for &(id, last) in inputs {
            let bytes = self.live[&id];
            let floats = bytes as usize / 4;
            self.r.input(
                &TensorIr {
                    id: TensorId::new(id),
                    shape: Shape::from(vec![floats]),
                    status: if last {
                        TensorStatus::ReadWrite
                    } else {
                        TensorStatus::ReadOnly
                    },
                    dtype: DType::F32,
                },
                bytes,
            );
        }
        self.r.outputs_follow();
        let mut made = Vec::new();
        for &floats in outputs {
            self.next += 1;
            self.r.output(
                &TensorIr {
                    id: TensorId::new(self.next),
                    shape: Shape::from(vec![floats]),
                    status: TensorStatus::NotInit,
                    dtype: DType::F32,
                },
                4 * floats as u64,
            );
            made.push(self.next);
        }
        self.r.end(OpCounters {
            live_before,
            resident_during: live_before,
            ..Default::default()
        });
        for &(id, last) in inputs {
            if last {
                self.live.remove(&id);
            }
        }
        for (&id, &floats) in made.iter().zip(outputs) {
            self.live.insert(id, 4 * floats as u64);
        }
        if let Some((period, _)) = self.r.schedule_key() {
            self.periods.insert(period);
        }
        made
    }

    /// One training step of a recurrent net unrolled over `steps` time steps, with one
    /// weight matrix updated by a per-parameter optimizer step; returns the new weight.
    fn rnn_step(&mut self, weight: u64, steps: usize) -> u64 {
        self.rnn_step_of(weight, steps, 64)
    }

    /// [`Loop::rnn_step`] on a batch of `features` features (its first op reads them).
    fn rnn_step_of(&mut self, weight: u64, steps: usize, features: usize) -> u64 {
        const H: usize = 64;
        let x = self.op(1, &[], &[features])[0];
        let mut h = self.op(2, &[(x, true)], &[H])[0];
        let mut saved = Vec::new();
        for _ in 0..steps {
            // The cell keeps its input and its pre-activation for the backward pass.
            let pre = self.op(3, &[(weight, false), (h, false)], &[H])[0];
            let next = self.op(4, &[(pre, false)], &[H])[0];
            saved.push((h, pre));
            h = next;
        }
        let mut grad = self.op(5, &[(h, true)], &[H])[0];
        let mut grad_w = self.op(6, &[], &[H * H])[0];
        for (h, pre) in saved.into_iter().rev() {
            let g = self.op(7, &[(grad, true), (pre, true), (weight, false)], &[H])[0];
            let gw = self.op(8, &[(g, false), (h, true)], &[H * H])[0];
            grad_w = self.op(9, &[(grad_w, true), (gw, true)], &[H * H])[0];
            grad = g;
        }
        self.op(10, &[(grad, true)], &[]);
        self.op(11, &[(weight, true), (grad_w, true)], &[H * H])[0]
    }
}

#[test]
fn an_unrolled_loop_inside_the_iteration_never_passes_for_its_period() {
    let mut l = Loop::new();
    let mut weight = l.op(0, &[], &[64 * 64])[0];
    let steps = 24;
    let iteration_ops = 2 + 2 * steps + 2 + 3 * steps + 2;
    for _ in 0..6 {
        weight = l.rnn_step(weight, steps);
    }
    // Every schedule found on the way, after any op, is the iteration: the forward steps
    // (2 ops) and the backward steps (3 ops) repeat 24 times each, but keep or free
    // activations.
    assert_eq!(
        l.periods.iter().copied().collect::<Vec<_>>(),
        vec![iteration_ops],
        "the iteration has {iteration_ops} ops"
    );
    assert_eq!(l.r.period(), Some(iteration_ops));
}

impl Loop {
    /// One training step of `weights.len()` identical blocks, each with one weight and two
    /// optimizer states, updated one parameter after another; the gradients are all dropped
    /// at the end of the step (so the optimizer's steps keep the live bytes level). The
    /// period is read (as the report does) right after the optimizer's steps, where the
    /// window ends with them.
    fn stack_step(&mut self, weights: &mut [u64], states: &mut [(u64, u64)]) {
        const H: usize = 32;
        let mut x = self.op(1, &[], &[H])[0];
        let mut saved = Vec::new();
        for &w in weights.iter() {
            let y = self.op(3, &[(w, false), (x, false)], &[H])[0];
            saved.push(x);
            x = y;
        }
        let mut grad = self.op(5, &[(x, true)], &[H])[0];
        let mut grads = Vec::new();
        for (&w, x) in weights.iter().zip(saved).rev() {
            let g = self.op(7, &[(grad, true), (x, true), (w, false)], &[H])[0];
            grads.push(self.op(8, &[(g, false)], &[H * H])[0]);
            grad = g;
        }
        self.op(10, &[(grad, true)], &[]);
        grads.reverse();
        for i in 0..weights.len() {
            let (m, v) = states[i];
            let m = self.op(12, &[(m, true), (grads[i], false)], &[H * H])[0];
            let v = self.op(14, &[(v, true), (grads[i], false)], &[H * H])[0];
            weights[i] = self.op(11, &[(weights[i], true), (m, false), (v, false)], &[H * H])[0];
            states[i] = (m, v);
        }
        if let Some(period) = self.r.period() {
            self.periods.insert(period);
        }
        for g in grads {
            self.op(13, &[(g, true)], &[]);
        }
    }
}

#[test]
fn identical_blocks_and_per_parameter_updates_never_pass_for_the_period() {
    let mut l = Loop::new();
    let blocks = 12;
    let mut weights: Vec<u64> = (0..blocks).map(|_| l.op(0, &[], &[32 * 32])[0]).collect();
    let mut states: Vec<(u64, u64)> = (0..blocks)
        .map(|_| (l.op(0, &[], &[32 * 32])[0], l.op(0, &[], &[32 * 32])[0]))
        .collect();
    let iteration_ops = 1 + blocks + 1 + 2 * blocks + 1 + 3 * blocks + blocks;
    for _ in 0..6 {
        l.stack_step(&mut weights, &mut states);
    }
    // The blocks' forward (1 op), backward (2 ops) and the optimizer's per-parameter
    // updates (3 ops, the bytes level) repeat 12 times each.
    assert_eq!(
        l.periods.iter().copied().collect::<Vec<_>>(),
        vec![iteration_ops],
        "the iteration has {iteration_ops} ops"
    );
}

#[test]
fn a_schedule_that_comes_back_is_taken_up_after_two_of_its_iterations() {
    let mut l = Loop::new();
    let mut weight = l.op(0, &[], &[64 * 64])[0];
    let period = |steps: usize| 2 + 2 * steps + 2 + 3 * steps + 2;
    // Runs of three steps of three lengths (a bucketing sampler's buckets), in an order
    // without a repeated stretch of runs (so that no cycle of runs is a period).
    let order = [0, 1, 2, 1, 0, 2, 1, 2, 0, 1, 2, 1, 0];
    let mut late = Vec::new();
    let mut seen = [false; 3];
    for (run, &bucket) in order.iter().enumerate() {
        let steps = [3, 5, 7][bucket];
        for step in 0..3 {
            weight = l.rnn_step(weight, steps);
            // After the second step of a run of a length seen before, the schedule in
            // force is this length's.
            if seen[bucket] && step >= 1 {
                let held = l.r.schedule_key().map(|(p, _)| p);
                if held != Some(period(steps)) {
                    late.push((run, step, held));
                }
            }
        }
        seen[bucket] = true;
    }
    assert!(late.is_empty(), "(run, step, period held): {late:?}");
}

#[test]
fn batches_of_another_shape_and_the_same_period_take_their_schedule_up_again() {
    let mut l = Loop::new();
    let mut weight = l.op(0, &[], &[64 * 64])[0];
    let order = [0, 1, 2, 1, 0, 2, 1, 2, 0, 1, 2, 1, 0];
    let mut content = [None; 3];
    let mut late = Vec::new();
    for (run, &bucket) in order.iter().enumerate() {
        for step in 0..3 {
            weight = l.rnn_step_of(weight, 5, [32, 48, 64][bucket]);
            if step >= 1 {
                let now = l.r.schedule_content();
                match content[bucket] {
                    None => content[bucket] = now,
                    Some(c) if now != Some(c) || l.r.position_of_last().is_none() => {
                        late.push((run, step, l.r.schedule_key()))
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(late.is_empty(), "(run, step, schedule): {late:?}");
}

#[test]
fn a_model_let_go_layer_by_layer_after_training_is_not_a_training_loop() {
    let mut l = Loop::new();
    let mut weight = l.op(0, &[], &[64 * 64])[0];
    // Small parameters (biases, norms' scales) of six shapes, uploaded once.
    let shapes = [8, 4, 8, 2, 8, 6];
    let small: Vec<u64> = (0..60)
        .map(|i| l.op_named(100, "Init", &[], &[shapes[i % shapes.len()]])[0])
        .collect();
    let steps = 4;
    let iteration_ops = 2 + 2 * steps + 2 + 3 * steps + 2;
    for _ in 0..6 {
        weight = l.rnn_step(weight, steps);
    }
    // The model is dropped: its tensors are let go one after another, the small ones in
    // the same order of shapes ten times over (a stretch as periodic as any loop, and its
    // live bytes all but level), but nothing is computed.
    for id in small {
        l.op_named(101, "Drop", &[(id, true)], &[]);
    }
    assert_eq!(
        l.periods.iter().copied().collect::<Vec<_>>(),
        vec![iteration_ops],
        "the iteration has {iteration_ops} ops"
    );
    assert_eq!(l.r.period(), Some(iteration_ops));
}
