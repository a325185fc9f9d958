"""GET /metrics of a real `parallm serve` read by Prometheus' own parser.

After a few requests (streamed and not, n = 2, chat), the exposition is piped
into `promtool check metrics` (Debian's `prometheus` package), which parses
it as Prometheus does and lints it. Any parse error fails, and so does any
lint problem but one: "metric names should not contain ':'". Colons are
reserved for recording rules by convention, yet vLLM's names (`vllm:...`)
carry one and dashboards look for exactly those, as for parallm's own
(`parallm:...`). Skips with a message where promtool is missing.

usage: metrics_promtool_test.py --binary build/parallm --shared ../shared
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_client as hc  # noqa: E402

ARGS = None
SERVED = "stories-test"
COLON_LINT = "metric names should not contain ':'"
VLLM_FAMILIES = [
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
    "vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:request_success_total",
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
    "vllm:request_time_per_output_token_seconds", "vllm:request_max_num_generation_tokens",
]


class PromtoolCheck(unittest.TestCase):
    def test_metrics_pass_promtool(self):
        promtool = shutil.which("promtool")
        if promtool is None:
            self.skipTest("promtool not found (Debian package `prometheus`); /metrics not checked by Prometheus' parser")
        model = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        with tempfile.TemporaryDirectory() as tmp:
            server = hc.Server(ARGS.binary, model, tmp, extra=("--served-model-name", SERVED))
            try:
                bodies = [
                    ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8, "n": 2, "seed": 1}),
                    ("/v1/completions", {"prompt": "One day", "max_tokens": 6, "stream": True}),
                    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
                                              "n": 2, "stream": True}),
                    ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4}),  # a prefix-cache hit
                ]
                for path, body in bodies:
                    r, _, err = server.post(path, json.dumps(body), timeout_s=60)
                    self.assertIsNotNone(r, err)
                    self.assertEqual(r.status, 200, bytes(r.body)[:300])
                r, _, err = server.get("/metrics")
                self.assertIsNotNone(r, err)
                self.assertEqual(r.status, 200)
                text = bytes(r.body).decode()
            finally:
                server.close()
        for name in VLLM_FAMILIES:
            self.assertRegex(text, rf"(?m)^# TYPE {re.escape(name)} ", name)
            self.assertRegex(text, rf'(?m)^{re.escape(name)}(_bucket|_count)?\{{[^}}]*model_name="{SERVED}"', name)
        p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        out = (p.stdout + p.stderr).strip()
        # Exit 0: clean; 3: lint problems only (one "name problem" line each); anything else: unparsable.
        self.assertIn(p.returncode, (0, 3), f"promtool failed ({p.returncode}):\n{out}")
        problems = [line for line in out.splitlines() if line.strip() and not line.rstrip().endswith(COLON_LINT)]
        self.assertEqual(problems, [], f"promtool check metrics:\n{out}")
        print(f"promtool check metrics: no errors ({len(out.splitlines())} names with ':' noted, as vLLM's)")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--shared", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
