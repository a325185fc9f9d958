#!/usr/bin/env python3
"""`parallm generate` against ../shared/reference/stories260K_greedy.json
(computed by llama2.c's run.c, an independent implementation), for both the
llama2.c and the GGUF form of the model; and bad inputs that must end as one
clear line on stderr with exit code 2, never a crash."""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

ARGS = None
TMP = None


def run(args, **kw):
    return subprocess.run([ARGS.binary, *args], capture_output=True, text=True, timeout=300, **kw)


class Golden(unittest.TestCase):
    def test_reference_cases(self):
        ref = json.load(open(os.path.join(ARGS.shared, "reference", "stories260K_greedy.json")))
        m = os.path.join(ARGS.shared, "models", "stories260K")
        forms = [["--model", os.path.join(m, "stories260K.bin"), "--tokenizer", os.path.join(m, "tok512.bin")],
                 ["--model", os.path.join(m, "stories260K.gguf"), "--ctx-size", "512"]]
        self.assertGreater(len(ref["cases"]), 0)
        for case in ref["cases"]:
            gen = case["generated_token_ids"]
            n = len(gen) - 1 if gen and gen[-1] == 1 else len(gen)
            for form in forms:
                with self.subTest(prompt=case["prompt"], model=form[1]):
                    out = run(["generate", "--json", *form, "--temperature", "0", "--kv-dtype", "f32", "-n", str(n),
                               "--prompt", case["prompt"]])
                    self.assertEqual(out.returncode, 0, out.stderr)
                    j = json.loads(out.stdout)
                    self.assertEqual(j["prompt_token_ids"], case["prompt_token_ids"])
                    self.assertEqual(j["token_ids"], gen[:n])
                    # Past N, the model produces the reference's final BOS and stops there.
                    if n < len(gen):
                        full = json.loads(run(["generate", "--json", *form, "--temperature", "0", "--kv-dtype",
                                               "f32", "-n", str(n + 5), "--prompt", case["prompt"]]).stdout)
                        self.assertEqual(full["token_ids"], gen[:n])
                        self.assertEqual(full["finish_reason"], "stop")

    def test_text_output_and_echo(self):
        ref = json.load(open(os.path.join(ARGS.shared, "reference", "stories260K_greedy.json")))
        case = ref["cases"][0]
        m = os.path.join(ARGS.shared, "models", "stories260K")
        gen = case["generated_token_ids"]
        n = len(gen) - 1 if gen and gen[-1] == 1 else len(gen)
        out = run(["generate", "--model", os.path.join(m, "stories260K.bin"), "--tokenizer",
                   os.path.join(m, "tok512.bin"), "--temperature", "0", "--kv-dtype", "f32", "-n", str(n),
                   "--echo", "--prompt", case["prompt"]])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.rstrip("\n"), case["output_text"])

    def test_same_seed_same_output(self):
        m = os.path.join(ARGS.shared, "models", "stories260K")
        args = ["generate", "--json", "--model", os.path.join(m, "stories260K.gguf"), "--prompt", "The cat",
                "--temperature", "0.9", "--top-k", "40", "--top-p", "0.9", "--min-p", "0.05", "-n", "40"]
        a = json.loads(run(args + ["--seed", "42"]).stdout)
        b = json.loads(run(args + ["--seed", "42"]).stdout)
        c = json.loads(run(args + ["--seed", "43"]).stdout)
        self.assertEqual(a["token_ids"], b["token_ids"])
        self.assertNotEqual(a["token_ids"], c["token_ids"])


class BadInput(unittest.TestCase):
    def expect_error(self, args, fragment):
        out = run(args)
        self.assertEqual(out.returncode, 2, f"{args}: {out.stderr}")
        # One error line; informational log lines ("[parallm info] ...") may precede it.
        lines = [l for l in out.stderr.strip().splitlines() if l and not l.startswith("[parallm info]")]
        self.assertEqual(len(lines), 1, out.stderr)
        self.assertTrue(lines[0].startswith("parallm: error: "), out.stderr)
        self.assertIn(fragment, lines[0])

    def write(self, name, data):
        path = os.path.join(TMP, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_files(self):
        gguf = open(os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf"), "rb").read()
        p = ["--prompt", "hi", "-n", "2"]
        self.expect_error(["generate", "--model", self.write("truncated.gguf", gguf[: len(gguf) // 2]), *p],
                          "truncated")
        self.expect_error(["generate", "--model", self.write("short.gguf", gguf[:100]), *p], "truncated")
        self.expect_error(["generate", "--model", self.write("magic.gguf", b"GGUX" + gguf[4:]), *p], "")
        self.expect_error(["generate", "--model", os.path.join(TMP, "missing.gguf"), *p], "cannot open")
        # Unknown architecture: rename general.architecture's value in place (same length).
        bad_arch = gguf.replace(b"\x05\x00\x00\x00\x00\x00\x00\x00llama", b"\x05\x00\x00\x00\x00\x00\x00\x00gpt-j", 1)
        self.expect_error(["generate", "--model", self.write("arch.gguf", bad_arch), *p], "supported")
        # An architecture parallm does not run, its keys under its own prefix: the engine refuses it by
        # name, and the planner, reading the same description, plans it without a parallm line.
        falco = gguf.replace(b"llama.", b"falco.").replace(
            b"general.architecture\x08\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00llama",
            b"general.architecture\x08\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00falco", 1)
        falco_path = self.write("falco.gguf", falco)
        self.expect_error(["generate", "--model", falco_path, *p], "unsupported architecture 'falco'")
        plan = run(["plan", "--model", falco_path, "--gpu", "cpu"])
        self.assertEqual(plan.returncode, 0, plan.stderr)
        self.assertIn("No parallm line: parallm's engine does not run", plan.stdout)
        self.assertIn("unsupported architecture 'falco'", plan.stdout)
        # A missing tensor: rename one tensor so the expected name is absent.
        missing = gguf.replace(b"blk.0.ffn_up.weight", b"blk.0.ffn_UP.weight", 1)
        self.expect_error(["generate", "--model", self.write("tensor.gguf", missing), *p], "blk.0.ffn_up.weight")
        # llama2.c checkpoint whose header promises more weights than the file holds.
        binf = open(os.path.join(ARGS.shared, "models", "stories260K", "stories260K.bin"), "rb").read()
        tok = os.path.join(ARGS.shared, "models", "stories260K", "tok512.bin")
        self.expect_error(["generate", "--model", self.write("cut.bin", binf[:5000]), "--tokenizer", tok, *p],
                          "truncated")
        # A shape mismatch: a header that claims another width.
        wide = struct.pack("<7i", 128, 172, 5, 8, 4, 512, 512) + binf[28:]
        self.expect_error(["generate", "--model", self.write("wide.bin", wide), "--tokenizer", tok, *p], "")

    def test_deep_json_and_templates(self):
        # Nested 50,000 deep: a stack overflow once; now the depth limits refuse them.
        seq = '{"type": "Sequence", "pretokenizers": ['
        deep = ('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": ' +
                seq * 50000 + '{"type": "ByteLevel"}' + "]}" * 50000 + "}")
        self.expect_error(["tokenize", "--tokenizer", self.write("deep.json", deep.encode()), "--text", "hi"],
                          "tokenizer.json: JSON nested deeper than the limit of 64 levels")
        m = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        tpl = self.write("deep.jinja", ("{{ " + "(" * 50000 + "1" + ")" * 50000 + " }}").encode())
        self.expect_error(["serve", "--model", m, "--port", "0", "--chat-template", tpl],
                          "nested deeper than the limit of 256 levels")

    def test_prompt_longer_than_context(self):
        m = os.path.join(ARGS.shared, "models", "stories260K")
        self.expect_error(["generate", "--model", os.path.join(m, "stories260K.gguf"), "--ctx-size", "16",
                           "--prompt", "Once upon a time " * 20, "-n", "4"], "context")

    def test_bad_flags(self):
        m = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        self.expect_error(["generate", "--model", m, "--prompt", "x", "--kv-dtype", "q4_0"], "kv-dtype")
        self.expect_error(["generate", "--model", m, "--prompt", "x", "--top-p", "0"], "top_p")
        self.expect_error(["generate", "--model", m, "--prompt", "x", "--tp", "3"], "tp")
        self.expect_error(["generate", "--model", m, "--prompt", "x", "--dtype", "q9"], "dtype")
        self.expect_error(["serve", "--model", m, "--port", "0", "--chat-template", "{% if %}"], "chat-template")
        self.expect_error(["serve", "--model", m, "--port", "0", "--chat-template", "/no/such/template"], "chat-template")
        self.expect_error(["serve", "--model", m, "--port", "0", "--reasoning-parser", "granite"], "reasoning-parser")

    def test_bad_devices(self):
        # This binary is the CPU-only build (the CUDA build's own answers are
        # CudaErrors.* in tests/model/device_model_test.cpp).
        m = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        g = ["generate", "--model", m, "--prompt", "x", "-n", "2"]
        self.expect_error(g + ["--devices", "cuda:0"], "built without CUDA; rebuild with -DPARALLM_CUDA=ON")
        self.expect_error(["bench-model", "--model", m, "--devices", "cuda:1"], "built without CUDA")
        # serve reports where it listens before it loads: the error is its last line.
        out = run(["serve", "--model", m, "--port", "0", "--devices", "cuda:0"])
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("parallm: error: cuda:0: this parallm was built without CUDA", out.stderr.strip().splitlines()[-1])
        self.expect_error(g + ["--devices", "gpu:x"], "index must be a number")
        self.expect_error(g + ["--devices", "tpu:0"], "expected cpu:N, cuda:N or emu:N")
        self.expect_error(g + ["--tp", "2", "--devices", "cpu:0,emu:0"], "mixes CPU and GPU ranks")
        self.expect_error(g + ["--devices", "cpu:0,cpu:1"], "the layout needs 1")
        self.expect_error(g + ["--comm", "nccl", "--devices", "cpu:0"], "nccl")
        # Too small a device: the need, the budget and what would fit.
        self.expect_error(g + ["--devices", "emu:0", "--device-memory", "256K"], "emu:0 has 256.00 KiB: try --tp 8")
        self.expect_error(g + ["--device-memory", "256K"], "cpu:0 has 256.00 KiB: try --tp 8")

    def test_emulated_device_generates_the_reference(self):
        ref = json.load(open(os.path.join(ARGS.shared, "reference", "stories260K_greedy.json")))
        m = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        for case in ref["cases"]:
            gen = case["generated_token_ids"]
            n = len(gen) - 1 if gen and gen[-1] == 1 else len(gen)
            out = run(["generate", "--json", "--model", m, "--ctx-size", "512", "--kv-dtype", "f32", "--temperature",
                       "0", "-n", str(n), "--prompt", case["prompt"], "--devices", "emu:0"])
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(json.loads(out.stdout)["token_ids"], gen[:n])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--shared", required=True)
    ARGS, rest = parser.parse_known_args()
    TMP = tempfile.mkdtemp(prefix="parallm_e2e_")
    try:
        unittest.main(argv=[sys.argv[0], "-v"] + rest)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
