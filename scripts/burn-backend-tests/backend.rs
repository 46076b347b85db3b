// burn-swap's stand-in for burn-backend-tests' `tests/common/backend.rs`: the backend under
// test is `Swap<B>`, `B` Flex or, with the `cube` feature, CubeCL's wgpu runtime; its budget
// and policy come from the `BURN_SWAP_*` variables.

pub type TestBackend = Inner;

include!("backend_shared.rs");
