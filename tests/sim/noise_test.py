"""bench/simulate_noise.py on check directories built here with known answers.

Each round of a level gets the same requests; the measured parts are the
simulated ones with every time multiplied by the host's factor of that round
(and the duration with it, so tokens/s divided by it). Then every figure's
error (measured / simulated) of a half of the rounds is that half's factor
exactly, and the halves' samples are known in closed form:
- rounds 0, 1 at factor f and 2, 3 at g: first against last = log(f / g) / 2
  (tokens/s the negative), even against odd = 0;
- percentile() against NumPy's default (linear) interpolation.

usage: noise_test.py REPO
"""
import contextlib
import io
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest

import numpy as np

REPO = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(REPO, "bench"))
import simulate_noise as sn  # noqa: E402

LEVELS = ("c1", "q2")
NCAL = 3


def part(ttft, tpot, tokens, duration):
    """bench's --json with --save-detailed, the fields the check reads."""
    return {"results": [{"detailed": {"ttft_ms": ttft, "tpot_ms": tpot}, "output_tokens": tokens,
                         "duration_s": duration, "input_tokens": 185 * len(ttft), "completed": len(ttft),
                         "requests": len(ttft), "client": {"cpu_share": 0.01}}]}


def dump(obj, path):
    with open(path, "w") as f:
        json.dump(obj, f)


def write_check(d, factors, seed=1):
    """A check directory whose round r ran at factors[r] times the simulated times.

    A level's figures pool its parts simulated with every calibration, so each
    measured part holds the requests of all of them, scaled: its half's pooled
    percentiles are then the simulated ones times the factor, exactly.
    """
    rng = random.Random(seed)
    for name in LEVELS:
        ttft = [rng.uniform(30, 60) for _ in range(40)]
        tpot = [rng.uniform(2, 4) for _ in range(40)]
        sims = [part([x * (1 + 0.01 * c) for x in ttft], [x * (1 + 0.01 * c) for x in tpot], 2560, 8.0 * (1 + 0.01 * c))
                for c in range(NCAL)]  # each calibration a little slower than the one before
        for r, f in enumerate(factors):
            for c, sim in enumerate(sims):
                dump(sim, f"{d}/sim-{name}-r{r}-cal{c}.json")
            runs = [s["results"][0] for s in sims]
            measured = part([x * f for s in runs for x in s["detailed"]["ttft_ms"]],
                            [x * f for s in runs for x in s["detailed"]["tpot_ms"]],
                            sum(s["output_tokens"] for s in runs), f * sum(s["duration_s"] for s in runs))
            dump(measured, f"{d}/bench-{name}-r{r}.json")


class NoiseTest(unittest.TestCase):
    def test_percentile_is_numpy_linear(self):
        rng = random.Random(7)
        for n in (1, 2, 5, 40, 241):
            v = [rng.uniform(0, 100) for _ in range(n)]
            for q in (0, 5, 50, 95, 99, 100):
                self.assertAlmostEqual(sn.percentile(v, q), float(np.percentile(v, q)), places=9)

    def test_halves_are_the_round_factors(self):
        f, g = 1.10, 0.90
        with tempfile.TemporaryDirectory() as d:
            write_check(d, [f, f, g, g])
            self.assertEqual(sn.layout(d), (list(LEVELS), 4, NCAL))
            h = sn.half_errors(d)
            self.assertEqual(len(h), len(LEVELS) * len(sn.ROWS))
            for (name, (label, _, _, _)), (first, parity) in h.items():
                want = math.log(f / g) / 2 * (-1 if label == "tokens/s" else 1)
                self.assertAlmostEqual(first, want, places=9, msg=f"{name} {label}")
                self.assertAlmostEqual(parity, 0.0, places=9, msg=f"{name} {label}")

    def test_share_of_samples_within_the_limits(self):
        # log(1.5) / 2 = 0.203 > log(1.2): the first split is over 20%; log(1.3) / 2 is within it
        # for the times but over 10% for tokens/s (0.131 > log(1.1) = 0.095).
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b, \
                tempfile.TemporaryDirectory() as c:
            write_check(a, [1.5, 1.5, 1.0, 1.0])
            write_check(b, [1.3, 1.3, 1.0, 1.0])
            write_check(c, [1.02, 1.02, 1.0, 1.0])
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(sn.main([a, b, c]), 0)
            text = out.getvalue()
            self.assertIn("4 of 6 samples (splits of runs) hold every figure within its limit: the chance", text)
            self.assertIn("c1 TPOT p95: spread", text)
            self.assertIn("1 of 6 samples over 20%", text)
            self.assertIn("2 of 6 samples over 10%", text)

    def test_bad_input_exits_2(self):
        script = os.path.join(REPO, "bench", "simulate_noise.py")
        with tempfile.TemporaryDirectory() as cut:
            write_check(cut, [1.0, 1.0])
            os.remove(f"{cut}/sim-q2-r1-cal2.json")  # a simulation missing: a check cut short
            for args in ([], ["--help"], [cut]):
                p = subprocess.run([sys.executable, script] + args, capture_output=True, text=True)
                self.assertEqual(p.returncode, 2, args)
                self.assertTrue(p.stderr.strip(), args)
                self.assertNotIn("Traceback", p.stderr, args)


if __name__ == "__main__":
    unittest.main()
