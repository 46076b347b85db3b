//! Models built from `burn::nn` modules, generic over the backend as user code is.

use burn::module::Module;
use burn::nn::attention::{
    MhaInput, MultiHeadAttention, MultiHeadAttentionConfig, generate_autoregressive_mask,
};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::{CrossEntropyLossConfig, MseLoss, Reduction};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{
    BatchNorm, BatchNormConfig, Embedding, EmbeddingConfig, Gelu, LayerNorm, LayerNormConfig,
    Linear, LinearConfig, PaddingConfig2d, Relu,
};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

use crate::data;

/// Sizes of an [`Mlp`] and its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlpConfig {
    /// Input features.
    pub d_in: usize,
    /// Width of the hidden layers.
    pub hidden: usize,
    /// Number of hidden layers.
    pub depth: usize,
    /// Output features.
    pub d_out: usize,
    /// Batch size.
    pub batch: usize,
    /// Seed of the synthetic data.
    pub seed: u64,
}

impl MlpConfig {
    /// A small MLP for tests: runs a step in about a millisecond on the CPU.
    pub fn small() -> Self {
        Self {
            d_in: 32,
            hidden: 64,
            depth: 3,
            d_out: 8,
            batch: 16,
            seed: 7,
        }
    }

    /// The benches' MLP, of realistic size for the CPU: input 1024, four hidden layers of
    /// 1024, batch 256 (a training step of tens of milliseconds).
    pub fn bench() -> Self {
        Self {
            d_in: 1024,
            hidden: 1024,
            depth: 4,
            d_out: 16,
            batch: 256,
            seed: 5,
        }
    }

    /// Initialises the model on `device` (call it under [`crate::rng_lock`] after seeding).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Mlp<B> {
        let mut layers = Vec::with_capacity(self.depth + 1);
        let mut width = self.d_in;
        for _ in 0..self.depth {
            layers.push(LinearConfig::new(width, self.hidden).init(device));
            width = self.hidden;
        }
        layers.push(LinearConfig::new(width, self.d_out).init(device));
        Mlp {
            layers,
            activation: Relu::new(),
        }
    }
}

/// A multilayer perceptron with ReLU.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    layers: Vec<Linear<B>>,
    activation: Relu,
}

impl<B: Backend> Mlp<B> {
    /// Forward pass.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let last = self.layers.len() - 1;
        self.layers.iter().enumerate().fold(x, |x, (i, layer)| {
            let y = layer.forward(x);
            if i < last {
                self.activation.forward(y)
            } else {
                y
            }
        })
    }

    /// Mean squared error on the synthetic regression batch of `step`.
    pub fn loss(&self, config: &MlpConfig, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let (x, y) =
            data::regression_batch(config.seed, step, config.batch, config.d_in, config.d_out);
        let x = Tensor::<B, 2>::from_data(x, device);
        let y = Tensor::<B, 2>::from_data(y, device);
        MseLoss::new().forward(self.forward(x), y, Reduction::Mean)
    }
}

/// Cross entropy of `forward`'s logits on the synthetic image batch of `step` (images of
/// `channels` × `size` × `size`, labels among `classes`).
fn image_loss<B: Backend>(
    seed: u64,
    step: usize,
    batch: usize,
    (channels, size, classes): (usize, usize, usize),
    device: &B::Device,
    forward: impl FnOnce(Tensor<B, 4>) -> Tensor<B, 2>,
) -> Tensor<B, 1> {
    let (x, y) = data::image_batch(seed, step, batch, channels, size, classes);
    let x = Tensor::<B, 4>::from_data(x, device);
    let y = Tensor::<B, 1, Int>::from_data(y, device);
    CrossEntropyLossConfig::new()
        .init(device)
        .forward(forward(x), y)
}

/// Sizes of a [`ConvNet`] and its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvNetConfig {
    /// Input channels.
    pub channels: usize,
    /// Image side.
    pub size: usize,
    /// Channels of the convolutions.
    pub width: usize,
    /// Convolution blocks at full resolution (conv, ReLU), before the pool.
    pub depth: usize,
    /// Classes.
    pub classes: usize,
    /// Batch size.
    pub batch: usize,
    /// Seed of the synthetic data.
    pub seed: u64,
}

impl ConvNetConfig {
    /// A small conv net for tests.
    pub fn small() -> Self {
        Self {
            channels: 3,
            size: 16,
            width: 8,
            depth: 6,
            classes: 4,
            batch: 8,
            seed: 11,
        }
    }

    /// Initialises the model on `device` (call it under [`crate::rng_lock`] after seeding).
    pub fn init<B: Backend>(&self, device: &B::Device) -> ConvNet<B> {
        let same = PaddingConfig2d::Explicit(1, 1, 1, 1);
        let convs = (0..self.depth)
            .map(|i| {
                let input = if i == 0 { self.channels } else { self.width };
                Conv2dConfig::new([input, self.width], [3, 3])
                    .with_padding(same.clone())
                    .init(device)
            })
            .collect();
        ConvNet {
            convs,
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            head: LinearConfig::new(self.width * (self.size / 2) * (self.size / 2), self.classes)
                .init(device),
            activation: Relu::new(),
        }
    }
}

/// A ResNet-like stem without the skips: `depth` × (conv 3×3, ReLU), max pool, linear.
#[derive(Module, Debug)]
pub struct ConvNet<B: Backend> {
    convs: Vec<Conv2d<B>>,
    pool: MaxPool2d,
    head: Linear<B>,
    activation: Relu,
}

impl<B: Backend> ConvNet<B> {
    /// Forward pass to logits.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 2> {
        let x = self
            .convs
            .iter()
            .fold(x, |x, conv| self.activation.forward(conv.forward(x)));
        self.head.forward(self.pool.forward(x).flatten(1, 3))
    }

    /// Cross entropy on the synthetic image batch of `step`.
    pub fn loss(&self, config: &ConvNetConfig, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let image = (config.channels, config.size, config.classes);
        image_loss(config.seed, step, config.batch, image, device, |x| {
            self.forward(x)
        })
    }
}

/// Sizes of a [`Transformer`] and its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformerConfig {
    /// Blocks.
    pub layers: usize,
    /// Model width.
    pub d_model: usize,
    /// Attention heads.
    pub heads: usize,
    /// Sequence length.
    pub seq: usize,
    /// Width of the feed-forward layer.
    pub d_ff: usize,
    /// Output features of the regression head.
    pub d_out: usize,
    /// Batch size.
    pub batch: usize,
    /// Seed of the synthetic data.
    pub seed: u64,
}

impl TransformerConfig {
    /// A small model for tests: three blocks.
    pub fn small() -> Self {
        Self {
            layers: 3,
            d_model: 32,
            heads: 4,
            seq: 16,
            d_ff: 64,
            d_out: 8,
            batch: 8,
            seed: 13,
        }
    }

    /// Twelve identical blocks of [`TransformerConfig::small`]'s width: a loop of twelve
    /// repeats inside each pass, and Adam's updates of same-shaped parameters.
    pub fn deep() -> Self {
        Self {
            layers: 12,
            ..Self::small()
        }
    }

    /// Initialises the model on `device` (call it under [`crate::rng_lock`] after seeding).
    /// Attention dropout is off: the comparisons are of deterministic training.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Transformer<B> {
        Transformer {
            blocks: (0..self.layers).map(|_| self.block(device)).collect(),
            head: LinearConfig::new(self.d_model, self.d_out).init(device),
        }
    }

    fn block<B: Backend>(&self, device: &B::Device) -> TransformerBlock<B> {
        block(self.d_model, self.heads, self.d_ff, device)
    }
}

/// One transformer block with attention dropout off.
fn block<B: Backend>(
    d_model: usize,
    heads: usize,
    d_ff: usize,
    device: &B::Device,
) -> TransformerBlock<B> {
    {
        TransformerBlock {
            norm1: LayerNormConfig::new(d_model).init(device),
            attention: MultiHeadAttentionConfig::new(d_model, heads)
                .with_dropout(0.0)
                .init(device),
            norm2: LayerNormConfig::new(d_model).init(device),
            ff1: LinearConfig::new(d_model, d_ff).init(device),
            ff2: LinearConfig::new(d_ff, d_model).init(device),
            gelu: Gelu::new(),
        }
    }
}

/// A stack of transformer blocks and a regression head on the mean over the sequence.
#[derive(Module, Debug)]
pub struct Transformer<B: Backend> {
    blocks: Vec<TransformerBlock<B>>,
    head: Linear<B>,
}

/// One pre-norm GPT-style block: causal self-attention and a GELU feed-forward layer, each
/// after a layer norm and with a residual.
#[derive(Module, Debug)]
pub struct TransformerBlock<B: Backend> {
    norm1: LayerNorm<B>,
    attention: MultiHeadAttention<B>,
    norm2: LayerNorm<B>,
    ff1: Linear<B>,
    ff2: Linear<B>,
    gelu: Gelu,
}

impl<B: Backend> TransformerBlock<B> {
    /// Forward pass, `[batch, seq, d_model]` to the same.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch, seq, _] = x.dims();
        let mask = generate_autoregressive_mask::<B>(batch, seq, &x.device());
        let attended = self
            .attention
            .forward(MhaInput::self_attn(self.norm1.forward(x.clone())).mask_attn(mask))
            .context;
        let h = x + attended;
        let ff = self.ff2.forward(
            self.gelu
                .forward(self.ff1.forward(self.norm2.forward(h.clone()))),
        );
        h + ff
    }
}

impl<B: Backend> Transformer<B> {
    /// Forward pass: `[batch, seq, d_model]` to `[batch, d_out]`.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 2> {
        let h = self.blocks.iter().fold(x, |h, block| block.forward(h));
        self.head.forward(h.mean_dim(1).squeeze_dim(1))
    }

    /// Mean squared error on the synthetic sequence batch of `step`.
    pub fn loss(
        &self,
        config: &TransformerConfig,
        step: usize,
        device: &B::Device,
    ) -> Tensor<B, 1> {
        let (x, y) = data::regression_batch(
            config.seed,
            step,
            config.batch,
            config.seq * config.d_model,
            config.d_out,
        );
        let x = Tensor::<B, 2>::from_data(x, device).reshape([
            config.batch,
            config.seq,
            config.d_model,
        ]);
        let y = Tensor::<B, 2>::from_data(y, device);
        MseLoss::new().forward(self.forward(x), y, Reduction::Mean)
    }
}

/// Sizes of a [`Gpt`] and its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GptConfig {
    /// Blocks.
    pub layers: usize,
    /// Attention heads.
    pub heads: usize,
    /// Model width.
    pub d_model: usize,
    /// Sequence length (and the number of learned positions).
    pub seq: usize,
    /// Batch size.
    pub batch: usize,
    /// Seed of the batches.
    pub seed: u64,
}

impl GptConfig {
    /// Bytes: the vocabulary of the bytewise tokeniser.
    pub const VOCAB: usize = 256;

    /// Small enough for the CPU: 2 blocks of width 64, 4 heads, 64 positions, batch 8.
    pub fn small() -> Self {
        Self {
            layers: 2,
            heads: 4,
            d_model: 64,
            seq: 64,
            batch: 8,
            seed: 21,
        }
    }

    /// GPT-2 small's shape (12 blocks of width 768, 12 heads, 1024 positions), for a GPU.
    pub fn gpt2_small() -> Self {
        Self {
            layers: 12,
            heads: 12,
            d_model: 768,
            seq: 1024,
            batch: 8,
            seed: 21,
        }
    }

    /// Sized for the CPU benches: 4 blocks of width 256, 4 heads, 128 positions, batch 4;
    /// its ops take 100 µs and more on the CPU, so that a transfer can hide behind them.
    pub fn cpu() -> Self {
        Self {
            layers: 4,
            heads: 4,
            d_model: 256,
            seq: 128,
            batch: 4,
            seed: 21,
        }
    }

    /// Initialises the model on `device` (call it under [`crate::rng_lock`] after seeding).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Gpt<B> {
        Gpt {
            tokens: EmbeddingConfig::new(Self::VOCAB, self.d_model).init(device),
            positions: EmbeddingConfig::new(self.seq, self.d_model).init(device),
            blocks: (0..self.layers)
                .map(|_| block(self.d_model, self.heads, 4 * self.d_model, device))
                .collect(),
            norm: LayerNormConfig::new(self.d_model).init(device),
            head: LinearConfig::new(self.d_model, Self::VOCAB).init(device),
        }
    }
}

/// A GPT-2-style decoder over bytes: token and learned position embeddings, pre-norm blocks
/// with causal attention, a final layer norm and a linear head to the 256 byte values.
#[derive(Module, Debug)]
pub struct Gpt<B: Backend> {
    tokens: Embedding<B>,
    positions: Embedding<B>,
    blocks: Vec<TransformerBlock<B>>,
    norm: LayerNorm<B>,
    head: Linear<B>,
}

impl<B: Backend> Gpt<B> {
    /// Logits `[batch, seq, 256]` for byte inputs `[batch, seq]`.
    pub fn forward(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let [batch, seq] = tokens.dims();
        let device = tokens.device();
        let positions = Tensor::<B, 1, Int>::arange(0..seq as i64, &device)
            .reshape([1, seq])
            .repeat_dim(0, batch);
        let h = self.tokens.forward(tokens) + self.positions.forward(positions);
        let h = self.blocks.iter().fold(h, |h, block| block.forward(h));
        self.head.forward(self.norm.forward(h))
    }

    /// Next-byte cross entropy on the corpus batch of `step`.
    pub fn loss(&self, config: &GptConfig, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let (x, y) = data::text_batch(
            data::CORPUS.as_bytes(),
            config.seed,
            step,
            config.batch,
            config.seq,
        );
        let x = Tensor::<B, 2, Int>::from_data(x, device);
        let y = Tensor::<B, 1, Int>::from_data(y, device);
        let logits = self
            .forward(x)
            .reshape([config.batch * config.seq, GptConfig::VOCAB]);
        CrossEntropyLossConfig::new()
            .init(device)
            .forward(logits, y)
    }
}

/// Sizes of a [`ResNet`] and its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResNetConfig {
    /// Input channels.
    pub channels: usize,
    /// Image side.
    pub size: usize,
    /// Channels of the residual blocks.
    pub width: usize,
    /// Residual blocks.
    pub blocks: usize,
    /// Classes.
    pub classes: usize,
    /// Batch size.
    pub batch: usize,
    /// Seed of the synthetic images.
    pub seed: u64,
}

impl ResNetConfig {
    /// Small enough for the CPU: 3 × 32 × 32 images, 4 blocks of 16 channels, batch 16.
    pub fn small() -> Self {
        Self {
            channels: 3,
            size: 32,
            width: 16,
            blocks: 4,
            classes: 4,
            batch: 16,
            seed: 31,
        }
    }

    /// Initialises the model on `device` (call it under [`crate::rng_lock`] after seeding).
    pub fn init<B: Backend>(&self, device: &B::Device) -> ResNet<B> {
        let same = PaddingConfig2d::Explicit(1, 1, 1, 1);
        let conv = |input: usize| {
            Conv2dConfig::new([input, self.width], [3, 3])
                .with_padding(same.clone())
                .init(device)
        };
        ResNet {
            stem: conv(self.channels),
            blocks: (0..self.blocks)
                .map(|_| ResidualBlock {
                    conv1: conv(self.width),
                    conv2: conv(self.width),
                })
                .collect(),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            head: LinearConfig::new(self.width, self.classes).init(device),
            activation: Relu::new(),
        }
    }
}

/// Two 3×3 convolutions with a skip connection.
#[derive(Module, Debug)]
pub struct ResidualBlock<B: Backend> {
    conv1: Conv2d<B>,
    conv2: Conv2d<B>,
}

/// A ResNet-style CNN with ReLU: a stem convolution, residual blocks, global average pooling,
/// a linear head.
#[derive(Module, Debug)]
pub struct ResNet<B: Backend> {
    stem: Conv2d<B>,
    blocks: Vec<ResidualBlock<B>>,
    pool: AdaptiveAvgPool2d,
    head: Linear<B>,
    activation: Relu,
}

impl<B: Backend> ResNet<B> {
    /// Forward pass to logits.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 2> {
        let x = self.activation.forward(self.stem.forward(x));
        let x = self.blocks.iter().fold(x, |x, b| {
            let y = b
                .conv2
                .forward(self.activation.forward(b.conv1.forward(x.clone())));
            self.activation.forward(x + y)
        });
        self.head.forward(self.pool.forward(x).flatten(1, 3))
    }

    /// Cross entropy on the synthetic image batch of `step`.
    pub fn loss(&self, config: &ResNetConfig, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let image = (config.channels, config.size, config.classes);
        image_loss(config.seed, step, config.batch, image, device, |x| {
            self.forward(x)
        })
    }
}

/// Sizes of a [`BnCnn`] and its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BnCnnConfig {
    /// Input channels.
    pub channels: usize,
    /// Image side.
    pub size: usize,
    /// Channels of the convolutions.
    pub width: usize,
    /// Blocks of convolution, batch norm and ReLU.
    pub depth: usize,
    /// Classes.
    pub classes: usize,
    /// Batch size.
    pub batch: usize,
    /// Seed of the synthetic data.
    pub seed: u64,
}

impl BnCnnConfig {
    /// A small batch-norm CNN for tests and the CI's quick runs.
    pub fn small() -> Self {
        Self {
            channels: 3,
            size: 12,
            width: 8,
            depth: 4,
            classes: 4,
            batch: 8,
            seed: 7,
        }
    }

    /// The benches' batch-norm CNN: 6 blocks of 32 channels on 32 × 32 images, batch 16.
    pub fn bench() -> Self {
        Self {
            channels: 3,
            size: 32,
            width: 32,
            depth: 6,
            classes: 10,
            batch: 16,
            seed: 7,
        }
    }

    /// Initialises the model on `device` (call it under [`crate::rng_lock`] after seeding).
    pub fn init<B: Backend>(&self, device: &B::Device) -> BnCnn<B> {
        let same = PaddingConfig2d::Explicit(1, 1, 1, 1);
        BnCnn {
            convs: (0..self.depth)
                .map(|i| {
                    let input = if i == 0 { self.channels } else { self.width };
                    Conv2dConfig::new([input, self.width], [3, 3])
                        .with_padding(same.clone())
                        .init(device)
                })
                .collect(),
            norms: (0..self.depth)
                .map(|_| BatchNormConfig::new(self.width).init(device))
                .collect(),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            head: LinearConfig::new(self.width, self.classes).init(device),
            activation: Relu::new(),
        }
    }
}

/// Blocks of convolution, batch norm (train mode) and ReLU, pooled to a linear head: the
/// shape of an ordinary image classifier, whose batch norm reads its input through views.
#[derive(Module, Debug)]
pub struct BnCnn<B: Backend> {
    convs: Vec<Conv2d<B>>,
    norms: Vec<BatchNorm<B>>,
    pool: AdaptiveAvgPool2d,
    head: Linear<B>,
    activation: Relu,
}

impl<B: Backend> BnCnn<B> {
    /// Forward pass to logits.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 2> {
        let x = self
            .convs
            .iter()
            .zip(&self.norms)
            .fold(x, |x, (conv, norm)| {
                self.activation.forward(norm.forward(conv.forward(x)))
            });
        self.head.forward(self.pool.forward(x).flatten(1, 3))
    }

    /// Cross entropy on the synthetic image batch of `step`.
    pub fn loss(&self, config: &BnCnnConfig, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let image = (config.channels, config.size, config.classes);
        image_loss(config.seed, step, config.batch, image, device, |x| {
            self.forward(x)
        })
    }
}

/// Sizes of an [`LstmNet`] and its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LstmNetConfig {
    /// Features per time step.
    pub input: usize,
    /// Hidden size of the LSTM.
    pub hidden: usize,
    /// Time steps.
    pub seq: usize,
    /// Regression targets.
    pub d_out: usize,
    /// Batch size.
    pub batch: usize,
    /// Seed of the synthetic data.
    pub seed: u64,
}

impl LstmNetConfig {
    /// A small LSTM model for tests and the CI's quick runs.
    pub fn small() -> Self {
        Self {
            input: 6,
            hidden: 16,
            seq: 10,
            d_out: 3,
            batch: 8,
            seed: 11,
        }
    }

    /// The benches' LSTM: 64 steps of 64 features, hidden 256, batch 32: op-bound (several
    /// thousand small ops per step).
    pub fn bench() -> Self {
        Self {
            input: 64,
            hidden: 256,
            seq: 64,
            d_out: 8,
            batch: 32,
            seed: 11,
        }
    }

    /// An LSTM whose ops cost next to nothing (16 features, hidden 32, 64 steps, batch 8):
    /// a step is thousands of tiny ops, so that what it measures is the route each op takes
    /// (the interception cost), not the arithmetic.
    pub fn op_bound() -> Self {
        Self {
            input: 16,
            hidden: 32,
            seq: 64,
            d_out: 4,
            batch: 8,
            seed: 11,
        }
    }

    /// Initialises the model on `device` (call it under [`crate::rng_lock`] after seeding).
    pub fn init<B: Backend>(&self, device: &B::Device) -> LstmNet<B> {
        LstmNet {
            lstm: burn::nn::LstmConfig::new(self.input, self.hidden, true).init(device),
            head: LinearConfig::new(self.hidden, self.d_out).init(device),
        }
    }
}

/// Burn's `Lstm` over a sequence, its last output to a linear head.
#[derive(Module, Debug)]
pub struct LstmNet<B: Backend> {
    lstm: burn::nn::Lstm<B>,
    head: Linear<B>,
}

impl<B: Backend> LstmNet<B> {
    /// Mean squared error on the synthetic sequence batch of `step`.
    pub fn loss(&self, config: &LstmNetConfig, step: usize, device: &B::Device) -> Tensor<B, 1> {
        let (x, y) = data::regression_batch(
            config.seed,
            step,
            config.batch,
            config.seq * config.input,
            config.d_out,
        );
        let x =
            Tensor::<B, 2>::from_data(x, device).reshape([config.batch, config.seq, config.input]);
        let y = Tensor::<B, 2>::from_data(y, device);
        let (out, _) = self.lstm.forward(x, None);
        let last = out.narrow(1, config.seq - 1, 1).squeeze_dim::<2>(1);
        MseLoss::new().forward(self.head.forward(last), y, Reduction::Mean)
    }
}
