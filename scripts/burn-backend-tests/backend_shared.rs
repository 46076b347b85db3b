// The part of burn-swap's stand-ins for burn-backend-tests' backend file that the tensor and
// the autodiff tests share (`include!`d after their `TestBackend`).
use ctor::ctor;

use super::{FloatElem, IntElem};

/// The backend the tests run on, and the one the autodiff tests' checkpointed variant wraps.
#[cfg(not(feature = "cube"))]
pub type Inner = burn_swap::Swap<burn::backend::Flex>;
#[cfg(feature = "cube")]
pub type Inner = burn_swap::Swap<burn_swap::unstable::CubeWgpu>;

/// The device of the backend under test.
pub type TestDevice = <Inner as burn_tensor::backend::BackendTypes>::Device;

#[ctor]
fn init_device_settings() {
    burn_tensor::set_default_dtypes::<TestBackend>(
        &TestDevice::default(),
        <FloatElem as burn_tensor::Element>::dtype(),
        <IntElem as burn_tensor::Element>::dtype(),
    )
    .unwrap();
}

#[allow(unused)]
pub mod prelude {
    pub use burn_tensor::Tensor;

    use super::*;
    pub type TestTensor<const D: usize> = Tensor<TestBackend, D>;
    pub type TestTensorInt<const D: usize> = Tensor<TestBackend, D, burn_tensor::Int>;
    pub type TestTensorBool<const D: usize> = Tensor<TestBackend, D, burn_tensor::Bool>;
}

#[allow(unused)]
pub use prelude::*;

/// The inner backend's default quantization scheme (`Swap`'s), for the tests that ask the
/// dispatch backend for its own.
#[allow(unused)]
pub fn default_quant_scheme(_device: &TestDevice) -> burn_tensor::quantization::QuantScheme {
    use burn_tensor::quantization::QTensorPrimitive;
    <burn_tensor::ops::QuantizedTensor<Inner> as QTensorPrimitive>::default_scheme()
}
