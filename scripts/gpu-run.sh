#!/usr/bin/env bash
# Runs on the GPU machine from the repository root (see scripts/gpu-check.sh). Everything it
# writes goes to $OUT when set (the device tool brings it back), else to .device/out.
#
#   .device/run.sh 1    # correctness (bit for bit, every policy, 5 models), peaks, transfers,
#                       # peers; the codec kernels                              (<= 8 min)
#   .device/run.sh 2    # swap-bench on the GPT-2-small-shaped model; the PyTorch peer (<= 7 min)
#   .device/run.sh 3    # a short run under compute-sanitizer (memcheck); Burn's default fused
#                       # and autotuned CUDA backend under Swap: within its own run-to-run
#                       # spread, and its step times                            (<= 10 min)
#
# One part per device call (a call may run 10 minutes); each stage has its own time limit,
# so that one slow stage cannot eat the others' time. The tables are printed last.
set -uo pipefail
OUT="${OUT:-.device/out}"
BIN="${TMPDIR:-/tmp}/burn-swap-bin"
mkdir -p "$OUT" "$BIN"
for f in .device/*.gz; do
    name=$(basename "$f" .gz)
    # Unpacked once per machine, again when a newer build was carried.
    [ "$BIN/$name" -nt "$f" ] || { gunzip -c "$f" > "$BIN/$name" && chmod +x "$BIN/$name"; }
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
date -u +%Y-%m-%dT%H:%MZ | tee -a "$OUT/gpu.txt"

part1() {
    # Correctness, peaks and transfer bandwidth; the peer-copy path (seed 000) on the GPUs
    # there are (device 0 to itself on one GPU).
    PEERS=$(nvidia-smi --query-gpu=index --format=csv,noheader | awk 'NR>1{printf "%scuda:%s@8GiB", s, $1; s=","}')
    PEERS=${PEERS:-cuda:0@8GiB}
    timeout 360 "$BIN/swap-check" --device cuda --compress --peers "$PEERS" \
        --markdown "$OUT/check.md" > "$OUT/check.txt" 2>&1
    echo "swap-check exit: $?" | tee -a "$OUT/check.txt"

    # The codec kernels against a device-to-device copy (criterion; CUDA and wgpu groups).
    timeout 100 "$BIN/codec-bench" --bench kernels 2>&1 | grep -E "kernels_|thrpt" > "$OUT/kernels.txt"

    echo "== kernels (GiB/s)"
    cat "$OUT/kernels.txt"
    echo "== correctness, peaks, transfers (swap-check)"
    tail -5 "$OUT/check.txt"
    cat "$OUT/check.md" 2>/dev/null
}

part2() {
    # The harness on the GPT-2-small-shaped model, on CUDA.
    timeout 300 "$BIN/swap-bench" --model gpt --preset gpt2-small --device cuda --limit 64 \
        --csv "$OUT/swap-bench-gpt.csv" --pareto "$OUT/swap-bench-gpt.svg" \
        > "$OUT/swap-bench-gpt.txt" 2>&1
    echo "swap-bench exit: $?" >> "$OUT/swap-bench-gpt.txt"

    # The PyTorch peer on the same model.
    if python3 -c "import torch" 2>/dev/null; then
        (cd .device && timeout 100 python3 scripts/torch_gpt.py --preset gpt2-small) \
            > "$OUT/torch-gpt.csv" 2> "$OUT/torch-gpt.log"
    else
        echo "no PyTorch on this machine" > "$OUT/torch-gpt.csv"
    fi

    echo "== PyTorch (same GPT)"
    cat "$OUT/torch-gpt.csv"
    echo "== burn-swap harness (GPT, CUDA)"
    tail -30 "$OUT/swap-bench-gpt.txt"
}

part3() {
    # A short run under compute-sanitizer's memcheck: the small MLP and BatchNorm CNN, every
    # policy at 50% and 25%, device compression, two steps; any memory error fails it.
    SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
    if [ -n "$SANITIZER" ]; then
        timeout 200 "$SANITIZER" --tool memcheck --error-exitcode 9 --print-limit 20 \
            "$BIN/swap-check" --device cuda --quick --models mlp,bn-cnn --steps 2 \
            --compress --sizes 1 > "$OUT/sanitizer.txt" 2>&1
        echo "compute-sanitizer exit: $?" | tee -a "$OUT/sanitizer.txt"
    else
        echo "no compute-sanitizer on this machine" | tee "$OUT/sanitizer.txt"
    fi

    # Burn's default CUDA backend (fused, autotuned) under Swap: its losses within the
    # unwrapped fused backend's own run-to-run spread, then its step times.
    timeout 150 "$BIN/swap-check-fused" --device cuda --quick --spread --sizes 1 \
        --markdown "$OUT/fused-check.md" > "$OUT/fused-check.txt" 2>&1
    echo "swap-check (fused) exit: $?" | tee -a "$OUT/fused-check.txt"
    timeout 220 "$BIN/swap-bench-fused" --model gpt --preset gpt2-small --device cuda \
        --limit 64 --csv "$OUT/swap-bench-gpt-fused.csv" > "$OUT/swap-bench-gpt-fused.txt" 2>&1
    echo "swap-bench (fused) exit: $?" >> "$OUT/swap-bench-gpt-fused.txt"

    echo "== compute-sanitizer (memcheck)"
    tail -8 "$OUT/sanitizer.txt"
    echo "== fused backend: correctness within its spread"
    tail -3 "$OUT/fused-check.txt"
    cat "$OUT/fused-check.md" 2>/dev/null
    echo "== fused backend: harness (GPT, CUDA)"
    tail -30 "$OUT/swap-bench-gpt-fused.txt"
}

case "${1:-1}" in
1) part1 ;;
2) part2 ;;
3) part3 ;;
*)
    echo "usage: .device/run.sh 1|2|3" >&2
    exit 2
    ;;
esac
