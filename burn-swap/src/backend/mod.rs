//! Intercept: every op of the model, forward and backward, reaches the swap client of its
//! device: as an `OperationIr` through burn-router when Burn's IR describes it, else as a
//! native op on the inner backend. This layer only translates; the engine does the rest.

mod build;
mod channel;
pub(crate) mod client;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub(crate) mod in_flight;
mod native;
#[rustfmt::skip]
mod ops;
mod quantized;
pub(crate) mod registry;
mod swap;

pub use channel::{SwapBridge, SwapChannel};
pub use client::SwapClient;
pub use quantized::SwapQTensor;
pub use swap::Swap;
