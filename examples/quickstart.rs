//! The two lines a model adds to train under burn-swap: `configure` before the training
//! loop, `report` after it. Everything else is a plain Burn training loop, and the backend
//! type is switched by a cargo feature, so that the same code trains on the unwrapped
//! backend too, with the same losses bit for bit.
//!
//! ```text
//! cargo run --example quickstart --features swap      # under a 4 MiB budget
//! cargo run --example quickstart                      # plain Autodiff<Flex>
//! ```

use burn::backend::flex::FlexDevice;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::{Tensor, TensorData, backend::Backend as BackendTrait};

// The one type that changes.
#[cfg(feature = "swap")]
type Backend = burn::backend::Autodiff<burn_swap::Swap<burn::backend::Flex>>;
#[cfg(not(feature = "swap"))]
type Backend = burn::backend::Autodiff<burn::backend::Flex>;

#[derive(Module, Debug)]
struct Mlp<B: BackendTrait> {
    input: Linear<B>,
    hidden: Linear<B>,
    output: Linear<B>,
    relu: Relu,
}

impl<B: BackendTrait> Mlp<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            input: LinearConfig::new(64, 512).init(device),
            hidden: LinearConfig::new(512, 512).init(device),
            output: LinearConfig::new(512, 1).init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let x = self.relu.forward(self.input.forward(x));
        let x = self.relu.forward(self.hidden.forward(x));
        self.output.forward(x)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = FlexDevice;
    Backend::seed(&device, 42);

    // Line one: the budget (or set BURN_SWAP_BUDGET=4MiB and leave the code alone).
    #[cfg(feature = "swap")]
    burn_swap::configure(&device, burn_swap::SwapConfig::budget_bytes(4 << 20))?;

    let mut model = Mlp::<Backend>::new(&device);
    let mut optimizer = AdamConfig::new().init();
    for step in 0..10 {
        let x: Vec<f32> = (0..128 * 64)
            .map(|i| ((i * 7 + step) % 13) as f32 / 13.0)
            .collect();
        let x = Tensor::<Backend, 2>::from_data(TensorData::new(x, [128, 64]), &device);
        let y = x.clone().sum_dim(1).div_scalar(64.0);
        let loss = (model.forward(x) - y).powi_scalar(2).mean();
        let value: f32 = loss.clone().into_scalar();
        println!(
            "step {step}: loss {value:.6} (bits {:#010x})",
            value.to_bits()
        );
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(1e-3, model, grads);
    }

    // Line two: what burn-swap did (peak against the budget, offloads, recomputations).
    #[cfg(feature = "swap")]
    if let Some(report) = burn_swap::report(&device) {
        println!("{report}");
    }
    Ok(())
}
