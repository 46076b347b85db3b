#!/usr/bin/env bash
# The README's example commands as CI runs them: each trainer's `main` with the README's flags
# for 2 steps, the quickstart, in the dev profile (the test build's), and the README's claims
# about them checked:
# - without the `swap` feature (and so without budget flags, which need it), train_mlp and the
#   quickstart train on plain Autodiff<Flex> and
#   end on the same loss, bit for bit;
# - `--report-json` writes the report (its counted peak within its budget), `--plot` an SVG.
# Usage: scripts/run-examples.sh [OUT_DIR] (default target/examples).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/examples}"
mkdir -p "$out"

run() {
    local log=$1 features=$2 example=$3
    shift 3
    printf '$ cargo run --features %s --example %s -- %s\n' "$features" "$example" "$*"
    cargo run --quiet --features "$features" --example "$example" -- "$@" >"$out/$log.log" 2>&1 || {
        cat "$out/$log.log"
        echo "run-examples: $example ($features) failed" >&2
        exit 1
    }
    tail -n 3 "$out/$log.log"
}

# The bits of the last loss a run printed ("... loss 0.123456 (bits 0x3dfcd6e9)").
final_bits() {
    grep -o 'loss [^ ]* (bits 0x[0-9a-f]*)' "$out/$1.log" | grep -o '0x[0-9a-f]*' | tail -n 1
}

# Fails unless runs $1 and $2 printed the same last loss, bit for bit.
same_loss() {
    local swapped plain
    swapped="$(final_bits "$1")"
    plain="$(final_bits "$2")"
    if [ -z "$swapped" ] || [ "$swapped" != "$plain" ]; then
        echo "run-examples: $1's last loss ($swapped) is not $2's ($plain)" >&2
        exit 1
    fi
    echo "$1 and $2: the same last loss ($swapped)"
}

# Every trainer takes the shared options: train_mlp with `--plot` (4 steps: a complete
# iteration traced) and `--lr`, as train_cnn below.
run mlp-swap swap,wgpu train_mlp --steps 4 --lr 1e-3 --budget 0.25 --report-json "$out/r.json" \
    --plot "$out/mlp-timeline.svg"
run mlp-plain wgpu train_mlp --steps 4 --lr 1e-3
same_loss mlp-swap mlp-plain
grep -q '<svg' "$out/mlp-timeline.svg" || {
    echo "run-examples: train_mlp --plot wrote no SVG" >&2
    exit 1
}
python3 - "$out/r.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
budget, peak = report["budget_bytes"], report["peak_bytes"]
if not budget or peak > budget:
    sys.exit(f"{sys.argv[1]}: counted peak {peak} B, budget {budget} B")
print(f"{sys.argv[1]}: counted peak {peak} B within the budget {budget} B")
PY

# The plot draws a complete iteration, traced after the loop is detected: 4 steps.
run cnn-swap swap,wgpu train_cnn --steps 4 --budget 0.4 --plot "$out/timeline.svg"
grep -q '<svg' "$out/timeline.svg" || {
    echo "run-examples: train_cnn --plot wrote no SVG" >&2
    exit 1
}

run gpt-swap swap,wgpu train_gpt --device wgpu --steps 2 --budget 0.5
run quickstart-swap swap,wgpu quickstart
run quickstart-plain wgpu quickstart
same_loss quickstart-swap quickstart-plain
echo "run-examples: all ran"
