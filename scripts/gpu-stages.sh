#!/usr/bin/env bash
# The GPU check's stages, in order of importance, each under its own time limit, each writing
# one PASS, FAIL or SKIP line with its reason to $OUT/summary.txt; the summary is printed last
# and the exit status is non-zero when any stage failed. Run through scripts/gpu-check.sh:
#
#   scripts/gpu-check.sh run        # on the GPU machine, from the carried bundle (.device/)
#   scripts/gpu-check.sh rehearse   # here and in CI: the same stages with the test build's
#                                   # binaries on burn-flex and wgpu, tiny sizes
#
# MODE is `device` or `rehearse`; BIN holds the binaries (swap-check, swap-bench, codec-bench
# on the device). What comes back, under $OUT (at most 6 files): summary.txt, check.md (the
# correctness and memory tables), bench.csv (speed), torch.csv (the PyTorch peer), logs.tgz
# (every stage's full output).
#
# Stage limits on the device add up to 420 s (7 minutes), leaving a 10-minute call time to
# start and to bring the files back: environment 20, correctness 150, memory 60, speed 110,
# transfers 30, pytorch 30, sanitizer 20 (the last, if time is left).
set -uo pipefail
MODE="${MODE:?MODE=device|rehearse}"
BIN="${BIN:?BIN=folder of the binaries}"
OUT="${OUT:-.device/out}"
LOGS="$OUT/logs"
SUMMARY="$OUT/summary.txt"
mkdir -p "$LOGS"
: >"$SUMMARY"
FAILED=0

# stage NAME LIMIT COMMAND...: runs COMMAND under `timeout LIMIT`, its output in
# $LOGS/NAME.log; exit 0 is PASS, 77 is SKIP (the command printed why as its last line),
# anything else FAIL with the log's last line as the reason.
stage() {
    local name=$1 limit=$2 start=$SECONDS rc result reason
    shift 2
    timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
    rc=$?
    reason=$(grep -v '^\s*$' "$LOGS/$name.log" | tail -n 1 | cut -c1-160)
    case $rc in
    0) result=PASS ;;
    77) result=SKIP ;;
    124) result=FAIL reason="timed out after ${limit} s; ${reason}" ;;
    *) result=FAIL reason="exit ${rc}; ${reason}" ;;
    esac
    [ "$result" = FAIL ] && FAILED=1
    printf '%-4s %-12s %4d s  %s\n' "$result" "$name" $((SECONDS - start)) "$reason" | tee -a "$SUMMARY"
}

skip() {
    echo "$*"
    exit 77
}

# device CMD...: a command of the device mode. On the GPU machine it runs as it is. In the
# rehearsal's `flags` stage (FLAGS_ONLY=1) it runs on the test build, which has no CUDA: each
# binary parses every option and stops at `--device cuda`, so that a wrong option, a binary
# that is not there or a malformed value fails here, not in the loan. A command that runs
# through, or stops for another reason, fails the stage.
device() {
    if [ "${FLAGS_ONLY:-0}" != 1 ]; then
        "$@"
        return
    fi
    local out
    [ -x "$1" ] || { echo "no binary $1"; return 1; }
    if out=$("$@" 2>&1); then
        echo "$out"
        echo "$(basename "$1") ran through without CUDA: not a device command"
        return 1
    fi
    grep -q 'needs the `cuda` feature' <<<"$out" || { echo "$out"; return 1; }
    echo "$*: options parsed"
}

# 1. The machine: GPU, driver, CUDA runtime, NVRTC, compute-sanitizer, and every library the
# binaries link found.
environment() {
    local missing
    for b in "$BIN"/swap-check "$BIN"/swap-bench; do
        [ -x "$b" ] || { echo "no binary $b"; return 1; }
        missing=$(ldd "$b" 2>&1 | grep 'not found' || true)
        [ -z "$missing" ] || { echo "$b: $missing"; return 1; }
    done
    ldd --version | head -n 1
    if [ "$MODE" = rehearse ]; then
        echo "binaries and their libraries found (rehearsal: no GPU here)"
        return 0
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || return 1
    ldconfig -p | grep -q 'libcuda\.so' || { echo "libcuda not found"; return 1; }
    ldconfig -p | grep -q 'libnvrtc' || ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1 ||
        { echo "libnvrtc not found"; return 1; }
    command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null ||
        echo "compute-sanitizer not found (the sanitizer stage will skip)"
    echo "GPU, driver, libcuda and libnvrtc found"
}

# 2. Bit for bit against the unwrapped backend: MLP, GPT-shaped transformer, BatchNorm CNN,
# `planned` and `offload-only` at 50% and 25% of the counted peak, device compression on,
# transfer jitter on.
correctness() {
    if [ "$MODE" = rehearse ]; then
        "$BIN/swap-check" --device flex --quick --models mlp,transformer,bn-cnn --steps 2 \
            --policies planned,offload-only --fractions 0.5,0.25 --compress --jitter 300 \
            --markdown "$OUT/check.md"
    else
        device "$BIN/swap-check" --device cuda --models mlp,transformer,bn-cnn --steps 6 \
            --policies planned,offload-only --fractions 0.5,0.25 --compress --jitter 300 \
            --markdown "$OUT/check.md"
    fi
}

# 3. The allocator's reserved bytes on the same kind of runs (CubeCL: wgpu here, CUDA there),
# the tables appended to check.md.
memory() {
    local device=cuda
    [ "$MODE" = rehearse ] && device=wgpu
    device "$BIN/swap-check" --device "$device" --quick --models mlp,bn-cnn --steps 2 \
        --policies planned,offload-only --fractions 0.5,0.25 --markdown "$LOGS/memory.md" &&
        { [ "${FLAGS_ONLY:-0}" = 1 ] || cat "$LOGS/memory.md" >>"$OUT/check.md"; }
}

# 4. Step times: the GPT-2-small-shaped model unwrapped, under Burn's BalancedCheckpointing,
# and under planned, offload-only and reactive at 75, 50 and 25% (one interleaved run).
speed() {
    if [ "$MODE" = rehearse ]; then
        "$BIN/swap-bench" --quick --policies planned,offload-only,reactive --limit 1 \
            --csv "$OUT/bench.csv" --pareto "$LOGS/bench.svg"
    else
        device "$BIN/swap-bench" --model gpt --preset gpt2-small --device cuda --budgets 75,50,25 \
            --policies planned,offload-only,reactive --fractions-only --steps 6 --warmup 4 \
            --limit 1 --csv "$OUT/bench.csv" --pareto "$LOGS/bench.svg"
    fi
}

# 5. Transfers: the codec kernels against a device-to-device copy; the peer path (device 0
# to itself) bit for bit with the MLP's offloads split across the peers.
transfers() {
    if [ "$MODE" = rehearse ]; then
        "$BIN/swap-check" --device flex --quick --models mlp --steps 2 \
            --policies offload-only --fractions 0.25 --peers 1MiB@40GB/s,1MiB@20GB/s
    else
        # codec-bench is criterion's: not in the test build, its options checked where the
        # bundle is built.
        if [ "${FLAGS_ONLY:-0}" != 1 ]; then
            "$BIN/codec-bench" --bench kernels --warm-up-time 1 --measurement-time 2 |
                grep -E 'kernels_|thrpt' || return 1
        fi
        device "$BIN/swap-check" --device cuda --quick --models mlp --steps 2 \
                --policies offload-only --fractions 0.25 --peers cuda:0@8GiB
    fi
}

# 6. PyTorch on the same GPT and batch, where PyTorch is there.
pytorch() {
    python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
        skip "no PyTorch with CUDA on this machine"
    python3 scripts/torch_gpt.py --preset gpt2-small >"$OUT/torch.csv"
}

# 7. Two steps under compute-sanitizer's memcheck, if time is left.
sanitizer() {
    local cmd=("$BIN/swap-check" --device cuda --quick --models mlp --steps 2
        --policies offload-only --fractions 0.25 --compress)
    if [ "${FLAGS_ONLY:-0}" = 1 ]; then
        device "${cmd[@]}"
        return
    fi
    local tool
    tool=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
    [ -n "$tool" ] || skip "no compute-sanitizer on this machine"
    [ "$MODE" = device ] || skip "no GPU to sanitize (rehearsal)"
    "$tool" --tool memcheck --error-exitcode 9 --print-limit 20 "${cmd[@]}"
}

# 0. (The rehearsal only.) The device mode's commands, each binary parsing its options on
# the test build and stopping at `--device cuda` (see `device`).
flags() {
    local f failed=""
    for f in correctness memory speed transfers sanitizer; do
        echo "== $f"
        (
            MODE=device
            FLAGS_ONLY=1
            "$f"
        ) || failed="$failed $f"
    done
    [ -z "$failed" ] || { echo "device commands refused in:$failed"; return 1; }
    echo "every device command's options parsed"
}

export -f flags environment correctness memory speed transfers pytorch sanitizer skip device
export MODE BIN OUT LOGS

# STAGES: the stages to run (all of them by default), for a second call after a first that
# could not finish.
ALL="environment correctness memory speed transfers pytorch sanitizer"
[ "$MODE" = rehearse ] && ALL="flags $ALL"
STAGES="${STAGES:-$ALL}"
for name in $STAGES; do
    case $name in
    flags) stage flags 60 bash -c flags ;;
    environment) stage environment 20 bash -c environment ;;
    correctness) stage correctness 150 bash -c correctness ;;
    memory) stage memory 60 bash -c memory ;;
    speed) stage speed 110 bash -c speed ;;
    transfers) stage transfers 30 bash -c transfers ;;
    pytorch) stage pytorch 30 bash -c pytorch ;;
    sanitizer) stage sanitizer 20 bash -c sanitizer ;;
    *)
        echo "FAIL $name: no such stage" | tee -a "$SUMMARY"
        FAILED=1
        ;;
    esac
done

tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
echo "== summary ($MODE)"
cat "$SUMMARY"
[ "$FAILED" = 0 ] || {
    echo "the GPU check failed: see the FAIL lines above and logs.tgz" >&2
    exit 1
}
