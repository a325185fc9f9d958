#!/usr/bin/env python3
"""How far this host alone moves the errors of bench/simulate_vs_real.sh.

A check's directory holds each level's measured parts (bench-LEVEL-rR.json)
and each part simulated with every calibration (sim-LEVEL-rR-calC.json).
Split a level's rounds into two halves: the simulated figure of a half
replays that half's own requests (its prompts, output lengths and Poisson
arrivals), so one half's error (measured / simulated) against the other
half's is what the host changed between them, with the workload and the
simulator held fixed. Two splits a run: the first rounds against the last,
and even rounds against odd (with odd rounds, one round sits out of each).

Half the distance between the two halves' errors is a sample of how far the
host alone moves a whole run's error: with the halves independent and each
error's spread s, the whole run's is s / sqrt(2), and so is that of half
their difference. Given several check directories, the share of samples in
which every figure stays within its limit estimates the chance that a
simulator right on average holds the whole table in one run on this host.

Usage: bench/simulate_noise.py CHECK_DIR [CHECK_DIR ...]
Also imported by bench/simulate_vs_real.sh for percentile(), pooled(), ROWS.
"""
import glob
import json
import math
import os
import re
import sys

# (label, bench JSON key, percentile or None, limit in %): the acceptance's.
ROWS = [("TTFT p50", "ttft_ms", "p50", 20), ("TTFT p95", "ttft_ms", "p95", 20),
        ("TPOT p50", "tpot_ms", "p50", 20), ("TPOT p95", "tpot_ms", "p95", 20),
        ("tokens/s", "output_tokens_per_s", None, 10)]


def percentile(values, q):  # NumPy's linear interpolation, as bench's stats
    v = sorted(values)
    if not v:
        return 0.0
    x = q / 100 * (len(v) - 1)
    i = int(x)
    return v[i] + (v[min(i + 1, len(v) - 1)] - v[i]) * (x - i)


def load(path):
    with open(path) as f:
        return json.load(f)


def pooled(files):
    """The level's figures over its parts' requests, as one bench run of them all would report."""
    res = [load(f)["results"][0] for f in files]
    col = lambda key: [x for r in res for x in r["detailed"][key] if x is not None]
    ttft, tpot = col("ttft_ms"), col("tpot_ms")
    return {("ttft_ms", "p50"): percentile(ttft, 50), ("ttft_ms", "p95"): percentile(ttft, 95),
            ("tpot_ms", "p50"): percentile(tpot, 50), ("tpot_ms", "p95"): percentile(tpot, 95),
            ("output_tokens_per_s", None): sum(r["output_tokens"] for r in res) / sum(r["duration_s"] for r in res),
            "prompt": sum(r["input_tokens"] for r in res) / max(1, sum(r["completed"] for r in res)),
            "completed": sum(r["completed"] for r in res), "requests": sum(r["requests"] for r in res),
            "cpu_share": max(r["client"]["cpu_share"] for r in res)}


def layout(d):
    """(levels, rounds, calibrations) of a check directory, in run order of levels."""
    parts = [re.fullmatch(r"bench-(\w+)-r(\d+)\.json", os.path.basename(f)) for f in glob.glob(f"{d}/bench-*.json")]
    parts = [m for m in parts if m]
    levels = sorted({m[1] for m in parts})
    rounds = 1 + max((int(m[2]) for m in parts), default=-1)
    ncal = len(glob.glob(f"{d}/sim-{levels[0]}-r0-cal[0-9]*.json")) if levels else 0
    return levels, rounds, ncal


def splits(rounds):
    """Two ways to halve the rounds: first against last, even against odd."""
    half = rounds // 2
    first = (tuple(range(half)), tuple(range(rounds - half, rounds)))
    parity = (tuple(range(0, 2 * half, 2)), tuple(range(1, 2 * half, 2)))
    return [first] if half < 2 else [first, parity]


def half_errors(d):
    """{(level, label): [half of the log-distance between the halves' errors, per split]}."""
    levels, rounds, ncal = layout(d)
    if rounds < 2 or ncal == 0:
        return {}
    out = {}
    for name in levels:
        for a, b in splits(rounds):
            err = []
            for half in (a, b):
                m = pooled([f"{d}/bench-{name}-r{r}.json" for r in half])
                s = pooled([f"{d}/sim-{name}-r{r}-cal{c}.json" for r in half for c in range(ncal)])
                err.append({row: m[row[1:3]] / s[row[1:3]] for row in ROWS})
            for row in ROWS:
                out.setdefault((name, row), []).append(math.log(err[0][row] / err[1][row]) / 2)
    return out


def main(dirs):
    try:
        runs = [(d, half_errors(d)) for d in dirs]
    except (OSError, KeyError, IndexError, ValueError, ZeroDivisionError) as e:  # a file missing or cut short
        print(f"simulate_noise: {e!r}: not a finished bench/simulate_vs_real.sh directory", file=sys.stderr)
        return 2
    runs = [(d, h) for d, h in runs if h]
    if not runs:
        print("no check directory with 2 or more rounds and its simulations", file=sys.stderr)
        return 2
    # The (level, figure) pairs every run has: a sample must be the same table in each.
    keys = [k for k in runs[0][1] if all(k in h for _, h in runs)]
    if not keys:
        print("the check directories share no level", file=sys.stderr)
        return 2
    print("\nthe host alone: half the distance between the errors of the run's two halves, per split")
    print(f"{'level':6} {'metric':9} {'limit':>6}   " + "   ".join(os.path.basename(d.rstrip('/')) for d, _ in runs))
    for key in keys:
        name, (label, _, _, limit) = key
        cells = ["/".join(f"{100 * math.expm1(x):+.0f}" for x in h[key]) for _, h in runs]
        print(f"{name:6} {label:9} {limit:5d}%   " + "   ".join(cells))
    # Each split of each run is one sample of the whole table's host error.
    samples = [[h[k][i] for k in keys] for _, h in runs for i in range(len(h[keys[0]]))]
    limits = [math.log1p(k[1][3] / 100) for k in keys]
    inside = sum(all(abs(x) <= lim for x, lim in zip(s, limits)) for s in samples)
    print(f"{inside} of {len(samples)} samples (splits of runs) hold every figure within its limit"
          + (": the chance that a simulator right on average holds the table in one run on this host"
             if len(runs) > 1 else ""))
    for key, lim in zip(keys, limits):
        xs = [x for _, h in runs for x in h[key]]
        rms = math.sqrt(sum(x * x for x in xs) / len(xs))
        out = sum(abs(x) > lim for x in xs)
        if out:
            print(f"  {key[0]} {key[1][0]}: spread {100 * rms:.1f}%, {out} of {len(xs)} samples over {key[1][3]}%")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or any(a.startswith("-") for a in sys.argv[1:]):
        print(__doc__.split("\n\n")[-1].split("\n")[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
