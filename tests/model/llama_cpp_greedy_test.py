#!/usr/bin/env python3
"""parallm against an established engine: llama.cpp's greedy tokens on generated models.

For every architecture make-model writes (f32 weights) and every GGUF tensor
type parallm reads (on tiny-256, whose 256-wide rows every block type takes),
llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU binary, llama_cpp_greedy.mjs)
continues a fixed prompt greedily. parallm then reads llama.cpp's whole
sequence as its prompt (`parallm serve`, vLLM's prompt_logprobs) and, at
every generated position, must rank llama.cpp's token first, or within
`delta` of its own first choice: a near tie that the two engines' different
rounding may break either way (float weights: delta 0.02 in log-probability,
about 2%; quantized weights 0.25, where llama.cpp rounds the activations per
256 for the K-quants and parallm per 32). A wrong rotation, norm, scale,
routing or block layout misranks by whole units, so it fails here.

Files llama.cpp refuses to load fail the test too (with llama.cpp's reason),
except the DeepSeek-V2-Lite shape: llama.cpp recognizes Lite (q without a
low-rank projection) by its 26 or 27 layers, which no tiny preset has.

Usage: llama_cpp_greedy_test.py --binary build/parallm --npm-dir DIR
Exits 77 (ctest's skip) when node or node-llama-cpp is missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from serve_process import ServeProcess  # noqa: E402

SKIP = 77
PROMPT = [1, 15, 27, 99, 250, 41, 7, 180, 66]  # ids below every preset's n_vocab (>= 300)
N_TOKENS = 16
FLOAT_DELTA = 0.02
QUANT_DELTA = 0.25

ARCH_PRESETS = ["tiny", "tiny-qwen2", "tiny-tied", "tiny-llama3", "mixtral-tiny", "tiny-mha64", "tiny-qwen3",
                "tiny-qwen3moe", "tiny-qwen2moe", "tiny-gemma2", "tiny-gemma3", "tiny-phi3", "tiny-deepseek2"]
TYPES = ["f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
         "iq4_xs",
         # llama.cpp's mixed file types (modelgen/quant_mix.h): a type per tensor, as downloads have them.
         "q4_k_m", "q5_k_m", "q3_k_m", "q2_k_mix"]


def run(cmd, timeout):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, text=True)
    return p.returncode, p.stdout, p.stderr


def llama_cpp_greedy(npm_dir, model):
    rc, out, err = run(["node", os.path.join(npm_dir, "llama_cpp_greedy.mjs"), model, json.dumps(PROMPT),
                        str(N_TOKENS)], timeout=120)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        raise AssertionError(f"llama.cpp gave no answer for {model} (exit {rc}): {err[-2000:]}")
    answer = json.loads(lines[-1])
    if "error" in answer:
        raise AssertionError(f"llama.cpp cannot load {model}: {answer['error']}; log: {err[-1500:]}")
    return answer["tokens"]


def parallm_ranks(binary, model, tmp, tokens):
    """parallm's (rank, logprob, best logprob) of each of llama.cpp's tokens after the prompt."""
    server = ServeProcess(binary, ["--model", model, "--threads", "2", "--ctx-size", "256",
                                   "--device-memory", "512M"], tmp, start_timeout_s=90)
    try:
        body = json.dumps({"prompt": PROMPT + tokens, "max_tokens": 1, "temperature": 0,
                           "prompt_logprobs": 1}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{server.port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=120) as r:
            answer = json.loads(r.read())
    finally:
        server.close()
    rows = answer["choices"][0]["prompt_logprobs"]
    out = []
    for i, tok in enumerate(tokens):
        entry = rows[len(PROMPT) + i]
        own = entry[str(tok)]
        best = max(v["logprob"] for v in entry.values())
        out.append((own["rank"], own["logprob"], best))
    return out


def check(binary, npm_dir, tmp, name, make_args, delta):
    model = os.path.join(tmp, name + ".gguf")
    rc, _, err = run([binary, "make-model", *make_args, "--seed", "11", "--out", model], timeout=120)
    if rc != 0:
        raise AssertionError(f"make-model {make_args}: {err}")
    tokens = llama_cpp_greedy(npm_dir, model)
    if not tokens:
        raise AssertionError(f"{name}: llama.cpp generated nothing")
    ranks = parallm_ranks(binary, model, tmp, tokens)
    firsts = sum(1 for r, _, _ in ranks if r == 1)
    worst = max(best - lp for _, lp, best in ranks)
    os.remove(model)
    bad = [(i, r, round(best - lp, 4)) for i, (r, lp, best) in enumerate(ranks) if r != 1 and best - lp > delta]
    print(f"{name:22s} {len(tokens):2d} tokens, parallm ranks {firsts} first, largest gap {worst:.4f}"
          f" (delta {delta}){'  FAIL ' + str(bad) if bad else ''}", flush=True)
    return not bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--npm-dir", required=True)
    args = ap.parse_args()
    if shutil.which("node") is None:
        print("skipped: node is not installed")
        return SKIP
    if not os.path.exists(os.path.join(args.npm_dir, "node_modules", "node-llama-cpp", "package.json")):
        print(f"skipped: node-llama-cpp is not installed in {args.npm_dir} (npm install at configure failed)")
        return SKIP
    ok = True
    with tempfile.TemporaryDirectory(prefix="parallm_llama_cpp_") as tmp:
        cases = [(p, ["--preset", p], FLOAT_DELTA) for p in ARCH_PRESETS]
        cases += [(f"tiny-256 {t}", ["--preset", "tiny-256", "--dtype", t],
                   FLOAT_DELTA if t in ("f16", "bf16") else QUANT_DELTA) for t in TYPES]
        for name, make_args, delta in cases:
            try:
                ok = check(args.binary, args.npm_dir, tmp, name.replace(" ", "_"), make_args, delta) and ok
            except AssertionError as e:
                print(f"{name:22s} FAIL {e}", flush=True)
                ok = False
    print("llama.cpp greedy:", "all agree" if ok else "DISAGREEMENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
