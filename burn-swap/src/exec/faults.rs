//! Fault injection at every transfer point, for the reliability tests: a fault makes the
//! point fail as the real failure would (a backend error, or a panic on the worker), so that
//! tests can show that no failure loses a tensor's bytes. Compiled in debug builds only: in
//! release builds [`take`] is `false` and costs nothing.
//!
//! Faults are process-wide: a rate per hook (faults per million passes, drawn from a seeded
//! generator, so a run is repeatable) and a count of forced faults (the next `n` passes).

/// A point where a transfer can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// Reading a tensor off the device (the copy into host memory), on any thread.
    OffloadRead,
    /// Allocating host memory for a copy: the buffer an offload reads into, or the one a
    /// compressed or split copy is decoded into on its way back (as a full host would refuse
    /// it; burn-swap's own host buffers are allocated fallibly, so the real failure is the
    /// same typed error).
    HostAlloc,
    /// The backend's pinned pool exhausted: CubeCL then reads into pageable memory instead
    /// (cubecl-cuda's `reserve_cpu`), which is not a failure but a slower copy of another
    /// kind; the hook makes a read that got pinned bytes hand over pageable ones, so that
    /// the rest of the path (the books' pinned count, a staged upload) sees the fallback.
    /// Applies where reads give pinned memory (CubeCL backends; not Flex).
    PinnedPool,
    /// Compressing the bytes before they leave (the zero-value codec).
    Compress,
    /// Writing a copy back to the device, failing before the inner backend has the bytes.
    Upload,
    /// The inner backend's own write (`from_data`) panicking after it took the bytes (as a
    /// device out of memory makes CubeCL's allocation panic). Applies wherever burn-swap
    /// keeps the copy while the backend writes: bytes decoded from a compressed or split
    /// copy, and raw bytes lent to a backend that copies them to the device. (Flex adopts
    /// raw bytes as its tensor's storage, a write that cannot fail: no hook there.)
    BackendWrite,
    /// Decompressing a copy before (or while) it is written back.
    Decompress,
    /// A transfer worker panicking, before its job's copy or after the job's result was
    /// made (in the worker's bookkeeping): as a worker thread dying would.
    WorkerPanic,
    /// A copy to or from a peer (the peer offload's transmitter).
    PeerCopy,
    /// A peer's memory manager refusing a reservation (as a peer whose memory filled up
    /// would): the piece goes to the host instead.
    PeerReserve,
}

impl Hook {
    /// Every hook.
    pub const ALL: [Hook; 10] = [
        Hook::OffloadRead,
        Hook::HostAlloc,
        Hook::PinnedPool,
        Hook::Compress,
        Hook::Upload,
        Hook::BackendWrite,
        Hook::Decompress,
        Hook::WorkerPanic,
        Hook::PeerCopy,
        Hook::PeerReserve,
    ];

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Hook::OffloadRead => "offload read",
            Hook::HostAlloc => "host allocation",
            Hook::PinnedPool => "pinned pool",
            Hook::Compress => "compression",
            Hook::Upload => "upload",
            Hook::BackendWrite => "backend write",
            Hook::Decompress => "decompression",
            Hook::WorkerPanic => "worker panic",
            Hook::PeerCopy => "peer copy",
            Hook::PeerReserve => "peer reservation",
        }
    }

    #[cfg(debug_assertions)]
    fn index(self) -> usize {
        self as usize
    }
}

#[cfg(debug_assertions)]
mod state {
    use super::Hook;
    use std::sync::atomic::{AtomicU64, Ordering};

    const HOOKS: usize = Hook::ALL.len();
    #[allow(clippy::declare_interior_mutable_const)]
    const ZERO: AtomicU64 = AtomicU64::new(0);
    static RATE_PPM: [AtomicU64; HOOKS] = [ZERO; HOOKS];
    static FORCED: [AtomicU64; HOOKS] = [ZERO; HOOKS];
    static INJECTED: [AtomicU64; HOOKS] = [ZERO; HOOKS];
    static RNG: AtomicU64 = AtomicU64::new(0x5eed);

    pub fn set_rate(hook: Hook, per_million: u64) {
        RATE_PPM[hook.index()].store(per_million.min(1_000_000), Ordering::SeqCst);
    }

    pub fn force(hook: Hook, n: u64) {
        FORCED[hook.index()].store(n, Ordering::SeqCst);
    }

    pub fn seed(seed: u64) {
        RNG.store(seed, Ordering::SeqCst);
    }

    pub fn injected(hook: Hook) -> u64 {
        INJECTED[hook.index()].load(Ordering::SeqCst)
    }

    pub fn take(hook: Hook) -> bool {
        let i = hook.index();
        let forced = FORCED[i]
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        let rate = RATE_PPM[i].load(Ordering::Relaxed);
        let drawn = rate > 0 && {
            // SplitMix64 over a shared counter: repeatable for a given seed and order.
            let mut z = RNG
                .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
                .wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % 1_000_000 < rate
        };
        let fault = forced || drawn;
        if fault {
            INJECTED[i].fetch_add(1, Ordering::SeqCst);
        }
        fault
    }
}

/// Whether the pass through `hook` fails now (always `false` in release builds).
#[inline]
pub(crate) fn take(hook: Hook) -> bool {
    #[cfg(debug_assertions)]
    {
        state::take(hook)
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = hook;
        false
    }
}

/// The first of `hooks` that applies (`true`) and fails now, if any: a transfer point
/// where several kinds of failure can happen passes each in turn.
#[inline]
pub(crate) fn take_first(hooks: &[(Hook, bool)]) -> Option<Hook> {
    hooks
        .iter()
        .find(|&&(hook, applies)| applies && take(hook))
        .map(|&(hook, _)| hook)
}

/// Fails `hook` at random, `per_million` passes in a million (0: never). No effect in
/// release builds.
pub fn set_rate(hook: Hook, per_million: u64) {
    #[cfg(debug_assertions)]
    state::set_rate(hook, per_million);
    #[cfg(not(debug_assertions))]
    let _ = (hook, per_million);
}

/// Fails the next `n` passes through `hook` (0: none). No effect in release builds.
pub fn force(hook: Hook, n: u64) {
    #[cfg(debug_assertions)]
    state::force(hook, n);
    #[cfg(not(debug_assertions))]
    let _ = (hook, n);
}

/// Seeds the generator of random faults.
pub fn seed(seed: u64) {
    #[cfg(debug_assertions)]
    state::seed(seed);
    #[cfg(not(debug_assertions))]
    let _ = seed;
}

/// Turns every hook off: no rate, no forced faults.
pub fn clear() {
    for hook in Hook::ALL {
        set_rate(hook, 0);
        force(hook, 0);
    }
}

/// Faults injected at `hook` since the process started (0 in release builds).
pub fn injected(hook: Hook) -> u64 {
    #[cfg(debug_assertions)]
    {
        state::injected(hook)
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = hook;
        0
    }
}

/// Whether faults can be injected in this build (debug builds only).
pub const ENABLED: bool = cfg!(debug_assertions);
