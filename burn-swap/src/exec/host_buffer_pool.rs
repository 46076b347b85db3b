//! Host memory recycled for the copies off a backend whose tensors live in host memory
//! (Flex): the CPU path's counterpart of the pinned staging a CubeCL backend keeps.
//!
//! On Flex an offload copies the tensor into a new host buffer, and the device copy is freed
//! once the copy is done; the host buffer becomes the tensor again on the way back. With
//! glibc's allocator, buffers allocated by the send worker and freed a step later land on
//! fresh pages step after step (glibc hands the free top of a heap back to the kernel past its
//! trim threshold), and the kernel faults in and zeroes every page: on the BatchNorm CNN at
//! 25% of its peak (2026-11-24, the 2-vCPU VM) 12,768 page faults per step, one per 4 KiB
//! page offloaded, on the send worker beside the compute, and the policies that copy on the
//! workers ran 8-12% slower than `reactive`, which copies on the compute thread and faulted
//! none (the book's *Results*, "Page faults").
//!
//! The pool keeps the device copies that offloads free instead (a device buffer on Flex is host
//! memory), and the next copy of the same length goes into one of them: in the steady state an
//! offload takes one buffer and gives one back, and nothing is allocated or freed. A buffer
//! in the pool is the backend's own (Flex adopts it as a fetched tensor's storage, owned,
//! written in place as any of its buffers); the pool only holds ones nothing else refers to.
//!
//! The pool never makes the host memory burn-swap holds exceed the host copies' own peak: a
//! buffer is kept only while the idle bytes fit in the room between the host copies counted
//! now and the highest they have been since the pool began (not reset with the report's
//! counters, so that the pool stays full across a reset), and freed otherwise.

use std::sync::{Mutex, MutexGuard, PoisonError};

use burn_std::Bytes;
use hashbrown::HashMap;

/// Idle host buffers by length. Shared by the transfer workers and the engine.
#[derive(Default)]
pub(crate) struct HostPool {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Idle buffers by their length.
    idle: HashMap<usize, Vec<Bytes>>,
    /// Bytes of the idle buffers.
    idle_bytes: usize,
    /// The most host-copy bytes the caller has reported.
    most_host: u64,
}

impl HostPool {
    /// `source` copied into an idle buffer of its length, else into a new one.
    pub(crate) fn copy(&self, source: &[u8]) -> Bytes {
        let idle = {
            let mut state = self.lock();
            let idle = state.idle.get_mut(&source.len()).and_then(Vec::pop);
            if idle.is_some() {
                state.idle_bytes -= source.len();
            }
            idle
        };
        match idle {
            Some(mut bytes) => {
                bytes.copy_from_slice(source);
                bytes
            }
            None => Bytes::from_bytes_vec(source.to_vec()),
        }
    }

    /// Keeps `bytes` for a later copy while the idle bytes stay within the room between the
    /// host copies' bytes now (`host`) and the most they have been (`peak`, and any peak
    /// reported before); frees them otherwise.
    pub(crate) fn keep(&self, bytes: Bytes, host: u64, peak: u64) {
        let len = bytes.len();
        let mut state = self.lock();
        state.most_host = state.most_host.max(peak).max(host);
        let room = state.most_host - host;
        if (state.idle_bytes + len) as u64 > room {
            drop(state);
            drop(bytes);
            return;
        }
        state.idle_bytes += len;
        state.idle.entry(len).or_default().push(bytes);
    }

    /// Bytes the pool holds idle.
    #[cfg(test)]
    pub(crate) fn idle_bytes(&self) -> usize {
        self.lock().idle_bytes
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is buffers and a count kept together; a panic while it was held (none
        // can happen there) would leave it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_takes_the_next_copy_of_its_length() {
        let pool = HostPool::default();
        let freed = Bytes::from_bytes_vec(vec![9; 4]);
        let address = freed.as_ptr();
        pool.keep(freed, 0, 1 << 20);
        assert_eq!(pool.idle_bytes(), 4);
        // Another length: a new buffer, the kept one stays.
        let other = pool.copy(&[1, 2, 3]);
        assert_eq!(&other[..], &[1, 2, 3]);
        assert_eq!(pool.idle_bytes(), 4);
        let copy = pool.copy(&[5, 6, 7, 8]);
        assert_eq!(&copy[..], &[5, 6, 7, 8]);
        assert_eq!(copy.as_ptr(), address, "the kept buffer is reused");
        assert_eq!(pool.idle_bytes(), 0);
    }

    #[test]
    fn the_pool_keeps_no_more_idle_bytes_than_the_room_below_the_highest_peak() {
        let pool = HostPool::default();
        // 20 bytes of host copies at most, 8 now: room for 12.
        pool.keep(Bytes::from_bytes_vec(vec![0; 8]), 8, 20);
        pool.keep(Bytes::from_bytes_vec(vec![0; 8]), 8, 20);
        assert_eq!(pool.idle_bytes(), 8, "the second would go over the room");
        pool.keep(Bytes::from_bytes_vec(vec![0; 4]), 8, 20);
        assert_eq!(pool.idle_bytes(), 12);
        pool.keep(Bytes::from_bytes_vec(vec![0; 1]), 8, 20);
        assert_eq!(pool.idle_bytes(), 12);
        // A peak reset (the report's counters) does not shrink the room: the highest stays.
        pool.keep(Bytes::from_bytes_vec(vec![0; 1]), 0, 0);
        assert_eq!(pool.idle_bytes(), 13);
    }
}
