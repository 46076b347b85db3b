//! The period is the training iteration: inner loops, identical blocks, per-parameter
//! updates and schedules that come back, over a loop that counts live bytes as the engine does.

use super::*;

/// A training loop as the recorder sees it, with the live bytes counted as the engine counts
/// them: ops of a kind over tensors by id, each input read or used a last time.
struct Loop {
    r: Recorder,
    next: u64,
    live: HashMap<u64, u64>,
    /// Every period the recorder held, after any op.
    periods: std::collections::BTreeSet<usize>,
    /// The ops a schedule was recognised at by the first ops of its iteration.
    recognised: Vec<u64>,
}

impl Loop {
    fn new() -> Self {
        Self {
            r: Recorder::default(),
            next: 0,
            live: HashMap::new(),
            periods: Default::default(),
            recognised: Vec::new(),
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
        if self.r.recognised_at_last() {
            self.recognised.push(self.r.next_index() - 1);
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
                    Some(c) if now != Some(c) || !super::holds(&l.r) => {
                        late.push((run, step, l.r.schedule_key()))
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(late.is_empty(), "(run, step, schedule): {late:?}");
}

/// Trains on batches of three lengths, three steps each (each length's schedule held),
/// then on `order`: a length's index, or `None` for a length of its own, seen once. Returns
/// the steps of a held length that were not recognised among their first ops, did not hold
/// at their end, or had another content than their length's schedule, as (step, bucket,
/// recognised among its first ops, holds at its end).
fn late_recognitions(order: &[Option<usize>]) -> Vec<(usize, usize, bool, bool)> {
    let mut l = Loop::new();
    let mut weight = l.op(0, &[], &[64 * 64])[0];
    let features = [32, 48, 64];
    let mut content = [None; 3];
    for (bucket, &f) in features.iter().enumerate() {
        for _ in 0..3 {
            weight = l.rnn_step_of(weight, 5, f);
        }
        content[bucket] = l.r.schedule_content();
        assert!(content[bucket].is_some() && super::holds(&l.r));
    }
    let mut late = Vec::new();
    for (step, bucket) in order.iter().enumerate() {
        let first = l.r.next_index();
        let Some(bucket) = *bucket else {
            weight = l.rnn_step_of(weight, 5, 24 + 8 * step);
            continue;
        };
        weight = l.rnn_step_of(weight, 5, features[bucket]);
        // Recognised once its first ops (the batch's upload, whose shape is the length's,
        // and those after it) have matched the iteration kept of its length.
        let recognised_first = l
            .recognised
            .last()
            .is_some_and(|&at| (first..first + RECOGNISED_AFTER as u64).contains(&at));
        if !recognised_first || !super::holds(&l.r) || l.r.schedule_content() != content[bucket] {
            late.push((step, bucket, recognised_first, super::holds(&l.r)));
        }
    }
    late
}

/// Batches of three lengths drawn at random (a length seldom twice in a row): once each
/// length's schedule has been held, a step of it that comes after others is recognised
/// among its first ops, holds through the step, and has the content its schedule had, so
/// that its kept plan can take over in it.
#[test]
fn a_schedule_that_comes_back_after_others_is_recognised_by_its_first_ops() {
    let order = [0, 2, 1, 0, 1, 2, 0, 2, 1, 2, 0, 1].map(Some);
    let late = late_recognitions(&order);
    assert!(
        late.is_empty(),
        "(step, bucket, recognised among its first ops, holds at its end): {late:?}"
    );
}

/// Batches of three lengths held before, with now and then a batch of a length seen once
/// in between (an iteration of no schedule kept): the step of a held length that follows
/// one is recognised among its first ops all the same, as is the step after it. Without
/// the watch for kept first ops while no schedule holds, none after a new length is.
#[test]
fn a_schedule_that_comes_back_after_a_length_seen_once_is_recognised_by_its_first_ops() {
    // `None`: a length of its own, seen once (40, 56, 24, ...).
    let order = [
        Some(0),
        None,
        Some(2),
        Some(1),
        None,
        Some(0),
        None,
        None,
        Some(1),
        Some(2),
        None,
        Some(2),
    ];
    let late = late_recognitions(&order);
    assert!(
        late.is_empty(),
        "(step, bucket, recognised among its first ops, holds at its end): {late:?}"
    );
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
