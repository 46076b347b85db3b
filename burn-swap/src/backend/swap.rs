//! `Swap<I>`: the backend type users name.

use core::marker::PhantomData;

use burn_backend::{
    DType, DTypeUsageSet, ExecutionError, TensorData,
    backend::{Backend, BackendTypes},
};
use burn_ir::BackendIr;
use burn_router::{BackendRouter, RouterTensor};

use super::registry::{self, DeviceKey};
use super::{SwapChannel, SwapClient};

/// The swap backend over the inner backend `I`: `Autodiff<Swap<I>>` trains like
/// `Autodiff<I>`, with the same values bit for bit, under a memory budget. Its device type is
/// `I`'s, so model code keeps its device values.
///
/// Ops that Burn's intermediate representation describes travel through burn-router's
/// `BackendRouter<SwapChannel<I>>` as `OperationIr`; the others (activations, sorts, layer
/// norm, ...) run natively on `I` through the same client. Either way, every tensor is known to
/// the swap client, which keeps the budget.
pub struct Swap<I> {
    _inner: PhantomData<fn() -> I>,
}

impl<I> core::fmt::Debug for Swap<I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Swap")
    }
}

impl<I> Clone for Swap<I> {
    fn clone(&self) -> Self {
        Self {
            _inner: PhantomData,
        }
    }
}

impl<I> Default for Swap<I> {
    fn default() -> Self {
        Self {
            _inner: PhantomData,
        }
    }
}

type R<I> = BackendRouter<SwapChannel<I>>;

/// The typed counterparts of [`crate::report`], [`crate::memory`] and [`crate::configure`]:
/// they reach the engine of this inner backend on `device` alone, when several inner
/// backends share a device.
impl<I: BackendIr> Swap<I> {
    /// What burn-swap did for inner backend `I` on `device`; `None` if it never ran there.
    pub fn report(device: &I::Device) -> Option<crate::report::Report> {
        registry::of::<I>(DeviceKey::of(device)).map(|c| c.report())
    }

    /// The counted bytes of inner backend `I` on `device`; `None` if it never ran there.
    pub fn memory(device: &I::Device) -> Option<crate::report::Memory> {
        registry::of::<I>(DeviceKey::of(device)).map(|c| c.memory())
    }

    /// Configures inner backend `I` on `device` alone, at once; all or nothing as
    /// [`crate::configure`]. An error when it never ran there (configure the device with
    /// [`crate::configure`] before its first use instead).
    pub fn configure(
        device: &I::Device,
        config: crate::config::SwapConfig,
    ) -> Result<(), crate::error::SwapError> {
        config.validate()?;
        match registry::of::<I>(DeviceKey::of(device)) {
            Some(control) => control.configure(config),
            None => Err(crate::error::SwapError::NotInUse {
                backend: I::name(device),
            }),
        }
    }
}

impl<I: BackendIr> BackendTypes for Swap<I> {
    type Device = I::Device;
    type FloatTensorPrimitive = RouterTensor<SwapClient<I>>;
    type FloatElem = I::FloatElem;
    type IntTensorPrimitive = RouterTensor<SwapClient<I>>;
    type IntElem = I::IntElem;
    type BoolTensorPrimitive = RouterTensor<SwapClient<I>>;
    type BoolElem = I::BoolElem;
    type QuantizedTensorPrimitive = super::SwapQTensor<I>;
}

impl<I: BackendIr> Backend for Swap<I> {
    fn name(device: &Self::Device) -> String {
        format!("swap<{}>", I::name(device))
    }

    fn seed(device: &Self::Device, seed: u64) {
        <R<I> as Backend>::seed(device, seed)
    }

    fn sync(device: &Self::Device) -> Result<(), ExecutionError> {
        <R<I> as Backend>::sync(device)
    }

    fn dtype_usage(device: &Self::Device, dtype: DType) -> DTypeUsageSet {
        I::dtype_usage(device, dtype)
    }

    fn device_count(type_id: u16) -> usize {
        I::device_count(type_id)
    }

    /// Cleans the streams of the calling thread and of burn-swap's transfer workers on
    /// `device`: every pool burn-swap's device work reserves.
    fn memory_cleanup(device: &Self::Device) {
        I::memory_cleanup(device);
        if let Some(control) = registry::of::<I>(DeviceKey::of(device)) {
            control.allocator_cleanup();
        }
    }

    /// Forwarded, so that what Burn allocates as persistent (parameters as they are made or
    /// loaded) lands where the inner backend puts it: in CubeCL's exact-size pool. Under a
    /// budget every buffer burn-swap's streams make is exact-size already (`exec::pools`),
    /// and `func` runs as it is, so that the scope's end does not switch that off.
    fn memory_persistent_allocations<
        Output: Send,
        Input: Send,
        Func: Fn(Input) -> Output + Send,
    >(
        device: &Self::Device,
        input: Input,
        func: Func,
    ) -> Output {
        let budgeted = registry::of::<I>(DeviceKey::of(device))
            .is_some_and(|control| control.memory().budget_bytes.is_some());
        if budgeted {
            func(input)
        } else {
            I::memory_persistent_allocations(device, input, func)
        }
    }

    fn staging<'a, Iter>(data: Iter, device: &Self::Device)
    where
        Iter: Iterator<Item = &'a mut TensorData>,
    {
        I::staging(data, device)
    }
}
