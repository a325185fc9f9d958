#!/usr/bin/env python3
"""End-to-end: `parallm bench` against `parallm serve` (issue 5 acceptance).

Runs `bench --concurrency 1,8 --num-requests 16 --input-len 16 --output-len 16
--json OUT` against a stories260K server and checks the JSON's fields, zero
errors, 16 requests per level, and that the tokens bench counted agree with
the server's own counters: the output tokens of all levels equal the increase
of `parallm:generation_tokens_total`, the input tokens the increase of
`parallm:prompt_tokens_total` (/metrics read before and after), and the
output tokens bench counted from the stream equal the usage it was sent.

The server is started with --port 0 and --threads 1 and killed in teardown;
every wait is bounded.
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

ARGS = None
TMP = None
STATS = ("mean", "p50", "p90", "p95", "p99")


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"metric {name} missing from /metrics:\n{text[:2000]}")


class BenchAgainstServe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        model = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        if not os.path.exists(model):
            raise unittest.SkipTest(f"{model} is missing")
        cls.log_path = os.path.join(TMP, "serve.log")
        cls.log = open(cls.log_path, "wb")
        cmd = [ARGS.binary, "serve", "--model", model, "--ctx-size", "512", "--host", "127.0.0.1", "--port", "0",
               "--threads", "1", "--device-memory", "256M", "--max-num-seqs", "16"]
        cls.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=cls.log, stdin=subprocess.DEVNULL)
        try:
            cls.port = cls._wait_ready(time.monotonic() + 90)
        except BaseException:
            cls._stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._stop()

    @classmethod
    def _stop(cls):
        if cls.proc.poll() is None:
            cls.proc.send_signal(signal.SIGTERM)
            try:
                cls.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
                cls.proc.wait(timeout=15)
        cls.log.close()

    @classmethod
    def _log_text(cls):
        with open(cls.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    @classmethod
    def _wait_ready(cls, deadline):
        port = 0
        while port == 0:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", cls._log_text())
            if m:
                port = int(m.group(1))
            elif cls.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"parallm serve did not start:\n{cls._log_text()[-3000:]}")
            else:
                time.sleep(0.05)
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        return port
            except (urllib.error.URLError, OSError):
                pass
            if cls.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"parallm serve never became healthy:\n{cls._log_text()[-3000:]}")
            time.sleep(0.05)

    def metrics(self, timeout_s=10):
        """/metrics once no request is running or waiting. NOTE: the engine publishes its
        counters after the step whose callbacks answered the clients, so a read right
        after the last response may miss that step."""
        deadline = time.monotonic() + timeout_s
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
                m = r.read().decode()
            idle = metric(m, "parallm:num_requests_running") == 0 and metric(m, "parallm:num_requests_waiting") == 0
            if idle or time.monotonic() > deadline:
                return m
            time.sleep(0.02)

    def test_bench_json_matches_server_counters(self):
        out_path = os.path.join(TMP, "bench.json")
        before = self.metrics()
        cmd = [ARGS.binary, "bench", "--url", f"http://127.0.0.1:{self.port}", "--concurrency", "1,8",
               "--num-requests", "16", "--input-len", "16", "--output-len", "16", "--timeout", "60",
               "--json", out_path]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        self.assertEqual(run.returncode, 0, f"{' '.join(cmd)}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
        after = self.metrics()
        with open(out_path) as f:
            j = json.load(f)
        # The table on stdout names both levels.
        self.assertIn("concurrency", run.stdout.lower() + run.stderr.lower())

        results = j["results"]
        self.assertEqual([r["concurrency"] for r in results], [1, 8])
        total_in = total_out = 0
        for r in results:
            with self.subTest(concurrency=r["concurrency"]):
                for key in ("concurrency", "rate", "requests", "errors", "input_tokens", "output_tokens", "duration_s",
                            "output_tokens_per_s", "requests_per_s", "goodput"):
                    self.assertIn(key, r)
                for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
                    self.assertIsInstance(r[key], dict, key)
                    for stat in STATS:
                        self.assertIsInstance(r[key].get(stat), (int, float), f"{key}.{stat}")
                    # Percentiles are ordered and not negative (ITL and TPOT may be 0: stories260K
                    # is fast enough that several chunks arrive in one read of the socket).
                    self.assertGreaterEqual(r[key]["p50"], 0, key)
                    self.assertLessEqual(r[key]["p50"], r[key]["p90"] + 1e-9, key)
                    self.assertLessEqual(r[key]["p90"], r[key]["p95"] + 1e-9, key)
                    self.assertLessEqual(r[key]["p95"], r[key]["p99"] + 1e-9, key)
                self.assertEqual(r["rate"], "inf")
                self.assertEqual(r["requests"], 16)
                self.assertIsInstance(r["errors"], dict)
                self.assertEqual(sum(r["errors"].values()), 0, r["errors"])
                self.assertEqual(r["completed"], 16)
                self.assertEqual(r["goodput"], 1.0)  # no SLO given: every success counts
                # Every request's usage came with the stream and agrees with the chunks counted.
                self.assertEqual(r["usage_reported"], 16)
                self.assertEqual(r["output_tokens_counted"], r["output_tokens"])
                self.assertGreater(r["output_tokens"], 0)
                self.assertLessEqual(r["output_tokens"], 16 * 16)  # max_tokens 16 each
                self.assertGreaterEqual(r["input_tokens"], 16 * 16)  # 16 words + BOS per prompt
                self.assertGreater(r["duration_s"], 0)
                self.assertAlmostEqual(r["requests_per_s"], 16 / r["duration_s"], delta=1e-6 * 16 / r["duration_s"] + 1e-3)
                self.assertAlmostEqual(r["output_tokens_per_s"], r["output_tokens"] / r["duration_s"],
                                       delta=1e-3 * r["output_tokens_per_s"] + 1e-3)
                self.assertLessEqual(r["max_in_flight"], r["concurrency"])
                self.assertGreater(r["ttft_ms"]["p50"], 0)
                self.assertLessEqual(r["ttft_ms"]["p50"], r["e2e_ms"]["p50"] + 1e-9)
                if r["concurrency"] == 1:
                    # A 16-token prompt on stories260K takes a few ms. A server that leaves
                    # Nagle on stalls each stream's first chunk behind the client's delayed
                    # ACK (>= 40 ms on Linux); 30 ms leaves room for a busy machine.
                    self.assertLess(r["ttft_ms"]["p50"], 30.0, "TTFT looks like a Nagle/delayed-ACK stall")
                total_in += r["input_tokens"]
                total_out += r["output_tokens"]
        # The server saw exactly what bench reports (bench sends nothing else that generates).
        self.assertEqual(total_out, metric(after, "parallm:generation_tokens_total") -
                         metric(before, "parallm:generation_tokens_total"))
        self.assertEqual(total_in, metric(after, "parallm:prompt_tokens_total") -
                         metric(before, "parallm:prompt_tokens_total"))
        self.assertEqual(32, metric(after, "parallm:request_success_total") -
                         metric(before, "parallm:request_success_total"))
        self.assertEqual(metric(after, "parallm:num_requests_running"), 0)


def main():
    global ARGS, TMP
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--shared", required=True)
    ARGS, rest = ap.parse_known_args()
    if not os.access(ARGS.binary, os.X_OK):
        print(f"{ARGS.binary} is not built", file=sys.stderr)
        return 1
    TMP = tempfile.mkdtemp(prefix="parallm_bench_e2e_")
    try:
        prog = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=2)
        return 0 if prog.result.wasSuccessful() else 1
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
