//! The crate's one unsafe layer, built as cudarc is: raw calls that can break memory safety
//! at the bottom, each an `unsafe fn` whose `# Safety` section says what its caller must
//! hold, and safe wrappers above them that check or arrange those conditions. Everything
//! else in the crate is safe code (the crate root denies `unsafe`).
//!
//! - [`cubecl_calls`]: CubeCL kernel arguments over buffers, checked against the buffer's size (what
//!   the codec's kernels are launched with).
//! - `cuda` (with the `cuda` feature): the CUDA home. `cuda::sys` holds the raw driver calls;
//!   `cuda::peer` (the peer offload's transmitter: peer copies between devices) and `cuda::pinned`
//!   (the plain pinned copy the GPU check measures burn-swap's transfers against) are safe.

pub mod cubecl_calls;
#[cfg(feature = "cuda")]
pub mod cuda;

/// The CubeCL this crate's kernels are written with (its runtimes, for callers and benches).
pub use cubecl;
