// burn-swap's stand-in for burn-backend-tests' `tests/common/autodiff.rs`: the autodiff
// tests on `Autodiff<Swap<B>>`, then again with Burn's balanced checkpointing.

pub use super::*;

pub struct AutodiffDevice;

impl AutodiffDevice {
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> super::TestDevice {
        Default::default()
    }
}

#[path = "../autodiff/mod.rs"]
mod base;

mod checkpointing {
    pub use super::FloatElem;
    pub type TestBackend = burn::backend::Autodiff<
        super::Inner,
        burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing,
    >;
    pub type TestTensor<const D: usize> = burn_tensor::Tensor<TestBackend, D>;
    pub type TestTensorInt<const D: usize> = burn_tensor::Tensor<TestBackend, D, burn_tensor::Int>;
    pub type TestTensorBool<const D: usize> = burn_tensor::Tensor<TestBackend, D, burn_tensor::Bool>;

    pub struct AutodiffDevice;

    impl AutodiffDevice {
        #[allow(clippy::new_ret_no_self)]
        pub fn new() -> super::TestDevice {
            Default::default()
        }
    }

    include!("../autodiff/mod.rs");
}
