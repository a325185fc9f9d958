#!/usr/bin/env python3
"""`parallm serve` answers that the NumPy reference forward checks
(tools/reference_forward.py, its own GGUF reader and float64 maths):

- POST /v1/embeddings on stories260K: each embedding equals the reference's
  final-norm hidden states of the same tokens, mean-pooled and L2-normalised
  (llama-server's --embedding with mean pooling), to 1e-4, on one device,
  --tp 2, --pp 2 and (with mpirun) --pp 2 over two MPI processes, with
  prompts chunked over several steps; a batch equals
  its inputs one at a time; token-id inputs equal their text; base64 is the
  float answer's little-endian float32 bytes exactly; usage and the prompt
  token counters; bad inputs are 400s (404 for another model) naming the field.
- vLLM's prompt_logprobs on /v1/completions (per choice) and
  /v1/chat/completions (beside the choices): null for the first prompt token,
  then each position's map of token id -> {logprob, rank, decoded_token}: the
  prompt token's logprob and rank and the k most likely tokens equal log
  softmax of the reference logits (a prompt longer than a prompt-logits chunk,
  asked twice so the second finds it in the prefix cache); bad values are 400s.

Every server runs with --port 0, --threads 1, --kv-dtype f32 (the reference
keeps K/V exact) and is stopped in teardown; every wait is bounded.
"""
import argparse
import base64
import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from serve_process import ServeProcess  # noqa: E402

ARGS = None
TMP = None
TOL = 1e-4

TEXTS = [
    "Once upon a time",
    "Tom and Lily went to the park to play with a big red ball",
    "The sun",
    "Sara had a red ball. She liked to play with it every day in the garden with her dog. " * 4,
    "One day, a big bird flew over the house and sang a song",
]


class Server(ServeProcess):
    """One `parallm serve` of stories260K (tests/common/serve_process.py); close() always stops it."""

    def __init__(self, extra=(), launcher=()):
        model = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        if not os.path.exists(model):
            raise unittest.SkipTest(f"{model} is missing")
        super().__init__(ARGS.binary,
                         ["--model", model, "--ctx-size", "512", "--threads", "1", "--device-memory", "256M",
                          "--kv-dtype", "f32", "--max-num-batched-tokens", "48", "--served-model-name", "stories",
                          *extra],
                         TMP, start_timeout_s=90, launcher=launcher)

    def request(self, path, body):
        """(status, parsed JSON body); body may be raw bytes."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def post(self, path, body):
        status, j = self.request(path, body)
        if status != 200:
            raise AssertionError(f"{path}: HTTP {status}: {j}")
        return j

    def metric(self, name):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            text = r.read().decode()
        m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
        return float(m.group(1)) if m else None


def reference():
    sys.path.insert(0, ARGS.tools)
    import reference_forward as ref
    return ref, ref.Gguf(os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf"))


def log_softmax(rows):
    m = rows.max(axis=1, keepdims=True)
    return rows - (m + np.log(np.exp(rows - m).sum(axis=1, keepdims=True)))


class Embeddings(unittest.TestCase):
    def test_embeddings_equal_reference_over_layouts(self):
        ref, g = reference()
        layouts = [([], ()), (["--tp", "2"], ()), (["--pp", "2"], ())]
        mpirun = shutil.which("mpirun")
        if mpirun:  # two pipeline stages as two processes: the pooled rows cross the MPI hand-off
            layouts.append((["--pp", "2", "--comm", "mpi", "--comm-timeout", "30"],
                            (mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2")))
        for layout, launcher in layouts:
            s = Server(layout, launcher)
            try:
                ids = [s.post("/tokenize", {"prompt": t})["tokens"] for t in TEXTS]
                self.assertGreater(max(len(i) for i in ids), 2 * 48)  # chunked over several steps
                want = []
                for i in ids:
                    v = ref.final_hidden(g, i).mean(axis=0)
                    want.append(v / np.linalg.norm(v))
                prompt_before = s.metric("vllm:prompt_tokens_total") or 0.0
                batch = s.post("/v1/embeddings", {"input": TEXTS, "model": "stories", "encoding_format": "float",
                                                   "user": "someone", "dimensions": len(want[0])})
                alone = [s.post("/v1/embeddings", {"input": t})["data"][0]["embedding"] for t in TEXTS]
                by_ids = s.post("/v1/embeddings", {"input": ids})
                one_ids = s.post("/v1/embeddings", {"input": ids[1]})
                b64 = s.post("/v1/embeddings", {"input": TEXTS, "encoding_format": "base64"})
                # Every embedding request's tokens count (the batch, five alone, ids, one, base64);
                # the engine publishes its counters after each step: wait for the last one.
                n_tokens = sum(len(i) for i in ids)
                expect_tokens = prompt_before + 4 * n_tokens + len(ids[1])
                deadline = time.monotonic() + 5
                while (prompt_after := s.metric("vllm:prompt_tokens_total")) != expect_tokens and time.monotonic() < deadline:
                    time.sleep(0.05)
            finally:
                s.close()
            with self.subTest(layout=layout):
                self.assertEqual(batch["object"], "list")
                self.assertEqual(batch["model"], "stories")
                self.assertEqual(batch["usage"], {"prompt_tokens": n_tokens, "total_tokens": n_tokens})
                self.assertEqual([d["index"] for d in batch["data"]], list(range(len(TEXTS))))
                self.assertTrue(all(d["object"] == "embedding" for d in batch["data"]))
                got = np.array([d["embedding"] for d in batch["data"]], dtype=np.float64)
                for k in range(len(TEXTS)):
                    np.testing.assert_allclose(got[k], want[k], atol=TOL, err_msg=f"input {k}")
                    np.testing.assert_allclose(np.array(alone[k]), got[k], atol=1e-5, err_msg=f"alone {k}")
                np.testing.assert_allclose(np.array([d["embedding"] for d in by_ids["data"]]), got, atol=1e-5)
                np.testing.assert_allclose(np.array(one_ids["data"][0]["embedding"]), got[1], atol=1e-5)
                # base64: little-endian float32, as the OpenAI SDKs decode it.
                for d in b64["data"]:
                    self.assertIsInstance(d["embedding"], str)
                    v = np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4")
                    np.testing.assert_allclose(v, got[d["index"]], atol=1e-5)
                self.assertEqual(prompt_after, expect_tokens)

    def test_bad_inputs_are_400(self):
        s = Server(["--max-model-len", "256"])
        try:
            cases = [
                ({}, "input"), ({"input": ""}, "input"), ({"input": []}, "input"), ({"input": [""]}, "input"),
                ({"input": [[]]}, "input"), ({"input": [1.5]}, "input"), ({"input": {"a": 1}}, "input"),
                ({"input": [-1]}, "input"), ({"input": [600]}, "input"), ({"input": [[1, 2], "x", 3]}, "input"),
                ({"input": ["x"] * 513}, "input"), ({"input": list(range(1, 300))}, "input"),
                ({"input": "x", "encoding_format": "hex"}, "encoding_format"),
                ({"input": "x", "dimensions": 32}, "dimensions"), ({"input": "x", "dimensions": "64"}, "dimensions"),
                ({"input": "x", "dimensions": 0}, "dimensions"), ({"input": "x", "user": 5}, "user"),
                ({"input": "x", "model": 7}, "model"),
            ]
            for body, param in cases:
                with self.subTest(body=json.dumps(body)[:80]):
                    status, j = s.request("/v1/embeddings", body)
                    self.assertEqual(status, 400, j)
                    self.assertEqual(j["error"]["param"], param, j)
                    self.assertEqual(j["error"]["type"], "invalid_request_error")
            status, j = s.request("/v1/embeddings", {"input": "x", "dimensions": 32})
            self.assertIn("64", j["error"]["message"])
            status, j = s.request("/v1/embeddings", b"{not json")
            self.assertEqual(status, 400, j)
            status, j = s.request("/v1/embeddings", {"input": "x", "model": "other"})
            self.assertEqual(status, 404, j)
            self.assertEqual(j["error"]["code"], "model_not_found")
            # The longest input that fits: max-model-len tokens exactly.
            self.assertEqual(len(s.post("/v1/embeddings", {"input": list(range(1, 257))})["data"]), 1)
        finally:
            s.close()


class PromptLogprobs(unittest.TestCase):
    def check(self, got, ids, lp, k, what):
        """got: vLLM's prompt_logprobs list for ids; lp: reference log softmax rows [len(ids), n_vocab]."""
        self.assertEqual(len(got), len(ids), what)
        self.assertIsNone(got[0], what)
        for i in range(1, len(ids)):
            row = lp[i - 1]
            entry = got[i]
            tok = ids[i]
            own = entry[str(tok)]
            self.assertAlmostEqual(own["logprob"], row[tok], delta=TOL, msg=f"{what} pos {i}")
            best = np.argsort(-row, kind="stable")[:k]
            want_rank = int((row > row[tok]).sum()) + 1
            self.assertEqual(own["rank"], want_rank, f"{what} pos {i}")
            self.assertIsInstance(own["decoded_token"], str)
            keys = {int(x) for x in entry}
            self.assertEqual(keys, set(int(b) for b in best) | {tok}, f"{what} pos {i}")
            for r, b in enumerate(best):
                self.assertAlmostEqual(entry[str(b)]["logprob"], row[b], delta=TOL, msg=f"{what} pos {i}")
                self.assertEqual(entry[str(b)]["rank"], r + 1, f"{what} pos {i}")

    def test_prompt_logprobs_equal_reference(self):
        ref, g = reference()
        k = 3
        for layout in ([], ["--tp", "2"]):
            s = Server(layout)
            try:
                ids = s.post("/tokenize", {"prompt": TEXTS[3]})["tokens"]
                long_ids = (ids * (300 // len(ids) + 1))[:300]  # past the 128-row prompt-logits chunk
                runs = [s.post("/v1/completions", {"prompt": long_ids, "max_tokens": 2, "temperature": 0,
                                                   "prompt_logprobs": k}) for _ in range(2)]
                short = s.post("/v1/completions", {"prompt": [TEXTS[0], TEXTS[2]], "max_tokens": 1,
                                                   "prompt_logprobs": 0, "logprobs": 1})
                short_ids = [s.post("/tokenize", {"prompt": t})["tokens"] for t in (TEXTS[0], TEXTS[2])]
                messages = [{"role": "user", "content": TEXTS[1]}]
                chat = s.post("/v1/chat/completions", {"messages": messages, "max_tokens": 2, "prompt_logprobs": 2})
                chat_ids = s.post("/tokenize", {"messages": messages})["tokens"]
                plain = s.post("/v1/completions", {"prompt": TEXTS[0], "max_tokens": 1})
            finally:
                s.close()
            with self.subTest(layout=layout):
                lp = log_softmax(ref.forward(g, long_ids).astype(np.float64))
                for run, j in enumerate(runs):  # the second finds the prompt in the prefix cache
                    self.check(j["choices"][0]["prompt_logprobs"], long_ids, lp, k, f"run {run}")
                for c in short["choices"]:
                    i = c["index"]
                    self.check(c["prompt_logprobs"], short_ids[i], log_softmax(ref.forward(g, short_ids[i])), 0,
                               f"choice {i}")
                    self.assertEqual(len(c["logprobs"]["tokens"]), 1)  # the completion's own logprobs stay apart
                self.assertEqual(len(chat["prompt_logprobs"]), chat["usage"]["prompt_tokens"])
                self.check(chat["prompt_logprobs"], chat_ids, log_softmax(ref.forward(g, chat_ids)), 2, "chat")
                self.assertNotIn("prompt_logprobs", chat["choices"][0])
                self.assertNotIn("prompt_logprobs", plain["choices"][0])

    def test_bad_values_are_400(self):
        s = Server()
        try:
            for route, head in (("/v1/completions", {"prompt": "Once"}),
                                ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})):
                for bad in (-1, -3, 21, 1000, "2", 1.5, True, [1]):
                    with self.subTest(route=route, value=bad):
                        status, j = s.request(route, {**head, "max_tokens": 1, "prompt_logprobs": bad})
                        self.assertEqual(status, 400, j)
                        self.assertEqual(j["error"]["param"], "prompt_logprobs", j)
                status, j = s.request(route, {**head, "max_tokens": 1, "prompt_logprobs": 1, "stream": True})
                self.assertEqual(status, 400, j)
                self.assertIn("stream", j["error"]["message"])
        finally:
            s.close()


def main():
    global ARGS, TMP
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--tools", required=True)
    ARGS, rest = ap.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        TMP = tmp
        prog = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
