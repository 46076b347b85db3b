#!/usr/bin/env bash
# The GPU check in two halves.
#
#   scripts/gpu-check.sh build    # here (a Rust toolchain, no GPU needed): builds the CUDA
#                                 # binaries (release, stripped) into .device/ (git-ignored)
#   .device/run.sh                # on the GPU machine (no toolchain, no network): runs them
#
# With the device tool: run(command=".device/run.sh", carry=[".device"]).
# What runs there: the harness on the GPT model under CUDA (unwrapped, Burn's
# BalancedCheckpointing, every burn-swap policy at 100/75/50/33/25/10% of the unwrapped peak,
# the max batch under half the peak), the codec kernels against a device copy, and the PyTorch
# peer (scripts/torch_gpt.py) on the same GPT; it prints the tables last.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-build}" in
build)
    cargo build --release --features cuda --bin swap-bench
    cargo bench --no-run --features cuda --bench codec 2>&1 | tail -1
    rm -rf .device && mkdir -p .device/data .device/scripts
    cp target/release/swap-bench .device/
    codec=$(ls -t target/release/deps/codec-* | grep -v '\.d$' | head -1)
    cp "$codec" .device/codec-bench
    strip .device/swap-bench .device/codec-bench
    cp data/corpus.txt .device/data/
    cp scripts/torch_gpt.py .device/scripts/
    cp scripts/gpu-run.sh .device/run.sh
    chmod +x .device/run.sh
    du -sh .device
    ;;
*)
    echo "usage: scripts/gpu-check.sh build" >&2
    exit 2
    ;;
esac
