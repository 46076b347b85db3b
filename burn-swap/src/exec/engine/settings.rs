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
