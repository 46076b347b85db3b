//! Planners: pure functions that decide what to keep and what to move. None touches a device.
//!
//! - [`advisor`]: seed 000's destination choice: which peers (and the host) take how many of
//!   a tensor's bytes, so that its transfer finishes fastest.
//! - [`reactive`]: the choice of victims when an op would exceed the budget.
//! - [`simulate`]: seed 004's reference-count memory simulation, which predicts the peak of a
//!   plan, fragmentation included.
//! - [`checkpoint`]: seed 004's candidates (recompute or swap) and threshold-block checkpoint
//!   selection, judged by the simulator.
//! - [`combine`]: per tensor keep, offload (with its prefetch point) or recompute, so that
//!   the simulated peak fits the budget at the least exposed time.
//! - [`segments`]: seed 001's segment plan evolved by a genetic algorithm to migrate as few
//!   bytes as possible.
//! - [`program`]: a plan turned into the steps the executor takes after each op.
//! - [`waits`]: seed 003's cross-queue waits: which work on the compute, send and receive
//!   queues must wait for which, so that no copy races a kernel and no buffer is freed while
//!   another queue reads it.
//! - [`profile`]: seed 004's profiled iteration (op times and bytes, copy throughput), which
//!   planners read.

pub mod advisor;
pub mod checkpoint;
pub mod combine;
pub mod profile;
pub mod program;
pub mod reactive;
pub mod segments;
pub mod simulate;
pub mod waits;
