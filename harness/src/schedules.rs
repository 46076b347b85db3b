//! Training loops whose schedule changes, as ordinary code has them: a GAN that alternates
//! critic and generator steps (two optimizers, two op sequences), and a sequence model fed
//! batches of a few lengths (a bucketing sampler). What `exec::plans` keeps plans for.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::activation::{relu, softplus};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Tensor};

use crate::data;
use crate::models::{Transformer, TransformerConfig};
use crate::train::{Outcome, init_seeded, parameters};

/// Sizes of a [`Gan`] and its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GanConfig {
    /// Noise features the generator reads.
    pub noise: usize,
    /// Hidden width of both nets.
    pub hidden: usize,
    /// Features of a sample.
    pub data: usize,
    /// Batch size.
    pub batch: usize,
    /// Critic steps before each generator step.
    pub critic_steps: usize,
    /// Seed of the batches.
    pub seed: u64,
}

impl GanConfig {
    /// A small GAN for tests: two critic steps per generator step.
    pub fn small() -> Self {
        Self {
            noise: 16,
            hidden: 64,
            data: 32,
            batch: 16,
            critic_steps: 2,
            seed: 5,
        }
    }

    /// Whether `step` updates the generator (else the critic).
    pub fn generator_step(&self, step: usize) -> bool {
        step % (self.critic_steps + 1) == self.critic_steps
    }
}

/// A generator and a critic, each two linear layers with a ReLU between.
#[derive(Module, Debug)]
pub struct Gan<B: Backend> {
    /// Noise to samples.
    pub generator: [Linear<B>; 2],
    /// Samples to one logit.
    pub critic: [Linear<B>; 2],
}

impl GanConfig {
    /// Initialises both nets on `device` (call it under [`crate::rng_lock`] after seeding).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Gan<B> {
        Gan {
            generator: [
                LinearConfig::new(self.noise, self.hidden).init(device),
                LinearConfig::new(self.hidden, self.data).init(device),
            ],
            critic: [
                LinearConfig::new(self.data, self.hidden).init(device),
                LinearConfig::new(self.hidden, 1).init(device),
            ],
        }
    }
}

fn two<B: Backend>(layers: &[Linear<B>; 2], x: Tensor<B, 2>) -> Tensor<B, 2> {
    layers[1].forward(relu(layers[0].forward(x)))
}

/// Trains a GAN for `steps` steps (the critic's, then the generator's, by
/// [`GanConfig::generator_step`]), each net with its own Adam, and returns the losses and
/// every parameter (generator's, then critic's).
pub fn train_gan<B: AutodiffBackend>(
    config: &GanConfig,
    device: &B::Device,
    steps: usize,
    lr: f64,
    mut on_step: impl FnMut(usize, f32),
) -> Outcome {
    let gan = init_seeded::<B, _>(device, 42, || config.init::<B>(device));
    let (mut generator, mut critic) = (gan.generator, gan.critic);
    let mut generator_adam = AdamConfig::new().init::<B, [Linear<B>; 2]>();
    let mut critic_adam = AdamConfig::new().init::<B, [Linear<B>; 2]>();
    let mut losses = Vec::with_capacity(steps);
    for step in 0..steps {
        let (noise, real) =
            data::regression_batch(config.seed, step, config.batch, config.noise, config.data);
        let noise = Tensor::<B, 2>::from_data(noise, device);
        let real = Tensor::<B, 2>::from_data(real, device);
        let loss = if config.generator_step(step) {
            let fake = two(&generator, noise);
            let loss = softplus(-two(&critic, fake), 1.0).mean();
            let grads = GradientsParams::from_grads(loss.backward(), &generator);
            generator = generator_adam.step(lr, generator, grads);
            loss
        } else {
            let fake = two(&generator, noise).detach();
            let loss = softplus(-two(&critic, real), 1.0).mean()
                + softplus(two(&critic, fake), 1.0).mean();
            let grads = GradientsParams::from_grads(loss.backward(), &critic);
            critic = critic_adam.step(lr, critic, grads);
            loss
        };
        let value: f32 = loss.into_scalar().elem();
        losses.push(value);
        on_step(step, value);
    }
    let mut params = parameters(&generator);
    params.extend(parameters(&critic));
    Outcome { losses, params }
}

/// The order of the buckets, three steps each: no stretch of buckets repeats right after
/// itself (a square-free word), so that no cycle of buckets is a period of the loop, as
/// with a sampler that draws buckets at random.
const BUCKET_ORDER: [usize; 13] = [0, 1, 2, 1, 0, 2, 1, 2, 0, 1, 2, 1, 0];

/// The steps from the start until every bucket has come, each for its three steps.
pub fn steps_until_every_bucket() -> usize {
    let mut seen = [false; 3];
    for (i, &bucket) in BUCKET_ORDER.iter().enumerate() {
        seen[bucket] = true;
        if seen.iter().all(|&s| s) {
            return 3 * (i + 1);
        }
    }
    3 * BUCKET_ORDER.len()
}

/// The sequence length of `step`'s batch: one of three buckets (half, three quarters and
/// all of `seq`), the same for three steps in a row, the buckets in a fixed order of 13 in which
/// no stretch repeats right after itself.
pub fn bucketed_seq(seq: usize, step: usize) -> usize {
    let bucket = BUCKET_ORDER[(step / 3) % BUCKET_ORDER.len()];
    (seq * (2 + bucket) / 4).max(1)
}

/// Trains a transformer on batches of [`bucketed_seq`] lengths for `steps` steps and returns
/// what to compare.
pub fn train_bucketed<B: AutodiffBackend>(
    config: &TransformerConfig,
    device: &B::Device,
    steps: usize,
    lr: f64,
    mut on_step: impl FnMut(usize, f32),
) -> Outcome {
    let mut model: Transformer<B> = init_seeded::<B, _>(device, 42, || config.init::<B>(device));
    let mut adam = AdamConfig::new().init::<B, Transformer<B>>();
    let mut losses = Vec::with_capacity(steps);
    for step in 0..steps {
        let seq = bucketed_seq(config.seq, step);
        let loss = model.loss(&TransformerConfig { seq, ..*config }, step, device);
        let value: f32 = loss.clone().into_scalar().elem();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = adam.step(lr, model, grads);
        losses.push(value);
        on_step(step, value);
    }
    Outcome {
        losses,
        params: parameters(&model),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_come_in_runs_of_three_and_all_three_appear() {
        let lengths: Vec<usize> = (0..30).map(|s| bucketed_seq(16, s)).collect();
        for run in lengths.chunks(3) {
            assert!(run.iter().all(|&l| l == run[0]), "{lengths:?}");
        }
        for l in [8, 12, 16] {
            assert!(lengths.contains(&l), "{l} missing from {lengths:?}");
        }
    }

    #[test]
    fn every_bucket_comes_within_its_steps_and_not_before() {
        let lengths = |n: usize| (0..n).map(|s| bucketed_seq(16, s)).collect::<Vec<_>>();
        let n = steps_until_every_bucket();
        for l in [8, 12, 16] {
            assert!(lengths(n).contains(&l), "{l} missing from {:?}", lengths(n));
        }
        let before = lengths(n - 3);
        assert!(
            [8, 12, 16].iter().any(|l| !before.contains(l)),
            "{before:?} has every bucket already"
        );
    }
}
