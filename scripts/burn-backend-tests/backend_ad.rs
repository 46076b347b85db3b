// burn-swap's stand-in for burn-backend-tests' `tests/common/backend.rs` in the autodiff
// tests: the backend under test is `Autodiff<Swap<B>>` (see `backend.rs`).

pub type TestBackend = burn::backend::Autodiff<Inner>;

include!("backend_shared.rs");
