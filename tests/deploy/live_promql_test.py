"""The dashboard's and the alerts' PromQL against a real Prometheus scraping a real `parallm serve`.

Starts two `parallm serve` (stories260K, --port 0) and Debian's `prometheus` on free loopback ports (a
generated config: scrape every 1 s, evaluate deploy/prometheus/alerts.yml every 1 s, its own TSDB in a
temp folder). The first serve (job `parallm`) reads GPUs through the stand-in libnvidia-ml of
tests/hwmetrics/fake_nvml.cpp (PARALLM_NVML_LIBRARY=--fake-nvml); the second (job `parallm_no_nvml`) is
pointed at a library that does not exist. It sends the first a short load (36 completions, a third
streamed, and 4 bad requests), waits until Prometheus has scraped the end of it, then asks /api/v1/query for:
- every target of every panel of deploy/grafana/parallm.json, GPU panels included, with the template
  variables replaced ($__rate_interval -> 1m, $instance -> .*): each must return data;
- every expression of vLLM's example dashboard (tests/deploy/data/vllm_dashboard_exprs.txt), with
  $model_name set as Grafana sets it, from label_values(model_name): each must return data;
- without NVML: parallm:gpu_metrics_available is 0 and no other parallm:gpu_ series exists;
- every alert expression: each must evaluate without error; and /api/v1/rules must show every rule
  evaluated with health "ok".
It also runs deploy/parallm-healthcheck (the containers' health check) against the server and a closed port.
Everything runs under one deadline (90 s) and every process is killed at the end.
Skips (exit 77) when `prometheus` is not installed.

usage: live_promql_test.py --binary build/parallm --fake-nvml libfake_nvml.so [--shared ../shared] [--source REPO]
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_common as dc  # noqa: E402

ARGS = None
DEADLINE_S = 90
NO_NVML = "/nonexistent/libnvidia-ml.so.1"
N_REQUESTS = 36
N_BAD = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout_s=10):
    """(status, body text); HTTP errors are answers too."""
    req = urllib.request.Request(url, data=body.encode() if body else None, method=method,
                                 headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def substitute(expr, variables):
    """Grafana's template variables in an expression, as a query would get them with 'All' selected."""
    expr = expr.replace("$__rate_interval", "1m").replace("${__rate_interval}", "1m")
    expr = expr.replace("$__interval", "15s").replace("${__interval}", "15s")
    for name, value in variables.items():
        expr = re.sub(r"\$\{" + name + r"(:[a-z]+)?\}|\[\[" + name + r"\]\]|\$" + name + r"\b", value, expr)
    left = re.findall(r"\$\{?\w+", expr)
    assert not left, f"unreplaced template variables {left} in {expr}"
    return expr


def panel_targets(dash):
    """[(panel title, expr)] over every panel, rows' nested panels included."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p["title"], t["expr"]))
            walk(p.get("panels", []))
    walk(dash["panels"])
    return out


class Processes:
    """The parallm and prometheus children; close() ends both."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def start_parallm(self, deadline, nvml_library, name="serve"):
        self.serve_log = os.path.join(self.tmp, name + ".log")
        model = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        cmd = [ARGS.binary, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0", "--threads", "1",
               "--max-model-len", "256", "--device-memory", "256M"]
        env = dict(os.environ, PARALLM_NVML_LIBRARY=nvml_library)
        with open(self.serve_log, "wb") as log:
            self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
                                               env=env))
        while True:
            with open(self.serve_log, "rb") as f:
                m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", f.read())
            if m:
                port = int(m.group(1))
                break
            self.check(self.procs[-1], deadline, "parallm serve did not log its port")
            time.sleep(0.05)
        while True:
            try:
                if http("GET", f"http://127.0.0.1:{port}/health", timeout_s=2)[0] == 200:
                    return port
            except OSError:
                pass
            self.check(self.procs[-1], deadline, "parallm serve never became healthy")
            time.sleep(0.05)

    def start_prometheus(self, serve_port, no_nvml_port, alerts, deadline):
        config = os.path.join(self.tmp, "prometheus.yml")
        with open(config, "w") as f:
            json.dump({"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                       "rule_files": [alerts],
                       "scrape_configs": [{"job_name": "parallm",
                                           "static_configs": [{"targets": [f"127.0.0.1:{serve_port}"]}]},
                                          {"job_name": "parallm_no_nvml",
                                           "static_configs": [{"targets": [f"127.0.0.1:{no_nvml_port}"]}]}]}, f)
        port = free_port()
        self.prom_log = os.path.join(self.tmp, "prometheus.log")
        cmd = ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={self.tmp}/tsdb",
               f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
        with open(self.prom_log, "wb") as log:
            self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        while True:
            try:
                if http("GET", f"http://127.0.0.1:{port}/-/ready", timeout_s=2)[0] == 200:
                    return port
            except OSError:
                pass
            self.check(self.procs[-1], deadline, "prometheus never became ready")
            time.sleep(0.1)

    def check(self, proc, deadline, what):
        if proc.poll() is not None or time.monotonic() > deadline:
            logs = ""
            for p in (getattr(self, "serve_log", None), getattr(self, "prom_log", None)):
                if p and os.path.exists(p):
                    with open(p, "rb") as f:
                        logs += f"--- {p}\n" + f.read().decode("utf-8", "replace")[-2000:]
            raise AssertionError(f"{what}\n{logs}")

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def vllm_dashboard_exprs():
    """The expressions of vLLM's example dashboard (data/vllm_dashboard_exprs.txt: one per line, # comments)."""
    with open(os.path.join(dc.HERE, "data", "vllm_dashboard_exprs.txt")) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def load(serve_port):
    """N_REQUESTS completions from 6 threads (every third streamed) and N_BAD requests answered 400."""
    base = f"http://127.0.0.1:{serve_port}"
    results = []

    def worker(k):
        for i in range(k, N_REQUESTS, 6):
            body = {"prompt": "Once upon a time" + " there" * (i % 5), "max_tokens": 8 + i % 8, "temperature": 0,
                    "stream": i % 3 == 0}
            status, text = http("POST", base + "/v1/completions", json.dumps(body), timeout_s=30)
            results.append((status, body["stream"], "[DONE]" in text))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=40)
    bad = [http("POST", base + "/v1/completions", json.dumps({"prompt": "x", "max_tokens": -1}))[0]
           for _ in range(N_BAD)]
    return results, bad


class LivePromql(unittest.TestCase):
    def test_dashboard_and_alert_queries(self):
        t0 = time.monotonic()
        deadline = t0 + DEADLINE_S
        src = os.path.join(ARGS.source, "deploy")
        with open(os.path.join(src, "grafana", "parallm.json")) as f:
            dash = json.load(f)
        alerts_path = os.path.join(src, "prometheus", "alerts.yml")
        rules = [r for g in dc.load_yaml_docs(alerts_path)[0]["groups"] for r in g["rules"]]
        variables = {v["name"]: v.get("allValue") or ".*" for v in dash["templating"]["list"] if v["type"] != "datasource"}
        variables.update({v["name"]: "prometheus" for v in dash["templating"]["list"] if v["type"] == "datasource"})

        with tempfile.TemporaryDirectory() as tmp:
            procs = Processes(tmp)
            try:
                serve_port = procs.start_parallm(deadline, ARGS.fake_nvml)
                no_nvml_port = procs.start_parallm(deadline, NO_NVML, "serve_no_nvml")
                prom_port = procs.start_prometheus(serve_port, no_nvml_port, alerts_path, deadline)
                api = f"http://127.0.0.1:{prom_port}/api/v1"

                def query(expr):
                    status, text = http("GET", api + "/query?" + urllib.parse.urlencode({"query": expr}))
                    return status, json.loads(text)

                # The containers' health check script against this server, and against a closed port.
                check = os.path.join(src, "parallm-healthcheck")
                for port, want in ((serve_port, 0), (free_port(), 1)):
                    r = subprocess.run(["bash", check], env={**os.environ, "PARALLM_HEALTH_PORT": str(port)},
                                       capture_output=True, timeout=10)
                    self.assertEqual(r.returncode != 0, want != 0, f"parallm-healthcheck on port {port}: {r}")

                t_ready = time.monotonic()
                results, bad = load(serve_port)
                t_load = time.monotonic()
                ok = sum(1 for s, _, _ in results if s == 200)
                self.assertEqual(ok, N_REQUESTS, results)
                self.assertTrue(all(done for _, stream, done in results if stream), "a stream without [DONE]")
                self.assertEqual(bad, [400] * N_BAD)

                # Until Prometheus has scraped the end of the load (and a few samples after it).
                while True:
                    _, r = query('parallm:request_success_total{job="parallm"}')
                    got = r["data"]["result"]
                    if got and float(got[0]["value"][1]) >= N_REQUESTS:
                        break
                    self.assertLess(time.monotonic(), deadline, f"the scrape never saw the load: {got}")
                    time.sleep(0.25)
                time.sleep(2.5)

                # serve always says whether it reads GPUs: 1 through the stand-in NVML, 0 without one,
                # and then no GPU series at all.
                for job, want in (("parallm", "1"), ("parallm_no_nvml", "0")):
                    _, r = query(f'parallm:gpu_metrics_available{{job="{job}"}}')
                    self.assertEqual([x["value"][1] for x in r["data"]["result"]], [want], (job, r))
                _, r = query('{__name__=~"parallm:gpu_.+", __name__!="parallm:gpu_metrics_available", '
                             'job="parallm_no_nvml"}')
                self.assertEqual(r["data"]["result"], [], "GPU series without NVML")
                checked = 0
                for title, raw in panel_targets(dash):
                    expr = substitute(raw, variables)
                    with self.subTest(panel=title, expr=expr):
                        status, r = query(expr)
                        self.assertEqual((status, r["status"]), (200, "success"), r)
                        self.assertTrue(r["data"]["result"], f"no data for panel '{title}': {expr}")
                        checked += 1
                _, r = query("parallm:num_requests_running")
                self.assertIn("instance", r["data"]["result"][0]["metric"], "the $instance variable's label")

                # vLLM's dashboard: $model_name from label_values(model_name), Grafana's first value.
                _, text = http("GET", api + "/label/model_name/values")
                names = json.loads(text)["data"]
                self.assertEqual(len(names), 1, names)  # both serves name the same model
                vllm_checked = 0
                for raw in vllm_dashboard_exprs():
                    expr = substitute(raw, {"model_name": names[0]})
                    with self.subTest(vllm_dashboard=expr):
                        status, r = query(expr)
                        self.assertEqual((status, r["status"]), (200, "success"), r)
                        self.assertTrue(r["data"]["result"], f"no data for vLLM's dashboard expression: {expr}")
                        vllm_checked += 1

                for rule in rules:
                    with self.subTest(alert=rule["alert"]):
                        status, r = query(rule["expr"])
                        self.assertEqual((status, r.get("status")), (200, "success"), r)

                # Prometheus itself loaded alerts.yml and evaluated every rule without error.
                while True:
                    _, text = http("GET", api + "/rules")
                    got = [r for g in json.loads(text)["data"]["groups"] for r in g["rules"]]
                    if len(got) == len(rules) and all(not r["lastEvaluation"].startswith("0001") for r in got):
                        break
                    self.assertLess(time.monotonic(), deadline, "the alert rules were never evaluated")
                    time.sleep(0.25)
                self.assertEqual(sorted(r["name"] for r in got), sorted(r["alert"] for r in rules))
                for r in got:
                    self.assertEqual(r["health"], "ok", r)

                print(f"\n{checked} panel queries (GPU panels through the stand-in NVML) and {vllm_checked} of vLLM's "
                      f"dashboard returned data; {len(rules)} alert rules evaluated; startup {t_ready - t0:.1f} s, "
                      f"load {t_load - t_ready:.1f} s, total {time.monotonic() - t0:.1f} s")
            finally:
                procs.close()


if __name__ == "__main__":
    ARGS = dc.parse_args(binary=True, fake_nvml=True)
    if shutil.which("prometheus") is None:
        dc.skip("the prometheus server is not installed (Debian package `prometheus`, tools/install_deps.sh)")
    unittest.main(verbosity=2)
