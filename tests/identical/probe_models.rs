//! More ordinary training code, as users write it, through `Autodiff<Swap<Flex>>` bit for
//! bit against `Autodiff<Flex>` under budgets: gradient accumulation over micro-batches,
//! gradient clipping by norm (AdamW) and by value (SGD with momentum and weight decay), a
//! language model whose output projection is its embedding matrix (weight tying) with causal
//! multi-head attention, an accuracy metric read every step (argmax, top-k), and a
//! convolutional net with strided, grouped and dilated convolutions, max and average pooling,
//! concatenation, a detached branch, cumulative sums and sorting; odd ops (padding, roll,
//! unfold, `mask_where`) with a frozen layer and a reload of the parameters mid-training; a
//! GAN with two optimizers, a learning rate changing every step and evaluation passes on the
//! inner backend; a sequence-to-sequence transformer (cross-attention, a source padding
//! mask, label smoothing, RMSprop) decoding greedily with its autoregressive cache; 3-D,
//! deformable and transposed 1-D convolutions with Huber, binary cross-entropy and KL losses
//! under AdaGrad; image patches (`Unfold4d`) with a CTC loss under Muon; a mixture of
//! experts routing tokens by data-dependent gathers and scatter-adds (top-2 gate, `argwhere`,
//! `select_assign`) under Adam with AMSGrad; a variational autoencoder sampling its latent
//! from noise drawn on the device inside the step; batches whose shapes change between steps
//! (longer and shorter sequences, a short last batch) while a plan is in force; a mean
//! teacher kept as plain tensors across steps, with an activation read after the backward;
//! training resumed from a checkpoint (the model saved in half precision, AdamW's state in
//! full) in a new model and optimizer; batched inference without autodiff, its weights leaving
//! and coming back every batch.

use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Module};
use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::attention::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
use burn::nn::conv::{
    Conv1d, Conv1dConfig, Conv2d, Conv2dConfig, Conv3d, Conv3dConfig, ConvTranspose1d,
    ConvTranspose1dConfig, DeformConv2d, DeformConv2dConfig,
};
use burn::nn::loss::{
    BinaryCrossEntropyLossConfig, CTCLossConfig, CrossEntropyLossConfig, HuberLossConfig,
    KLDivLossConfig, Reduction,
};
use burn::nn::pool::{
    AvgPool1d, AvgPool1dConfig, AvgPool2d, AvgPool2dConfig, MaxPool2d, MaxPool2dConfig,
};
use burn::nn::transformer::{
    TransformerDecoder, TransformerDecoderConfig, TransformerDecoderInput, TransformerEncoder,
    TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{
    Dropout, DropoutConfig, Embedding, EmbeddingConfig, Gelu, LayerNorm, LayerNormConfig, Linear,
    LinearConfig, PaddingConfig1d, PaddingConfig2d, PaddingConfig3d, PositionalEncoding,
    PositionalEncodingConfig, Unfold4d, Unfold4dConfig,
};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{
    AdaGradConfig, AdamWConfig, GradientsAccumulator, GradientsParams, MuonConfig, Optimizer,
    RmsPropConfig, SgdConfig,
};
use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::PadMode;
use burn::tensor::{Bool, ElementConversion, Int, Tensor, TensorData};
use burn_swap::Swap;
use burn_swap_harness::data::{XorShift, labelled};
use burn_swap_harness::train::{Outcome, parameters};
use burn_swap_harness::verify::every_policy;

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

const STEPS: usize = 12;
const MICRO: usize = 2;

/// `n` values uniform in [-1, 1) from `seed`.
fn noise(seed: u64, n: usize) -> Vec<f32> {
    XorShift::new(seed).vec_f32(n, 1.0)
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
    let _rng = burn_swap_harness::rng_lock();
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

/// Trains `Odds` from `seed` for [`STEPS`] steps of `optimizer`, reading its loss, accuracy
/// and metric every step; half-way, `midway` takes the model and the optimizer and gives back
/// the ones training goes on with.
fn train_odds<B: AutodiffBackend, O: Optimizer<Odds<B>, B>>(
    seed: u64,
    optimizer: O,
    midway: impl FnOnce(Odds<B>, O) -> (Odds<B>, O),
) -> Outcome {
    let device = B::Device::default();
    let _rng = burn_swap_harness::rng_lock();
    B::seed(&device, seed);
    let mut model = Odds::<B>::new(&device);
    let mut optimizer = optimizer;
    let mut midway = Some(midway);
    let mut values = Vec::new();
    for step in 0..STEPS {
        if step == STEPS / 2
            && let Some(midway) = midway.take()
        {
            (model, optimizer) = midway(model, optimizer);
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

#[test]
fn odd_ops_with_a_frozen_layer_and_a_reload_mid_training() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let optimizer = AdamWConfig::new().init::<B, Odds<B>>();
        train_odds::<B, _>(9, optimizer, |model, optimizer| {
            (model.map(&mut Reload), optimizer)
        })
    }
    every_policy("odd ops", run::<Plain>(), run::<Swapped>);
}

/// A checkpoint taken mid-training as Burn's recorders take it, the model in half precision
/// and the optimizer's state in full, then training resumed from it in a new model and a new
/// optimizer, as a restarted job does: the record's tensors are read out of the device (some
/// of them offloaded at the time) and the loaded ones come back as new tensors, the moments
/// of AdamW included.
#[test]
fn training_resumed_from_a_half_precision_checkpoint_with_its_optimizer_state() {
    use burn::record::{BinBytesRecorder, FullPrecisionSettings, HalfPrecisionSettings, Recorder};
    fn run<B: AutodiffBackend>() -> Outcome {
        let optimizer = AdamWConfig::new().init::<B, Odds<B>>();
        train_odds::<B, _>(13, optimizer, |model, optimizer| {
            let device = B::Device::default();
            let weights = BinBytesRecorder::<HalfPrecisionSettings>::default()
                .record(model.clone().into_record(), ())
                .expect("the model's record saves");
            let moments = BinBytesRecorder::<FullPrecisionSettings>::default()
                .record(optimizer.to_record(), ())
                .expect("the optimizer's record saves");
            drop((model, optimizer));
            let weights = BinBytesRecorder::<HalfPrecisionSettings>::default()
                .load(weights, &device)
                .expect("the model's record loads");
            let moments = BinBytesRecorder::<FullPrecisionSettings>::default()
                .load(moments, &device)
                .expect("the optimizer's record loads");
            let model = Odds::<B>::new(&device).load_record(weights);
            let optimizer = AdamWConfig::new().init::<B, Odds<B>>().load_record(moments);
            (model, optimizer)
        })
    }
    every_policy("resumed from a checkpoint", run::<Plain>(), run::<Swapped>);
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
        let _rng = burn_swap_harness::rng_lock();
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

/// A sequence-to-sequence transformer: an encoder over the source with a padding mask, a
/// decoder with causal self-attention and cross-attention over the encoder's memory,
/// sinusoidal positions and label smoothing.
#[derive(Module, Debug)]
struct Seq2Seq<B: Backend> {
    source: Embedding<B>,
    target: Embedding<B>,
    positions: PositionalEncoding<B>,
    encoder: TransformerEncoder<B>,
    decoder: TransformerDecoder<B>,
    out: Linear<B>,
}

impl<B: Backend> Seq2Seq<B> {
    const VOCAB: usize = 20;
    const D: usize = 16;
    const SEQ: usize = 8;
    const BATCH: usize = 3;

    fn new(device: &B::Device) -> Self {
        Self {
            source: EmbeddingConfig::new(Self::VOCAB, Self::D).init(device),
            target: EmbeddingConfig::new(Self::VOCAB, Self::D).init(device),
            positions: PositionalEncodingConfig::new(Self::D)
                .with_max_sequence_size(16)
                .init(device),
            encoder: TransformerEncoderConfig::new(Self::D, 32, 2, 2).init(device),
            decoder: TransformerDecoderConfig::new(Self::D, 32, 2, 2)
                .with_norm_first(true)
                .init(device),
            out: LinearConfig::new(Self::D, Self::VOCAB).init(device),
        }
    }

    /// `b × s` token ids from `seed`.
    fn ids(seed: u64, [b, s]: [usize; 2], device: &B::Device) -> Tensor<B, 2, Int> {
        let ids: Vec<i64> = noise(seed, b * s)
            .into_iter()
            .map(|v| ((v + 1.0) * 9.99) as i64)
            .collect();
        Tensor::from_data(TensorData::new(ids, [b, s]), device)
    }

    /// The encoder's memory of step `step`'s source (the first row's last two positions
    /// padding), and that step's target sequence.
    fn encode(&self, step: usize) -> (Tensor<B, 3>, Tensor<B, 2, Int>) {
        let device = self.out.weight.device();
        let (b, s) = (Self::BATCH, Self::SEQ);
        let seed = 1000 + step as u64;
        let pad: Vec<bool> = (0..b * s).map(|i| (s - 2..s).contains(&i)).collect();
        let pad = Tensor::<B, 2, Bool>::from_data(TensorData::new(pad, [b, s]), &device);
        let x = self
            .positions
            .forward(self.source.forward(Self::ids(seed, [b, s], &device)));
        let memory = self
            .encoder
            .forward(TransformerEncoderInput::new(x).mask_pad(pad));
        (memory, Self::ids(seed + 500, [b, s + 1], &device))
    }

    /// Teacher-forced next-token loss and accuracy.
    fn loss(&self, step: usize) -> (Tensor<B, 1>, Tensor<B, 1>) {
        let device = self.out.weight.device();
        let (b, s) = (Self::BATCH, Self::SEQ);
        let (memory, tgt) = self.encode(step);
        let input = tgt.clone().slice([0..b, 0..s]);
        let target = tgt.slice([0..b, 1..s + 1]).reshape([b * s]);
        let y = self.positions.forward(self.target.forward(input));
        let mask = generate_autoregressive_mask::<B>(b, s, &device);
        let h = self
            .decoder
            .forward(TransformerDecoderInput::new(y, memory).target_mask_attn(mask));
        let logits = self.out.forward(h).reshape([b * s, Self::VOCAB]);
        let hit = logits
            .clone()
            .argmax(1)
            .reshape([b * s])
            .equal(target.clone())
            .int()
            .float()
            .mean();
        let loss = CrossEntropyLossConfig::new()
            .with_smoothing(Some(0.1))
            .init(&device)
            .forward(logits, target);
        (loss, hit)
    }

    /// Four tokens decoded greedily from token 0 with the decoder's autoregressive cache:
    /// their ids.
    fn decode(&self, step: usize) -> Vec<i64> {
        let device = self.out.weight.device();
        let b = Self::BATCH;
        let (memory, _) = self.encode(step);
        let mut cache = self.decoder.new_autoregressive_cache();
        let mut tokens = Tensor::<B, 2, Int>::zeros([b, 1], &device);
        for t in 0..4 {
            let y = self.positions.forward(self.target.forward(tokens.clone()));
            let mask = generate_autoregressive_mask::<B>(b, t + 1, &device);
            let h = self.decoder.forward_autoregressive_inference(
                TransformerDecoderInput::new(y, memory.clone()).target_mask_attn(mask),
                &mut cache,
            );
            let last = h.slice([0..b, t..t + 1]).reshape([b, Self::D]);
            let next = self.out.forward(last).argmax(1);
            tokens = Tensor::cat(vec![tokens, next], 1);
        }
        tokens.into_data().iter::<i64>().collect()
    }
}

#[test]
fn seq2seq_transformer_with_rmsprop_and_cached_greedy_decoding() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let device = B::Device::default();
        let _rng = burn_swap_harness::rng_lock();
        B::seed(&device, 9);
        let mut model = Seq2Seq::<B>::new(&device);
        let mut optimizer = RmsPropConfig::new()
            .with_momentum(0.5)
            .with_centered(true)
            .init::<B, Seq2Seq<B>>();
        let mut values = Vec::new();
        for step in 0..STEPS {
            let (loss, hit) = model.loss(step);
            values.push(loss.clone().into_scalar().elem::<f32>());
            values.push(hit.into_scalar().elem::<f32>());
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optimizer.step(3e-3, model, grads);
            // Greedy decoding on the inner backend, as an evaluation pass does.
            if step % 3 == 2 {
                values.extend(model.valid().decode(step).iter().map(|&t| t as f32));
            }
        }
        Outcome {
            losses: values,
            params: parameters(&model),
        }
    }
    every_policy("seq2seq transformer", run::<Plain>(), run::<Swapped>);
}

/// A 3-D convolution over short clips read out as a sequence by residual 1-D convolutions,
/// average pooling and a transposed 1-D convolution, beside a deformable convolution over images
/// (its offsets made by a plain one); three heads trained at once with a Huber loss, a binary
/// cross-entropy on logits and a KL divergence.
#[derive(Module, Debug)]
struct Signals<B: Backend> {
    clip: Conv3d<B>,
    seq: Conv1d<B>,
    mix: Vec<Conv1d<B>>,
    pool: AvgPool1d,
    up: ConvTranspose1d<B>,
    offsets: Conv2d<B>,
    deform: DeformConv2d<B>,
    regress: Linear<B>,
    flags: Linear<B>,
    dist: Linear<B>,
}

impl<B: Backend> Signals<B> {
    const BATCH: usize = 4;

    fn new(device: &B::Device) -> Self {
        Self {
            clip: Conv3dConfig::new([2, 4], [3, 3, 3])
                .with_padding(PaddingConfig3d::Explicit(1, 1, 1))
                .init(device),
            seq: Conv1dConfig::new(16, 8, 3)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .init(device),
            mix: (0..6)
                .map(|_| {
                    Conv1dConfig::new(8, 8, 3)
                        .with_padding(PaddingConfig1d::Explicit(1, 1))
                        .init(device)
                })
                .collect(),
            pool: AvgPool1dConfig::new(2).init(),
            up: ConvTranspose1dConfig::new([8, 4], 4)
                .with_stride(2)
                .init(device),
            offsets: Conv2dConfig::new([3, 18], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device),
            deform: DeformConv2dConfig::new([3, 4], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device),
            regress: LinearConfig::new(4 * 38 + 4, 2).init(device),
            flags: LinearConfig::new(4 * 38 + 4, 3).init(device),
            dist: LinearConfig::new(4 * 38 + 4, 5).init(device),
        }
    }

    fn loss(&self, step: usize, micro: usize) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1, Int>) {
        let device = self.regress.weight.device();
        let b = Self::BATCH;
        let seed = 2000 + 10 * (step * MICRO + micro) as u64;
        let clips = labelled::<B, 5>(seed, [b, 2, 4, 6, 6], 2, &device).0;
        let images = labelled::<B, 4>(seed + 2, [b, 3, 6, 6], 2, &device).0;
        // [b, 4, 4, 6, 6] -> a sequence of 36 positions with 16 channels.
        let v = self.clip.forward(clips).clamp_min(0.0).reshape([b, 16, 36]);
        let mut v = self.seq.forward(v).tanh();
        for conv in &self.mix {
            v = conv.forward(v.clone()).tanh() + v;
        }
        let v = self.up.forward(self.pool.forward(v));
        let offsets = self.offsets.forward(images.clone()) * 0.5;
        let w = self.deform.forward(images, offsets, None);
        let w = w.mean_dim(3).mean_dim(2).reshape([b, 4]);
        let h = Tensor::cat(vec![v.flatten::<2>(1, 2), w], 1);
        let target = labelled::<B, 2>(seed + 4, [b, 2], 2, &device).0;
        let huber = HuberLossConfig::new(0.5).init().forward(
            self.regress.forward(h.clone()),
            target,
            Reduction::Mean,
        );
        let flags = labelled::<B, 2>(seed + 6, [b, 3], 2, &device)
            .0
            .greater_elem(0.0)
            .int();
        let bce = BinaryCrossEntropyLossConfig::new()
            .with_logits(true)
            .init(&device)
            .forward(self.flags.forward(h.clone()), flags);
        let wanted = softmax(labelled::<B, 2>(seed + 8, [b, 5], 2, &device).0, 1);
        let dist = self.dist.forward(h);
        let kl = KLDivLossConfig::new().init().forward(
            log_softmax(dist.clone(), 1),
            wanted,
            Reduction::BatchMean,
        );
        let top = dist.argmax(1).reshape([b]).sum().reshape([1]);
        (huber.clone() + bce + kl, huber, top)
    }
}

#[test]
fn conv3d_deformable_and_transposed_1d_with_adagrad_and_three_losses() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let optimizer = AdaGradConfig::new().init::<B, Signals<B>>();
        train::<B, _>(Signals::new, |m, s, k| m.loss(s, k), optimizer)
    }
    every_policy(
        "conv3d, deformable, transposed 1-D",
        run::<Plain>(),
        run::<Swapped>,
    );
}

/// Image patches (`Unfold4d`) through bias-free linear layers, read as a sequence of
/// frames and trained with a CTC loss under Muon (whose Newton-Schulz iterations run on the
/// inner backend).
#[derive(Module, Debug)]
struct Patches<B: Backend> {
    unfold: Unfold4d,
    layers: Vec<Linear<B>>,
}

impl<B: Backend> Patches<B> {
    const BATCH: usize = 3;
    /// 8 frames of 4 × 4 patches, 6 classes (0 the blank).
    const FRAMES: usize = 8;
    const CLASSES: usize = 6;

    fn new(device: &B::Device) -> Self {
        let widths = [16, 24, 24, Self::CLASSES];
        Self {
            unfold: Unfold4dConfig::new([4, 4]).with_stride([4, 4]).init(),
            layers: widths
                .windows(2)
                .map(|w| LinearConfig::new(w[0], w[1]).with_bias(false).init(device))
                .collect(),
        }
    }

    fn loss(&self, step: usize, micro: usize) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1, Int>) {
        let device = self.layers[0].weight.device();
        let b = Self::BATCH;
        let seed = 3000 + 10 * (step * MICRO + micro) as u64;
        let images = labelled::<B, 4>(seed, [b, 1, 8, 16], 2, &device).0;
        // [b, 16, 8]: 16 values per patch, 8 patches -> frames [b, 8, 16].
        let mut h = self.unfold.forward(images).swap_dims(1, 2);
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward(h);
            if i + 1 < self.layers.len() {
                h = h.tanh();
            }
        }
        let log_probs = log_softmax(h, 2).swap_dims(0, 1);
        let labels: Vec<i64> = noise(seed + 1, b * 3)
            .iter()
            .map(|v| 1 + ((v + 1.0) * 2.49) as i64)
            .collect();
        let targets = Tensor::from_data(TensorData::new(labels, [b, 3]), &device);
        let lengths = |values: Vec<i64>| Tensor::from_data(TensorData::new(values, [b]), &device);
        let loss = CTCLossConfig::new()
            .init()
            .forward(
                log_probs.clone(),
                targets,
                lengths(vec![Self::FRAMES as i64; b]),
                lengths(vec![3, 2, 3]),
            )
            .mean();
        let blank = log_probs
            .clone()
            .detach()
            .argmax(2)
            .equal_elem(0)
            .int()
            .float()
            .mean();
        let best = log_probs.argmax(2).sum().reshape([1]);
        (loss, blank, best)
    }
}

#[test]
fn unfolded_patches_with_ctc_loss_and_muon() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let optimizer = MuonConfig::new().init::<B, Patches<B>>();
        train::<B, _>(Patches::new, |m, s, k| m.loss(s, k), optimizer)
    }
    every_policy("patches, CTC, Muon", run::<Plain>(), run::<Swapped>);
}

/// A mixture of experts as sparse models route tokens: a softmax gate picks two of four
/// expert MLPs per token (`topk_with_indices`), each expert takes only its tokens by a
/// data-dependent gather (`argwhere`, then `select`) and adds its weighted output back in
/// place (`select_assign` with `Add`); a load-balancing auxiliary loss from the one-hot
/// routing; Adam with AMSGrad.
#[derive(Module, Debug)]
struct Experts<B: Backend> {
    embed: Linear<B>,
    gate: Linear<B>,
    up: Vec<Linear<B>>,
    down: Vec<Linear<B>>,
    head: Linear<B>,
}

impl<B: Backend> Experts<B> {
    const EXPERTS: usize = 4;
    const TOKENS: usize = 24;
    const D: usize = 12;
    const CLASSES: usize = 5;

    fn new(device: &B::Device) -> Self {
        let (d, e) = (Self::D, Self::EXPERTS);
        Self {
            embed: LinearConfig::new(8, d).init(device),
            gate: LinearConfig::new(d, e).init(device),
            up: (0..e)
                .map(|_| LinearConfig::new(d, 2 * d).init(device))
                .collect(),
            down: (0..e)
                .map(|_| LinearConfig::new(2 * d, d).init(device))
                .collect(),
            head: LinearConfig::new(d, Self::CLASSES).init(device),
        }
    }

    fn loss(&self, step: usize, micro: usize) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1, Int>) {
        let device = self.gate.weight.device();
        let (t, d, e) = (Self::TOKENS, Self::D, Self::EXPERTS);
        let seed = 4000 + 10 * (step * MICRO + micro) as u64;
        let (x, y) = labelled::<B, 2>(seed, [t, 8], Self::CLASSES, &device);
        let h = self.embed.forward(x).tanh();
        let probs = softmax(self.gate.forward(h.clone()), 1);
        let (top, chosen) = probs.clone().topk_with_indices(2, 1);
        let weights = top.clone() / top.sum_dim(1);
        let mut mixed = Tensor::<B, 2>::zeros([t, d], &device);
        for expert in 0..e {
            let picked = chosen.clone().equal_elem(expert as i64);
            let weight = weights
                .clone()
                .mask_fill(picked.clone().bool_not(), 0.0)
                .sum_dim(1);
            // Which tokens chose this expert: a shape known only from the data.
            let rows = picked.any_dim(1).squeeze_dim::<1>(1).argwhere();
            if rows.dims()[0] == 0 {
                continue;
            }
            let rows = rows.squeeze_dim::<1>(1);
            let tokens = h.clone().select(0, rows.clone());
            let hidden = burn::tensor::activation::gelu(self.up[expert].forward(tokens));
            let out = self.down[expert].forward(hidden) * weight.select(0, rows.clone());
            mixed = mixed.select_assign(0, rows, out, burn::tensor::IndexingUpdateOp::Add);
        }
        let logits = self.head.forward(mixed + h);
        let ce = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits.clone(), y.clone());
        // Load balancing: the share of routings each expert took (no gradient) against its
        // mean gate probability.
        let routed = chosen
            .clone()
            .one_hot::<3>(e)
            .float()
            .sum_dim(1)
            .squeeze_dim::<2>(1)
            .mean_dim(0)
            / 2.0;
        let balance = (routed.detach() * probs.mean_dim(0)).sum() * e as f64;
        let loss = ce + balance * 0.01;
        let hit = logits
            .argmax(1)
            .squeeze_dim::<1>(1)
            .equal(y)
            .int()
            .float()
            .mean();
        let to_first = chosen.equal_elem(0).int().sum();
        (loss, hit, to_first)
    }
}

#[test]
fn mixture_of_experts_routed_by_data_dependent_gathers_with_amsgrad() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let optimizer = burn::optim::AdamConfig::new()
            .with_amsgrad(true)
            .init::<B, Experts<B>>();
        train::<B, _>(Experts::new, |m, s, k| m.loss(s, k), optimizer)
    }
    every_policy("mixture of experts", run::<Plain>(), run::<Swapped>);
}

/// A variational autoencoder: the encoder gives a mean and a log-variance, the latent is
/// sampled by the reparameterisation trick from noise drawn on the device inside the step
/// (`Tensor::random`), and the loss is the decoder's binary cross-entropy plus the KL term;
/// AdamW with a stronger weight decay than its default.
#[derive(Module, Debug)]
struct Vae<B: Backend> {
    encode: Linear<B>,
    mean: Linear<B>,
    log_var: Linear<B>,
    decode: Vec<Linear<B>>,
}

impl<B: Backend> Vae<B> {
    const BATCH: usize = 6;
    const PIXELS: usize = 20;
    const LATENT: usize = 3;

    fn new(device: &B::Device) -> Self {
        let (p, l) = (Self::PIXELS, Self::LATENT);
        Self {
            encode: LinearConfig::new(p, 16).init(device),
            mean: LinearConfig::new(16, l).init(device),
            log_var: LinearConfig::new(16, l).init(device),
            decode: vec![
                LinearConfig::new(l, 16).init(device),
                LinearConfig::new(16, p).init(device),
            ],
        }
    }

    fn loss(&self, step: usize, micro: usize) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1, Int>) {
        let device = self.encode.weight.device();
        let seed = 5000 + 10 * (step * MICRO + micro) as u64;
        let images = labelled::<B, 2>(seed, [Self::BATCH, Self::PIXELS], 2, &device).0;
        let targets = images.clone().greater_elem(0.0).float();
        let h = burn::tensor::activation::relu(self.encode.forward(images));
        let (mean, log_var) = (self.mean.forward(h.clone()), self.log_var.forward(h));
        let noise = Tensor::<B, 2>::random(
            [Self::BATCH, Self::LATENT],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        let z = mean.clone() + (log_var.clone() * 0.5).exp() * noise;
        let logits = self.decode[1].forward(self.decode[0].forward(z).tanh());
        let reconstruction = BinaryCrossEntropyLossConfig::new()
            .with_logits(true)
            .init(&device)
            .forward(logits.clone(), targets.clone().int());
        let kl =
            ((log_var.clone().exp() + mean.powi_scalar(2) - log_var - 1.0).sum_dim(1) * 0.5).mean();
        let loss = reconstruction + kl * 0.1;
        let right = logits
            .greater_elem(0.0)
            .float()
            .equal(targets)
            .float()
            .mean();
        let on = noise_sign(seed);
        (
            loss,
            right,
            Tensor::from_data(TensorData::new(vec![on], [1]), &device),
        )
    }
}

/// An integer metric that needs no tensor: the sign of the step's first input.
fn noise_sign(seed: u64) -> i64 {
    (noise(seed, 1)[0] > 0.0) as i64
}

#[test]
fn variational_autoencoder_sampling_on_the_device_with_adamw() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let optimizer = AdamWConfig::new()
            .with_weight_decay(1e-2)
            .init::<B, Vae<B>>();
        train::<B, _>(Vae::new, |m, s, k| m.loss(s, k), optimizer)
    }
    every_policy("variational autoencoder", run::<Plain>(), run::<Swapped>);
}

/// Batches whose shapes change between steps, as bucketed or epoch-ending batches do: a
/// transformer encoder classifies sequences of 8 tokens for four steps (long enough for a
/// plan of that schedule to be made and followed), then of 12, then a short last batch of
/// 3, then 8 again, then 5 and 12; a mean over the valid positions under a padding mask.
#[derive(Module, Debug)]
struct Buckets<B: Backend> {
    tokens: Embedding<B>,
    encoder: TransformerEncoder<B>,
    out: Linear<B>,
}

impl<B: Backend> Buckets<B> {
    const VOCAB: usize = 16;
    const D: usize = 16;
    const CLASSES: usize = 3;

    fn new(device: &B::Device) -> Self {
        Self {
            tokens: EmbeddingConfig::new(Self::VOCAB, Self::D).init(device),
            encoder: TransformerEncoderConfig::new(Self::D, 32, 2, 2).init(device),
            out: LinearConfig::new(Self::D, Self::CLASSES).init(device),
        }
    }

    /// The batch size and sequence length of a step.
    fn shape(step: usize) -> [usize; 2] {
        match step {
            7 => [4, 12],
            8 => [3, 8],
            10 => [4, 5],
            11 => [4, 12],
            _ => [4, 8],
        }
    }

    fn loss(&self, step: usize, micro: usize) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1, Int>) {
        let device = self.out.weight.device();
        let [b, s] = Self::shape(step);
        let seed = 6000 + 10 * (step * MICRO + micro) as u64;
        let ids: Vec<i64> = noise(seed, b * s)
            .into_iter()
            .map(|v| ((v + 1.0) * 7.99) as i64)
            .collect();
        let ids = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [b, s]), &device);
        // Row r keeps its first s - r positions; the rest is padding.
        let pad: Vec<bool> = (0..b * s).map(|i| i % s >= s - i / s).collect();
        let pad = Tensor::<B, 2, Bool>::from_data(TensorData::new(pad.clone(), [b, s]), &device);
        let h = self
            .encoder
            .forward(TransformerEncoderInput::new(self.tokens.forward(ids)).mask_pad(pad.clone()));
        let keep = pad.bool_not().float().unsqueeze_dim::<3>(2);
        let pooled =
            (h * keep.clone()).sum_dim(1).squeeze_dim::<2>(1) / keep.sum_dim(1).squeeze_dim::<2>(1);
        let logits = self.out.forward(pooled);
        let y = labelled::<B, 2>(seed + 1, [b, 1], Self::CLASSES, &device).1;
        let hit = logits
            .clone()
            .argmax(1)
            .squeeze_dim::<1>(1)
            .equal(y.clone())
            .int()
            .float()
            .mean();
        let loss = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits, y);
        let length = Tensor::from_data(TensorData::new(vec![s as i64], [1]), &device);
        (loss, hit, length)
    }
}

#[test]
fn batches_whose_shapes_change_between_steps() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let optimizer = AdamWConfig::new().init::<B, Buckets<B>>();
        train::<B, _>(Buckets::new, |m, s, k| m.loss(s, k), optimizer)
    }
    let plain = run::<Plain>();
    let unbudgeted = every_policy("changing batch shapes", plain.clone(), run::<Swapped>);
    // The case this probe is for: a plan made for one shape's schedule was in force when
    // the shape changed, and every value above stayed the plain backend's. (The schedule is
    // the whole step, its two micro-batches and the update: the first shape holds for seven
    // steps so that its plan is made before the shape changes.)
    let device = burn::backend::flex::FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let budget = unbudgeted.memory.peak_bytes / 4;
    burn_swap::configure(
        &device,
        burn_swap::SwapConfig::budget_bytes(budget).with_background_planning(false),
    )
    .unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    plain.assert_same(
        &run::<Swapped>(),
        "changing batch shapes, planned, checked for plans",
    );
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, burn_swap::SwapConfig::default()).unwrap();
    assert!(report.plan.plans > 0, "no plan was made\n{report}");
    assert!(report.memory.peak_bytes <= budget, "{report}");
}

/// A student and its mean teacher (an exponential moving average of the student's weights,
/// kept by the training loop as plain tensors outside any module and updated every step
/// without gradients), a consistency loss against the teacher's detached outputs, and an
/// activation kept past the backward pass and read whole for a histogram, as logging code
/// does; SGD.
#[derive(Module, Debug)]
struct Student<B: Backend> {
    layers: Vec<Linear<B>>,
}

impl<B: Backend> Student<B> {
    const WIDTHS: [usize; 4] = [10, 24, 24, 4];
    const BATCH: usize = 8;

    fn new(device: &B::Device) -> Self {
        Self {
            layers: Self::WIDTHS
                .windows(2)
                .map(|w| LinearConfig::new(w[0], w[1]).init(device))
                .collect(),
        }
    }

    /// The weights and biases as detached tensors: the teacher's first copy.
    fn weights(&self) -> Vec<(Tensor<B, 2>, Tensor<B, 1>)> {
        self.layers
            .iter()
            .map(|l| {
                let bias = l.bias.as_ref().expect("a bias").val();
                (l.weight.val().detach(), bias.detach())
            })
            .collect()
    }

    /// The logits and the first hidden activation.
    fn forward(&self, x: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let first = self.layers[0].forward(x).tanh();
        let mut h = first.clone();
        for layer in &self.layers[1..] {
            h = layer.forward(h.tanh());
        }
        (h, first)
    }
}

/// The teacher's logits from its own weights.
fn teacher_logits<B: Backend>(
    teacher: &[(Tensor<B, 2>, Tensor<B, 1>)],
    x: Tensor<B, 2>,
) -> Tensor<B, 2> {
    let mut h = x;
    for (i, (w, b)) in teacher.iter().enumerate() {
        if i > 0 {
            h = h.tanh();
        }
        h = h.matmul(w.clone()) + b.clone().unsqueeze_dim::<2>(0);
        if i == 0 {
            h = h.tanh();
        }
    }
    h
}

#[test]
fn mean_teacher_with_tensors_kept_across_steps_and_an_activation_read_after_backward() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let device = B::Device::default();
        let _rng = burn_swap_harness::rng_lock();
        B::seed(&device, 9);
        let mut student = Student::<B>::new(&device);
        let mut teacher = student.weights();
        let mut optimizer = SgdConfig::new().init::<B, Student<B>>();
        let mut values = Vec::new();
        for step in 0..STEPS {
            let seed = 7000 + 10 * step as u64;
            let (x, y) = labelled::<B, 2>(seed, [Student::<B>::BATCH, 10], 4, &device);
            let target = softmax(teacher_logits(&teacher, x.clone()), 1).detach();
            let (logits, first) = student.forward(x);
            let consistency = (softmax(logits.clone(), 1) - target).powi_scalar(2).mean();
            let loss = CrossEntropyLossConfig::new()
                .init(&device)
                .forward(logits, y)
                + consistency * 0.5;
            values.push(loss.clone().into_scalar().elem::<f32>());
            let grads = GradientsParams::from_grads(loss.backward(), &student);
            student = optimizer.step(5e-2, student, grads);
            // Read after the backward pass: eight bins of the first activation.
            let data = first.into_data();
            let mut bins = [0u32; 8];
            for v in data.iter::<f32>() {
                bins[(((v + 1.0) * 4.0) as usize).min(7)] += 1;
            }
            values.extend(bins.iter().map(|&n| n as f32));
            // The teacher follows the student without gradients.
            teacher = teacher
                .into_iter()
                .zip(student.weights())
                .map(|((tw, tb), (sw, sb))| (tw * 0.9 + sw * 0.1, tb * 0.9 + sb * 0.1))
                .collect();
        }
        let mut params = parameters(&student);
        for (w, b) in &teacher {
            params.push(w.clone().into_data());
            params.push(b.clone().into_data());
        }
        Outcome {
            losses: values,
            params,
        }
    }
    every_policy("mean teacher", run::<Plain>(), run::<Swapped>);
}

/// A classifier over a transformer encoder.
#[derive(Module, Debug)]
struct Classifier<B: Backend> {
    encoder: TransformerEncoder<B>,
    head: Linear<B>,
}

/// Batched inference with no autodiff at all, on `Swap<Flex>` itself, as a model served
/// from weights larger than the device's memory: twelve batches through a four-layer
/// transformer encoder whose weights are most of the peak, so under a quarter of it they
/// leave and come back every batch. The class probabilities of every batch and the weights
/// afterwards, bit for bit.
#[test]
fn batched_inference_without_autodiff_with_weights_that_leave() {
    fn run<B: Backend>() -> Outcome {
        let device = B::Device::default();
        let _rng = burn_swap_harness::rng_lock();
        B::seed(&device, 21);
        let model = Classifier {
            encoder: TransformerEncoderConfig::new(32, 64, 4, 4).init::<B>(&device),
            head: LinearConfig::new(32, 10).init::<B>(&device),
        };
        let mut values = Vec::new();
        let mut outputs = Vec::new();
        for batch in 0..STEPS {
            let x = Tensor::<B, 3>::from_data(
                TensorData::new(noise(900 + batch as u64, 2 * 8 * 32), [2, 8, 32]),
                &device,
            );
            let h = model.encoder.forward(TransformerEncoderInput::new(x));
            let logits = model.head.forward(h.mean_dim(1).squeeze_dim::<2>(1));
            let probs = softmax(logits, 1);
            values.push(probs.clone().max().into_scalar().elem::<f32>());
            outputs.push(probs.into_data());
        }
        outputs.extend(parameters(&model));
        Outcome {
            losses: values,
            params: outputs,
        }
    }
    every_policy("batched inference", run::<Flex>(), run::<Swap<Flex>>);
}
