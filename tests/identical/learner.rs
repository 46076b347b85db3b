//! Training as Burn's book teaches it: burn-train's `SupervisedTraining` and `Learner`, with a
//! data loader, a batcher, accuracy and loss metrics, a learning-rate schedule and a file
//! checkpointer, through `Autodiff<Swap<Flex>>` against `Autodiff<Flex>`, bit for bit, under
//! every policy at a half, a quarter and the minimum of the unbudgeted counted peak.
//!
//! burn-train reads the device from threads of its own while the step runs: its metrics
//! thread reads each step's loss, logits and targets (one `Transaction`), its checkpointer
//! thread reads the model and optimizer records; validation runs on the inner backend
//! (`Swap<Flex>`, no autodiff) between epochs. What is compared: the trained model's
//! parameters and every metric file the learner wrote (train and valid, every epoch), byte
//! for byte.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use burn::backend::{Autodiff, Flex};
use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::InMemDataset;
use burn::module::AutodiffModule;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::{
    BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig, PaddingConfig2d, Relu,
};
use burn::optim::lr_scheduler::cosine::CosineAnnealingLrSchedulerConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::record::{BinFileRecorder, FullPrecisionSettings};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Int, Tensor, TensorData};
use burn_swap::{Policy, Swap, SwapConfig};
use burn_swap_harness::data::XorShift;
use burn_swap_harness::train::{Outcome, parameters};
use burn_swap_harness::verify::{every_policy, run_configured};
use burn_train::metric::{AccuracyMetric, LossMetric};
use burn_train::{
    ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep,
};

type Plain = Autodiff<Flex>;
type Swapped = Autodiff<Swap<Flex>>;

const SIDE: usize = 8;
const CLASSES: usize = 4;

/// One image and its class.
#[derive(Clone, Debug)]
struct Item {
    pixels: Vec<f32>,
    label: i64,
}

/// `count` images whose class is the quadrant holding their brightest patch, with noise.
fn items(seed: u64, count: usize) -> Vec<Item> {
    let mut rng = XorShift::new(seed);
    (0..count)
        .map(|_| {
            let label = (rng.next_u64() % CLASSES as u64) as i64;
            let mut pixels = rng.vec_f32(SIDE * SIDE, 0.5);
            let (row, col) = (
                (label as usize / 2) * SIDE / 2,
                (label as usize % 2) * SIDE / 2,
            );
            for r in row..row + SIDE / 2 {
                for c in col..col + SIDE / 2 {
                    pixels[r * SIDE + c] += 1.0;
                }
            }
            Item { pixels, label }
        })
        .collect()
}

#[derive(Clone, Debug)]
struct ImageBatch<B: Backend> {
    images: Tensor<B, 4>,
    targets: Tensor<B, 1, Int>,
}

#[derive(Clone, Default)]
struct ImageBatcher;

impl<B: Backend> Batcher<B, Item, ImageBatch<B>> for ImageBatcher {
    fn batch(&self, items: Vec<Item>, device: &B::Device) -> ImageBatch<B> {
        let n = items.len();
        let pixels: Vec<f32> = items
            .iter()
            .flat_map(|i| i.pixels.iter().copied())
            .collect();
        let labels: Vec<i64> = items.iter().map(|i| i.label).collect();
        ImageBatch {
            images: Tensor::from_data(TensorData::new(pixels, [n, 1, SIDE, SIDE]), device),
            targets: Tensor::from_data(TensorData::new(labels, [n]), device),
        }
    }
}

/// The book's guide model, smaller: two convolutions with batch norm, pooling, dropout and
/// two linear layers.
#[derive(Module, Debug)]
struct Net<B: Backend> {
    conv1: Conv2d<B>,
    norm1: Option<BatchNorm<B>>,
    conv2: Conv2d<B>,
    norm2: Option<BatchNorm<B>>,
    pool: AdaptiveAvgPool2d,
    dropout: Option<Dropout>,
    hidden: Linear<B>,
    out: Linear<B>,
    act: Relu,
}

impl<B: Backend> Net<B> {
    /// The guide's model; `plain`: without its batch norms and dropout, so that a validation
    /// step runs the very ops of a training step's forward pass.
    fn new(device: &B::Device, plain: bool) -> Self {
        let conv = |i, o| {
            Conv2dConfig::new([i, o], [3, 3])
                .with_padding(PaddingConfig2d::Same)
                .init(device)
        };
        Self {
            conv1: conv(1, 8),
            norm1: (!plain).then(|| BatchNormConfig::new(8).init(device)),
            conv2: conv(8, 8),
            norm2: (!plain).then(|| BatchNormConfig::new(8).init(device)),
            pool: AdaptiveAvgPool2dConfig::new([4, 4]).init(),
            dropout: (!plain).then(|| DropoutConfig::new(0.25).init()),
            hidden: LinearConfig::new(8 * 16, 32).init(device),
            out: LinearConfig::new(32, CLASSES).init(device),
            act: Relu::new(),
        }
    }

    fn classify(&self, batch: ImageBatch<B>) -> ClassificationOutput<B> {
        let norm = |norm: &Option<BatchNorm<B>>, x| match norm {
            Some(norm) => norm.forward(x),
            None => x,
        };
        let x = self
            .act
            .forward(norm(&self.norm1, self.conv1.forward(batch.images)));
        let x = self.act.forward(norm(&self.norm2, self.conv2.forward(x)));
        let x = self.pool.forward(x);
        let x = match &self.dropout {
            Some(dropout) => dropout.forward(x),
            None => x,
        }
        .flatten(1, 3);
        let output = self.out.forward(self.act.forward(self.hidden.forward(x)));
        let loss = CrossEntropyLossConfig::new()
            .init(&output.device())
            .forward(output.clone(), batch.targets.clone());
        ClassificationOutput::new(loss, output, batch.targets)
    }
}

impl<B: AutodiffBackend> TrainStep for Net<B> {
    type Input = ImageBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: ImageBatch<B>) -> TrainOutput<ClassificationOutput<B>> {
        let item = self.classify(batch);
        TrainOutput::new(self, item.loss.backward(), item)
    }
}

impl<B: Backend> InferenceStep for Net<B> {
    type Input = ImageBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: ImageBatch<B>) -> ClassificationOutput<B> {
        self.classify(batch)
    }
}

/// A directory of its own for each run.
fn artifacts() -> PathBuf {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("burn-swap-learner-{}-{run}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Every `.log` file under `dir` (metrics per split and epoch), by path, as one text.
fn metric_logs(dir: &Path) -> String {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "log")
                && path.file_name().is_some_and(|n| n != "experiment.log")
            {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files.sort();
    let mut text = String::new();
    for file in files {
        let relative = file.strip_prefix(dir).unwrap_or(&file);
        text.push_str(&format!("== {}\n", relative.display()));
        text.push_str(&std::fs::read_to_string(&file).unwrap_or_default());
    }
    text
}

/// Two epochs of the learner, six steps each; the outcome holds the metric logs' bytes after
/// the trained parameters.
fn run<B: AutodiffBackend>() -> Outcome {
    run_with::<B>(6)
}

/// Two epochs of `steps` steps of 16 images, batched on the calling thread.
fn run_with<B: AutodiffBackend>(steps: usize) -> Outcome {
    run_loading::<B>(steps, 0)
}

/// Two epochs of `steps` steps of 16 images, batched by `workers` threads of the data loader
/// (none: on the training thread).
fn run_loading<B: AutodiffBackend>(steps: usize, workers: usize) -> Outcome {
    run_model::<B>(steps, workers, (false, 2))
}

/// `epochs` epochs of `steps` steps of 16 images, batched by `workers` threads of the data
/// loader, each followed by a validation of two batches of 16; `plain`: the model without
/// batch norms and dropout ([`Net::new`]).
fn run_model<B: AutodiffBackend>(
    steps: usize,
    workers: usize,
    (plain, epochs): (bool, usize),
) -> Outcome {
    let device = B::Device::default();
    let _rng = burn_swap_harness::rng_lock();
    B::seed(&device, 21);
    let train = DataLoaderBuilder::<B, Item, ImageBatch<B>>::new(ImageBatcher)
        .batch_size(16)
        .shuffle(7)
        .num_workers(workers)
        .build(InMemDataset::new(items(3, 16 * steps)));
    let valid =
        DataLoaderBuilder::<B::InnerBackend, Item, ImageBatch<B::InnerBackend>>::new(ImageBatcher)
            .batch_size(16)
            .build(InMemDataset::new(items(4, 32)));
    let dir = artifacts();
    let training = SupervisedTraining::new(&dir, train, valid)
        .metric_train_numeric(AccuracyMetric::new())
        .metric_valid_numeric(AccuracyMetric::new())
        .metric_train_numeric(LossMetric::new())
        .metric_valid_numeric(LossMetric::new())
        .with_file_checkpointer(BinFileRecorder::<FullPrecisionSettings>::new())
        .num_epochs(epochs);
    let schedule = CosineAnnealingLrSchedulerConfig::new(5e-3, 12)
        .init()
        .expect("a valid schedule");
    let result = training.launch(Learner::new(
        Net::<B>::new(&device, plain),
        AdamConfig::new().init(),
        schedule,
    ));
    let mut params = parameters(&result.model);
    drop(result);
    let logs = metric_logs(&dir);
    assert!(
        logs.contains("train") && logs.contains("valid"),
        "the learner wrote no metric logs under {}:\n{logs}",
        dir.display()
    );
    let bytes = logs.into_bytes();
    let len = bytes.len();
    params.push(TensorData::new(bytes, [len]));
    let _ = std::fs::remove_dir_all(&dir);
    Outcome {
        losses: Vec::new(),
        params,
    }
}

/// The learner's loop without its threads: `epochs` epochs of ten steps of 16 images with Adam,
/// each followed by a validation of two batches (the inner backend's forward pass, its loss
/// read), all on the calling thread, so that the op stream is the same in every run. The
/// model is the plain one ([`Net::new`]): a validation batch begins with a training step's
/// forward ops. The outcome's losses are the training steps' and the validation batches'.
fn run_epochs_on_one_thread<B: AutodiffBackend>(epochs: usize) -> Outcome {
    let device = B::Device::default();
    let _rng = burn_swap_harness::rng_lock();
    B::seed(&device, 21);
    let mut model = Net::<B>::new(&device, true);
    let mut optim = AdamConfig::new().init();
    let train = items(3, 16 * 10);
    let valid = items(4, 32);
    let mut losses = Vec::new();
    for _ in 0..epochs {
        for chunk in train.chunks(16) {
            let batch = ImageBatcher.batch(chunk.to_vec(), &device);
            let loss = model.classify(batch).loss;
            losses.push(loss.clone().into_scalar().elem::<f32>());
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(5e-3, model, grads);
        }
        let inner = model.valid();
        for chunk in valid.chunks(16) {
            let batch = ImageBatcher.batch(chunk.to_vec(), &device);
            losses.push(inner.classify(batch).loss.into_scalar().elem::<f32>());
        }
    }
    Outcome {
        losses,
        params: parameters(&model),
    }
}

#[test]
fn burn_train_learner_with_metrics_checkpoints_and_validation() {
    every_policy("burn-train learner", run::<Plain>(), run::<Swapped>);
}

/// The metrics thread reads each step's outputs at a place among the next step's ops that
/// varies from step to step; the loop's schedule is found and holds through it, so `planned`
/// makes and follows plans (the recorder's tests pin the reorderings down deterministically).
#[test]
fn the_planned_policy_plans_under_the_learner_threads() {
    let device = burn::backend::flex::FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    run_with::<Swapped>(30);
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;
    let config = SwapConfig::budget_bytes(peak / 4)
        .with_policy(Policy::Planned)
        .with_background_planning(false)
        .with_plans_judged(false);
    burn_swap::configure(&device, config).unwrap();
    burn_swap::restart_trace(&device);
    burn_swap::reset_counters(&device);
    run_with::<Swapped>(30);
    let report = burn_swap::report(&device).unwrap();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    assert!(
        report.plan.plans > 0 && report.plan.planned_iterations > 0,
        "no plan was followed\n{report}"
    );
    assert!(
        report.memory.peak_bytes <= peak / 4,
        "over the budget\n{report}"
    );
}

/// The data loader's worker threads upload their batches (`from_data`) while the training
/// thread runs: under budgets that force offloads, every policy trains (the batches' order,
/// and so the values, vary from run to run in Burn alone too: nothing to compare bit for bit),
/// the counted peak stays within the budget, and the parameters come out finite.
#[test]
fn data_loader_workers_upload_under_the_budget() {
    let device = burn::backend::flex::FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    run_loading::<Swapped>(12, 3);
    let peak = burn_swap::report(&device).unwrap().memory.peak_bytes;
    for policy in Policy::ALL {
        for budget in [peak / 2, peak / 4] {
            let config = SwapConfig::budget_bytes(budget).with_policy(policy);
            burn_swap::configure(&device, config).unwrap();
            burn_swap::restart_trace(&device);
            burn_swap::reset_counters(&device);
            let outcome = run_loading::<Swapped>(12, 3);
            let report = burn_swap::report(&device).unwrap();
            let what = format!("{} at {budget} of {peak} bytes", policy.name());
            assert!(
                report.memory.peak_bytes <= budget,
                "{what}: over the budget\n{report}"
            );
            assert!(
                report.transfers.offloads + report.transfers.recomputes > 0,
                "{what}: nothing moved"
            );
            for data in &outcome.params[..outcome.params.len() - 1] {
                let values = data.to_vec::<f32>().unwrap();
                assert!(values.iter().all(|v| v.is_finite()), "{what}: {report}");
            }
        }
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

/// The validation tests' budgets: `swapped` run unbudgeted (its values checked against
/// `plain`, bit for bit), then two thirds and half of its counted peak and a third of it or
/// the smallest budget an op needs, whichever is larger. The peak comes back with them.
fn validation_budgets(
    device: &burn::backend::flex::FlexDevice,
    plain: &Outcome,
    swapped: impl FnOnce() -> Outcome,
) -> (u64, [u64; 3]) {
    let (unbudgeted, measured) = run_configured(device, SwapConfig::default(), swapped);
    plain.assert_same(&unbudgeted, "unbudgeted");
    let peak = measured.memory.peak_bytes;
    let minimum = measured.workload.minimum_budget_bytes;
    (peak, [peak * 2 / 3, peak / 2, (peak / 3).max(minimum)])
}

/// Validation between epochs runs the first ops of a training step (the forward pass of a
/// model without batch norms or dropout) and then stops: the training schedule's first ops
/// come back in each validation batch, and the epoch (ten steps and two validation batches)
/// repeats too. Under the planned policy, beside the learner's threads, the metrics and
/// parameters are Burn's alone, bit for bit, and the counted peak stays within the budget.
///
/// What the plans do here depends on the machine's load: the metrics thread reads each step's
/// outputs at a place among the next step's ops that moves with it, and a planner thread is
/// ready after a number of iterations that does too (on one loaded core the schedule was seen
/// lost for whole epochs). The plans' claims are checked on the same loop run on one thread
/// (the next test).
#[test]
fn validation_between_epochs_under_the_learner_threads() {
    let device = burn::backend::flex::FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let plain = run_model::<Plain>(10, 0, (true, 4));
    let (peak, budgets) =
        validation_budgets(&device, &plain, || run_model::<Swapped>(10, 0, (true, 4)));
    for budget in budgets {
        let config = SwapConfig::budget_bytes(budget)
            .with_policy(Policy::Planned)
            .with_plans_judged(false);
        let (swapped, report) =
            run_configured(&device, config, || run_model::<Swapped>(10, 0, (true, 4)));
        plain.assert_same(&swapped, &format!("planned at {budget} of {peak} bytes"));
        assert!(
            report.memory.peak_bytes <= budget,
            "over the budget of {budget} bytes\n{report}"
        );
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}

/// The loop of the test above on one thread ([`run_epochs_on_one_thread`]), its plans made on
/// the op's thread: the same ops in every run, so what the plans do is exact. After each
/// validation the step's schedule comes back and its plan is taken back, not made again (nor
/// made again because it does not fit: that happens a few times in a plan's life, not each
/// time its schedule comes back). Measured: one plan (two at the smallest budget), taken back
/// twice, followed over 23 of the 40 steps; after two epochs the epoch itself repeats and
/// becomes the period.
#[test]
fn validation_between_epochs_takes_the_steps_plan_back() {
    let device = burn::backend::flex::FlexDevice;
    let _guard = burn_swap_harness::swap_device_lock();
    let epochs = 4;
    let plain = run_epochs_on_one_thread::<Plain>(epochs);
    let (peak, budgets) = validation_budgets(&device, &plain, || {
        run_epochs_on_one_thread::<Swapped>(epochs)
    });
    for budget in budgets {
        let config = SwapConfig::budget_bytes(budget)
            .with_policy(Policy::Planned)
            .with_background_planning(false)
            .with_plans_judged(false);
        let (swapped, report) = run_configured(&device, config, || {
            run_epochs_on_one_thread::<Swapped>(epochs)
        });
        plain.assert_same(&swapped, &format!("planned at {budget} of {peak} bytes"));
        let plan = &report.plan;
        assert!(
            report.memory.peak_bytes <= budget,
            "over the budget of {budget} bytes\n{report}"
        );
        // One plan for the step, and, where it does not fit (the smallest budget), one more
        // from the next iteration's trace; taken back after the validations that follow, and
        // followed over at least half the steps.
        assert!(
            plan.plans <= 2 && plan.plans_reused >= 2 && plan.planned_iterations >= 20,
            "{} plans made, {} reused, {} iterations planned at {budget} bytes: {:?}\n{report}",
            plan.plans,
            plan.plans_reused,
            plan.planned_iterations,
            plan.plan_takeovers
        );
    }
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
}
