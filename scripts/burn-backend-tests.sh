#!/usr/bin/env bash
# Burn's own backend tests (crates/burn-backend-tests of Burn v0.21: about 1,400 tensor op
# tests and 480 autodiff tests, each autodiff test also under balanced checkpointing) through
# `Swap<Flex>` and `Autodiff<Swap<Flex>>`; with `--no-default-features --features
# std,quantization,cube`, through `Swap` over CubeCL's wgpu runtime (a Vulkan driver needed:
# mesa-vulkan-drivers' software one will do).
#
#   scripts/burn-backend-tests.sh BURN_CHECKOUT [cargo test arguments...]
#
# BURN_CHECKOUT is a checkout of https://github.com/tracel-ai/burn at tag v0.21.0 (not
# fetched here: the tests are Burn's, and nothing outside the package registries is
# downloaded by this repository's builds). The harness (scripts/burn-backend-tests/) takes
# the place of the tests' `common` backend files; the test files are copied as they are into
# target/burn-backend-tests, built in this repository's target directory, and run. The
# budget and policy come from the usual variables, e.g.
#
#   BURN_SWAP_BUDGET=2048 BURN_SWAP_POLICY=reactive BURN_SWAP_COMPRESS=on \
#     scripts/burn-backend-tests.sh ~/burn -- -q
#
# Under a budget, a test whose single op needs more than the budget fails with burn-swap's
# "needs N bytes resident at once" error, as it should; tests run on several threads share
# the device's one budget. Results: the book's Testing page.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
burn="${1:?usage: scripts/burn-backend-tests.sh BURN_CHECKOUT [cargo test arguments...]}"
shift
src="$burn/crates/burn-backend-tests/tests"
[ -d "$src/tensor" ] || { echo "no $src/tensor: is $burn a Burn v0.21 checkout?" >&2; exit 2; }
dest="$repo/target/burn-backend-tests"
rm -rf "$dest"
mkdir -p "$dest/src" "$dest/tests/common"
cp -r "$src/tensor" "$src/autodiff" "$dest/tests/"
cp "$src/tensor.rs" "$src/autodiff.rs" "$src/tensor_f16.rs" "$dest/tests/"
cp "$src/common/tensor.rs" "$dest/tests/common/"
here="$repo/scripts/burn-backend-tests"
cp "$here/backend.rs" "$here/backend_ad.rs" "$here/backend_shared.rs" "$here/autodiff.rs" "$dest/tests/common/"
sed "s|@BURN_SWAP@|$repo/burn-swap|" "$here/Cargo.toml.in" > "$dest/Cargo.toml"
echo 'pub use burn_tensor_testgen::might_panic;' > "$dest/src/lib.rs"
cp "$repo/Cargo.lock" "$dest/"
# The autodiff tests on the autodiff backend; the dispatch backend's quantization scheme is
# asked of the harness.
sed -i 's|#\[path = "common/backend.rs"\]|#[path = "common/backend_ad.rs"]|' "$dest/tests/autodiff.rs"
grep -rl 'TestBackend::default_quant_scheme(' "$dest/tests" |
    xargs -r sed -i 's/TestBackend::default_quant_scheme(/crate::default_quant_scheme(/g'
CARGO_TARGET_DIR="$repo/target" cargo test --manifest-path "$dest/Cargo.toml" "$@"
