// burn-swap's stand-in for burn-backend-tests' `tests/common/backend.rs`: the backend under
// test is `burn_swap::Swap<burn::backend::Flex>`; its budget and policy come from the `BURN_SWAP_*` variables.
use ctor::ctor;

use super::{FloatElem, IntElem};

pub type TestBackend = burn_swap::Swap<burn::backend::Flex>;

/// The backend the autodiff tests' checkpointed variant wraps.
#[allow(unused)]
pub type Inner = burn_swap::Swap<burn::backend::Flex>;

#[ctor]
fn init_device_settings() {
    burn_tensor::set_default_dtypes::<TestBackend>(
        &burn::backend::flex::FlexDevice,
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

/// `Swap<Flex>`'s default quantization scheme (Flex's), for the tests that ask the dispatch
/// backend for its own.
#[allow(unused)]
pub fn default_quant_scheme(
    _device: &burn::backend::flex::FlexDevice,
) -> burn_tensor::quantization::QuantScheme {
    use burn_tensor::quantization::QTensorPrimitive;
    <burn_tensor::ops::QuantizedTensor<Inner> as QTensorPrimitive>::default_scheme()
}
