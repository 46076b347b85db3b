//! The process-wide table of swap devices, so that [`crate::configure`], [`crate::report`] and
//! [`crate::trace`] reach a device's client from its device value alone.

use std::sync::{Arc, Mutex, PoisonError};

use burn_backend::backend::DeviceId;

use crate::config::SwapConfig;
use crate::error::SwapError;
use crate::report::Report;
use crate::trace::Trace;

/// What the public functions can do with a device's client, whatever its inner backend.
pub(crate) trait DeviceControl: Send + Sync {
    fn configure(&self, config: SwapConfig) -> Result<(), SwapError>;
    fn report(&self) -> Report;
    fn memory(&self) -> crate::Memory;
    fn reset_counters(&self);
    fn restart_trace(&self);
    fn trace(&self) -> Option<Trace>;
    fn profile(&self) -> Option<crate::plan::profile::Profile>;
    fn measure_transfers(&self, sizes: &[u64]) -> Option<crate::plan::profile::Links>;
    fn trace_window(&self) -> Trace;
}

#[derive(Default)]
struct Registry {
    devices: Vec<(DeviceId, Arc<dyn DeviceControl>)>,
    pending: Vec<(DeviceId, SwapConfig)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    devices: Vec::new(),
    pending: Vec::new(),
});

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    f(&mut registry)
}

pub(crate) fn register(id: DeviceId, control: Arc<dyn DeviceControl>) {
    with(|r| {
        r.devices.retain(|(d, _)| *d != id);
        r.devices.push((id, control));
    });
}

pub(crate) fn get(id: DeviceId) -> Option<Arc<dyn DeviceControl>> {
    with(|r| {
        r.devices
            .iter()
            .find(|(d, _)| *d == id)
            .map(|(_, c)| c.clone())
    })
}

pub(crate) fn set_pending(id: DeviceId, config: SwapConfig) {
    with(|r| {
        r.pending.retain(|(d, _)| *d != id);
        r.pending.push((id, config));
    });
}

pub(crate) fn take_pending(id: DeviceId) -> Option<SwapConfig> {
    with(|r| {
        let at = r.pending.iter().position(|(d, _)| *d == id)?;
        Some(r.pending.swap_remove(at).1)
    })
}
