//! Instruction counts per op for the book: run under `valgrind --tool=callgrind`.
//! Usage: prof flex|router|traced|untraced (17 ops per loop, 20,000 loops), or
//! prof step-flex|step-swap (3 training steps of the bench's MLP: width 1024, batch 256)
use burn::backend::Flex;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
fn run<B: Backend>() {
    let device = Default::default();
    let x = Tensor::<B, 1>::from_floats([1.0, 2.0, 3.0, 4.0], &device);
    for _ in 0..20000 {
        let mut y = x.clone();
        for _ in 0..8 {
            y = (y * 1.0001) + 0.5;
        }
        std::hint::black_box(y);
    }
}
/// burn-router with no decorator: its runner is the client.
struct Bare<B>(std::marker::PhantomData<fn() -> B>);
impl<B> Clone for Bare<B> {
    fn clone(&self) -> Self {
        Self(std::marker::PhantomData)
    }
}
impl<B: burn_ir::BackendIr> burn_router::RunnerChannel for Bare<B> {
    type Device = B::Device;
    type Bridge = burn_swap::SwapBridge<B>;
    type Client = burn_router::Runner<B>;
    type FloatElem = B::FloatElem;
    type IntElem = B::IntElem;
    type BoolElem = B::BoolElem;
    fn name(device: &Self::Device) -> String {
        B::name(device)
    }
    fn init_client(device: &Self::Device) -> Self::Client {
        burn_router::Runner::new(device.clone())
    }
    fn get_tensor_handle(tensor: &burn_ir::TensorIr, client: &Self::Client) -> B::Handle {
        client.get_tensor_handle(tensor)
    }
    fn register_tensor(
        client: &Self::Client,
        handle: B::Handle,
        shape: burn::tensor::Shape,
        dtype: burn::tensor::DType,
    ) -> burn_router::RouterTensor<Self::Client> {
        client.register_tensor(handle, shape, dtype, client.clone())
    }
}
fn steps<B: burn::tensor::backend::AutodiffBackend>() {
    use burn_swap_suite::models::{Mlp, MlpConfig};
    let config = MlpConfig {
        d_in: 1024,
        hidden: 1024,
        depth: 4,
        d_out: 16,
        batch: 256,
        seed: 5,
    };
    let device = Default::default();
    let model = burn_swap_suite::train::init_mlp::<B>(&config, &device, 1);
    let (_m, losses) = burn_swap_suite::train::train_loop(
        model,
        3,
        1e-4,
        |m: &Mlp<B>, s| m.loss(&config, s, &device),
        |_, _| {},
    );
    std::hint::black_box(losses);
}
fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let device = burn::backend::flex::FlexDevice;
    match mode.as_str() {
        "flex" => run::<Flex>(),
        "step-flex" => steps::<burn::backend::Autodiff<Flex>>(),
        "step-swap" => steps::<burn::backend::Autodiff<burn_swap::Swap<Flex>>>(),
        "router" => run::<burn_router::BackendRouter<Bare<Flex>>>(),
        "untraced" => {
            burn_swap::configure(&device, burn_swap::SwapConfig::default().with_trace(false))
                .unwrap();
            run::<burn_swap::Swap<Flex>>()
        }
        _ => {
            burn_swap::configure(&device, burn_swap::SwapConfig::default()).unwrap();
            run::<burn_swap::Swap<Flex>>()
        }
    }
}
