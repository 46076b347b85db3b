#!/usr/bin/env python3
"""Checks a `swap-bench` CSV (CI runs it on `swap-bench --quick`'s): the unwrapped row and one
row per policy and budget are present, and the `no-budget` row (burn-swap with its default
configuration), no row failed, and every burn-swap row's counted peak
is within its budget (the budget fraction times the unwrapped row's peak; the CSV prints the
fraction to four decimals, so a peak may pass it by that rounding, never by more).

With `--paired` (a `swap-bench --lockstep` CSV), every budgeted row that ran also has its
paired ratio to the first policy's row at its fraction, the first policy's rows are 1, and
the ratio of the two rows' own median steps (which the harness computes apart from the
pairing) lies inside the paired ratio's interval widened by 10% each way: a ratio paired
with the wrong row (another fraction, the unwrapped run), or inverted where its interval
is narrow and away from 1, fails. (The median of the per-step ratios and the ratio of the
medians are two estimates of one thing; on a noisy quick run they differed by 10% with the
pairing right, 2026-12-07, so the bound is the pairing's own interval, not a fixed 10%.
That the ratio lies inside its own interval is checked too, but a median always does.)

Usage: check-bench-csv.py FILE [--policies reactive,planned,...] [--fractions 1,0.5,0.25] [--paired]
"""
import csv
import sys


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    path = argv[0]
    paired = "--paired" in argv
    argv = [a for a in argv if a != "--paired"]
    options = dict(zip(argv[1::2], argv[2::2]))
    policies = options.get("--policies", "reactive,planned,offload-only,recompute-only").split(",")
    fractions = [float(f) for f in options.get("--fractions", "1,0.5,0.25").split(",")]
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    problems = []
    unwrapped = [r for r in rows if r["config"] == "unwrapped"]
    if len(unwrapped) != 1:
        sys.exit(f"{path}: {len(unwrapped)} `unwrapped` rows (expected one)")
    if len([r for r in rows if r["config"] == "no-budget"]) != 1:
        problems.append("no `no-budget` row (burn-swap without a budget)")
    peak = int(unwrapped[0]["peak_bytes"])
    if peak <= 0:
        problems.append(f"the unwrapped peak is {peak} B")
    for policy in policies:
        for fraction in fractions:
            found = [
                r
                for r in rows
                if r["config"] == policy
                and r["budget_fraction"]
                and abs(float(r["budget_fraction"]) - fraction) < 5e-5
            ]
            if not found:
                problems.append(f"no row for {policy} at {fraction:g}")
    checked = 0
    for r in rows:
        what = f"{r['config']} at {r['budget_fraction'] or '-'}"
        if r["error"]:
            problems.append(f"{what}: failed: {r['error']}")
            continue
        if not r["budget_fraction"]:
            continue
        budget = float(r["budget_fraction"]) * peak
        measured = int(r["peak_bytes"])
        # The fraction is printed to four decimals: the budget may be up to half a unit of
        # the last one (5e-5 of the peak) above what it reads, whatever the fraction's size
        # (a relative bound failed the smallest-budget rows, at fractions near 0.1).
        if measured > (float(r["budget_fraction"]) + 5e-5) * peak:
            problems.append(f"{what}: counted peak {measured} B over the budget {budget:.0f} B")
        checked += 1
        if paired:
            try:
                ratio, low, high = (float(r[k]) for k in ("paired_ratio", "paired_low", "paired_high"))
            except (KeyError, ValueError):
                problems.append(f"{what}: no paired ratio")
                continue
            if not low <= ratio <= high:
                problems.append(f"{what}: paired ratio {ratio} outside its interval [{low}, {high}]")
            if r["config"] == policies[0] and not (ratio == low == high == 1.0):
                problems.append(f"{what}: the first policy's paired ratio is {ratio}, not 1")
            reference = [
                q
                for q in rows
                if q["config"] == policies[0]
                and q["budget_fraction"]
                and abs(float(q["budget_fraction"]) - float(r["budget_fraction"])) < 5e-5
            ]
            if reference and not reference[0]["error"]:
                of_medians = float(r["median_step_ms"]) / float(reference[0]["median_step_ms"])
                if not low / 1.1 <= of_medians <= high * 1.1:
                    problems.append(
                        f"{what}: {of_medians:.4f} from the rows' median steps lies outside the "
                        f"paired interval [{low}, {high}] widened by 10% (paired ratio {ratio})"
                    )
    if problems:
        sys.exit(f"{path}:\n  " + "\n  ".join(problems))
    print(f"{path}: {len(rows)} rows, {checked} budgeted peaks within their budgets")


if __name__ == "__main__":
    main(sys.argv[1:])
