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
//! burn-router also reads a holder count and subtracts from it in two steps, so a drop on
//! another thread landing between the two makes the op's own thread drop the tensor inside
//! its op, before the op has reached the engine. A drop inside an op of a tensor made before
//! the op began is therefore held back until the outermost op of the thread has ended
//! ([`must_wait`], [`hold_back`]); drops of the values an op makes and lets go of itself (the
//! intermediate values of a trait's default composition) still run at once, so no op keeps
//! more on the device than before.

use std::cell::{Cell, RefCell};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use burn_ir::TensorId;

/// Shared by the threads in an op, taken alone by a drop outside ops. One for the process:
/// a drop waits for the ops of every device (they are short beside a drop's rarity of being
/// across threads, and a tensor's device is not known before its drop is read).
static GATE: RwLock<()> = RwLock::new(());

thread_local! {
    /// How deep this thread is in ops of [`crate::Swap`]: the gate is taken at the
    /// outermost one only (a second shared take behind a waiting drop would deadlock).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The id of the first tensor made inside the outermost op in progress on this thread
    /// (`u64::MAX`: none yet). Ids come from one counter for the process, so a tensor made
    /// before the op began has a smaller one.
    static FIRST_MADE: Cell<u64> = const { Cell::new(u64::MAX) };
    /// The drops held back until the outermost op of this thread ends ([`hold_back`]).
    static HELD_BACK: RefCell<Vec<Box<dyn FnOnce()>>> = const { RefCell::new(Vec::new()) };
    /// Whether `HELD_BACK` has anything (read at the end of every op, without touching the
    /// list).
    static ANY_HELD: Cell<bool> = const { Cell::new(false) };
}

/// An op of [`crate::Swap`] in progress on this thread: holds the gate shared, at the
/// outermost op, until it is dropped.
pub(crate) struct Op {
    shared: Option<RwLockReadGuard<'static, ()>>,
}

impl Op {
    /// Enters an op: call before any of its input tensors is counted out.
    #[inline]
    pub(crate) fn enter() -> Self {
        let depth = DEPTH.get();
        DEPTH.set(depth + 1);
        if depth == 0 {
            FIRST_MADE.set(u64::MAX);
        }
        let shared = (depth == 0).then(|| GATE.read().unwrap_or_else(PoisonError::into_inner));
        Self { shared }
    }
}

impl Drop for Op {
    #[inline]
    fn drop(&mut self) {
        let depth = DEPTH.get().saturating_sub(1);
        DEPTH.set(depth);
        if depth == 0 && ANY_HELD.get() {
            // The shared hold goes first: the drops held back take the gate alone.
            self.shared = None;
            run_held_back();
        }
    }
}

/// Notes a tensor made by an op of this thread (its id, from burn-router's counter).
#[inline]
pub(crate) fn made(id: TensorId) {
    if FIRST_MADE.get() == u64::MAX && DEPTH.get() > 0 {
        FIRST_MADE.set(id.value());
    }
}

/// Whether the drop of `id` arriving now must wait for the end of this thread's op: it
/// arrives inside an op, and the tensor was not made by that op (so the op may be about to
/// read it, its holder count having been read just before another thread let go of its
/// last other holder).
#[inline]
pub(crate) fn must_wait(id: TensorId) -> bool {
    DEPTH.get() > 0 && id.value() < FIRST_MADE.get()
}

/// Holds `drop` back until the outermost op of this thread has ended (see [`must_wait`]).
#[cold]
pub(crate) fn hold_back(drop: Box<dyn FnOnce()>) {
    HELD_BACK.with_borrow_mut(|held| held.push(drop));
    ANY_HELD.set(true);
}

/// Runs the drops held back, in the order they came. The thread is outside any op now, so
/// none of them is held back again.
#[cold]
#[inline(never)]
fn run_held_back() {
    let held = HELD_BACK.with_borrow_mut(std::mem::take);
    ANY_HELD.set(false);
    for drop in held {
        drop();
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
