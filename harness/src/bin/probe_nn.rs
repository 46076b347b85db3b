//! Ordinary `burn::nn` models the harness does not have, written as a new user writes them,
//! timed under the planned policy, the reactive policy and no budget at all, in interleaved
//! rounds (issue 42's table: plans made, planning on the op's thread, run seconds):
//!
//! ```text
//! cargo run --release -p burn-swap-harness --features wgpu --bin probe_nn -- [MODELS] [--steps N] [--rounds R] [--fraction F]
//! ```
//!
//! `MODELS` is a comma-separated list of `tagger` (a BiLSTM, a GRU and an LSTM stacked),
//! `ln-lstm` (an LSTM cell with layer norms, unrolled by hand over 32 time steps), `enc-dec`
//! (a transformer encoder-decoder), `llama` (RMS norms, rotary positions, SwiGLU, four
//! blocks), `classifier` (a transformer encoder over batches of 16, 24 and 32 tokens in a
//! cycle of six steps, pooled under a padding mask), `classifier-random` (the same, its
//! lengths drawn at random), `cnn-checkpointed` (a CNN under Burn's
//! `BalancedCheckpointing`) and `cnn-dropout` (a CNN with dropout); all of them by default.
//! Each trains `N` steps (12) with Adam on `Autodiff<Swap<Flex>>`: unbudgeted first, for the
//! counted peak, then `R` rounds (3) of planned, reactive and plain `Autodiff<Flex>` runs at
//! `F` (0.5) of that peak (or the model's smallest budget, if larger). Every run's losses are
//! the plain run's, bit for bit, and every budgeted peak within its budget, or the probe
//! fails. It prints, per model, what the first round's budgeted runs moved and planned, and
//! each policy's median run time over the rounds with its range.

use std::time::Instant;

use burn::backend::autodiff::checkpoint::strategy::{
    BalancedCheckpointing, CheckpointStrategy, NoCheckpointing,
};
use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::module::Module;
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::transformer::{
    TransformerDecoder, TransformerDecoderConfig, TransformerDecoderInput, TransformerEncoder,
    TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{
    BiLstm, BiLstmConfig, Dropout, DropoutConfig, Embedding, EmbeddingConfig, Gru, GruConfig,
    LayerNorm, LayerNormConfig, Linear, LinearConfig, Lstm, LstmConfig, PaddingConfig2d, RmsNorm,
    RmsNormConfig, RotaryEncoding, RotaryEncodingConfig, SwiGlu, SwiGluConfig,
};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::activation::{relu, sigmoid, softmax, tanh};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, ElementConversion, Int, Tensor, TensorData};
use burn_swap::{Policy, Swap, SwapConfig};

const MODELS: [&str; 8] = [
    "tagger",
    "ln-lstm",
    "enc-dec",
    "llama",
    "classifier",
    "classifier-random",
    "cnn-checkpointed",
    "cnn-dropout",
];

/// Deterministic integers in `0..modulo`, different for each `salt` (the step).
fn ints<B: Backend, const D: usize>(
    shape: [usize; D],
    modulo: i64,
    salt: usize,
    device: &B::Device,
) -> Tensor<B, D, Int> {
    let n = shape.iter().product::<usize>();
    let values: Vec<i64> = (0..n)
        .map(|i| ((i * 7919 + salt * 104_729) % 1_000_003) as i64 % modulo)
        .collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// Deterministic floats in `-0.5..0.5`, different for each `salt`.
fn floats<B: Backend, const D: usize>(
    shape: [usize; D],
    salt: usize,
    device: &B::Device,
) -> Tensor<B, D> {
    let n = shape.iter().product::<usize>();
    let values: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 + salt * 31) % 997) as f32 / 997.0 - 0.5)
        .collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

fn cross_entropy<B: Backend>(logits: Tensor<B, 2>, classes: usize, salt: usize) -> Tensor<B, 1> {
    let device = logits.device();
    let [n, _] = logits.dims();
    let targets = ints::<B, 1>([n], classes as i64, salt, &device);
    CrossEntropyLossConfig::new()
        .init(&device)
        .forward(logits, targets)
}

/// A sequence tagger: a BiLSTM, a GRU and an LSTM stacked over token embeddings.
#[derive(Module, Debug)]
struct Tagger<B: Backend> {
    embedding: Embedding<B>,
    bilstm: BiLstm<B>,
    gru: Gru<B>,
    lstm: Lstm<B>,
    output: Linear<B>,
}

impl<B: Backend> Tagger<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            embedding: EmbeddingConfig::new(100, 32).init(device),
            bilstm: BiLstmConfig::new(32, 64, true).init(device),
            gru: GruConfig::new(128, 64, true).init(device),
            lstm: LstmConfig::new(64, 64, true).init(device),
            output: LinearConfig::new(64, 10).init(device),
        }
    }

    fn loss(&self, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let (batch, seq) = (16, 24);
        let x = self
            .embedding
            .forward(ints([batch, seq], 100, step, device));
        let (x, _) = self.bilstm.forward(x, None);
        let x = self.gru.forward(x, None);
        let (x, _) = self.lstm.forward(x, None);
        let logits = self.output.forward(x).reshape([batch * seq, 10]);
        cross_entropy(logits, 10, step + 1)
    }
}

/// An LSTM cell with layer norms on its gates and its cell state, unrolled by hand.
#[derive(Module, Debug)]
struct LayerNormLstm<B: Backend> {
    input: Linear<B>,
    gates: Linear<B>,
    gates_norm: LayerNorm<B>,
    cell_norm: LayerNorm<B>,
    output: Linear<B>,
}

impl<B: Backend> LayerNormLstm<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            input: LinearConfig::new(16, 64).init(device),
            gates: LinearConfig::new(128, 256).init(device),
            gates_norm: LayerNormConfig::new(256).init(device),
            cell_norm: LayerNormConfig::new(64).init(device),
            output: LinearConfig::new(64, 1).init(device),
        }
    }

    fn loss(&self, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let (batch, seq) = (32, 32);
        let xs = floats::<B, 3>([batch, seq, 16], step, device);
        let mut hidden = Tensor::<B, 2>::zeros([batch, 64], device);
        let mut cell = Tensor::<B, 2>::zeros([batch, 64], device);
        for t in 0..seq {
            let x = xs
                .clone()
                .slice([0..batch, t..t + 1, 0..16])
                .reshape([batch, 16]);
            let x = self.input.forward(x);
            let gates = self
                .gates_norm
                .forward(self.gates.forward(Tensor::cat(vec![x, hidden.clone()], 1)));
            let [i, f, o, u]: [Tensor<B, 2>; 4] = gates.chunk(4, 1).try_into().expect("4 gates");
            cell = sigmoid(f) * cell + sigmoid(i) * tanh(u);
            hidden = sigmoid(o) * tanh(self.cell_norm.forward(cell.clone()));
        }
        let target = floats::<B, 2>([batch, 1], step + 3, device);
        (self.output.forward(hidden) - target).powi_scalar(2).mean()
    }
}

/// A transformer encoder-decoder: two layers each, a causal target mask.
#[derive(Module, Debug)]
struct EncoderDecoder<B: Backend> {
    source: Embedding<B>,
    target: Embedding<B>,
    encoder: TransformerEncoder<B>,
    decoder: TransformerDecoder<B>,
    output: Linear<B>,
}

impl<B: Backend> EncoderDecoder<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            source: EmbeddingConfig::new(64, 64).init(device),
            target: EmbeddingConfig::new(64, 64).init(device),
            encoder: TransformerEncoderConfig::new(64, 128, 4, 2).init(device),
            decoder: TransformerDecoderConfig::new(64, 128, 4, 2).init(device),
            output: LinearConfig::new(64, 64).init(device),
        }
    }

    fn loss(&self, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let (batch, seq) = (8, 16);
        let source = self.source.forward(ints([batch, seq], 64, step, device));
        let memory = self.encoder.forward(TransformerEncoderInput::new(source));
        let target = self
            .target
            .forward(ints([batch, seq], 64, step + 5, device));
        let mask = generate_autoregressive_mask::<B>(batch, seq, device);
        let y = self
            .decoder
            .forward(TransformerDecoderInput::new(target, memory).target_mask_attn(mask));
        cross_entropy(
            self.output.forward(y).reshape([batch * seq, 64]),
            64,
            step + 9,
        )
    }
}

/// A llama-style block: RMS norms, rotary positions on queries and keys, a SwiGLU MLP.
#[derive(Module, Debug)]
struct LlamaBlock<B: Backend> {
    attention_norm: RmsNorm<B>,
    qkv: Linear<B>,
    out: Linear<B>,
    mlp_norm: RmsNorm<B>,
    up: SwiGlu<B>,
    down: Linear<B>,
}

/// A llama-style decoder of four blocks.
#[derive(Module, Debug)]
struct Llama<B: Backend> {
    embedding: Embedding<B>,
    rope: RotaryEncoding<B>,
    blocks: Vec<LlamaBlock<B>>,
    norm: RmsNorm<B>,
    head: Linear<B>,
}

const LLAMA_WIDTH: usize = 64;
const LLAMA_HEADS: usize = 4;

impl<B: Backend> Llama<B> {
    fn new(device: &B::Device) -> Self {
        let w = LLAMA_WIDTH;
        let linear = |i, o| LinearConfig::new(i, o).with_bias(false).init(device);
        Self {
            embedding: EmbeddingConfig::new(128, w).init(device),
            rope: RotaryEncodingConfig::new(64, w / LLAMA_HEADS).init(device),
            blocks: (0..4)
                .map(|_| LlamaBlock {
                    attention_norm: RmsNormConfig::new(w).init(device),
                    qkv: linear(w, 3 * w),
                    out: linear(w, w),
                    mlp_norm: RmsNormConfig::new(w).init(device),
                    up: SwiGluConfig::new(w, 4 * w).init(device),
                    down: linear(4 * w, w),
                })
                .collect(),
            norm: RmsNormConfig::new(w).init(device),
            head: linear(w, 128),
        }
    }

    fn loss(&self, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let (batch, seq, heads, hd) = (4, 32, LLAMA_HEADS, LLAMA_WIDTH / LLAMA_HEADS);
        let mut x = self
            .embedding
            .forward(ints([batch, seq], 128, step, device));
        let mask = generate_autoregressive_mask::<B>(batch, seq, device)
            .reshape([batch, 1, seq, seq])
            .expand([batch, heads, seq, seq]);
        for block in &self.blocks {
            // [batch, heads, 3, seq, head dim]
            let qkv = block
                .qkv
                .forward(block.attention_norm.forward(x.clone()))
                .reshape([batch, seq, 3, heads, hd])
                .swap_dims(1, 3);
            let part = |k: usize| {
                qkv.clone()
                    .slice([0..batch, 0..heads, k..k + 1])
                    .reshape([batch, heads, seq, hd])
            };
            let (q, k, v) = (
                self.rope.apply(part(0), 0),
                self.rope.apply(part(1), 0),
                part(2),
            );
            let scores = q
                .matmul(k.swap_dims(2, 3))
                .div_scalar((hd as f32).sqrt())
                .mask_fill(mask.clone(), -1e9);
            let attended =
                softmax(scores, 3)
                    .matmul(v)
                    .swap_dims(1, 2)
                    .reshape([batch, seq, heads * hd]);
            x = x + block.out.forward(attended);
            x = x.clone()
                + block
                    .down
                    .forward(block.up.forward(block.mlp_norm.forward(x)));
        }
        let logits = self
            .head
            .forward(self.norm.forward(x))
            .reshape([batch * seq, 128]);
        cross_entropy(logits, 128, step + 1)
    }
}

/// A text classifier: a transformer encoder over batches whose length changes with the step
/// (16, 24, 16, 32, 24, 16 tokens, again and again; or one of the three drawn at random),
/// pooled under a padding mask.
#[derive(Module, Debug)]
struct Classifier<B: Backend> {
    embedding: Embedding<B>,
    encoder: TransformerEncoder<B>,
    output: Linear<B>,
}

impl<B: Backend> Classifier<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            embedding: EmbeddingConfig::new(200, 64).init(device),
            encoder: TransformerEncoderConfig::new(64, 128, 4, 3).init(device),
            output: LinearConfig::new(64, 4).init(device),
        }
    }

    fn loss(&self, step: usize, device: &B::Device, random: bool) -> Tensor<B, 1> {
        let batch = 8;
        let seq = if random {
            // A sampler drawing one of three lengths at random each step (a fixed
            // sequence: the same in every run).
            let mut x = (step as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            x ^= x >> 31;
            [16, 24, 32][(x.wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 62) as usize % 3]
        } else {
            [16, 24, 16, 32, 24, 16][step % 6]
        };
        let tokens = ints::<B, 2>([batch, seq], 200, step, device);
        let padding: Tensor<B, 2, Bool> = tokens.clone().equal_elem(0);
        let x = self.encoder.forward(
            TransformerEncoderInput::new(self.embedding.forward(tokens)).mask_pad(padding),
        );
        cross_entropy(
            self.output.forward(x.mean_dim(1).reshape([batch, 64])),
            4,
            step + 2,
        )
    }
}

/// Three 3×3 convolutions with max pooling, dropout before the classifier (none when its
/// probability is 0).
#[derive(Module, Debug)]
struct Cnn<B: Backend> {
    conv1: Conv2d<B>,
    conv2: Conv2d<B>,
    conv3: Conv2d<B>,
    pool: MaxPool2d,
    dropout: Dropout,
    output: Linear<B>,
}

impl<B: Backend> Cnn<B> {
    fn new(device: &B::Device, dropout: f64) -> Self {
        let conv = |i, o| {
            Conv2dConfig::new([i, o], [3, 3])
                .with_padding(PaddingConfig2d::Same)
                .init(device)
        };
        Self {
            conv1: conv(3, 16),
            conv2: conv(16, 32),
            conv3: conv(32, 32),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            dropout: DropoutConfig::new(dropout).init(),
            output: LinearConfig::new(32 * 8 * 8, 10).init(device),
        }
    }

    fn loss(&self, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let batch = 16;
        let x = floats::<B, 4>([batch, 3, 32, 32], step, device);
        let x = self.pool.forward(relu(self.conv1.forward(x)));
        let x = self.pool.forward(relu(self.conv2.forward(x)));
        let x = self.dropout.forward(relu(self.conv3.forward(x)));
        cross_entropy(
            self.output.forward(x.reshape([batch, 32 * 8 * 8])),
            10,
            step + 2,
        )
    }
}

/// Trains `$model` (a type with `new` and `loss`, which takes `$arg` after the step and the
/// device when given) on backend `$backend` for `$steps` steps from seed 7 and returns each
/// step's loss bits and the run's seconds.
macro_rules! train {
    ($backend:ty, $model:ident, $new:expr, $steps:expr $(, $arg:expr)?) => {{
        let device = FlexDevice;
        <$backend>::seed(&device, 7);
        let mut model: $model<$backend> = $new(&device);
        let mut optimizer = AdamConfig::new().init();
        let mut losses = Vec::with_capacity($steps);
        let start = Instant::now();
        for step in 0..$steps {
            let loss = model.loss(step, &device $(, $arg)?);
            let value: f32 = loss.clone().into_scalar().elem();
            losses.push(value.to_bits());
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optimizer.step(1e-3, model, grads);
        }
        (losses, start.elapsed().as_secs_f64())
    }};
}

/// Trains model `name` for `steps` steps, under burn-swap (`Autodiff<Swap<Flex>, C>`) or not
/// (`Autodiff<Flex, C>`).
fn train<C: CheckpointStrategy>(name: &str, steps: usize, swap: bool) -> (Vec<u32>, f64) {
    macro_rules! on {
        ($backend:ty) => {
            match name {
                "tagger" => train!($backend, Tagger, Tagger::new, steps),
                "ln-lstm" => train!($backend, LayerNormLstm, LayerNormLstm::new, steps),
                "enc-dec" => train!($backend, EncoderDecoder, EncoderDecoder::new, steps),
                "llama" => train!($backend, Llama, Llama::new, steps),
                "classifier" => train!($backend, Classifier, Classifier::new, steps, false),
                "classifier-random" => {
                    train!($backend, Classifier, Classifier::new, steps, true)
                }
                "cnn-dropout" => train!($backend, Cnn, |d| Cnn::new(d, 0.3), steps),
                _ => train!($backend, Cnn, |d| Cnn::new(d, 0.0), steps),
            }
        };
    }
    if swap {
        on!(Autodiff<Swap<Flex>, C>)
    } else {
        on!(Autodiff<Flex, C>)
    }
}

fn configure(config: SwapConfig) -> Result<(), String> {
    let device = FlexDevice;
    burn_swap::configure(&device, config).map_err(|e| e.to_string())?;
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    Ok(())
}

/// The median, lowest and highest of `times`.
fn spread(mut times: Vec<f64>) -> (f64, f64, f64) {
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[0], times[times.len() - 1])
}

fn probe<C: CheckpointStrategy>(
    name: &str,
    steps: usize,
    rounds: usize,
    fraction: f64,
) -> Result<(), String> {
    let device = FlexDevice;
    let (plain, _) = train::<C>(name, steps, false);
    configure(SwapConfig::default())?;
    let (unbudgeted, _) = train::<C>(name, steps, true);
    if unbudgeted != plain {
        return Err(format!(
            "{name}: unbudgeted losses differ from the plain run's"
        ));
    }
    let report = burn_swap::report(&device).ok_or("no report")?;
    let peak = report.memory.peak_bytes;
    let budget = ((peak as f64 * fraction) as u64).max(report.workload.minimum_budget_bytes);
    let mut times: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        for (k, policy) in [Some(Policy::Planned), Some(Policy::Reactive), None]
            .into_iter()
            .enumerate()
        {
            let Some(policy) = policy else {
                let (losses, seconds) = train::<C>(name, steps, false);
                assert_eq!(losses, plain, "{name}: the plain run is not deterministic");
                times[k].push(seconds);
                continue;
            };
            configure(SwapConfig::budget_bytes(budget).with_policy(policy))?;
            let (losses, seconds) = train::<C>(name, steps, true);
            let report = burn_swap::report(&device).ok_or("no report")?;
            configure(SwapConfig::default())?;
            if losses != plain {
                return Err(format!(
                    "{name} ({}): losses differ from the plain run's",
                    policy.name()
                ));
            }
            if report.memory.peak_bytes > budget {
                return Err(format!(
                    "{name} ({}): peak {} B over the budget of {budget} B",
                    policy.name(),
                    report.memory.peak_bytes
                ));
            }
            times[k].push(seconds);
            if round == 0 {
                let p = &report.plan;
                println!(
                    "{name}: budget {budget} B ({:.0}% of {peak} B), period {:?} ops; {}: \
                     {} B offloaded, {} plans made, {} reused, {} declined, {} planned \
                     iterations, planner {:.1} ms, op thread {:.2} ms",
                    budget as f64 * 100.0 / peak as f64,
                    report.workload.period,
                    policy.name(),
                    report.transfers.offloaded_bytes,
                    p.plans,
                    p.plans_reused,
                    p.declines.count,
                    p.planned_iterations,
                    p.planning_seconds * 1e3,
                    p.planning_op_thread_seconds * 1e3,
                );
            }
        }
    }
    let [planned, reactive, plain] = times.map(spread);
    println!(
        "{name}: {steps} steps, seconds (median [range] of {rounds}): planned {:.3} [{:.3}-{:.3}], \
         reactive {:.3} [{:.3}-{:.3}], plain {:.3} [{:.3}-{:.3}]; planned/reactive {:.3}",
        planned.0,
        planned.1,
        planned.2,
        reactive.0,
        reactive.1,
        reactive.2,
        plain.0,
        plain.1,
        plain.2,
        planned.0 / reactive.0
    );
    Ok(())
}

fn main() -> Result<(), String> {
    let mut models: Vec<String> = MODELS.iter().map(|m| m.to_string()).collect();
    let (mut steps, mut rounds, mut fraction) = (12, 3, 0.5);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--steps" => {
                steps = value("--steps")?
                    .parse()
                    .map_err(|e| format!("--steps: {e}"))?
            }
            "--rounds" => {
                rounds = value("--rounds")?
                    .parse()
                    .map_err(|e| format!("--rounds: {e}"))?
            }
            "--fraction" => {
                fraction = value("--fraction")?
                    .parse()
                    .map_err(|e| format!("--fraction: {e}"))?
            }
            list => models = list.split(',').map(str::to_string).collect(),
        }
    }
    if steps == 0 || rounds == 0 || !(fraction > 0.0 && fraction <= 1.0) {
        return Err(format!(
            "--steps {steps} and --rounds {rounds} must be positive, --fraction {fraction} in (0, 1]"
        ));
    }
    for name in &models {
        match name.as_str() {
            "cnn-checkpointed" => probe::<BalancedCheckpointing>(name, steps, rounds, fraction)?,
            known if MODELS.contains(&known) => {
                probe::<NoCheckpointing>(name, steps, rounds, fraction)?
            }
            unknown => return Err(format!("unknown model {unknown:?}; one of {MODELS:?}")),
        }
    }
    Ok(())
}
