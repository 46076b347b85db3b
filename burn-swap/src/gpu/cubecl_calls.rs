//! CubeCL calls that its API marks `unsafe`, wrapped so that their callers need no `unsafe`
//! of their own:
//!
//! - kernel arguments over buffers: `ArrayArg::from_raw_parts` is `unsafe` because a length
//!   longer than the buffer lets a kernel read and write out of bounds; [`words`] checks the
//!   length against the buffer's size;
//! - the allocation mode of a stream's pools ([`set_allocation_mode`]).

use cubecl::MemoryAllocationMode;
use cubecl::client::ComputeClient;
use cubecl::prelude::{ArrayArg, Runtime};
use cubecl::server::Handle;

/// Sets how the pools of the calling thread's stream on `client` place new buffers:
/// `Persistent` gives each buffer a device allocation of its exact size (reused only by a
/// buffer of the same size, given back by a cleanup once free), `Auto` carves them out of
/// CubeCL's shared pages (its default).
pub fn set_allocation_mode<R: Runtime>(client: &ComputeClient<R>, mode: MemoryAllocationMode) {
    // SAFETY: CubeCL marks the switch `unsafe` for two hazards, neither of memory safety in
    // the Rust sense: (1) the mode belongs to a stream, and another thread that shares the
    // stream allocates under it too (burn-swap switches only the streams of its own device
    // work: the op threads' and its transfer workers', for the device it keeps the budget
    // of); (2) exact-size buffers stay reserved until an explicit cleanup frees the idle
    // ones (burn-swap cleans every stream it switched whenever the allocator's reserved
    // bytes exceed the budget, and switches them back to `Auto` when the budget is lifted).
    // The call itself only queues the mode change on the stream's server, in order with
    // the stream's other work.
    unsafe { client.allocation_mode(mode) }
}

/// Bytes per word: the kernels read and write buffers as `u32` (or `Atomic<u32>`) arrays.
const WORD: u64 = 4;

/// A buffer too small for the words a kernel would be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a kernel argument of {words} words does not fit its buffer of {bytes} bytes")]
pub struct Overrun {
    /// Words asked for.
    pub words: usize,
    /// Bytes the buffer holds.
    pub bytes: u64,
}

/// `words` 32-bit words of `handle`, as a kernel's array argument: refused when the buffer
/// holds fewer bytes.
pub fn words<R: Runtime>(handle: &Handle, words: usize) -> Result<ArrayArg<R>, Overrun> {
    fits(words, handle.size_in_used())?;
    // SAFETY: the argument covers `4 · words` bytes, checked above to lie inside the buffer
    // (from its first used byte), so the kernel's accesses below `words` stay in bounds.
    Ok(unsafe { ArrayArg::from_raw_parts(handle.clone(), words) })
}

/// Whether `words` words fit in `bytes` bytes.
fn fits(words: usize, bytes: u64) -> Result<(), Overrun> {
    if (words as u64).checked_mul(WORD).is_none_or(|b| b > bytes) {
        return Err(Overrun { words, bytes });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argument_longer_than_its_buffer_is_refused() {
        assert_eq!(fits(16, 64), Ok(()));
        assert_eq!(fits(0, 0), Ok(()));
        assert_eq!(
            fits(17, 64),
            Err(Overrun {
                words: 17,
                bytes: 64
            })
        );
        assert_eq!(
            fits(usize::MAX, u64::MAX),
            Err(Overrun {
                words: usize::MAX,
                bytes: u64::MAX
            })
        );
    }
}
