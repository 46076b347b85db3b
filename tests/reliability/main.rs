//! What goes wrong stays contained: typed errors for bad input, injected faults at every
//! transfer point, transfer jitter, ops from several threads at once. One test binary; its
//! tests share the default device under `swap_device_lock`. (An inner backend's panic, which
//! leaves the device unusable for the rest of the process, is `tests/inner_panic.rs`, a
//! binary of its own.)

mod errors;
mod faults;
mod stress;
mod threads;
