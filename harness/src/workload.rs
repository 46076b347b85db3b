//! The suite's models as one type: what the benchmark harness times (`swap-bench`) and what
//! the GPU check verifies (`swap-check`), each at a size, trained from its deterministic
//! initialisation on any backend.

use burn::tensor::backend::AutodiffBackend;

use crate::classifier::{ClassifierConfig, train_classifier};
use crate::models::{
    BnCnnConfig, ConvNetConfig, GptConfig, LstmNetConfig, MlpConfig, ResNetConfig,
    TransformerConfig,
};
use crate::recurrent::{RecurrentConfig, train_recurrent};
use crate::schedules::{GanConfig, train_bucketed, train_gan};
use crate::train::{Outcome, init_seeded, parameters, train_loop};

/// A model of the suite and its size (batch included).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// An MLP (`train_mlp`'s model).
    Mlp(MlpConfig),
    /// A conv net with ReLU (zero-rich activations, for compression).
    ConvNet(ConvNetConfig),
    /// A transformer (attention blocks).
    Transformer(TransformerConfig),
    /// A GPT-2-style decoder on the shipped corpus (`train_gpt`'s model).
    Gpt(GptConfig),
    /// A ResNet-style CNN (`train_cnn`'s model).
    Cnn(ResNetConfig),
    /// A CNN with batch norm in train mode.
    BnCnn(BnCnnConfig),
    /// Burn's `Lstm` over a sequence (op-bound).
    Lstm(LstmNetConfig),
    /// A GAN: critic and generator steps in turn, each net with its own optimizer (two
    /// schedules).
    Gan(GanConfig),
    /// A transformer fed batches of three sequence lengths (a bucketing sampler: three
    /// schedules that come back).
    Bucketed(TransformerConfig),
    /// Stacked bidirectional LSTM cells in the style of Burn's examples, batches made on a
    /// loader thread (op-bound, with loops inside the step).
    Recurrent(RecurrentConfig),
    /// A text classifier in the style of Burn's examples (padding masks made on a loader
    /// thread, a Noam schedule), padded to a fixed length or to each batch's longest.
    Classifier(ClassifierConfig),
}

/// The seed every workload is initialised with.
const SEED: u64 = 42;

impl Workload {
    /// The name in tables.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Mlp(_) => "mlp",
            Workload::ConvNet(_) => "convnet",
            Workload::Transformer(_) => "transformer",
            Workload::Gpt(_) => "gpt",
            Workload::Cnn(_) => "cnn",
            Workload::BnCnn(_) => "bn-cnn",
            Workload::Lstm(_) => "lstm",
            Workload::Gan(_) => "gan",
            Workload::Bucketed(_) => "bucketed",
            Workload::Recurrent(_) => "recurrent",
            Workload::Classifier(c) if c.fixed_length => "classifier",
            Workload::Classifier(_) => "classifier-varying",
        }
    }

    /// Its batch size.
    pub fn batch(&self) -> usize {
        match self {
            Workload::Mlp(c) => c.batch,
            Workload::ConvNet(c) => c.batch,
            Workload::Transformer(c) => c.batch,
            Workload::Gpt(c) => c.batch,
            Workload::Cnn(c) => c.batch,
            Workload::BnCnn(c) => c.batch,
            Workload::Lstm(c) => c.batch,
            Workload::Gan(c) => c.batch,
            Workload::Bucketed(c) => c.batch,
            Workload::Recurrent(c) => c.batch,
            Workload::Classifier(c) => c.batch,
        }
    }

    /// The steps from the start that run every kind of step the workload has at least twice
    /// (the first of each kind makes its optimizer's state): a counted peak or a smallest
    /// budget taken over fewer steps can miss a larger schedule (a longer bucket, the
    /// generator's step) that the measured steps then run.
    pub fn steps_to_see_every_schedule(&self) -> usize {
        match self {
            Workload::Gan(c) => 2 * (c.critic_steps + 1),
            Workload::Bucketed(_) => crate::schedules::steps_until_every_bucket(),
            _ => 2,
        }
    }

    /// The same workload with another batch size.
    pub fn with_batch(self, batch: usize) -> Self {
        match self {
            Workload::Mlp(c) => Workload::Mlp(MlpConfig { batch, ..c }),
            Workload::ConvNet(c) => Workload::ConvNet(ConvNetConfig { batch, ..c }),
            Workload::Transformer(c) => Workload::Transformer(TransformerConfig { batch, ..c }),
            Workload::Gpt(c) => Workload::Gpt(GptConfig { batch, ..c }),
            Workload::Cnn(c) => Workload::Cnn(ResNetConfig { batch, ..c }),
            Workload::BnCnn(c) => Workload::BnCnn(BnCnnConfig { batch, ..c }),
            Workload::Lstm(c) => Workload::Lstm(LstmNetConfig { batch, ..c }),
            Workload::Gan(c) => Workload::Gan(GanConfig { batch, ..c }),
            Workload::Bucketed(c) => Workload::Bucketed(TransformerConfig { batch, ..c }),
            Workload::Recurrent(c) => Workload::Recurrent(RecurrentConfig { batch, ..c }),
            Workload::Classifier(c) => Workload::Classifier(ClassifierConfig { batch, ..c }),
        }
    }

    /// Adam's learning rate for it.
    pub fn learning_rate(&self) -> f64 {
        match self {
            Workload::Mlp(_) | Workload::ConvNet(_) | Workload::BnCnn(_) => 5e-3,
            Workload::Lstm(_) => 2e-3,
            Workload::Transformer(_) | Workload::Bucketed(_) => 2e-3,
            Workload::Gan(_) => 1e-3,
            Workload::Gpt(_) | Workload::Cnn(_) => 1e-3,
            Workload::Recurrent(_) => 1e-3,
            // The Noam schedule's factor.
            Workload::Classifier(_) => 0.5,
        }
    }

    /// Trains `steps` steps on `B` from the deterministic initialisation and returns what to
    /// compare.
    pub fn train<B: AutodiffBackend>(&self, device: &B::Device, steps: usize) -> Outcome {
        self.train_with::<B>(device, steps, &mut |_, _| {})
    }

    /// [`Workload::train`], calling `on_step(step, loss)` after each step. The callback is a
    /// trait object, so that each backend has one copy of every model's training code
    /// whatever its callers pass (one closure type per caller would make one copy each).
    pub fn train_with<B: AutodiffBackend>(
        &self,
        device: &B::Device,
        steps: usize,
        on_step: &mut dyn FnMut(usize, f32),
    ) -> Outcome {
        let lr = self.learning_rate();
        macro_rules! run {
            ($c:expr) => {{
                let c = $c;
                let model = init_seeded::<B, _>(device, SEED, || c.init::<B>(device));
                let (model, losses) =
                    train_loop(model, steps, lr, |m, s| m.loss(&c, s, device), on_step);
                Outcome {
                    losses,
                    params: parameters(&model),
                }
            }};
        }
        match *self {
            Workload::Mlp(c) => run!(c),
            Workload::ConvNet(c) => run!(c),
            Workload::Transformer(c) => run!(c),
            Workload::Gpt(c) => run!(c),
            Workload::Cnn(c) => run!(c),
            Workload::BnCnn(c) => run!(c),
            Workload::Lstm(c) => run!(c),
            Workload::Gan(c) => train_gan::<B>(&c, device, steps, lr, on_step),
            Workload::Bucketed(c) => train_bucketed::<B>(&c, device, steps, lr, on_step),
            Workload::Recurrent(c) => train_recurrent::<B>(&c, device, steps, lr, on_step),
            Workload::Classifier(c) => train_classifier::<B>(&c, device, steps, lr, on_step),
        }
    }
}

/// Trains an MLP from its deterministic initialisation and returns what to compare.
pub fn train_mlp<B: AutodiffBackend>(
    config: &MlpConfig,
    device: &B::Device,
    steps: usize,
) -> Outcome {
    Workload::Mlp(*config).train::<B>(device, steps)
}

/// Trains a conv net from its deterministic initialisation and returns what to compare.
pub fn train_convnet<B: AutodiffBackend>(
    config: &ConvNetConfig,
    device: &B::Device,
    steps: usize,
) -> Outcome {
    Workload::ConvNet(*config).train::<B>(device, steps)
}

/// Trains a transformer from its deterministic initialisation and returns what to
/// compare.
pub fn train_transformer<B: AutodiffBackend>(
    config: &TransformerConfig,
    device: &B::Device,
    steps: usize,
) -> Outcome {
    Workload::Transformer(*config).train::<B>(device, steps)
}
