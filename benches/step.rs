//! One training step on `Autodiff<Flex>` and on `Autodiff<Swap<Flex>>` with no budget, in
//! the same process: the cost of interception, bookkeeping and tracing on a real step.
//!
//! - an MLP of realistic size (width 1024, batch 256, Adam): ops of tens of microseconds.
//!   Target: ratio ≤ 1.03.
//! - the op-bound LSTM (`LstmNetConfig::op_bound`: thousands of ops of about a microsecond
//!   per step): what is left is the route each op takes. Target: ratio ≤ 1.15.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use burn_swap::{Swap, SwapConfig};
use burn_swap_harness::models::{LstmNet, LstmNetConfig, Mlp, MlpConfig};
use burn_swap_harness::train::{init_mlp, init_seeded};
use criterion::{Criterion, criterion_group, criterion_main};

/// Benchmarks one Adam step of `model` (its loss for step `n` from `loss_of`), each
/// iteration a new batch.
fn bench_training<B, M>(
    c: &mut Criterion,
    name: &str,
    model: M,
    lr: f64,
    loss_of: impl Fn(&M, usize) -> Tensor<B, 1>,
) where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
{
    let mut model = Some(model);
    let mut optimizer = AdamConfig::new().init::<B, M>();
    let mut step = 0;
    c.bench_function(name, |b| {
        b.iter(|| {
            let m = model.take().unwrap();
            let loss = loss_of(&m, step);
            let grads = GradientsParams::from_grads(loss.backward(), &m);
            model = Some(optimizer.step(lr, m, grads));
            step += 1;
        })
    });
}

fn bench_mlp<B: AutodiffBackend>(c: &mut Criterion, name: &str)
where
    Mlp<B>: AutodiffModule<B>,
{
    let config = MlpConfig::bench();
    let device = Default::default();
    let model = init_mlp::<B>(&config, &device, 1);
    bench_training(c, name, model, 1e-4, |m: &Mlp<B>, step| {
        m.loss(&config, step, &device)
    });
}

fn bench_lstm<B: AutodiffBackend>(c: &mut Criterion, name: &str)
where
    LstmNet<B>: AutodiffModule<B>,
{
    let config = LstmNetConfig::op_bound();
    let device = Default::default();
    let model = init_seeded::<B, _>(&device, 1, || config.init(&device));
    bench_training(c, name, model, 1e-3, |m: &LstmNet<B>, step| {
        m.loss(&config, step, &device)
    });
}

fn step(c: &mut Criterion) {
    burn_swap::configure(&FlexDevice, SwapConfig::default()).unwrap();
    // Interleaved, so that drift of the machine shows as a difference between the two runs
    // of the same backend rather than as an overhead.
    bench_mlp::<Autodiff<Flex>>(c, "mlp_step/autodiff_flex_1");
    bench_mlp::<Autodiff<Swap<Flex>>>(c, "mlp_step/autodiff_swap_flex_1");
    bench_mlp::<Autodiff<Flex>>(c, "mlp_step/autodiff_flex_2");
    bench_mlp::<Autodiff<Swap<Flex>>>(c, "mlp_step/autodiff_swap_flex_2");
    bench_lstm::<Autodiff<Flex>>(c, "lstm_step/autodiff_flex_1");
    bench_lstm::<Autodiff<Swap<Flex>>>(c, "lstm_step/autodiff_swap_flex_1");
    bench_lstm::<Autodiff<Flex>>(c, "lstm_step/autodiff_flex_2");
    bench_lstm::<Autodiff<Swap<Flex>>>(c, "lstm_step/autodiff_swap_flex_2");
    // The trace's share: the same step with it off.
    burn_swap::configure(&FlexDevice, SwapConfig::default().with_trace(false)).unwrap();
    bench_lstm::<Autodiff<Swap<Flex>>>(c, "lstm_step/autodiff_swap_flex_untraced");
    bench_lstm::<Autodiff<Flex>>(c, "lstm_step/autodiff_flex_3");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = step
}
criterion_main!(benches);
