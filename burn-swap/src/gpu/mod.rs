//! Code that works on device memory directly: CubeCL kernels and their launches, and (with
//! the `cuda` feature) cudarc: peer copies between devices (`peer`) and the plain pinned
//! copy that the GPU check measures burn-swap's transfers against (`pinned`). All `unsafe` code of the crate lives under this
//! module (the crate root denies it elsewhere); every `unsafe` block says why it is sound.

#[cfg(feature = "cuda")]
pub mod peer;
#[cfg(feature = "cuda")]
pub mod pinned;
pub mod zvc;

/// The CubeCL this crate's kernels are written with (its runtimes, for callers and benches).
pub use cubecl;
