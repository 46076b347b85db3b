//! Ordinary Burn models, as a new user would write them, train through
//! `Autodiff<Swap<Flex>>` bit for bit as through `Autodiff<Flex>` at a half and a quarter of
//! their unbudgeted counted peak, under every policy, with and without compression, and the
//! counted peak stays within the budget; and at the minimum budget the unbudgeted run's report
//! named, under the policies that recompute nothing of their own accord (reactive,
//! offload-only: planned recipes pin their inputs on top of what that minimum counts): a CNN
//! with batch norm (trained, then run in eval
//! mode), a model on `burn::nn::Lstm`, one on `burn::nn::Gru`, and one with group norm, a
//! transposed convolution and interpolation.
//!
//! These models are built from the layers Burn ships, so they exercise what the suite's own
//! models do not: reductions over `swap_dims` views (batch norm), `chunk`/`slice` then gates
//! (recurrent cells), `iter_dim`, broadcasting over `[1, C, 1, 1]` statistics.

use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Module};
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::conv::{Conv2d, Conv2dConfig, ConvTranspose2d, ConvTranspose2dConfig};
use burn::nn::interpolate::{Interpolate2d, Interpolate2dConfig, InterpolateMode};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::pool::{MaxPool1d, MaxPool1dConfig};
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{
    BatchNorm, BatchNormConfig, BiLstm, BiLstmConfig, Dropout, DropoutConfig, Embedding,
    EmbeddingConfig, GroupNorm, GroupNormConfig, Gru, GruConfig, InstanceNorm, InstanceNormConfig,
    LayerNorm, LayerNormConfig, LeakyRelu, LeakyReluConfig, Linear, LinearConfig, Lstm, LstmConfig,
    PRelu, PReluConfig, PaddingConfig1d, PaddingConfig2d, Relu, RmsNorm, RmsNormConfig,
    RotaryEncoding, RotaryEncodingConfig, SwiGlu, SwiGluConfig,
};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Int, Tensor, TensorData};
use burn_swap::Swap;
use burn_swap_harness::train::{Outcome, parameters, train_loop};
use burn_swap_harness::verify::every_policy as check;

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

const STEPS: usize = 20;

/// A deterministic pseudo-random sequence in [-1, 1).
fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn batch<B: Backend, const D: usize>(
    seed: u64,
    step: usize,
    dims: [usize; D],
    classes: usize,
    device: &B::Device,
) -> (Tensor<B, D>, Tensor<B, 1, Int>) {
    let n: usize = dims.iter().product();
    let x = noise(seed * 1000 + step as u64, n);
    let y: Vec<i64> = (0..dims[0])
        .map(|i| ((x[i * (n / dims[0])] + 1.0) * classes as f32 / 2.0) as i64 % classes as i64)
        .collect();
    (
        Tensor::from_data(TensorData::new(x, dims), device),
        Tensor::from_data(TensorData::new(y, [dims[0]]), device),
    )
}

fn cross_entropy<B: Backend>(logits: Tensor<B, 2>, y: Tensor<B, 1, Int>) -> Tensor<B, 1> {
    CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits, y)
}

/// A 3 × 3 convolution to 8 channels that keeps the image size.
fn conv3x3<B: Backend>(input: usize, device: &B::Device) -> Conv2d<B> {
    Conv2dConfig::new([input, 8], [3, 3])
        .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
        .init(device)
}

/// Four convolutions, each followed by batch norm and ReLU, pooled to a linear head.
#[derive(Module, Debug)]
struct BatchNormCnn<B: Backend> {
    convs: Vec<Conv2d<B>>,
    norms: Vec<BatchNorm<B>>,
    pool: AdaptiveAvgPool2d,
    head: Linear<B>,
    relu: Relu,
}

impl<B: Backend> BatchNormCnn<B> {
    fn new(device: &B::Device) -> Self {
        let conv = |input: usize| conv3x3(input, device);
        Self {
            convs: (0..4).map(|i| conv(if i == 0 { 3 } else { 8 })).collect(),
            norms: (0..4)
                .map(|_| BatchNormConfig::new(8).init(device))
                .collect(),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            head: LinearConfig::new(8, 4).init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, mut x: Tensor<B, 4>) -> Tensor<B, 2> {
        for (conv, norm) in self.convs.iter().zip(&self.norms) {
            x = self.relu.forward(norm.forward(conv.forward(x)));
        }
        self.head.forward(self.pool.forward(x).flatten(1, 3))
    }

    fn loss(&self, step: usize) -> Tensor<B, 1> {
        let device = self.head.weight.device();
        let (x, y) = batch::<B, 4>(7, step, [8, 3, 12, 12], 4, &device);
        cross_entropy(self.forward(x), y)
    }
}

/// An LSTM over a sequence, its last output to a linear head.
#[derive(Module, Debug)]
struct LstmNet<B: Backend> {
    lstm: Lstm<B>,
    head: Linear<B>,
}

impl<B: Backend> LstmNet<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            lstm: LstmConfig::new(6, 16, true).init(device),
            head: LinearConfig::new(16, 3).init(device),
        }
    }

    fn loss(&self, step: usize) -> Tensor<B, 1> {
        let device = self.head.weight.device();
        let (x, y) = batch::<B, 3>(11, step, [8, 10, 6], 3, &device);
        let (out, _) = self.lstm.forward(x, None);
        let last = out.narrow(1, 9, 1).squeeze_dim::<2>(1);
        cross_entropy(self.head.forward(last), y)
    }
}

/// A GRU over a sequence, its outputs averaged to a linear head.
#[derive(Module, Debug)]
struct GruNet<B: Backend> {
    gru: Gru<B>,
    head: Linear<B>,
}

impl<B: Backend> GruNet<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            gru: GruConfig::new(6, 16, true).init(device),
            head: LinearConfig::new(16, 3).init(device),
        }
    }

    fn loss(&self, step: usize) -> Tensor<B, 1> {
        let device = self.head.weight.device();
        let (x, y) = batch::<B, 3>(13, step, [8, 10, 6], 3, &device);
        let out = self.gru.forward(x, None);
        cross_entropy(self.head.forward(out.mean_dim(1).squeeze_dim::<2>(1)), y)
    }
}

/// A small decoder: a convolution and group norm, a transposed convolution up, bilinear
/// interpolation back down, then blocks of convolution, group norm and ReLU, pooled to a
/// linear head.
#[derive(Module, Debug)]
struct UpDown<B: Backend> {
    stem: Conv2d<B>,
    stem_norm: GroupNorm<B>,
    up: ConvTranspose2d<B>,
    resize: Interpolate2d,
    convs: Vec<Conv2d<B>>,
    norms: Vec<GroupNorm<B>>,
    pool: AdaptiveAvgPool2d,
    head: Linear<B>,
    relu: Relu,
}

impl<B: Backend> UpDown<B> {
    fn new(device: &B::Device) -> Self {
        let conv = |input: usize| conv3x3(input, device);
        Self {
            stem: conv(3),
            stem_norm: GroupNormConfig::new(2, 8).init(device),
            up: ConvTranspose2dConfig::new([8, 8], [2, 2])
                .with_stride([2, 2])
                .init(device),
            resize: Interpolate2dConfig::new()
                .with_output_size(Some([10, 10]))
                .with_mode(InterpolateMode::Linear)
                .init(),
            convs: (0..4).map(|_| conv(8)).collect(),
            norms: (0..4)
                .map(|_| GroupNormConfig::new(2, 8).init(device))
                .collect(),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            head: LinearConfig::new(8, 3).init(device),
            relu: Relu::new(),
        }
    }

    fn loss(&self, step: usize) -> Tensor<B, 1> {
        let device = self.head.weight.device();
        let (x, y) = batch::<B, 4>(17, step, [4, 3, 6, 6], 3, &device);
        let x = self
            .relu
            .forward(self.stem_norm.forward(self.stem.forward(x)));
        let mut x = self.resize.forward(self.up.forward(x));
        for (conv, norm) in self.convs.iter().zip(&self.norms) {
            x = self.relu.forward(norm.forward(conv.forward(x)));
        }
        cross_entropy(self.head.forward(self.pool.forward(x).flatten(1, 3)), y)
    }
}

/// A text encoder: token embeddings turned by rotary encoding, a pre-norm transformer
/// encoder (dropout, quiet softmax, a padding mask), RMS norm and a SwiGLU, then a 1-D
/// convolution over the sequence with instance norm, PReLU and max pooling, averaged to a
/// linear head.
#[derive(Module, Debug)]
struct TextEncoder<B: Backend> {
    tokens: Embedding<B>,
    rope: RotaryEncoding<B>,
    encoder: TransformerEncoder<B>,
    rms: RmsNorm<B>,
    swiglu: SwiGlu<B>,
    conv: Conv1d<B>,
    instance: InstanceNorm<B>,
    prelu: PRelu<B>,
    pool: MaxPool1d,
    head: Linear<B>,
}

impl<B: Backend> TextEncoder<B> {
    const SEQ: usize = 12;

    fn new(device: &B::Device) -> Self {
        Self {
            tokens: EmbeddingConfig::new(16, 16).init(device),
            rope: RotaryEncodingConfig::new(Self::SEQ, 16).init(device),
            encoder: TransformerEncoderConfig::new(16, 32, 2, 2)
                .with_norm_first(true)
                .with_quiet_softmax(true)
                .init(device),
            rms: RmsNormConfig::new(16).init(device),
            swiglu: SwiGluConfig::new(16, 16).init(device),
            conv: Conv1dConfig::new(16, 8, 3)
                .with_padding(PaddingConfig1d::Same)
                .init(device),
            instance: InstanceNormConfig::new(8).init(device),
            prelu: PReluConfig::new().init(device),
            pool: MaxPool1dConfig::new(2).init(),
            head: LinearConfig::new(8, 3).init(device),
        }
    }

    fn loss(&self, step: usize) -> Tensor<B, 1> {
        let device = self.head.weight.device();
        let (x, y) = batch::<B, 2>(19, step, [6, Self::SEQ], 3, &device);
        let ids = ((x.clone() + 1.0) * 7.9).int();
        // The last positions of every other sequence are padding.
        let pad = Tensor::<B, 1, Int>::arange(0..Self::SEQ as i64, &device)
            .unsqueeze::<2>()
            .repeat_dim(0, 6)
            .greater_elem(Self::SEQ as i64 - 4)
            .bool_and(
                x.slice([0..6, 0..1])
                    .greater_elem(0.0)
                    .expand([6, Self::SEQ]),
            );
        let h = self.rope.forward(self.tokens.forward(ids));
        let h = self
            .encoder
            .forward(TransformerEncoderInput::new(h).mask_pad(pad));
        let h = self.swiglu.forward(self.rms.forward(h)).swap_dims(1, 2);
        let h = self
            .prelu
            .forward(self.instance.forward(self.conv.forward(h)));
        let h = self.pool.forward(h).mean_dim(2).squeeze_dim::<2>(2);
        cross_entropy(self.head.forward(h), y)
    }
}

/// A bidirectional LSTM with layer norm, dropout and leaky ReLU, its outputs' maximum over
/// the sequence to a linear head.
#[derive(Module, Debug)]
struct BiLstmNet<B: Backend> {
    lstm: BiLstm<B>,
    norm: LayerNorm<B>,
    dropout: Dropout,
    act: LeakyRelu,
    head: Linear<B>,
}

impl<B: Backend> BiLstmNet<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            lstm: BiLstmConfig::new(6, 12, true).init(device),
            norm: LayerNormConfig::new(24).init(device),
            dropout: DropoutConfig::new(0.2).init(),
            act: LeakyReluConfig::new().init(),
            head: LinearConfig::new(24, 3).init(device),
        }
    }

    fn loss(&self, step: usize) -> Tensor<B, 1> {
        let device = self.head.weight.device();
        let (x, y) = batch::<B, 3>(23, step, [6, 9, 6], 3, &device);
        let (out, _) = self.lstm.forward(x, None);
        let h = self
            .act
            .forward(self.dropout.forward(self.norm.forward(out)));
        cross_entropy(self.head.forward(h.max_dim(1).squeeze_dim::<2>(1)), y)
    }
}

/// A DCGAN-style generator: a latent vector projected, then transposed convolutions up (two
/// of stride 2, four of stride 1; batch norm and ReLU between), scored against a target
/// image. Flex computes a transposed convolution's weight gradient as a strided view of a
/// buffer of its own: every one of them is alive at once when the optimizer steps, and each
/// must be able to leave.
#[derive(Module, Debug)]
struct Generator<B: Backend> {
    project: Linear<B>,
    ups: Vec<ConvTranspose2d<B>>,
    norms: Vec<BatchNorm<B>>,
    relu: Relu,
}

impl<B: Backend> Generator<B> {
    const CHANNELS: [usize; 7] = [16, 12, 8, 8, 8, 8, 3];

    fn new(device: &B::Device) -> Self {
        let channels = Self::CHANNELS;
        let layers = channels.len() - 1;
        Self {
            project: LinearConfig::new(8, channels[0] * 4).init(device),
            ups: (0..layers)
                .map(|i| {
                    let config = ConvTranspose2dConfig::new([channels[i], channels[i + 1]], [4, 4]);
                    if i < 2 {
                        config.with_stride([2, 2]).with_padding([1, 1])
                    } else {
                        ConvTranspose2dConfig::new([channels[i], channels[i + 1]], [3, 3])
                            .with_padding([1, 1])
                    }
                    .init(device)
                })
                .collect(),
            norms: channels[1..layers]
                .iter()
                .map(|&c| BatchNormConfig::new(c).init(device))
                .collect(),
            relu: Relu::new(),
        }
    }

    fn loss(&self, step: usize) -> Tensor<B, 1> {
        let device = self.project.weight.device();
        let (z, _) = batch::<B, 2>(29, step, [8, 8], 2, &device);
        let (target, _) = batch::<B, 4>(31, step, [8, 3, 8, 8], 2, &device);
        let mut x = self
            .project
            .forward(z)
            .reshape([8, Self::CHANNELS[0], 2, 2]);
        for (i, up) in self.ups.iter().enumerate() {
            x = up.forward(x);
            if let Some(norm) = self.norms.get(i) {
                x = self.relu.forward(norm.forward(x));
            }
        }
        (x.tanh() - target).powf_scalar(2.0).mean()
    }
}

/// Trains a model built by `init` with `loss`; the outcome holds, after the training losses,
/// the loss of one more batch in eval mode (batch norm on its running statistics).
fn train<B: AutodiffBackend, M: AutodiffModule<B>>(
    init: impl FnOnce(&B::Device) -> M,
    loss: impl Fn(&M, usize) -> Tensor<B, 1>,
    eval: impl Fn(&M::InnerModule, usize) -> Tensor<B::InnerBackend, 1>,
) -> Outcome {
    let device = B::Device::default();
    // Dropout draws from the backend's global generator during training, not only at
    // initialisation: the whole run holds the generator's lock (another test seeding it
    // mid-run would change the masks).
    let _rng = burn_swap_harness::rng_lock();
    B::seed(&device, 5);
    let model = init(&device);
    let (model, mut losses) = train_loop(model, STEPS, 1e-2, loss, |_, _| {});
    let inner = model.valid();
    losses.push(eval(&inner, STEPS).into_scalar().elem());
    Outcome {
        losses,
        params: parameters(&model),
    }
}

#[test]
fn batch_norm_cnn_trains_at_a_quarter_of_its_peak() {
    fn run<B: AutodiffBackend>() -> Outcome {
        train::<B, _>(BatchNormCnn::new, |m, s| m.loss(s), |m, s| m.loss(s))
    }
    check("batch-norm CNN", run::<Plain>(), run::<Swapped>);
}

#[test]
fn lstm_trains_at_a_quarter_of_its_peak() {
    fn run<B: AutodiffBackend>() -> Outcome {
        train::<B, _>(LstmNet::new, |m, s| m.loss(s), |m, s| m.loss(s))
    }
    check("LSTM", run::<Plain>(), run::<Swapped>);
}

#[test]
fn gru_trains_at_a_quarter_of_its_peak() {
    fn run<B: AutodiffBackend>() -> Outcome {
        train::<B, _>(GruNet::new, |m, s| m.loss(s), |m, s| m.loss(s))
    }
    check("GRU", run::<Plain>(), run::<Swapped>);
}

#[test]
fn group_norm_transposed_conv_and_interpolation_train_at_a_quarter_of_their_peak() {
    fn run<B: AutodiffBackend>() -> Outcome {
        train::<B, _>(UpDown::new, |m, s| m.loss(s), |m, s| m.loss(s))
    }
    check(
        "group norm / transposed conv / interpolation",
        run::<Plain>(),
        run::<Swapped>,
    );
}

#[test]
fn transformer_encoder_with_rotary_encoding_and_conv1d_trains_at_a_quarter_of_its_peak() {
    fn run<B: AutodiffBackend>() -> Outcome {
        train::<B, _>(TextEncoder::new, |m, s| m.loss(s), |m, s| m.loss(s))
    }
    check("text encoder", run::<Plain>(), run::<Swapped>);
}

#[test]
fn bidirectional_lstm_with_dropout_trains_at_a_quarter_of_its_peak() {
    fn run<B: AutodiffBackend>() -> Outcome {
        train::<B, _>(BiLstmNet::new, |m, s| m.loss(s), |m, s| m.loss(s))
    }
    check("bidirectional LSTM", run::<Plain>(), run::<Swapped>);
}

#[test]
fn transposed_convolution_generator_trains_at_a_quarter_of_its_peak() {
    fn run<B: AutodiffBackend>() -> Outcome {
        train::<B, _>(Generator::new, |m, s| m.loss(s), |m, s| m.loss(s))
    }
    let report = check(
        "transposed-convolution generator",
        run::<Plain>(),
        run::<Swapped>,
    );
    // Every weight gradient (a strided view of a buffer of its own) can leave: nothing but
    // the largest op sets the minimum.
    assert_eq!(
        report.workload.minimum_budget_bytes, report.workload.largest_op_bytes,
        "{report}"
    );
}
