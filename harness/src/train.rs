//! One training loop, generic over the backend and the model.

use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{ElementConversion, Tensor, TensorData};

use crate::models::{ConvNet, ConvNetConfig, Mlp, MlpConfig};

/// What a run leaves to compare: the loss of every step (as bits) and the final parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The loss of each step.
    pub losses: Vec<f32>,
    /// Every float parameter's data, in the module's visiting order.
    pub params: Vec<TensorData>,
}

impl Outcome {
    /// The losses as raw bits, for exact comparison (NaN included).
    pub fn loss_bits(&self) -> Vec<u32> {
        self.losses.iter().map(|l| l.to_bits()).collect()
    }

    /// Asserts that `other` is this outcome bit for bit: every loss and every parameter's
    /// shape and bytes (`what` names the run in the message).
    pub fn assert_same(&self, other: &Outcome, what: &str) {
        assert_eq!(self.loss_bits(), other.loss_bits(), "{what}: losses differ");
        assert_eq!(self.params.len(), other.params.len(), "{what}: parameters");
        for (i, (a, b)) in self.params.iter().zip(&other.params).enumerate() {
            assert_eq!(a.shape, b.shape, "{what}: parameter {i} shape");
            assert_eq!(&a.bytes[..], &b.bytes[..], "{what}: parameter {i} differs");
        }
    }
}

struct Collect<'a>(&'a mut Vec<TensorData>);

impl<B: burn::tensor::backend::Backend> ModuleVisitor<B> for Collect<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.0.push(param.val().into_data());
    }
}

/// Every float parameter's data (reading them also forces lazily initialised parameters).
pub fn parameters<B: burn::tensor::backend::Backend, M: Module<B>>(model: &M) -> Vec<TensorData> {
    let mut out = Vec::new();
    model.visit(&mut Collect(&mut out));
    out
}

/// Trains `model` for `steps` steps of Adam at learning rate `lr`, calling `on_step(step,
/// loss)` after each, and returns the trained model and the losses.
pub fn train_loop<B, M>(
    model: M,
    steps: usize,
    lr: f64,
    loss_of: impl Fn(&M, usize) -> Tensor<B, 1>,
    on_step: impl FnMut(usize, f32),
) -> (M, Vec<f32>)
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
{
    train_loop_scheduled(model, steps, |_| lr, loss_of, on_step)
}

/// [`train_loop`] at the learning rate `lr_at(step)` of each step (from 0), with a loss that
/// may take state along (a loader's next batch).
pub fn train_loop_scheduled<B, M>(
    mut model: M,
    steps: usize,
    lr_at: impl Fn(usize) -> f64,
    mut loss_of: impl FnMut(&M, usize) -> Tensor<B, 1>,
    mut on_step: impl FnMut(usize, f32),
) -> (M, Vec<f32>)
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
{
    let mut optimizer = AdamConfig::new().init::<B, M>();
    let mut losses = Vec::with_capacity(steps);
    for step in 0..steps {
        let loss = loss_of(&model, step);
        let value: f32 = loss.clone().into_scalar().elem();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(lr_at(step), model, grads);
        losses.push(value);
        on_step(step, value);
    }
    (model, losses)
}

/// Trains the model `init` makes (seeded as every workload's is) for `steps` steps of Adam at
/// `lr_at(step)`, its batches made by `batch` on a [`Loader`](crate::loader::Loader) thread two
/// ahead, each step's loss `loss(model, batch)`, and returns what to compare.
pub fn train_loaded<B, M, T>(
    device: &B::Device,
    steps: usize,
    init: impl FnOnce() -> M,
    batch: impl Fn(usize) -> T + Send + 'static,
    lr_at: impl Fn(usize) -> f64,
    loss: impl Fn(&M, T) -> Tensor<B, 1>,
    on_step: &mut dyn FnMut(usize, f32),
) -> Outcome
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    T: Send + 'static,
{
    let model = init_seeded::<B, _>(device, 42, init);
    let mut loader = crate::loader::Loader::start(steps, 2, batch);
    let (model, losses) = train_loop_scheduled(
        model,
        steps,
        lr_at,
        |m: &M, _| loss(m, loader.next_batch()),
        on_step,
    );
    Outcome {
        losses,
        params: parameters(&model),
    }
}

/// Makes a model deterministically: seeds the backend with `seed` and runs `init` under
/// [`crate::rng_lock`], then reads its parameters (forcing lazily initialised ones).
pub fn init_seeded<B: AutodiffBackend, M: Module<B>>(
    device: &B::Device,
    seed: u64,
    init: impl FnOnce() -> M,
) -> M {
    let _guard = crate::rng_lock();
    B::seed(device, seed);
    let model = init();
    parameters(&model);
    model
}

/// Initialises an MLP deterministically (seeded, under [`crate::rng_lock`]).
pub fn init_mlp<B: AutodiffBackend>(config: &MlpConfig, device: &B::Device, seed: u64) -> Mlp<B> {
    init_seeded::<B, _>(device, seed, || config.init::<B>(device))
}

/// Initialises a conv net deterministically (seeded, under [`crate::rng_lock`]).
pub fn init_convnet<B: AutodiffBackend>(
    config: &ConvNetConfig,
    device: &B::Device,
    seed: u64,
) -> ConvNet<B> {
    init_seeded::<B, _>(device, seed, || config.init::<B>(device))
}

/// Trains an MLP whose batch shrinks to `last_batch` for the last `short_steps` steps (a
/// dataset whose size is not a multiple of the batch): the shapes change mid-training.
pub fn train_mlp_short_tail<B: AutodiffBackend>(
    config: &MlpConfig,
    device: &B::Device,
    steps: usize,
    short_steps: usize,
    last_batch: usize,
) -> Outcome {
    let model = init_mlp::<B>(config, device, 42);
    let short = MlpConfig {
        batch: last_batch,
        ..*config
    };
    let (model, losses) = train_loop(
        model,
        steps,
        5e-3,
        |m: &Mlp<B>, step| {
            let config = if step + short_steps >= steps {
                &short
            } else {
                config
            };
            m.loss(config, step, device)
        },
        |_, _| {},
    );
    Outcome {
        losses,
        params: parameters(&model),
    }
}

/// Runs `train` on a swap device with a fresh trace and returns the trace of its last complete
/// iteration. The caller holds [`crate::swap_device_lock`].
pub fn last_iteration<D: burn::tensor::backend::DeviceOps>(
    device: &D,
    train: impl FnOnce(),
) -> burn_swap::Trace {
    burn_swap::configure(device, burn_swap::SwapConfig::default())
        .expect("the default configuration is valid");
    burn_swap::restart_trace(device);
    train();
    burn_swap::trace(device).expect("a complete iteration was traced")
}
