//! The CubeCL fast path: what the executor does differently when the inner backend is one of
//! Burn's CubeCL backends (`CubeBackend<R>`: CUDA with the `cuda` feature, wgpu with the
//! `wgpu` feature, which is how CI runs this code without a GPU).
//!
//! Found at run time, not by type: a tensor primitive of the inner backend is looked at as a
//! `CubeTensor<R>` of each runtime compiled in; when none matches, the caller takes the
//! generic path. (Burn's fused backends, `Fusion<CubeBackend<R>>`, hold lazy fusion handles
//! and take the generic path, which is correct and slower.)
//!
//! - **Streams.** Nothing here picks a stream: CubeCL runs the work of each OS thread on a
//!   stream of its own, so the send and receive workers' copies already run on their own
//!   streams, apart from the compute stream of the training thread. When a copy stream uses a
//!   buffer that compute made, CubeCL records an event on compute and makes the copy stream
//!   wait on it, on the GPU (the cross-stream waits that the executor realises through the
//!   backend: [`crate::plan::waits`]).
//! - **Pinned memory.** CubeCL reads device buffers into pinned host memory taken from a pool
//!   of its own (per stream, grown in pages and reused), and uploads pinned bytes by DMA
//!   without staging them: the host copy of an offloaded tensor is those pinned bytes, and
//!   goes back as they are.
//! - **Compression before the copy** ([`compress_offload`], [`decompress_fetch`]): the zero-value
//!   kernels of [`crate::codec::kernels`] run on the copy stream before the bytes cross the link, so
//!   that only the bitmask and the nonzero values move.
//! - **The allocator's figures** ([`allocator_usage`]) and the device's total memory
//!   ([`total_memory`], for budgets given as a fraction of it).

//!
//! This module is the one place that asks whether a CubeCL runtime is compiled in: without
//! one, `without_cubecl` gives the same functions, answering as the generic path needs, so
//! that its callers hold no feature switch of their own.

#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod with_cubecl;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) use with_cubecl::*;

#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
mod without_cubecl;
#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
pub(crate) use without_cubecl::*;

/// Whether a CubeCL runtime is compiled in: where none is, the callers skip the work that
/// only prepares a question for it (a constant, so that the compiler drops that work).
pub(crate) const COMPILED_IN: bool = cfg!(any(feature = "cuda", feature = "wgpu"));
