#!/usr/bin/env bash
# The GPU check: one device call that fits a 15-minute loan, fails loudly, and is rehearsed
# here and in CI on every commit.
#
#   scripts/gpu-check.sh build      # here (a Rust toolchain, no GPU needed): the CUDA binaries
#                                   # (release, stripped, gzipped) into .device/ (git-ignored),
#                                   # with each binary's dynamic libraries listed
#   scripts/gpu-check.sh run        # on the GPU machine (no toolchain, no network), from the
#                                   # carried bundle: every stage of scripts/gpu-stages.sh
#   scripts/gpu-check.sh rehearse   # here and in CI (.ci/run): the same stages with the test
#                                   # build's binaries on burn-flex and wgpu, tiny sizes, and
#                                   # first the device commands' options parsed (`flags`)
#
# With the device tool, one call:
#   run(command="scripts/gpu-check.sh run", carry=[".device"], timeout_s=480)
# The stages (environment, correctness, memory, speed, transfers, pytorch, sanitizer) each
# run under their own time limit, 7 minutes in all, and write one PASS/FAIL/SKIP line to
# $OUT/summary.txt, printed last; the exit status is non-zero when a stage failed. A second
# call, only for what the first could not finish: STAGES="speed transfers" scripts/gpu-check.sh run.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
build)
    cargo build --release -p burn-swap-harness --features cuda --bin swap-bench --bin swap-check
    cargo bench --no-run --features cuda --bench codec 2>&1 | tail -1
    rm -rf .device && mkdir -p .device/harness/src .device/scripts
    codec=$(ls -t target/release/deps/codec-* | grep -v '\.d$' | head -1)
    for bin in target/release/swap-bench target/release/swap-check "$codec"; do
        name=$(basename "$bin")
        case "$bin" in
        */deps/codec-*) name=codec-bench ;;
        esac
        cp "$bin" ".device/$name"
        strip ".device/$name"
        gzip -9 ".device/$name"
    done
    cp harness/src/corpus.txt .device/harness/src/
    cp scripts/torch_gpt.py .device/scripts/
    for bin in .device/*.gz; do
        echo "== $(basename "$bin" .gz)"
        gunzip -c "$bin" >.device/unpacked && chmod +x .device/unpacked
        ldd .device/unpacked || true
    done >.device/ldd.txt
    rm -f .device/unpacked
    du -sh .device
    ;;
run)
    # Unpacked once per machine, again when a newer build was carried.
    BIN="${TMPDIR:-/tmp}/burn-swap-bin"
    mkdir -p "$BIN"
    for f in .device/*.gz; do
        name=$(basename "$f" .gz)
        [ "$BIN/$name" -nt "$f" ] || { gunzip -c "$f" >"$BIN/$name" && chmod +x "$BIN/$name"; }
    done
    MODE=device BIN="$BIN" OUT="${OUT:-.device/out}" exec scripts/gpu-stages.sh
    ;;
rehearse)
    # The test build's binaries (`.ci/run` builds them with the tests' features).
    MODE=rehearse BIN="${BIN:-target/debug}" OUT="${OUT:-target/gpu-rehearsal}" \
        exec scripts/gpu-stages.sh
    ;;
*)
    echo "usage: scripts/gpu-check.sh build|run|rehearse" >&2
    exit 2
    ;;
esac
