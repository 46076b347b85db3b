//! The interception cost per op on tiny tensors: the same chain of elementwise ops on
//!
//! - `Flex` alone,
//! - burn-router alone (`BackendRouter` over a channel whose client is burn-router's plain
//!   `Runner<Flex>`): the cost of the IR route, which burn-swap cannot go below,
//! - `Swap<Flex>` with the trace on, with it off, and with burn-swap disabled.
//!
//! burn-swap's own cost per op is `swap - router`. Target: ≤ 300 ns per op in all.

use burn::backend::Flex;
use burn::backend::flex::FlexDevice;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use burn_swap::{Swap, SwapConfig};
use burn_swap_harness::baseline::BareRouter;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const OPS: u64 = 64;

fn chain<B: Backend>(x: &Tensor<B, 1>) -> Tensor<B, 1> {
    let mut y = x.clone();
    for _ in 0..OPS / 2 {
        y = (y * 1.0001) + 0.5;
    }
    y
}

fn bench<B: Backend>(c: &mut Criterion, name: &str) {
    let device = Default::default();
    let x = Tensor::<B, 1>::from_floats([1.0, 2.0, 3.0, 4.0], &device);
    let mut group = c.benchmark_group("intercept");
    group.throughput(Throughput::Elements(OPS));
    group.bench_function(name, |b| b.iter(|| chain(&x)));
    group.finish();
}

fn intercept(c: &mut Criterion) {
    let device = FlexDevice;
    bench::<Flex>(c, "flex");
    bench::<BareRouter<Flex>>(c, "router_flex");
    burn_swap::configure(&device, SwapConfig::default()).unwrap();
    bench::<Swap<Flex>>(c, "swap_flex_traced");
    burn_swap::configure(&device, SwapConfig::default().with_trace(false)).unwrap();
    bench::<Swap<Flex>>(c, "swap_flex_untraced");
    burn_swap::configure(&device, SwapConfig::default().with_enabled(false)).unwrap();
    bench::<Swap<Flex>>(c, "swap_flex_disabled");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = intercept
}
criterion_main!(benches);
