#!/usr/bin/env bash
# The GPU check in two halves.
#
#   scripts/gpu-check.sh build    # here (a Rust toolchain, no GPU needed): builds the CUDA
#                                 # binaries (release, stripped, gzipped) into .device/
#                                 # (git-ignored; about 30 MB, under the device tool's 64 MiB)
#   .device/run.sh                # on the GPU machine (no toolchain, no network): runs them
#
# With the device tool: run(command=".device/run.sh", carry=[".device"]).
# What runs there, each stage under its own time limit, tables printed last:
#   1. swap-check: MLP, conv net and transformer through Autodiff<Swap<Cuda>> against
#      Autodiff<Cuda>, bit for bit, under every policy at 50% and 25% of the counted peak, with
#      transfer jitter and device-side compression; counted and allocator peaks against the
#      unwrapped run's; burn-swap's D2H/H2D bandwidth against a plain pinned copy (cudarc);
#      the MLP with its offloads split across the other GPUs by cudarc peer copies (device 0
#      to itself when there is one GPU), bit for bit, with each link's bandwidth.
#   2. the codec kernels against a device-to-device copy;
#   3. swap-bench: the harness on the GPT-2-small-shaped model (step time, peaks, time
#      compute waited on transfers, max batch under half the peak);
#   4. the PyTorch peer (scripts/torch_gpt.py) on the same GPT, when PyTorch is there.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-build}" in
build)
    cargo build --release --features cuda --bin swap-bench --bin swap-check
    cargo bench --no-run --features cuda --bench codec 2>&1 | tail -1
    rm -rf .device && mkdir -p .device/data .device/scripts
    codec=$(ls -t target/release/deps/codec-* | grep -v '\.d$' | head -1)
    for bin in target/release/swap-bench target/release/swap-check "$codec"; do
        name=$(basename "$bin")
        case "$name" in codec-*) name=codec-bench ;; esac
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
