#!/usr/bin/env python3
"""Quantized Hugging Face checkpoints end to end: tools/quantize_hf.py writes
tiny-qwen3 / tiny-qwen2 twins in the layouts real repositories ship (fp8 per
tensor, per channel and per block; GPTQ groups 32/64/128 with and without
desc_act, symmetric and not; AWQ gemm; compressed-tensors pack-quantized),
and dequantizes them itself from those layouts. parallm's logits must equal
the NumPy reference forward over those dequantized weights: within 1e-4
with --dtype f32 (the conversion is exact), and within the kernels' own
rounding in the default layout (q4_0 / q4_1 / q8_0, whose AVX-512 kernels
round activations to 8 bits). Unknown quant methods and broken layouts exit 2
with a message naming them.
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
PROMPT = "Once upon a time, a small robot found a blue flower in the garden."
CASES = [
    ("fp8", {"scheme": "tensor"}), ("fp8", {"scheme": "channel"}), ("fp8", {"scheme": (32, 64)}),
    ("fp8", {"scheme": (128, 128)}),
    ("gptq", {"group": 32, "desc_act": False, "sym": True}), ("gptq", {"group": 64, "desc_act": False, "sym": False}),
    ("gptq", {"group": 128, "desc_act": False, "sym": False}), ("gptq", {"group": 32, "desc_act": True, "sym": False}),
    ("gptq", {"group": 64, "desc_act": True, "sym": True}),
    ("awq", {"group": 32}), ("awq", {"group": 64}), ("awq", {"group": 128}),
    ("compressed", {"group": 32}), ("compressed", {"group": 0}),
]


def run(cmd, ok=True):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if ok and out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out


class QuantizedCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, ARGS.tools)
        cls.tmp = tempfile.TemporaryDirectory()
        cls.models = {}
        for preset in ("tiny-qwen3", "tiny-qwen2"):
            path = os.path.join(cls.tmp.name, preset + ".gguf")
            run([ARGS.binary, "make-model", "--preset", preset, "--dtype", "f32", "--out", path, "--seed", "3"])
            cls.models[preset] = path

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def logits(self, model_dir, gguf, extra):
        dump = os.path.join(self.tmp.name, "logits.f32")
        out = run([ARGS.binary, "generate", "--model", model_dir, "--tokenizer", gguf, "--prompt", PROMPT, "-n", "0",
                   "--kv-dtype", "f32", "--json", "--dump-logits", dump, "--threads", "2", *extra])
        ids = json.loads(out.stdout)["prompt_token_ids"]
        return ids, np.fromfile(dump, dtype=np.float32).reshape(len(ids), -1).astype(np.float64)

    @staticmethod
    def worst(got, want):
        return (np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)).max()

    def test_every_layout_equals_dequantize_then_forward(self):
        import quantize_hf
        import reference_forward as ref

        for preset, gguf in self.models.items():
            for method, opts in CASES:
                with self.subTest(preset=preset, method=method, opts=opts):
                    d = os.path.join(self.tmp.name, f"{preset}-{method}")
                    g = quantize_hf.quantize(gguf, d, method, **opts)
                    ids, exact = self.logits(d, gguf, ["--dtype", "f32"])
                    want = ref.forward(g, ids)
                    self.assertLess(self.worst(exact, want), 1e-4)
                    # The quantization is really there: the unquantized model is far off.
                    self.assertGreater(self.worst(ref.forward(ref.Gguf(gguf), ids), want), 1e-2)
                    _, fast = self.logits(d, gguf, [])
                    self.assertLess(self.worst(fast, want), 0.1)

    def test_bad_checkpoints_exit_2_with_the_reason(self):
        import quantize_hf

        gguf = self.models["tiny-qwen3"]
        d = os.path.join(self.tmp.name, "bad")
        quantize_hf.quantize(gguf, d, "gptq", group=32, desc_act=False, sym=True)
        config_path = os.path.join(d, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        for edit, needle in ((lambda c: c["quantization_config"].update(quant_method="bitsandbytes"), "'bitsandbytes'"),
                             (lambda c: c["quantization_config"].update(group_size=16), "scale groups"),
                             (lambda c: c["quantization_config"].update(bits=3), "3-bit"),
                             (lambda c: c.pop("quantization_config"), "dtype I32")):
            broken = json.loads(json.dumps(config))
            edit(broken)
            with open(config_path, "w") as f:
                json.dump(broken, f)
            out = run([ARGS.binary, "generate", "--model", d, "--tokenizer", gguf, "--prompt", "hi", "-n", "1"], ok=False)
            with self.subTest(needle=needle):
                self.assertEqual(out.returncode, 2, out.stderr)
                self.assertIn(needle, out.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--tools", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v"] + rest)
