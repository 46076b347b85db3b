//! Ops in flight: a tensor's drop waits for the ops other threads have begun.
//!
//! burn-router counts a tensor's holders, and an op counts its input's holder out when it
//! builds its `OperationIr` (`RouterTensor::into_ir`), before the op reaches the swap client.
//! If another thread drops the last other holder in between (a checkpointer thread done with
//! the optimizer's state it saved, while the training thread's next op reads that state), the
//! drop reaches the engine first and frees the tensor, and the op finds nothing ("Should have
//! handle for tensor"). So every op of [`crate::Swap`] holds this module's gate, shared, from
//! before its inputs are counted out until the engine has run it ([`Op::enter`]), and a drop
//! that arrives outside any op of its own thread takes the gate alone
//! ([`drop_outside_ops`]): it waits for the ops other threads are in the middle of, so the
//! tensor goes after the op that reads it. Ops inside ops (a trait's default composition, the
//! autodiff backward of one op) and drops inside ops (a composition's intermediate values)
//! take nothing more: the thread holds the gate already.
//!
//! Left: burn-router reads a holder count and subtracts from it in two steps, so a drop on
//! another thread landing between the two (a few instructions) still makes the op's own
//! thread register the drop inside its op; see the book's *Reliability*.

use std::cell::Cell;
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

/// Shared by the threads in an op, taken alone by a drop outside ops. One for the process:
/// a drop waits for the ops of every device (they are short beside a drop's rarity of being
/// across threads, and a tensor's device is not known before its drop is read).
static GATE: RwLock<()> = RwLock::new(());

thread_local! {
    /// How deep this thread is in ops of [`crate::Swap`]: the gate is taken at the
    /// outermost one only (a second shared take behind a waiting drop would deadlock).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// An op of [`crate::Swap`] in progress on this thread: holds the gate shared, at the
/// outermost op, until it is dropped.
pub(crate) struct Op {
    _shared: Option<RwLockReadGuard<'static, ()>>,
}

impl Op {
    /// Enters an op: call before any of its input tensors is counted out.
    #[inline]
    pub(crate) fn enter() -> Self {
        let depth = DEPTH.get();
        DEPTH.set(depth + 1);
        let shared = (depth == 0).then(|| GATE.read().unwrap_or_else(PoisonError::into_inner));
        Self { _shared: shared }
    }
}

impl Drop for Op {
    #[inline]
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get().saturating_sub(1));
    }
}

/// Runs `drop`, the drop of a tensor: at once inside an op of this thread, else once the ops
/// other threads are in the middle of have reached the engine.
#[inline]
pub(crate) fn drop_outside_ops<R>(drop: impl FnOnce() -> R) -> R {
    if DEPTH.get() > 0 {
        return drop();
    }
    let _alone = GATE.write().unwrap_or_else(PoisonError::into_inner);
    drop()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A drop inside an op of its own thread (nested ops too) runs at once: taking the gate
    /// alone there would wait for its own thread for ever. One outside ops waits for the op
    /// another thread is in.
    #[test]
    fn a_drop_waits_for_the_ops_of_other_threads_only() {
        {
            let _outer = Op::enter();
            let _inner = Op::enter();
            assert_eq!(drop_outside_ops(|| DEPTH.get()), 2);
        }
        assert_eq!(DEPTH.get(), 0);
        let entered = Arc::new(std::sync::Barrier::new(2));
        let released = Arc::new(AtomicBool::new(false));
        let other = {
            let (entered, released) = (entered.clone(), released.clone());
            std::thread::spawn(move || {
                let _op = Op::enter();
                entered.wait();
                std::thread::sleep(std::time::Duration::from_millis(50));
                released.store(true, Ordering::SeqCst);
            })
        };
        entered.wait();
        assert!(drop_outside_ops(|| released.load(Ordering::SeqCst)));
        other.join().unwrap();
    }
}
