//! A panic inside the inner backend, in an op the engine's interpreter runs, takes the handles
//! the op had taken with it: the device's tensors no longer match the books, and no op runs on
//! the device after it. Under `Swap` the panic reaches the caller as Flex's own, every later
//! op on the device fails with the typed `SwapError::InnerBackendPanicked` (not a panic about
//! a missing handle), and tensors dropped meanwhile, while the panic unwinds too, do nothing
//! (when burn-router's runner ran the ops, a drop during the unwinding panicked again and
//! aborted the process).
//!
//! Its own test binary: the device stays unusable for the rest of the process.

use std::panic::{AssertUnwindSafe, catch_unwind};

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use burn_swap::{Swap, SwapError};

/// burn-flex 0.21's SIMD row sums panic on a flipped view's first dim ("src too short"; Burn's
/// default features build Flex with them): an inner backend's own panic, in an op the
/// interpreter runs.
fn flipped_row_sum<B: burn::tensor::backend::Backend>() -> Tensor<B, 2> {
    let device = Default::default();
    Tensor::<B, 2>::random([16, 8], Distribution::Default, &device)
        .transpose()
        .flip([1])
        .sum_dim(0)
}

#[test]
fn an_inner_panic_leaves_a_typed_error_for_every_later_op_and_no_abort() {
    let plain = catch_unwind(|| flipped_row_sum::<Flex>().into_data());
    assert!(
        plain.is_err(),
        "Flex no longer panics here: pick another op that panics inside the inner backend"
    );
    // Flex itself goes on after its panic.
    let _ = Tensor::<Flex, 1>::ones([4], &Default::default()).into_data();

    let device = Default::default();
    let kept = Tensor::<Swap<Flex>, 1>::ones([4], &device);
    let first = catch_unwind(|| flipped_row_sum::<Swap<Flex>>().into_data())
        .expect_err("the inner backend's panic reaches the caller");
    assert!(
        first.downcast_ref::<SwapError>().is_none(),
        "the first panic is the inner backend's own"
    );
    let later = catch_unwind(AssertUnwindSafe(|| (kept.clone() + 1.0).into_data()))
        .expect_err("no op runs on the device after the inner backend broke it");
    match later.downcast_ref::<SwapError>() {
        Some(SwapError::InnerBackendPanicked { message }) => {
            assert!(message.contains("src too short"), "{message}")
        }
        other => panic!("expected InnerBackendPanicked, got {other:?}"),
    }
    let read = catch_unwind(AssertUnwindSafe(|| kept.clone().into_data())).expect_err("nor a read");
    assert!(matches!(
        read.downcast_ref::<SwapError>(),
        Some(SwapError::InnerBackendPanicked { .. })
    ));
    // Dropping tensors of the broken device does nothing (no panic, no abort).
    drop(kept);
}
