//! burn-router with no decorator, the floor of any backend that takes the IR route: the
//! benches measure burn-swap's own cost against it.

use core::marker::PhantomData;

use burn::tensor::{DType, Shape};
use burn_ir::{BackendIr, TensorIr};
use burn_router::{BackendRouter, RouterTensor, Runner, RunnerChannel};
use burn_swap::unstable::SwapBridge;

/// A router channel whose client is burn-router's plain `Runner<B>`.
pub struct BareChannel<B>(PhantomData<fn() -> B>);

/// burn-router over `B` alone.
pub type BareRouter<B> = BackendRouter<BareChannel<B>>;

impl<B> Clone for BareChannel<B> {
    fn clone(&self) -> Self {
        Self(PhantomData)
    }
}

impl<B: BackendIr> RunnerChannel for BareChannel<B> {
    type Device = B::Device;
    type Bridge = SwapBridge<B>;
    type Client = Runner<B>;
    type FloatElem = B::FloatElem;
    type IntElem = B::IntElem;
    type BoolElem = B::BoolElem;

    fn name(device: &Self::Device) -> String {
        format!("router<{}>", B::name(device))
    }

    fn init_client(device: &Self::Device) -> Self::Client {
        Runner::new(device.clone())
    }

    fn get_tensor_handle(tensor: &TensorIr, client: &Self::Client) -> B::Handle {
        client.get_tensor_handle(tensor)
    }

    fn register_tensor(
        client: &Self::Client,
        handle: B::Handle,
        shape: Shape,
        dtype: DType,
    ) -> RouterTensor<Self::Client> {
        client.register_tensor(handle, shape, dtype, client.clone())
    }
}
