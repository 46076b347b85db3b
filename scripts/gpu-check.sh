#!/usr/bin/env bash
# The GPU check in two halves.
#
#   scripts/gpu-check.sh build    # here (a Rust toolchain, no GPU needed): builds the CUDA
#                                 # binaries (release, stripped, gzipped) into .device/
#                                 # (git-ignored; under the device tool's 64 MiB)
#   .device/run.sh 1|2|3          # on the GPU machine (no toolchain, no network): runs them
#
# With the device tool, one call per part (a call may run 10 minutes):
#   run(command=".device/run.sh 1", carry=[".device"]), then 2, then 3.
# What runs there, each stage under its own time limit, tables printed last:
#   1. swap-check: MLP, conv net, transformer, BatchNorm CNN and LSTM through
#      Autodiff<Swap<Cuda>> against Autodiff<Cuda>, bit for bit, under every policy at 50% and
#      25% of the counted peak, with transfer jitter and device-side compression; counted and
#      allocator peaks against the unwrapped run's; burn-swap's D2H/H2D bandwidth against a
#      plain pinned copy (cudarc); the MLP with its offloads split across the other GPUs by
#      cudarc peer copies (device 0 to itself when there is one GPU), bit for bit, with each
#      link's bandwidth. Then the codec kernels against a device-to-device copy.
#   2. swap-bench: the harness on the GPT-2-small-shaped model (step time, peaks, time compute
#      waited on transfers, max batch under half the peak); the PyTorch peer
#      (scripts/torch_gpt.py) on the same GPT, when PyTorch is there.
#   3. a short swap-check under compute-sanitizer (memcheck); Burn's default CUDA backend
#      (fused, autotuned: the `cuda-default` feature, built into target/fused) under Swap:
#      swap-check within the unwrapped fused backend's run-to-run spread, swap-bench's step
#      times on the GPT.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-build}" in
build)
    cargo build --release --features cuda --bin swap-bench --bin swap-check
    cargo bench --no-run --features cuda --bench codec 2>&1 | tail -1
    # Burn's default CUDA backend (fused, autotuned) in a target dir of its own: its features
    # would otherwise rebuild Burn for the binaries above.
    CARGO_TARGET_DIR=target/fused cargo build --release --features cuda-default \
        --bin swap-bench --bin swap-check
    rm -rf .device && mkdir -p .device/data .device/scripts
    codec=$(ls -t target/release/deps/codec-* | grep -v '\.d$' | head -1)
    for bin in target/release/swap-bench target/release/swap-check "$codec" \
        target/fused/release/swap-bench target/fused/release/swap-check; do
        name=$(basename "$bin")
        case "$bin" in
        */deps/codec-*) name=codec-bench ;;
        target/fused/*) name="$name-fused" ;;
        esac
        cp "$bin" ".device/$name"
        strip ".device/$name"
        gzip -9 ".device/$name"
    done
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
