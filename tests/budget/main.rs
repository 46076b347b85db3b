//! The budget and the plans that keep it: the counted and the allocator's bytes under a
//! budget (on Flex and on CubeCL's wgpu runtime), native ops, peers, the trace and profile the
//! planners read, the simulator, the executor's cross-queue waits. One test binary; its tests share the default device under
//! `swap_device_lock`. (`tests/plans_fit.rs` and `tests/segments.rs`, whose plans are held
//! within 2% of their predicted peak, run in processes of their own until the conv net's
//! prediction over its measured peak is found: the book's *When plans are made*, Left out.)

mod budget;
mod cube;
mod native_budget;
mod op_bound;
mod peers;
mod profile;
mod simulate;
mod trace;
mod waits;
