//! Workloads for instruction counts under `valgrind --tool=callgrind` (the book's
//! *Measurements*): exact and repeatable where wall-clock time on a shared machine is not.
//!
//! ```text
//! prof flex|router|untraced|traced   # 20,000 × 17 tiny elementwise ops
//! prof step-flex|step-swap           # 3 training steps of the benches' MLP
//! ```

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn_swap::{Swap, SwapConfig};
use burn_swap_suite::baseline::BareRouter;
use burn_swap_suite::models::{Mlp, MlpConfig};
use burn_swap_suite::train::{init_mlp, train_loop};

fn tiny_ops<B: Backend>() {
    let device = Default::default();
    let x = Tensor::<B, 1>::from_floats([1.0, 2.0, 3.0, 4.0], &device);
    for _ in 0..20_000 {
        let mut y = x.clone();
        for _ in 0..8 {
            y = (y * 1.0001) + 0.5;
        }
        std::hint::black_box(y);
    }
}

fn steps<B: AutodiffBackend>() {
    let config = MlpConfig::bench();
    let device = Default::default();
    let model = init_mlp::<B>(&config, &device, 1);
    let (_model, losses) = train_loop(
        model,
        3,
        1e-4,
        |m: &Mlp<B>, s| m.loss(&config, s, &device),
        |_, _| {},
    );
    std::hint::black_box(losses);
}

fn main() {
    let device = FlexDevice;
    match std::env::args().nth(1).as_deref() {
        Some("flex") => tiny_ops::<Flex>(),
        Some("router") => tiny_ops::<BareRouter<Flex>>(),
        Some("untraced") => {
            burn_swap::configure(&device, SwapConfig::default().with_trace(false)).unwrap();
            tiny_ops::<Swap<Flex>>()
        }
        Some("traced") => tiny_ops::<Swap<Flex>>(),
        Some("step-flex") => steps::<Autodiff<Flex>>(),
        Some("step-swap") => steps::<Autodiff<Swap<Flex>>>(),
        _ => eprintln!("usage: prof flex|router|untraced|traced|step-flex|step-swap"),
    }
}
