#!/usr/bin/env python3
"""Embeddings throughput of `parallm serve`: prompt tokens per second through
POST /v1/embeddings, against the same token ids sent as completions with
max_tokens 1 (a prefill plus one sampled token, the cheapest generation),
with the same clients. Embedding requests compute no logits and sample
nothing, so on a model whose output matrix is a real share of a prefill
they should be no slower. A benchmark, not a test (docs/PERFORMANCE.md).

usage: embeddings_bench.py --binary build/parallm --model M.gguf [--tokens 128] [--inputs 8]
                           [--requests 24] [--clients 4] [--rounds 3] [--threads N] [serve flags after --]
"""
import argparse
import http.client
import json
import random
import re
import subprocess
import sys
import threading
import time


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise SystemExit(f"{path}: HTTP {r.status}: {data[:300]!r}")
    return json.loads(data)


def run(port, bodies, path, clients):
    """Sends every body from `clients` threads; returns (seconds, prompt tokens)."""
    lock, todo, tokens = threading.Lock(), list(bodies), [0]

    def client():
        while True:
            with lock:
                if not todo:
                    return
                body = todo.pop()
            j = post(port, path, body)
            with lock:
                tokens[0] += j["usage"]["prompt_tokens"]

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - t0, tokens[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=128, help="tokens per input")
    ap.add_argument("--inputs", type=int, default=8, help="inputs per request")
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    args, serve_extra = ap.parse_known_args()
    serve_extra = [a for a in serve_extra if a != "--"]
    cmd = [args.binary, "serve", "--model", args.model, "--port", "0", "--max-model-len", str(args.tokens + 16),
           *(["--threads", str(args.threads)] if args.threads else []), *serve_extra]
    log = open("/tmp/embeddings_bench_serve.log", "wb")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    try:
        port = 0
        deadline = time.monotonic() + 300
        while port == 0:
            m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", open("/tmp/embeddings_bench_serve.log", "rb").read())
            if m:
                port = int(m.group(1))
            elif proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("serve did not start: see /tmp/embeddings_bench_serve.log")
            time.sleep(0.1)
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        rng = random.Random(7)
        n_vocab = 500  # ids every model here has
        # Fresh random ids for each phase: no prefix-cache hit for the completions
        # (embeddings never take one), so both compute every prompt token.
        def batch():
            return [[[1] + [rng.randrange(3, n_vocab) for _ in range(args.tokens - 1)] for _ in range(args.inputs)]
                    for _ in range(args.requests)]
        post(port, "/v1/embeddings", {"input": batch()[0]})  # warm-up
        # Alternating rounds, so that neither kind alone runs while the
        # machine is quieter (or its memory still cold).
        rounds = []
        for _ in range(args.rounds):
            emb_s, emb_tokens = run(port, [{"input": x} for x in batch()], "/v1/embeddings", args.clients)
            cmp_s, cmp_tokens = run(port, [{"prompt": x, "max_tokens": 1, "temperature": 0} for x in batch()],
                                    "/v1/completions", args.clients)
            rounds.append({"embeddings_tokens_per_s": round(emb_tokens / emb_s, 1),
                           "completions_max_tokens_1_tokens_per_s": round(cmp_tokens / cmp_s, 1)})
        print(json.dumps({"tokens_per_input": args.tokens, "inputs_per_request": args.inputs,
                          "requests": args.requests, "clients": args.clients, "rounds": rounds}, indent=1))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
