//! What the engine was configured with: the configuration, the budget it resolved to, and
//! which backend tells where its tensors live.

use crate::config::SwapConfig;
use crate::exec::layout::Teller;

/// The configuration in force on a device.
pub(super) struct Settings {
    pub config: SwapConfig,
    /// The budget in bytes, resolved from the configuration; `None` is unlimited.
    pub budget: Option<u64>,
    /// Which backend tells where its tensors live (`exec::layout`), if any.
    pub teller: Teller,
}

impl Settings {
    /// Whether ops are traced: burn-swap is on and its trace was not turned off.
    #[inline]
    pub fn tracing(&self) -> bool {
        self.config.enabled && self.config.trace
    }
}
