//! The process-wide table of swap devices, so that [`crate::configure`], [`crate::report`] and
//! [`crate::trace`] reach a device's engine from its device value alone.
//!
//! An engine is keyed by its inner backend's type and its device (the device's type and
//! id), as burn-router keys its clients: `Swap<X>` and `Swap<Y>` on devices with the same id
//! keep separate books. The untyped functions reach every engine of a device; the typed ones
//! on [`crate::Swap`] reach one.

use core::any::TypeId;
use std::sync::{Arc, Mutex, PoisonError};

use burn_backend::backend::{DeviceId, DeviceOps};

use crate::config::SwapConfig;
use crate::error::SwapError;
use crate::report::Report;
use crate::trace::Trace;

/// What the public functions can do with a device's client, whatever its inner backend.
pub(crate) trait DeviceControl: Send + Sync {
    fn configure(&self, config: SwapConfig) -> Result<(), SwapError>;
    fn report(&self) -> Report;
    fn memory(&self) -> crate::report::Memory;
    fn reset_counters(&self);
    fn restart_trace(&self);
    fn trace(&self) -> Option<Trace>;
    fn profile(&self) -> Option<crate::plan::profile::Profile>;
    fn measure_transfers(&self, sizes: &[u64]) -> Option<crate::plan::profile::Links>;
    fn forget_links(&self);
    fn trace_window(&self) -> Trace;
    fn hold_resident(&self);
    /// Gives the idle buffers and free pages of every stream burn-swap uses on the device
    /// back (CubeCL backends; nothing elsewhere).
    fn allocator_cleanup(&self) {}
}

/// A device: the type of its value and its id.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct DeviceKey {
    kind: TypeId,
    id: DeviceId,
}

impl DeviceKey {
    pub fn of<D: DeviceOps + 'static>(device: &D) -> Self {
        Self {
            kind: TypeId::of::<D>(),
            id: device.id(),
        }
    }
}

struct Slot {
    backend: TypeId,
    device: DeviceKey,
    control: Arc<dyn DeviceControl>,
}

#[derive(Default)]
struct Registry {
    engines: Vec<Slot>,
    /// The configuration given to each device, for the engines made on it later.
    configs: Vec<(DeviceKey, SwapConfig)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    engines: Vec::new(),
    configs: Vec::new(),
});

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    f(&mut registry)
}

/// Registers the engine of inner backend `B` on `device` (replacing an earlier one).
pub(crate) fn register<B: 'static>(device: DeviceKey, control: Arc<dyn DeviceControl>) {
    let backend = TypeId::of::<B>();
    with(|r| {
        r.engines
            .retain(|s| !(s.backend == backend && s.device == device));
        r.engines.push(Slot {
            backend,
            device,
            control,
        });
    });
}

/// Every engine on `device`, oldest first.
pub(crate) fn all(device: DeviceKey) -> Vec<Arc<dyn DeviceControl>> {
    with(|r| {
        r.engines
            .iter()
            .filter(|s| s.device == device)
            .map(|s| s.control.clone())
            .collect()
    })
}

/// The first engine made on `device`.
pub(crate) fn first(device: DeviceKey) -> Option<Arc<dyn DeviceControl>> {
    with(|r| {
        r.engines
            .iter()
            .find(|s| s.device == device)
            .map(|s| s.control.clone())
    })
}

/// The engine of inner backend `B` on `device`.
pub(crate) fn of<B: 'static>(device: DeviceKey) -> Option<Arc<dyn DeviceControl>> {
    let backend = TypeId::of::<B>();
    with(|r| {
        r.engines
            .iter()
            .find(|s| s.backend == backend && s.device == device)
            .map(|s| s.control.clone())
    })
}

/// Remembers `config` as the configuration of engines made on `device` from now on.
pub(crate) fn set_config(device: DeviceKey, config: SwapConfig) {
    with(|r| {
        r.configs.retain(|(d, _)| *d != device);
        r.configs.push((device, config));
    });
}

/// The configuration given to `device`, if any.
pub(crate) fn config(device: DeviceKey) -> Option<SwapConfig> {
    with(|r| {
        r.configs
            .iter()
            .find(|(d, _)| *d == device)
            .map(|(_, c)| c.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::flex::FlexDevice;

    /// A device's engine that only knows its own resident bytes.
    struct Books(u64);

    impl DeviceControl for Books {
        fn configure(&self, _: SwapConfig) -> Result<(), SwapError> {
            Ok(())
        }
        fn report(&self) -> Report {
            unimplemented!("not needed")
        }
        fn memory(&self) -> crate::report::Memory {
            crate::report::Memory {
                resident_bytes: self.0,
                peak_bytes: self.0,
                host_bytes: 0,
                pinned_host_bytes: 0,
                budget_bytes: None,
            }
        }
        fn reset_counters(&self) {}
        fn restart_trace(&self) {}
        fn trace(&self) -> Option<Trace> {
            None
        }
        fn profile(&self) -> Option<crate::plan::profile::Profile> {
            None
        }
        fn measure_transfers(&self, _: &[u64]) -> Option<crate::plan::profile::Links> {
            None
        }
        fn forget_links(&self) {}
        fn trace_window(&self) -> Trace {
            unimplemented!("not needed")
        }
        fn hold_resident(&self) {}
    }

    /// A device value of another type with the same id as `FlexDevice`'s.
    #[derive(Clone, Debug, Default, PartialEq)]
    struct Twin;

    impl burn_backend::backend::Device for Twin {
        fn to_id(&self) -> DeviceId {
            FlexDevice.id()
        }
        fn from_id(_: DeviceId) -> Self {
            Twin
        }
    }
    impl DeviceOps for Twin {}

    #[test]
    fn two_inner_backends_on_one_device_keep_separate_books() {
        let flex = DeviceKey::of(&Twin);
        // Two inner backends (named by any two types here) on one device.
        register::<[u8; 1]>(flex, Arc::new(Books(100)));
        register::<[u8; 2]>(flex, Arc::new(Books(200)));
        let resident = |c: Option<Arc<dyn DeviceControl>>| c.unwrap().memory().resident_bytes;
        assert_eq!(resident(of::<[u8; 1]>(flex)), 100);
        assert_eq!(resident(of::<[u8; 2]>(flex)), 200);
        assert_eq!(all(flex).len(), 2);
        // A new engine of one backend replaces only its own.
        register::<[u8; 1]>(flex, Arc::new(Books(150)));
        assert_eq!(resident(of::<[u8; 1]>(flex)), 150);
        assert_eq!(resident(of::<[u8; 2]>(flex)), 200);
        // A device of another type with the same id is another device.
        assert_eq!(FlexDevice.id(), Twin.id());
        assert_ne!(DeviceKey::of(&FlexDevice), flex);
    }
}
