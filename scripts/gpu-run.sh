#!/usr/bin/env bash
# Runs on the GPU machine from the repository root (see scripts/gpu-check.sh). Everything it
# writes goes to $OUT when set (the device tool brings it back), else to .device/out.
set -uo pipefail
OUT="${OUT:-.device/out}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

# The codec kernels against a device-to-device copy (criterion; CUDA and wgpu groups).
.device/codec-bench --bench kernels 2>&1 | grep -E "kernels_|thrpt" | tee "$OUT/kernels.txt"

# The harness on the GPT-2-small-shaped model, on CUDA.
.device/swap-bench --model gpt --preset gpt2-small --device cuda --limit 64 \
    --csv "$OUT/swap-bench-gpt.csv" --pareto "$OUT/swap-bench-gpt.svg" \
    > "$OUT/swap-bench-gpt.txt" 2>&1
echo "swap-bench exit: $?" >> "$OUT/swap-bench-gpt.txt"

# The PyTorch peer on the same model.
if python3 -c "import torch" 2>/dev/null; then
    (cd .device && python3 scripts/torch_gpt.py --preset gpt2-small) \
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
