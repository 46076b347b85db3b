//! Models trained in half precision, as a user asks for it in Burn: the device's default float
//! type set to bf16 before the first tensor (`set_default_dtypes`), so that parameters,
//! activations, gradients and the optimizer's state are all two-byte floats. Through
//! `Autodiff<Swap<Flex>>` they train bit for bit as through `Autodiff<Flex>`, under every
//! policy at a half and a quarter of the unbudgeted counted peak, with compression off and on,
//! within the budget: the bytes counted, moved, compressed and brought back are those of
//! two-byte elements.
//!
//! The device's default types can be set once per process, so this binary holds only bf16
//! tests, and each sets them first (whichever runs first does).

use std::sync::Once;

use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Module};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{
    Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig, Lstm, LstmConfig,
};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{DType, ElementConversion, FloatDType, Int, IntDType, Tensor};
use burn_swap::Swap;
use burn_swap_harness::data::labelled;
use burn_swap_harness::models::BnCnnConfig;
use burn_swap_harness::train::{Outcome, parameters, train_loop};
use burn_swap_harness::verify::every_policy as check;

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

const STEPS: usize = 12;

/// Makes bf16 the device's default float type, before any tensor of this process.
fn bf16_by_default() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let device = burn::backend::flex::FlexDevice;
        burn::tensor::set_default_dtypes::<Flex>(&device, FloatDType::BF16, IntDType::I64)
            .expect("the device's default types are set before its first tensor");
    });
}

fn cross_entropy<B: Backend>(logits: Tensor<B, 2>, y: Tensor<B, 1, Int>) -> Tensor<B, 1> {
    CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits, y)
}

/// Token embeddings through an LSTM and layer norm, the last output to a linear head.
#[derive(Module, Debug)]
struct Tagger<B: Backend> {
    tokens: Embedding<B>,
    lstm: Lstm<B>,
    norm: LayerNorm<B>,
    head: Linear<B>,
}

impl<B: Backend> Tagger<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            tokens: EmbeddingConfig::new(12, 8).init(device),
            lstm: LstmConfig::new(8, 16, true).init(device),
            norm: LayerNormConfig::new(16).init(device),
            head: LinearConfig::new(16, 3).init(device),
        }
    }

    fn loss(&self, step: usize) -> Tensor<B, 1> {
        let device = self.head.weight.device();
        let (x, y) = labelled::<B, 2>(5000 + step as u64, [6, 9], 3, &device);
        let ids = ((x + 1.0) * 5.9).int();
        let (out, _) = self.lstm.forward(self.tokens.forward(ids), None);
        let last = self.norm.forward(out.narrow(1, 8, 1).squeeze_dim::<2>(1));
        cross_entropy(self.head.forward(last), y)
    }
}

/// Trains a model built by `init` in bf16, asserting that its parameters are bf16; the
/// outcome holds, after the training losses, the loss of one more batch in eval mode.
fn train<B: AutodiffBackend, M: AutodiffModule<B>>(
    init: impl FnOnce(&B::Device) -> M,
    loss: impl Fn(&M, usize) -> Tensor<B, 1>,
    eval: impl Fn(&M::InnerModule, usize) -> Tensor<B::InnerBackend, 1>,
) -> Outcome {
    bf16_by_default();
    let device = B::Device::default();
    let _rng = burn_swap_harness::rng_lock();
    B::seed(&device, 9);
    let model = init(&device);
    let (model, mut losses) = train_loop(model, STEPS, 1e-2, loss, |_, _| {});
    losses.push(eval(&model.valid(), STEPS).into_scalar().elem());
    let params = parameters(&model);
    assert!(
        params.iter().all(|p| p.dtype == DType::BF16),
        "the parameters are bf16: {:?}",
        params.iter().map(|p| p.dtype).collect::<Vec<_>>()
    );
    Outcome { losses, params }
}

#[test]
fn a_bf16_batch_norm_cnn_trains_bit_for_bit_under_every_policy() {
    fn run<B: AutodiffBackend>() -> Outcome {
        let config = BnCnnConfig::small();
        let device = B::Device::default();
        train::<B, _>(
            |device| config.init(device),
            |m, s| m.loss(&config, s, &device),
            |m, s| m.loss(&config, s, &device),
        )
    }
    let plain = run::<Plain>();
    assert!(
        plain.losses.iter().all(|l| l.is_finite()),
        "{:?}",
        plain.losses
    );
    check("bf16 batch-norm CNN", plain, run::<Swapped>);
}

#[test]
fn a_bf16_embedding_lstm_trains_bit_for_bit_under_every_policy() {
    fn run<B: AutodiffBackend>() -> Outcome {
        train::<B, _>(Tagger::new, |m, s| m.loss(s), |m, s| m.loss(s))
    }
    let plain = run::<Plain>();
    assert!(
        plain.losses.iter().all(|l| l.is_finite()),
        "{:?}",
        plain.losses
    );
    check("bf16 embedding LSTM", plain, run::<Swapped>);
}
