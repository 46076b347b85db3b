#!/usr/bin/env bash
# Runs on the GPU machine from the repository root (see scripts/gpu-check.sh). Everything it
# writes goes to $OUT when set (the device tool brings it back), else to .device/out. Each
# stage has its own time limit, so that one slow stage cannot eat the others' time.
set -uo pipefail
OUT="${OUT:-.device/out}"
BIN="${TMPDIR:-/tmp}/burn-swap-bin"
mkdir -p "$OUT" "$BIN"
for f in .device/*.gz; do
    name=$(basename "$f" .gz)
    gunzip -c "$f" > "$BIN/$name" && chmod +x "$BIN/$name"
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
date -u +%Y-%m-%d | tee -a "$OUT/gpu.txt"

# 1. Correctness, peaks and transfer bandwidth; the peer-copy path (seed 000) on the GPUs
#    there are (device 0 to itself on one GPU).
PEERS=$(nvidia-smi --query-gpu=index --format=csv,noheader | awk 'NR>1{printf "%scuda:%s@8GiB", s, $1; s=","}')
PEERS=${PEERS:-cuda:0@8GiB}
timeout 360 "$BIN/swap-check" --device cuda --compress --peers "$PEERS" \
    --markdown "$OUT/check.md" > "$OUT/check.txt" 2>&1
echo "swap-check exit: $?" | tee -a "$OUT/check.txt"

# 2. The codec kernels against a device-to-device copy (criterion; CUDA and wgpu groups).
timeout 120 "$BIN/codec-bench" --bench kernels 2>&1 | grep -E "kernels_|thrpt" > "$OUT/kernels.txt"

# 3. The harness on the GPT-2-small-shaped model, on CUDA.
timeout 300 "$BIN/swap-bench" --model gpt --preset gpt2-small --device cuda --limit 64 \
    --csv "$OUT/swap-bench-gpt.csv" --pareto "$OUT/swap-bench-gpt.svg" \
    > "$OUT/swap-bench-gpt.txt" 2>&1
echo "swap-bench exit: $?" >> "$OUT/swap-bench-gpt.txt"

# 4. The PyTorch peer on the same model.
if python3 -c "import torch" 2>/dev/null; then
    (cd .device && timeout 120 python3 scripts/torch_gpt.py --preset gpt2-small) \
        > "$OUT/torch-gpt.csv" 2> "$OUT/torch-gpt.log"
else
    echo "no PyTorch on this machine" > "$OUT/torch-gpt.csv"
fi

echo
echo "== kernels (GiB/s)"
cat "$OUT/kernels.txt"
echo "== PyTorch (same GPT)"
cat "$OUT/torch-gpt.csv"
echo "== burn-swap harness (GPT, CUDA)"
tail -30 "$OUT/swap-bench-gpt.txt"
echo "== correctness, peaks, transfers (swap-check)"
tail -5 "$OUT/check.txt"
cat "$OUT/check.md" 2>/dev/null
