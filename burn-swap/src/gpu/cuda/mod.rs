//! The CUDA home: every call into the CUDA driver (through cudarc) that the crate makes.
//!
//! Layered as cudarc is: `sys` holds the raw calls, each either a safe function whose
//! arguments cannot break memory safety (with the `// SAFETY:` reasoning inside) or an
//! `unsafe fn` whose `# Safety` section says what its caller must hold; [`peer`] and
//! [`pinned`] are safe APIs over them, and the only code outside this folder that touches
//! CUDA memory goes through them. The backend types by name (`Swap<Cuda>`) are in
//! `crate::cuda`; the executor's CubeCL fast path (`exec::cubecl_fast_path`) reaches CUDA through CubeCL
//! and these APIs only.

pub mod peer;
pub mod pinned;
mod sys;
