//! A text classifier written the way Burn's own text-classification example writes one:
//! token and position embeddings, a norm-first transformer encoder under a padding mask, the
//! first position's encoding to the classes, a Noam learning-rate schedule, and batches
//! tokenised, padded and masked on a loader thread (`generate_padding_mask`: an op per
//! sequence, on that thread). Padded to a fixed length, or to each batch's longest sequence
//! (a length that varies from batch to batch).

use burn::module::Module;
use burn::nn::attention::{SeqLengthOption, generate_padding_mask};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Bool, Int, Tensor, TensorData};

use crate::data::XorShift;
use crate::train::{Outcome, train_loaded};

/// The padding token.
const PAD: usize = 0;

/// Sizes of a [`Classifier`] and its batches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassifierConfig {
    /// Tokens in the vocabulary (the padding token included).
    pub vocab: usize,
    /// Width of the encoder.
    pub d_model: usize,
    /// Attention heads.
    pub heads: usize,
    /// Encoder layers.
    pub layers: usize,
    /// The longest sequence (the padded length where `fixed_length`).
    pub max_seq: usize,
    /// Whether every batch is padded to `max_seq` (Burn's example) or to its longest sequence.
    pub fixed_length: bool,
    /// Classes.
    pub classes: usize,
    /// Sequences per batch.
    pub batch: usize,
    /// Seed of the synthetic texts.
    pub seed: u64,
}

impl ClassifierConfig {
    /// The benches' classifier: a vocabulary of 256, width 64, four heads, two layers,
    /// sequences of up to 48 tokens padded to 48, four classes, batch 16 (about a thousand
    /// ops per step, a third of them the loader's).
    pub fn bench() -> Self {
        Self {
            vocab: 256,
            d_model: 64,
            heads: 4,
            layers: 2,
            max_seq: 48,
            fixed_length: true,
            classes: 4,
            batch: 16,
            seed: 9,
        }
    }

    /// A small one for tests.
    pub fn small() -> Self {
        Self {
            vocab: 32,
            d_model: 16,
            heads: 2,
            layers: 1,
            max_seq: 12,
            fixed_length: true,
            classes: 3,
            batch: 4,
            seed: 9,
        }
    }

    /// The same model, each batch padded to its own longest sequence.
    pub fn varying(self) -> Self {
        Self {
            fixed_length: false,
            ..self
        }
    }

    /// Initialises the model on `device` (call it under [`crate::rng_lock`] after seeding).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Classifier<B> {
        Classifier {
            tokens: EmbeddingConfig::new(self.vocab, self.d_model).init(device),
            positions: EmbeddingConfig::new(self.max_seq, self.d_model).init(device),
            encoder: TransformerEncoderConfig::new(
                self.d_model,
                2 * self.d_model,
                self.heads,
                self.layers,
            )
            .with_norm_first(true)
            .with_quiet_softmax(true)
            .init(device),
            output: LinearConfig::new(self.d_model, self.classes).init(device),
        }
    }

    /// The batch of `step`, tokenised, padded and masked on the calling thread: texts of 4 to
    /// `max_seq` tokens whose class is set by their first token. Padded to each batch's
    /// longest text (not `fixed_length`), the batch's texts are of 4 to a length drawn per
    /// batch between 8 and `max_seq` (a sampler that groups texts of similar lengths): the
    /// padded length changes from step to step.
    pub fn batch<B: Backend>(&self, step: usize, device: &B::Device) -> Batch<B> {
        let mut rng = XorShift::new(self.seed ^ (step as u64).wrapping_mul(0x9e37_79b9));
        let mut texts = Vec::with_capacity(self.batch);
        let mut labels = Vec::with_capacity(self.batch);
        let longest = if self.fixed_length {
            self.max_seq
        } else {
            8 + (rng.next_u64() % (self.max_seq.saturating_sub(7).max(1) as u64)) as usize
        };
        for _ in 0..self.batch {
            let span = longest.saturating_sub(4) as u64 + 1;
            let len = (4 + rng.next_u64() % span) as usize;
            let text: Vec<usize> = (0..len)
                .map(|_| 1 + (rng.next_u64() % (self.vocab as u64 - 1)) as usize)
                .collect();
            labels.push((text[0] % self.classes) as i64);
            texts.push(text);
        }
        let length = if self.fixed_length {
            SeqLengthOption::Fixed(self.max_seq)
        } else {
            SeqLengthOption::Max(self.max_seq)
        };
        let mask = generate_padding_mask::<B>(PAD, texts, length, device);
        Batch {
            tokens: mask.tensor,
            mask_pad: mask.mask,
            labels: Tensor::from_data(TensorData::new(labels, [self.batch]), device),
        }
    }
}

/// A batch: tokens `[batch, seq]`, its padding mask and one label per text.
#[derive(Debug)]
pub struct Batch<B: Backend> {
    tokens: Tensor<B, 2, Int>,
    mask_pad: Tensor<B, 2, Bool>,
    labels: Tensor<B, 1, Int>,
}

/// Embeddings, a norm-first encoder under the padding mask, and a linear head on the first
/// position.
#[derive(Module, Debug)]
pub struct Classifier<B: Backend> {
    tokens: Embedding<B>,
    positions: Embedding<B>,
    encoder: TransformerEncoder<B>,
    output: Linear<B>,
}

impl<B: Backend> Classifier<B> {
    /// Cross entropy of the batch's classes.
    pub fn loss(&self, batch: Batch<B>) -> Tensor<B, 1> {
        let [size, seq] = batch.tokens.dims();
        let device = batch.tokens.device();
        let index = Tensor::<B, 1, Int>::arange(0..seq as i64, &device)
            .reshape([1, seq])
            .repeat_dim(0, size);
        let embedded = (self.tokens.forward(batch.tokens) + self.positions.forward(index)) / 2;
        let encoded = self
            .encoder
            .forward(TransformerEncoderInput::new(embedded).mask_pad(batch.mask_pad));
        let [_, _, d_model] = encoded.dims();
        let first = encoded.narrow(1, 0, 1).reshape([size, d_model]);
        let logits = self.output.forward(first);
        CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits, batch.labels)
    }
}

/// The Noam schedule's learning rate at `step` (from 1): a linear warm-up over `warmup` steps,
/// then a decay with the inverse square root of the step, scaled by `factor / sqrt(d_model)`.
pub fn noam(factor: f64, d_model: usize, warmup: usize, step: usize) -> f64 {
    let step = step.max(1) as f64;
    factor / (d_model as f64).sqrt() * (step.powf(-0.5)).min(step * (warmup as f64).powf(-1.5))
}

/// Trains a [`Classifier`] for `steps` steps of Adam under a Noam schedule (`lr` its factor),
/// its batches made on a loader thread two ahead, and returns what to compare.
pub fn train_classifier<B: AutodiffBackend>(
    config: &ClassifierConfig,
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
        |step| noam(lr, config.d_model, 10, step + 1),
        |m: &Classifier<B>, batch| m.loss(batch),
        on_step,
    )
}
