//! Trace: what ran, in which order, and how long each tensor lived.
//!
//! The recorder logs every op of a device as it passes; a period detector finds the training loop's
//! period in the stream of op signatures, and the per-tensor [`Trace`] of the last complete
//! iteration is derived from the log on demand.

mod model;
pub(crate) mod period;
pub(crate) mod recorder;
pub(crate) mod signature;
pub(crate) mod synthetic;
pub(crate) mod threads;

pub use model::{
    Access, AccessKind, End, EndKind, IterationPeak, OpEvents, OpTrace, Slot, TensorTrace, Trace,
};
