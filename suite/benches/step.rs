//! One training step of an MLP of realistic size (width 1024, batch 256, Adam) on
//! `Autodiff<Flex>` and on `Autodiff<Swap<Flex>>` with no budget, in the same process: the
//! cost of interception, bookkeeping and tracing on a real step. Target: ratio ≤ 1.03.

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn_swap::{Swap, SwapConfig};
use burn_swap_suite::models::{Mlp, MlpConfig};
use burn_swap_suite::train::init_mlp;
use criterion::{Criterion, criterion_group, criterion_main};

fn bench_backend<B: AutodiffBackend>(c: &mut Criterion, name: &str)
where
    Mlp<B>: AutodiffModule<B>,
{
    let config = MlpConfig::bench();
    let device = Default::default();
    let mut model = Some(init_mlp::<B>(&config, &device, 1));
    let mut optimizer = AdamConfig::new().init::<B, Mlp<B>>();
    let mut step = 0;
    c.bench_function(name, |b| {
        b.iter(|| {
            let m = model.take().unwrap();
            let loss = m.loss(&config, step, &device);
            let grads = GradientsParams::from_grads(loss.backward(), &m);
            model = Some(optimizer.step(1e-4, m, grads));
            step += 1;
        })
    });
}

fn step(c: &mut Criterion) {
    burn_swap::configure(&FlexDevice, SwapConfig::default()).unwrap();
    // Interleaved, so that drift of the machine shows as a difference between the two runs
    // of the same backend rather than as an overhead.
    bench_backend::<Autodiff<Flex>>(c, "mlp_step/autodiff_flex_1");
    bench_backend::<Autodiff<Swap<Flex>>>(c, "mlp_step/autodiff_swap_flex_1");
    bench_backend::<Autodiff<Flex>>(c, "mlp_step/autodiff_flex_2");
    bench_backend::<Autodiff<Swap<Flex>>>(c, "mlp_step/autodiff_swap_flex_2");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = step
}
criterion_main!(benches);
