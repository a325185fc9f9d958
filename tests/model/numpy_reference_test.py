#!/usr/bin/env python3
"""Engine logits vs. the NumPy reference forward, f32 weights and f32 KV cache.

For each generated preset, `parallm generate --dump-logits` writes the logits of
every prompt position; tools/reference_forward.py recomputes them in float64
from the same GGUF file with its own parser. Tolerance: 1e-4 relative to the
largest logit magnitude of the row (the acceptance bound of issue 2).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

ARGS = None
PRESETS = ["tiny", "tiny-qwen2", "tiny-tied", "tiny-llama3", "mixtral-tiny"]
PROMPT = "Once upon a time, a small robot found a blue flower in the garden."


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout


class NumpyReference(unittest.TestCase):
    def check_preset(self, preset, extra=()):
        sys.path.insert(0, ARGS.tools)
        import reference_forward as ref

        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(tmp, preset + ".gguf")
            run([ARGS.binary, "make-model", "--preset", preset, "--dtype", "f32", "--out", model, "--seed", "7"])
            dump = os.path.join(tmp, "logits.f32")
            j = json.loads(run([ARGS.binary, "generate", "--model", model, "--prompt", PROMPT, "-n", "0",
                                "--kv-dtype", "f32", "--json", "--dump-logits", dump, "--threads", "2", *extra]))
            ids = j["prompt_token_ids"]
            self.assertGreater(len(ids), 8)
            got = np.fromfile(dump, dtype=np.float32).reshape(len(ids), -1).astype(np.float64)
            want = ref.forward(ref.Gguf(model), ids)
            self.assertEqual(got.shape, want.shape)
            rel = np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)
            self.assertLess(rel.max(), 1e-4, f"{preset}: worst row relative error {rel.max():.3g}")
            # The reference really differs from a wrong model: sanity-check the spread.
            self.assertGreater(np.abs(want).max(), 0.5)

    def test_presets(self):
        for preset in PRESETS:
            with self.subTest(preset=preset):
                self.check_preset(preset)

    def test_parallel_layouts_match_reference(self):
        self.check_preset("tiny", ["--tp", "2"])
        self.check_preset("mixtral-tiny", ["--ep", "2"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--tools", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v"] + rest)
