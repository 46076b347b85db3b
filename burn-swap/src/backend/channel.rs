//! The router channel that puts the swap client between Burn and the inner backend.

use core::marker::PhantomData;

use burn_backend::{DType, Shape};
use burn_ir::{BackendIr, TensorHandle, TensorIr};
use burn_router::{MultiBackendBridge, RouterTensor, RunnerChannel};

use super::client::SwapClient;

/// The channel of [`crate::Swap`]: one [`SwapClient`] per device, over the inner backend `B`.
pub struct SwapChannel<B> {
    _backend: PhantomData<fn() -> B>,
}

impl<B> Clone for SwapChannel<B> {
    fn clone(&self) -> Self {
        Self {
            _backend: PhantomData,
        }
    }
}

impl<B: BackendIr> RunnerChannel for SwapChannel<B> {
    type Device = B::Device;
    type Bridge = SwapBridge<B>;
    type Client = SwapClient<B>;
    type FloatElem = B::FloatElem;
    type IntElem = B::IntElem;
    type BoolElem = B::BoolElem;

    fn name(device: &Self::Device) -> String {
        format!("swap<{}>", B::name(device))
    }

    fn init_client(device: &Self::Device) -> Self::Client {
        SwapClient::new(device)
    }

    fn get_tensor_handle(tensor: &TensorIr, client: &Self::Client) -> B::Handle {
        client.take_handle(tensor)
    }

    fn register_tensor(
        client: &Self::Client,
        handle: B::Handle,
        shape: Shape,
        dtype: DType,
    ) -> RouterTensor<Self::Client> {
        let id = client.register_handle(handle, shape.clone(), dtype);
        RouterTensor::new(id, shape, dtype, client.clone())
    }
}

/// Moves tensors between devices of the one inner backend with its own `to_device`.
pub struct SwapBridge<B> {
    _backend: PhantomData<fn() -> B>,
}

impl<B: BackendIr> MultiBackendBridge for SwapBridge<B> {
    type TensorHandle = B::Handle;
    type Device = B::Device;

    fn change_backend_float(handle: B::Handle, shape: Shape, target: &B::Device) -> B::Handle {
        let tensor = B::float_tensor(TensorHandle { handle, shape });
        B::float_tensor_handle(B::float_to_device(tensor, target))
    }

    fn change_backend_int(handle: B::Handle, shape: Shape, target: &B::Device) -> B::Handle {
        let tensor = B::int_tensor(TensorHandle { handle, shape });
        B::int_tensor_handle(B::int_to_device(tensor, target))
    }

    fn change_backend_bool(handle: B::Handle, shape: Shape, target: &B::Device) -> B::Handle {
        let tensor = B::bool_tensor(TensorHandle { handle, shape });
        B::bool_tensor_handle(B::bool_to_device(tensor, target))
    }
}
