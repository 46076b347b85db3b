//! Planners: pure functions that decide what to keep and what to move. None touches a device.
//!
//! - [`reactive`]: the choice of victims when an op would exceed the budget.

pub mod reactive;
