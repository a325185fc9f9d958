#!/usr/bin/env python3
"""Memory after large requests: does `parallm serve` give memory back?

Starts a server, warms it up with ordinary completions, records its RSS, sends
a burst of large requests that are rejected (bodies of several MB whose JSON
parses but fails validation, so the server builds and frees a big tree), then
soaks it with ordinary completions for --minutes, sampling RSS. Prints the
RSS after warm-up, right after the burst, and over the soak, and the soak's
end relative to the warm-up value. A benchmark, not a test (docs/PERFORMANCE.md).

usage: soak_memory.py --binary build/parallm --model M.gguf [--minutes 10] [--burst 200]
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def request(port, method, path, body=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--burst", type=int, default=200)
    ap.add_argument("--burst-mb", type=float, default=7.0)
    ap.add_argument("--port", type=int, default=18555)
    ap.add_argument("--json", default="")
    ap.add_argument("--log", default="/dev/null", help="the server's stderr")
    args = ap.parse_args()

    cmd = [args.binary, "serve", "--model", args.model, "--port", str(args.port), "--threads", "1",
           "--max-model-len", "256"]
    # The server's log goes to a file: a pipe nobody reads fills up and blocks it.
    log = open(args.log, "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if request(args.port, "GET", "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        ok = json.dumps({"prompt": "Once upon a time", "max_tokens": 16})
        for _ in range(50):
            request(args.port, "POST", "/v1/completions", ok)
        warm = rss_mib(proc.pid)

        # The burst: valid JSON, refused by validation (too many prompts), so
        # the whole tree is built and freed. Four clients at a time.
        n_items = int(args.burst_mb * 1e6 / 6)  # each item is `"ab", `
        big = json.dumps({"prompt": ["ab"] * n_items})
        statuses = {}
        lock = threading.Lock()
        sent = [0]

        def burst_worker():
            while True:
                with lock:
                    if sent[0] >= args.burst:
                        return
                    sent[0] += 1
                st, _ = request(args.port, "POST", "/v1/completions", big)
                with lock:
                    statuses[st] = statuses.get(st, 0) + 1

        t0 = time.time()
        workers = [threading.Thread(target=burst_worker) for _ in range(4)]
        for w in workers:
            w.start()
        peak = warm
        while any(w.is_alive() for w in workers):
            peak = max(peak, rss_mib(proc.pid))
            time.sleep(0.1)
        burst_s = time.time() - t0
        time.sleep(2)
        after_burst = rss_mib(proc.pid)

        samples = []
        end = time.time() + args.minutes * 60
        next_sample = time.time()
        n_soak = 0
        while time.time() < end:
            request(args.port, "POST", "/v1/completions", ok)
            n_soak += 1
            if time.time() >= next_sample:
                samples.append((round(time.time() - t0, 1), rss_mib(proc.pid)))
                next_sample += 30
            time.sleep(0.05)
        final = rss_mib(proc.pid)
        out = {
            "binary": args.binary, "burst_requests": args.burst, "burst_body_mb": round(len(big) / 1e6, 2),
            "burst_statuses": statuses, "burst_s": round(burst_s, 1), "rss_warm_mib": round(warm, 1),
            "rss_peak_mib": round(peak, 1), "rss_after_burst_mib": round(after_burst, 1),
            "rss_end_mib": round(final, 1), "end_vs_warm": round(final / warm - 1, 4),
            "soak_minutes": args.minutes, "soak_requests": n_soak, "samples": samples,
        }
        print(json.dumps(out, indent=1))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
