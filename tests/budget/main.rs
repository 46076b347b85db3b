//! The budget and the plans that keep it: the counted and the allocator's bytes under a
//! budget (on Flex and on CubeCL's wgpu runtime), native ops, peers, the trace and profile the
//! planners read, the plans they make and how closely training follows them, the executor's
//! cross-queue waits. One test binary; its tests share the default device under
//! `swap_device_lock`.

mod budget;
mod cube;
mod native_budget;
mod peers;
mod plans_fit;
mod profile;
mod segments;
mod simulate;
mod trace;
mod waits;
