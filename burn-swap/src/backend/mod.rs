//! Intercept: `Swap<B>` is Burn's router backend over a channel whose client is burn-swap's.
//! Every op of the model, forward and backward, arrives here as an `OperationIr` and goes to
//! the engine; this layer only translates.

mod channel;
mod client;
pub(crate) mod registry;

pub use channel::{SwapBridge, SwapChannel};
pub use client::SwapClient;
