//! A recurrent network written the way Burn's own examples write one (its modern LSTM example):
//! LSTM cells built from `Linear`, `LayerNorm` and `chunk`, stacked in layers, run forwards
//! and on the flipped sequence, the two directions concatenated, dropout between layers, and
//! its batches made on a loader thread. Thousands of small ops per step, with loops inside the
//! step (time steps, layers, directions): what an op-bound user model looks like to burn-swap.

use burn::module::Module;
use burn::nn::loss::{MseLoss, Reduction};
use burn::nn::{Dropout, DropoutConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::Tensor;
use burn::tensor::activation::{sigmoid, tanh};
use burn::tensor::backend::{AutodiffBackend, Backend};

use crate::data::XorShift;
use crate::train::{Outcome, train_loaded};

/// Sizes of a [`Recurrent`] network and its batches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecurrentConfig {
    /// Features per time step.
    pub input: usize,
    /// Hidden size of every cell.
    pub hidden: usize,
    /// Stacked layers per direction.
    pub layers: usize,
    /// Time steps per sequence.
    pub seq: usize,
    /// Batch size.
    pub batch: usize,
    /// Whether a second stack reads the flipped sequence.
    pub bidirectional: bool,
    /// Dropout probability on each cell's hidden output.
    pub dropout: f64,
    /// Seed of the synthetic sequences.
    pub seed: u64,
}

impl RecurrentConfig {
    /// Burn's example's sizes: one feature, hidden 32, two layers, both directions, ten time
    /// steps, batch 32, dropout 0.1 (about 9,000 ops per training step).
    pub fn example() -> Self {
        Self {
            input: 1,
            hidden: 32,
            layers: 2,
            seq: 10,
            batch: 32,
            bidirectional: true,
            dropout: 0.1,
            seed: 3,
        }
    }

    /// A smaller one for tests: one direction, four time steps, batch 4.
    pub fn small() -> Self {
        Self {
            input: 2,
            hidden: 8,
            layers: 2,
            seq: 4,
            batch: 4,
            bidirectional: false,
            dropout: 0.1,
            seed: 3,
        }
    }

    /// Initialises the network on `device` (call it under [`crate::rng_lock`] after seeding).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Recurrent<B> {
        let stack = |device: &B::Device| {
            (0..self.layers)
                .map(|layer| {
                    let input = if layer == 0 { self.input } else { self.hidden };
                    Cell {
                        input_gates: LinearConfig::new(input, 4 * self.hidden).init(device),
                        hidden_gates: LinearConfig::new(self.hidden, 4 * self.hidden).init(device),
                        gates_norm: LayerNormConfig::new(4 * self.hidden).init(device),
                        cell_norm: LayerNormConfig::new(self.hidden).init(device),
                        hidden_norm: LayerNormConfig::new(self.hidden).init(device),
                        dropout: DropoutConfig::new(self.dropout).init(),
                    }
                })
                .collect::<Vec<_>>()
        };
        let directions = if self.bidirectional { 2 } else { 1 };
        Recurrent {
            forwards: stack(device),
            backwards: if self.bidirectional {
                stack(device)
            } else {
                Vec::new()
            },
            dropout: DropoutConfig::new(self.dropout).init(),
            head: LinearConfig::new(directions * self.hidden, 1).init(device),
            hidden: self.hidden,
        }
    }

    /// The batch of `step`: noisy sine waves `[batch, seq, input]` and the next value of each,
    /// built as a Burn batcher builds one on the calling thread: each item uploaded as a
    /// tensor of its own, then the items stacked.
    pub fn batch<B: Backend>(
        &self,
        step: usize,
        device: &B::Device,
    ) -> (Tensor<B, 3>, Tensor<B, 2>) {
        let mut rng = XorShift::new(self.seed ^ (step as u64).wrapping_mul(0x2545_f491));
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for _ in 0..self.batch {
            let phase = rng.next_f32() * 3.0;
            let wave = |t: usize| (phase + t as f32 * 0.3).sin();
            let sequence: Vec<f32> = (0..self.seq * self.input)
                .map(|i| {
                    wave(i / self.input) + 0.05 * rng.next_f32() + (i % self.input) as f32 * 0.01
                })
                .collect();
            xs.push(
                Tensor::<B, 1>::from_floats(sequence.as_slice(), device)
                    .reshape([self.seq, self.input]),
            );
            ys.push(Tensor::<B, 1>::from_floats([wave(self.seq)], device));
        }
        (Tensor::stack(xs, 0), Tensor::stack(ys, 0))
    }
}

/// One LSTM cell: both gate projections, a layer norm on the gates, on the cell state and on
/// the hidden output, dropout on the output.
#[derive(Module, Debug)]
pub struct Cell<B: Backend> {
    input_gates: Linear<B>,
    hidden_gates: Linear<B>,
    gates_norm: LayerNorm<B>,
    cell_norm: LayerNorm<B>,
    hidden_norm: LayerNorm<B>,
    dropout: Dropout,
}

impl<B: Backend> Cell<B> {
    /// One time step: `x` `[batch, input]`, the state `(hidden, cell)`, each `[batch, hidden]`.
    fn step(
        &self,
        x: Tensor<B, 2>,
        (hidden, cell): (Tensor<B, 2>, Tensor<B, 2>),
    ) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let gates = self
            .gates_norm
            .forward(self.input_gates.forward(x) + self.hidden_gates.forward(hidden));
        let [input, forget, update, output]: [Tensor<B, 2>; 4] =
            gates.chunk(4, 1).try_into().expect("four gates");
        let cell = self
            .cell_norm
            .forward(sigmoid(forget) * cell + sigmoid(input) * tanh(update));
        let hidden = self
            .hidden_norm
            .forward(sigmoid(output) * tanh(cell.clone()));
        (self.dropout.forward(hidden), cell)
    }
}

/// Stacked LSTM cells over a sequence, forwards and (when bidirectional) backwards, the last
/// time step's outputs to a linear head.
#[derive(Module, Debug)]
pub struct Recurrent<B: Backend> {
    forwards: Vec<Cell<B>>,
    backwards: Vec<Cell<B>>,
    dropout: Dropout,
    head: Linear<B>,
    hidden: usize,
}

impl<B: Backend> Recurrent<B> {
    /// Runs a stack over `x` `[batch, seq, input]`; the top layer's output at each time step,
    /// `[batch, seq, hidden]`.
    fn run(&self, stack: &[Cell<B>], x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch, seq, _] = x.dims();
        let device = x.device();
        let mut states: Vec<(Tensor<B, 2>, Tensor<B, 2>)> = stack
            .iter()
            .map(|_| {
                (
                    Tensor::zeros([batch, self.hidden], &device),
                    Tensor::zeros([batch, self.hidden], &device),
                )
            })
            .collect();
        let mut outputs = Vec::with_capacity(seq);
        for t in 0..seq {
            let mut input = x.clone().narrow(1, t, 1).squeeze_dim::<2>(1);
            for (cell, state) in stack.iter().zip(states.iter_mut()) {
                let (hidden, c) = cell.step(input, state.clone());
                *state = (hidden.clone(), c);
                input = hidden;
            }
            outputs.push(input.unsqueeze_dim::<3>(1));
        }
        Tensor::cat(outputs, 1)
    }

    /// The prediction `[batch, 1]` for `x` `[batch, seq, input]`.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 2> {
        let [_, seq, _] = x.dims();
        let mut out = self.run(&self.forwards, x.clone());
        if !self.backwards.is_empty() {
            let reversed = self.run(&self.backwards, x.flip([1])).flip([1]);
            out = Tensor::cat(vec![out, reversed], 2);
        }
        let last = out.narrow(1, seq - 1, 1).squeeze_dim::<2>(1);
        self.head.forward(self.dropout.forward(last))
    }
}

/// Trains a [`Recurrent`] network for `steps` steps of Adam at `lr`, its batches made on a
/// loader thread two ahead, and returns what to compare.
pub fn train_recurrent<B: AutodiffBackend>(
    config: &RecurrentConfig,
    device: &B::Device,
    steps: usize,
    lr: f64,
    on_step: &mut dyn FnMut(usize, f32),
) -> Outcome {
    let (c, d) = (*config, device.clone());
    train_loaded(
        device,
        steps,
        || config.init::<B>(device),
        move |step| c.batch::<B>(step, &d),
        |_| lr,
        |m: &Recurrent<B>, (x, y)| MseLoss::new().forward(m.forward(x), y, Reduction::Mean),
        on_step,
    )
}
