//! More ordinary training code, as users write it, through `Autodiff<Swap<Flex>>` bit for
//! bit against `Autodiff<Flex>` under budgets: gradient accumulation over micro-batches,
//! gradient clipping by norm (AdamW) and by value (SGD with momentum and weight decay), a
//! language model whose output projection is its embedding matrix (weight tying) with causal
//! multi-head attention, an accuracy metric read every step (argmax, top-k), and a
//! convolutional net with strided, grouped and dilated convolutions, max and average pooling,
//! concatenation, a detached branch, cumulative sums and sorting; odd ops (padding, roll,
//! unfold, `mask_where`) with a frozen layer and a reload of the parameters mid-training; a
//! GAN with two optimizers, a learning rate changing every step and evaluation passes on the
//! inner backend.

use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Module};
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::attention::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{AvgPool2d, AvgPool2dConfig, MaxPool2d, MaxPool2dConfig};
use burn::nn::{
    Dropout, DropoutConfig, Embedding, EmbeddingConfig, Gelu, LayerNorm, LayerNormConfig, Linear,
    LinearConfig, PaddingConfig2d,
};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamWConfig, GradientsAccumulator, GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::PadMode;
use burn::tensor::{ElementConversion, Int, Tensor, TensorData};
use burn_swap::Swap;
use burn_swap_suite::data::XorShift;
use burn_swap_suite::train::{Outcome, parameters};
use burn_swap_suite::verify::every_policy;

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

const STEPS: usize = 12;
const MICRO: usize = 2;

/// `n` values uniform in [-1, 1) from `seed`.
fn noise(seed: u64, n: usize) -> Vec<f32> {
    XorShift::new(seed).vec_f32(n, 1.0)
}

/// Inputs of shape `dims` from `seed`, and one label in `0..classes` per row.
fn labelled<B: Backend, const D: usize>(
    seed: u64,
    dims: [usize; D],
    classes: usize,
    device: &B::Device,
) -> (Tensor<B, D>, Tensor<B, 1, Int>) {
    let n = dims.iter().product();
    let x = Tensor::from_data(TensorData::new(noise(seed, n), dims), device);
    let y: Vec<i64> = noise(seed + 1, dims[0])
        .iter()
        .map(|v| (((v + 1.0) / 2.0 * classes as f32) as i64).min(classes as i64 - 1))
        .collect();
    (x, Tensor::from_data(TensorData::new(y, [dims[0]]), device))
}

/// A two-layer causal language model whose logits are its hidden states against the
/// embedding matrix (weight tying).
#[derive(Module, Debug)]
struct TiedLm<B: Backend> {
    tokens: Embedding<B>,
    attn: Vec<MultiHeadAttention<B>>,
    norms: Vec<LayerNorm<B>>,
    up: Vec<Linear<B>>,
    down: Vec<Linear<B>>,
    gelu: Gelu,
    dropout: Dropout,
}

impl<B: Backend> TiedLm<B> {
    const VOCAB: usize = 24;
    const D: usize = 16;
    const SEQ: usize = 10;
    const BATCH: usize = 4;

    fn new(device: &B::Device) -> Self {
        Self {
            tokens: EmbeddingConfig::new(Self::VOCAB, Self::D).init(device),
            attn: (0..2)
                .map(|_| MultiHeadAttentionConfig::new(Self::D, 2).init(device))
                .collect(),
            norms: (0..4)
                .map(|_| LayerNormConfig::new(Self::D).init(device))
                .collect(),
            up: (0..2)
                .map(|_| LinearConfig::new(Self::D, 32).init(device))
                .collect(),
            down: (0..2)
                .map(|_| LinearConfig::new(32, Self::D).init(device))
                .collect(),
            gelu: Gelu::new(),
            dropout: DropoutConfig::new(0.1).init(),
        }
    }

    fn tokens(step: usize, micro: usize, device: &B::Device) -> Tensor<B, 2, Int> {
        let n = Self::BATCH * (Self::SEQ + 1);
        let ids: Vec<i64> = noise(100 + (step * MICRO + micro) as u64, n)
            .into_iter()
            .map(|v| ((v + 1.0) * 11.99) as i64)
            .collect();
        Tensor::from_data(TensorData::new(ids, [Self::BATCH, Self::SEQ + 1]), device)
    }

    /// The loss and the top-1 and top-3 accuracy of the next-token predictions.
    fn loss(&self, step: usize, micro: usize) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1, Int>) {
        let device = self.tokens.weight.device();
        let ids = Self::tokens(step, micro, &device);
        let (b, s) = (Self::BATCH, Self::SEQ);
        let input = ids.clone().slice([0..b, 0..s]);
        let target = ids.slice([0..b, 1..s + 1]).reshape([b * s]);
        let mask = generate_autoregressive_mask::<B>(b, s, &device);
        let mut h = self.tokens.forward(input);
        for i in 0..2 {
            let x = self.norms[2 * i].forward(h.clone());
            let a = self.attn[i]
                .forward(MhaInput::self_attn(x).mask_attn(mask.clone()))
                .context;
            h = h + self.dropout.forward(a);
            let x = self.norms[2 * i + 1].forward(h.clone());
            h = h + self.down[i].forward(self.gelu.forward(self.up[i].forward(x)));
        }
        let weight = self.tokens.weight.val();
        let logits = h.reshape([b * s, Self::D]).matmul(weight.transpose());
        let hit = logits
            .clone()
            .argmax(1)
            .reshape([b * s])
            .equal(target.clone())
            .int()
            .float()
            .mean();
        let top3 = logits
            .clone()
            .detach()
            .sort_descending(1)
            .slice([0..b * s, 2..3])
            .reshape([b * s])
            .sort(0)
            .argmax(0);
        let loss = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits, target);
        (loss, hit, top3)
    }
}

/// Strided, grouped and dilated convolutions, max and average pooling of two branches
/// concatenated, one of them detached, cumulative sums and a sort before the head.
#[derive(Module, Debug)]
struct PoolNet<B: Backend> {
    stem: Conv2d<B>,
    grouped: Vec<Conv2d<B>>,
    dilated: Conv2d<B>,
    max: MaxPool2d,
    avg: AvgPool2d,
    head: Linear<B>,
}

impl<B: Backend> PoolNet<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            stem: Conv2dConfig::new([3, 8], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device),
            grouped: (0..4)
                .map(|_| {
                    Conv2dConfig::new([8, 8], [3, 3])
                        .with_groups(2)
                        .with_padding(PaddingConfig2d::Same)
                        .init(device)
                })
                .collect(),
            dilated: Conv2dConfig::new([8, 8], [3, 3])
                .with_dilation([2, 2])
                .with_padding(PaddingConfig2d::Explicit(2, 2, 2, 2))
                .init(device),
            max: MaxPool2dConfig::new([2, 2]).init(),
            avg: AvgPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            head: LinearConfig::new(16 * 4, 3).init(device),
        }
    }

    fn loss(&self, step: usize, micro: usize) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1, Int>) {
        let device = self.head.weight.device();
        let seed = 300 + (step * MICRO + micro) as u64;
        let (x, y) = labelled::<B, 4>(seed, [6, 3, 16, 16], 3, &device);
        let h = self.stem.forward(x).clamp_min(0.0);
        let mut g = h;
        for conv in &self.grouped {
            g = conv.forward(g.clone()).clamp_min(0.0) + g;
        }
        let d = self.dilated.forward(g.clone().detach()) * g.clone().tanh();
        let a = self.max.forward(g);
        let b = self.avg.forward(d).cumsum(3);
        let x = Tensor::cat(vec![a, b], 1);
        let x = self.max.forward(x).flatten::<2>(1, 3).sort(1);
        let logits = self.head.forward(x);
        let hit = logits
            .clone()
            .argmax(1)
            .reshape([6])
            .equal(y.clone())
            .int()
            .float()
            .mean();
        let order = logits
            .clone()
            .detach()
            .sort_descending(1)
            .slice([0..6, 0..2])
            .sum()
            .reshape([1])
            .argmax(0);
        let loss = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits, y);
        (loss, hit, order)
    }
}

/// Trains with gradient accumulation over two micro-batches; every step reads the loss, the
/// accuracy and an integer metric. The outcome holds all of them and the parameters.
fn train<B: AutodiffBackend, M: AutodiffModule<B>>(
    init: impl FnOnce(&B::Device) -> M,
    loss: impl Fn(&M, usize, usize) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1, Int>),
    mut optimizer: impl Optimizer<M, B>,
) -> Outcome {
    let device = B::Device::default();
    let _rng = burn_swap_suite::rng_lock();
    B::seed(&device, 9);
    let mut model = init(&device);
    let mut values = Vec::new();
    for step in 0..STEPS {
        let mut accumulator = GradientsAccumulator::<M>::new();
        for micro in 0..MICRO {
            let (l, hit, metric) = loss(&model, step, micro);
            values.push(l.clone().into_scalar().elem::<f32>());
            values.push(hit.into_scalar().elem::<f32>());
            values.push(metric.into_scalar().elem::<i64>() as f32);
            accumulator.accumulate(&model, GradientsParams::from_grads(l.backward(), &model));
        }
        model = optimizer.step(1e-2, model, accumulator.grads());
    }
    Outcome {
        losses: values,
        params: parameters(&model),
    }
}

#[test]
fn tied_causal_lm_with_accumulation_and_norm_clipping() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let optimizer = AdamWConfig::new()
            .with_grad_clipping(Some(GradientClippingConfig::Norm(0.5)))
            .init::<B, TiedLm<B>>();
        train::<B, _>(TiedLm::new, |m, s, k| m.loss(s, k), optimizer)
    }
    every_policy("tied causal LM", run::<Plain>(), run::<Swapped>);
}

#[test]
fn pooled_convolutions_with_sgd_momentum_and_value_clipping() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let optimizer = SgdConfig::new()
            .with_momentum(Some(MomentumConfig::new()))
            .with_weight_decay(Some(WeightDecayConfig::new(1e-3)))
            .with_gradient_clipping(Some(GradientClippingConfig::Value(0.05)))
            .init::<B, PoolNet<B>>();
        train::<B, _>(PoolNet::new, |m, s, k| m.loss(s, k), optimizer)
    }
    every_policy("pooled convolutions", run::<Plain>(), run::<Swapped>);
}

/// Odd ops ordinary code uses: padding, roll, flip, unfold, chunk, repeat, variance,
/// log-softmax, `mask_where`, a frozen layer; saved to bytes and loaded back mid-training.
#[derive(Module, Debug)]
struct Odds<B: Backend> {
    frozen: Linear<B>,
    a: Vec<Linear<B>>,
    b: Vec<Linear<B>>,
    head: Linear<B>,
}

impl<B: Backend> Odds<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            frozen: LinearConfig::new(12, 12).init(device).no_grad(),
            a: (0..4)
                .map(|_| LinearConfig::new(12, 24).init(device))
                .collect(),
            b: (0..4)
                .map(|_| LinearConfig::new(24, 12).init(device))
                .collect(),
            head: LinearConfig::new(72, 5).init(device),
        }
    }

    fn loss(&self, step: usize, micro: usize) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1, Int>) {
        let device = self.head.weight.device();
        let seed = 500 + (step * MICRO + micro) as u64;
        let (x, y) = labelled::<B, 3>(seed, [8, 10, 12], 5, &device);
        let h = self.frozen.forward(x.clone()).tanh();
        let mut h = h;
        for (a, b) in self.a.iter().zip(&self.b) {
            h = b.forward(a.forward(h.clone()).clamp_min(0.0)) + h;
        }
        let h = h + x.flip([1]);
        let h = h.clone().roll(&[3], &[1]) * h.var(1).exp().neg().exp();
        let h = h.pad([(0, 0), (1, 1), (0, 0)], PadMode::Constant(0.5));
        let windows: Tensor<B, 4> = h.unfold(1, 4, 3);
        let parts = windows.clone().chunk(2, 3);
        let w = (parts[0].clone() * burn::tensor::activation::sigmoid(parts[1].clone()))
            .sum_dim(3)
            .squeeze_dim::<3>(3);
        let mask = w.clone().greater_elem(0.0);
        let w = w.clone().mask_where(mask, w.clone() * 0.5);
        let pooled = w.repeat(&[1, 1, 2]).reshape([8, 72]);
        let logits = self.head.forward(pooled);
        let logp = burn::tensor::activation::log_softmax(logits.clone(), 1);
        let loss = logp
            .clone()
            .gather(1, y.clone().reshape([8, 1]))
            .neg()
            .mean();
        let hit = logits.argmax(1).reshape([8]).equal(y).int().float().mean();
        let any = logp.lower_elem(-3.0).int().sum();
        (loss, hit, any)
    }
}

/// The model's parameters read out and put back as new tensors, as loading a saved record
/// does.
struct Reload;

impl<B: Backend> burn::module::ModuleMapper<B> for Reload {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<Tensor<B, D>>,
    ) -> burn::module::Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let device = tensor.device();
        let require_grad = tensor.is_require_grad();
        let mut loaded = Tensor::<B, D>::from_data(tensor.into_data(), &device);
        if require_grad {
            loaded = loaded.require_grad();
        }
        burn::module::Param::from_mapped_value(id, loaded, mapper)
    }
}

#[test]
fn odd_ops_with_a_frozen_layer_and_a_reload_mid_training() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let device = B::Device::default();
        let _rng = burn_swap_suite::rng_lock();
        B::seed(&device, 9);
        let mut model = Odds::<B>::new(&device);
        let mut optimizer = AdamWConfig::new().init::<B, Odds<B>>();
        let mut values = Vec::new();
        for step in 0..STEPS {
            if step == STEPS / 2 {
                model = model.map(&mut Reload);
            }
            let (l, hit, metric) = model.loss(step, 0);
            values.push(l.clone().into_scalar().elem::<f32>());
            values.push(hit.into_scalar().elem::<f32>());
            values.push(metric.into_scalar().elem::<i64>() as f32);
            let grads = GradientsParams::from_grads(l.backward(), &model);
            model = optimizer.step(1e-2, model, grads);
        }
        Outcome {
            losses: values,
            params: parameters(&model),
        }
    }
    every_policy("odd ops", run::<Plain>(), run::<Swapped>);
}

/// A GAN's two players.
#[derive(Module, Debug)]
struct Player<B: Backend> {
    layers: Vec<Linear<B>>,
}

impl<B: Backend> Player<B> {
    fn new(sizes: &[usize], device: &B::Device) -> Self {
        Self {
            layers: sizes
                .windows(2)
                .map(|w| LinearConfig::new(w[0], w[1]).init(device))
                .collect(),
        }
    }

    fn forward(&self, mut x: Tensor<B, 2>) -> Tensor<B, 2> {
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            if i < last {
                x = burn::tensor::activation::leaky_relu(x, 0.2);
            }
        }
        x
    }
}

/// A GAN: the discriminator steps on real and detached fake samples, then the generator
/// steps through the discriminator, each with its own optimizer and a learning rate that
/// changes every step; every third step an evaluation pass runs on the inner backend (no
/// autodiff) and is read.
#[test]
fn gan_with_two_optimizers_a_schedule_and_evaluation_passes() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let device = B::Device::default();
        let _rng = burn_swap_suite::rng_lock();
        B::seed(&device, 9);
        let mut g = Player::<B>::new(&[8, 32, 32, 16], &device);
        let mut d = Player::<B>::new(&[16, 32, 32, 1], &device);
        let mut opt_g = AdamWConfig::new().init::<B, Player<B>>();
        let mut opt_d = AdamWConfig::new().init::<B, Player<B>>();
        let mut values = Vec::new();
        for step in 0..STEPS {
            let lr = 2e-3 * (1.0 + (step as f64 * 0.7).cos()) / 2.0 + 1e-4;
            let real = labelled::<B, 2>(700 + step as u64, [16, 16], 2, &device)
                .0
                .tanh();
            let z = labelled::<B, 2>(800 + step as u64, [16, 8], 2, &device).0;
            let fake = g.forward(z.clone());
            let d_real = d.forward(real);
            let d_fake = d.forward(fake.clone().detach());
            let d_loss = burn::tensor::activation::softplus(d_real.neg(), 1.0).mean()
                + burn::tensor::activation::softplus(d_fake, 1.0).mean();
            values.push(d_loss.clone().into_scalar().elem::<f32>());
            let grads = GradientsParams::from_grads(d_loss.backward(), &d);
            d = opt_d.step(lr, d, grads);
            let g_loss = burn::tensor::activation::softplus(d.forward(fake).neg(), 1.0).mean();
            values.push(g_loss.clone().into_scalar().elem::<f32>());
            let grads = GradientsParams::from_grads(g_loss.backward(), &g);
            g = opt_g.step(lr, g, grads);
            if step % 3 == 2 {
                let z = labelled::<B::InnerBackend, 2>(900, [32, 8], 2, &device).0;
                let sample = g.valid().forward(z);
                values.push(sample.powf_scalar(2.0).mean().into_scalar().elem::<f32>());
            }
        }
        let mut params = parameters(&g);
        params.extend(parameters(&d));
        Outcome {
            losses: values,
            params,
        }
    }
    every_policy("GAN", run::<Plain>(), run::<Swapped>);
}
