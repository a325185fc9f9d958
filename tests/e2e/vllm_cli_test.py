#!/usr/bin/env python3
"""`parallm serve` with the command lines of vLLM and llama-server
(docs/server.md "vLLM and llama-server flags"), and the built-in model.

A vLLM line (positional MODEL, --tensor-parallel-size, --gpu-memory-utilization,
--kv-cache-dtype auto, --dtype auto, --enable-prefix-caching,
--served-model-name) and a llama-server line (-m, -c, -np, --alias, -ngl) must
serve under the names they give; several --served-model-name values are all
accepted and all listed; flags parallm cannot honour end with one line naming
them and exit 2. With no --model, `generate` and `serve` use the trained
stories260K shipped in models/ and write English.

Every server is started with --port 0 (the port is read from its log) and is
stopped in teardown; every wait is bounded.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from serve_process import ServeProcess  # noqa: E402

ARGS = None
TMP = None
MODEL = None  # ../shared/models/stories260K/stories260K.gguf
COMMON_WORDS = {"the", "a", "was", "she", "he", "to", "and", "little", "day", "girl", "boy", "her", "his", "it"}


def run(args, env=None, timeout=300):
    return subprocess.run([ARGS.binary, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def assert_english(test, text):
    """What a trained TinyStories model writes and random weights do not."""
    test.assertRegex(text, r"^[A-Za-z0-9 \n.,!?'\"\-:;]+$", f"not plain English text: {text!r}")
    words = set(re.findall(r"[a-z]+", text.lower()))
    test.assertGreaterEqual(len(words & COMMON_WORDS), 3, f"too few common words in {text!r}")


class Server(ServeProcess):
    """One `parallm serve` child process; close() always stops it."""

    def __init__(self, args, start_timeout_s=120, env=None):
        super().__init__(ARGS.binary, args, TMP, start_timeout_s, env=env)

    def request(self, method, path, body=None):
        """(status, JSON body)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     headers={"Content-Type": "application/json"}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def models(self):
        status, j = self.request("GET", "/v1/models")
        assert status == 200, j
        return [m["id"] for m in j["data"]], j

    def complete(self, model, prompt="Once upon a time", max_tokens=24):
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
        if model is not None:
            body["model"] = model
        return self.request("POST", "/v1/completions", body)


class ServeTestCase(unittest.TestCase):
    def serve(self, args, **kw):
        s = Server(args, **kw)
        self.addCleanup(s.close)
        return s

    def expect_error(self, args, *fragments):
        out = run(["serve", *args, "--port", "0"], timeout=120)
        self.assertEqual(out.returncode, 2, f"{args}: {out.stderr}")
        lines = [l for l in out.stderr.strip().splitlines() if l and not l.startswith("[parallm info]")]
        self.assertTrue(lines, out.stderr)
        for f in fragments:
            self.assertIn(f, lines[0], out.stderr)
        return lines


# Keep the servers small on a shared machine.
SMALL = ["--threads", "1", "--device-memory", "256M"]


class VllmCommandLine(ServeTestCase):
    def test_vllm_line(self):
        s = self.serve([MODEL, "--tensor-parallel-size", "1", "--gpu-memory-utilization", "0.5", "--max-model-len", "512",
                        "--kv-cache-dtype", "auto", "--enable-prefix-caching", "--dtype", "auto",
                        "--served-model-name", "m1", *SMALL])
        ids, j = s.models()
        self.assertEqual(ids, ["m1"])
        self.assertEqual(j["data"][0]["max_model_len"], 512)
        status, r = s.complete("m1")
        self.assertEqual(status, 200, r)
        self.assertEqual(r["model"], "m1")
        assert_english(self, r["choices"][0]["text"])
        self.assertEqual(s.complete("stories260K.gguf")[0], 404)  # only the names given

    def test_several_served_model_names(self):
        s = self.serve([MODEL, "--served-model-name", "first", "second", "third", "--enable-log-requests", *SMALL])
        ids, _ = s.models()
        self.assertEqual(ids, ["first", "second", "third"])
        for name in ids:
            status, r = s.complete(name, max_tokens=4)
            self.assertEqual(status, 200, r)
            self.assertEqual(r["model"], "first")  # vLLM reports the first name
            status, card = s.request("GET", f"/v1/models/{name}")
            self.assertEqual((status, card["id"]), (200, name))
            status, t = s.request("POST", "/tokenize", {"model": name, "prompt": "Once upon a time"})
            self.assertEqual(status, 200, t)
        status, chat = s.request("POST", "/v1/chat/completions",
                                 {"model": "third", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
        self.assertEqual(status, 200, chat)
        self.assertEqual(s.complete("fourth")[0], 404)
        self.assertEqual(s.request("GET", "/v1/models/fourth")[0], 404)
        self.assertEqual(s.request("POST", "/tokenize", {"model": "fourth", "prompt": "x"})[0], 404)
        self.assertIn("Once upon a time", s.log_text())  # --enable-log-requests: the prompts are logged

    def test_dash_tp_and_more_vllm_flags(self):
        s = self.serve([MODEL, "-tp", "1", "-pp=1", "-dp", "2", "--max-model-len", "256", "--enforce-eager",
                        "--trust-remote-code", "--disable-log-requests", "--disable-log-stats",
                        "--no-enable-prefix-caching", "--block-size", "32", "--max-num-seqs", "8",
                        "--max-num-batched-tokens", "256", "--dtype", "float32", "--uvicorn-log-level", "info", *SMALL])
        ids, j = s.models()
        self.assertEqual(ids, ["stories260K.gguf"])
        self.assertEqual(j["data"][0]["max_model_len"], 256)
        status, r = s.complete(None)
        self.assertEqual(status, 200, r)
        assert_english(self, r["choices"][0]["text"])
        self.assertIn("2 replica(s)", s.log_text())
        self.assertRegex(s.log_text(), r"KV cache: \d+ blocks of 32 tokens")

    def test_model_given_twice(self):
        s = self.serve([MODEL, "--model", MODEL, "--max-model-len", "128", *SMALL])  # the same: fine
        self.assertEqual(s.models()[0], ["stories260K.gguf"])
        self.expect_error([MODEL, "--model", os.path.join(TMP, "other.gguf")], "two models")

    def test_expert_parallel(self):
        # A dense model: accepted, with a note.
        s = self.serve([MODEL, "--enable-expert-parallel", "--max-model-len", "128", *SMALL])
        self.assertIn("no experts", s.log_text())
        # A MoE model: the experts over the two tensor-parallel ranks.
        moe = os.path.join(TMP, "moe.gguf")
        out = run(["make-model", "--preset", "mixtral-tiny", "--dtype", "f32", "--out", moe])
        self.assertEqual(out.returncode, 0, out.stderr)
        s = self.serve([moe, "-tp", "2", "--enable-expert-parallel", "--max-model-len", "128", *SMALL])
        self.assertIn("tp=2 pp=1 ep=2", s.log_text())
        self.assertEqual(s.complete(None, max_tokens=4)[0], 200)
        self.expect_error([moe, "-tp", "2", "--ep", "4", "--enable-expert-parallel"], "--enable-expert-parallel", "--ep 4")

    def test_refused_flags(self):
        for args, fragments in [
            (["--kv-cache-dtype", "fp8"], ["--kv-cache-dtype fp8", "q8_0"]),
            (["--kv-cache-dtype", "fp8_e5m2"], ["fp8_e5m2", "q8_0"]),
            (["--kv-cache-dtype", "int4"], ["kv-cache-dtype", "int4"]),
            (["--dtype", "float8"], ["--dtype", "float8"]),
            (["--quantization", "awq"], ["--quantization", "--dtype"]),
            (["-q", "gptq"], ["--quantization"]),
            (["--speculative-config", '{"method": "ngram"}'], ["--speculative-config"]),
            (["--swap-space", "4"], ["--swap-space"]),
            (["--seed", "0"], ["--seed", "seed"]),
            (["--block-size", "0"], ["--block-size"]),
            (["--uvicorn-log-level", "info", "--log-level", "warn"], ["--uvicorn-log-level", "--log-level"]),
            (["--uvicorn-log-level", "loud"], ["loud"]),
            (["--frobnicate"], ["--frobnicate"]),
        ]:
            with self.subTest(args=args):
                self.expect_error([MODEL, *args], *fragments)


class EmulatedDevice(ServeTestCase):
    """`serve --devices emu:0`: the GPU rank model on the emulated device
    (docs/cuda.md) sizes its pool after a profiled step and answers what the
    CPU ranks answer, token for token (greedy)."""

    def test_serve_equals_cpu(self):
        cpu = self.serve([MODEL, "--max-model-len", "256", *SMALL])
        emu = self.serve([MODEL, "--max-model-len", "256", "--devices", "emu:0", *SMALL])
        self.assertIn("profiled a step", emu.log_text())
        self.assertIn("on emu:0", emu.log_text())
        for prompt in ("Once upon a time", "The little dog"):
            a = cpu.complete(None, prompt, 32)
            b = emu.complete(None, prompt, 32)
            self.assertEqual(a[0], 200, a)
            self.assertEqual(b[0], 200, b)
            self.assertEqual(b[1]["choices"][0]["text"], a[1]["choices"][0]["text"])


class LlamaServerCommandLine(ServeTestCase):
    def test_llama_server_line(self):
        s = self.serve(["-m", MODEL, "-c", "256", "-np", "4", "--alias", "m2", "-ngl", "99", *SMALL])
        self.assertIn("-ngl", s.log_text())  # the note
        ids, j = s.models()
        self.assertEqual(ids, ["m2"])
        self.assertEqual(j["data"][0]["max_model_len"], 256)
        status, r = s.complete("m2")
        self.assertEqual(status, 200, r)
        assert_english(self, r["choices"][0]["text"])
        self.assertIn("max concurrency", s.log_text())


class DefaultModel(ServeTestCase):
    def test_generate(self):
        out = run(["generate", "--prompt", "Once upon a time", "-n", "20", "--temperature", "0", "--threads", "1"])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("stories260K.gguf", out.stderr)
        assert_english(self, out.stdout.strip())

    def test_serve(self):
        s = self.serve(["--threads", "1"])
        ids, j = s.models()
        self.assertEqual(ids, ["stories260K.gguf"])
        self.assertEqual(j["data"][0]["max_model_len"], 512)  # the trained context, not the file's 128
        status, r = s.complete(None, max_tokens=32)
        self.assertEqual(status, 200, r)
        assert_english(self, r["choices"][0]["text"])

    def test_override_and_missing(self):
        env = dict(os.environ, PARALLM_DEFAULT_MODEL=os.path.join(TMP, "none.gguf"))
        out = run(["generate", "--prompt", "x", "-n", "1"], env=env)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("PARALLM_DEFAULT_MODEL", out.stderr)
        # A copy of the binary away from any tree falls back to the source tree it was built from.
        lone = os.path.join(TMP, "bin", "parallm")
        os.makedirs(os.path.dirname(lone), exist_ok=True)
        shutil.copy(ARGS.binary, lone)
        out = subprocess.run([lone, "generate", "--prompt", "Once upon a time", "-n", "20", "--temperature", "0",
                              "--threads", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        assert_english(self, out.stdout.strip())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--shared", required=True)
    ARGS, rest = parser.parse_known_args()
    ARGS.binary = os.path.abspath(ARGS.binary)
    MODEL = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
    TMP = tempfile.mkdtemp(prefix="parallm_vllm_cli_")
    try:
        unittest.main(argv=[sys.argv[0], "-v"] + rest)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
