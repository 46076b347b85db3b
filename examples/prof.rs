//! Instruction counts per op for the book: run under `valgrind --tool=callgrind`.
//! Usage: prof flex|router|traced|untraced (17 ops per loop, 20,000 loops)
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
fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let device = burn::backend::flex::FlexDevice;
    match mode.as_str() {
        "flex" => run::<Flex>(),
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
