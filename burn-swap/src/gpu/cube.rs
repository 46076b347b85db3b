//! Kernel arguments over CubeCL buffers. CubeCL's `ArrayArg::from_raw_parts` is `unsafe`
//! because a length longer than the buffer lets a kernel read and write out of bounds; the
//! one wrapper here checks the length against the buffer's size, so that the kernels' launch
//! code needs no `unsafe` of its own.

use cubecl::prelude::{ArrayArg, Runtime};
use cubecl::server::Handle;

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
