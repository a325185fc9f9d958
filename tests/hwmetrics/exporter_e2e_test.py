"""Hardware and host metrics end to end: `parallm exporter` and `parallm serve`.

Starts `parallm exporter --port 0` and `parallm serve` (stories260K, --port 0),
reads the port from the "listening on http://HOST:PORT" line on stderr,
scrapes GET /metrics of both and checks the host series are there with sane
values (CPU ratio in [0, 1], memory used <= total per NUMA node, RSS > 0),
that `parallm:gpu_metrics_available` is 0 or 1 and GPU series appear only
with 1, and, where Debian's promtool is installed, that `promtool check
metrics` reports nothing but the ':'-in-name lint. Also: the exporter's
/health, a 404, SIGTERM stops it (exit 0), and a bad port exits 2.

usage: exporter_e2e_test.py --binary build/parallm --shared ../shared
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

ARGS = None
COLON_LINT = "metric names should not contain ':'"
LISTEN_RE = re.compile(r"listening on http://([^:\s]+):(\d+)")
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an http_proxy


class Proc:
    """A parallm subcommand whose stderr is collected; .url once it listens."""

    def __init__(self, args, timeout_s=60):
        self.p = subprocess.Popen([ARGS.binary] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.url = None
        got = threading.Event()

        def pump():
            for line in self.p.stderr:
                self.lines.append(line)
                m = LISTEN_RE.search(line)
                if m and self.url is None:
                    self.url = f"http://{m.group(1)}:{m.group(2)}"
                    got.set()
            got.set()

        threading.Thread(target=pump, daemon=True).start()
        got.wait(timeout_s)
        if self.url is None:
            self.close()
            raise AssertionError("no 'listening on' line:\n" + "".join(self.lines))

    def get(self, path):
        try:
            with OPENER.open(self.url + path, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def close(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stderr.close()
        return self.p.returncode


def samples(text):
    """{name: [(labels, value)]} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)$", line)
        assert m, f"unparsable line: {line!r}"
        out.setdefault(m.group(1), []).append((m.group(2) or "", float(m.group(3))))
    return out


class HardwareMetrics(unittest.TestCase):
    def check_host_series(self, text, where):
        s = samples(text)
        for name in ("parallm:gpu_metrics_available", "parallm:host_cpu_utilization_ratio",
                     "parallm:host_memory_used_bytes", "parallm:host_memory_total_bytes",
                     "process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"):
            self.assertIn(name, s, f"{where}: {name} missing")
            self.assertRegex(text, rf"(?m)^# TYPE {re.escape(name)} (gauge|counter)$", f"{where}: {name}")
        cpu = s["parallm:host_cpu_utilization_ratio"][0][1]
        self.assertGreaterEqual(cpu, 0.0, where)
        self.assertLessEqual(cpu, 1.0, where)
        used = dict(s["parallm:host_memory_used_bytes"])
        total = dict(s["parallm:host_memory_total_bytes"])
        self.assertEqual(sorted(used), sorted(total), where)
        for labels, u in used.items():
            self.assertRegex(labels, r'^\{numa_node="\d+"\}$', where)
            self.assertGreater(total[labels], 0, where)
            self.assertLessEqual(u, total[labels], f"{where}: {labels}")
        self.assertGreater(s["process_resident_memory_bytes"][0][1], 0, where)
        self.assertGreater(s["process_open_fds"][0][1], 0, where)
        avail = s["parallm:gpu_metrics_available"][0][1]
        self.assertIn(avail, (0.0, 1.0), where)
        gpu_series = [n for n in s if n.startswith("parallm:gpu_") and n != "parallm:gpu_metrics_available"]
        if avail == 0:
            self.assertEqual(gpu_series, [], f"{where}: GPU series without NVML")
        for name in gpu_series:
            for labels, _ in s[name]:
                self.assertRegex(labels, r'gpu="\d+",uuid="', f"{where}: {name}")
        return s

    def promtool(self, text, where):
        promtool = shutil.which("promtool")
        if promtool is None:
            print(f"{where}: promtool not found (Debian package `prometheus`); not checked by Prometheus' parser")
            return
        p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        out = (p.stdout + p.stderr).strip()
        self.assertIn(p.returncode, (0, 3), f"{where}: promtool failed ({p.returncode}):\n{out}")
        problems = [line for line in out.splitlines() if line.strip() and not line.rstrip().endswith(COLON_LINT)]
        self.assertEqual(problems, [], f"{where}: promtool check metrics:\n{out}")

    def test_exporter(self):
        ex = Proc(["exporter", "--port", "0"])
        try:
            self.assertTrue(ex.url.startswith("http://127.0.0.1:"), ex.url)
            status, first = ex.get("/metrics")
            self.assertEqual(status, 200)
            time.sleep(0.3)
            status, text = ex.get("/metrics")  # a second scrape: the CPU ratio over the time between the two
            self.assertEqual(status, 200)
            s = self.check_host_series(text, "exporter")
            # Only hardware and host: none of the server's own series.
            self.assertFalse([n for n in s if n.startswith("vllm:")], "exporter has server series")
            self.promtool(text, "exporter")
            status, body = ex.get("/health")
            self.assertEqual(status, 200)
            self.assertIn("ok", body)
            self.assertEqual(ex.get("/nope")[0], 404)
        finally:
            rc = ex.close()
        self.assertEqual(rc, 0, "".join(ex.lines))

    def test_serve_appends_hardware_metrics(self):
        model = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        if not os.path.exists(model):
            self.skipTest(f"{model} not found")
        srv = Proc(["serve", "--model", model, "--port", "0", "--threads", "1", "--max-model-len", "256"])
        try:
            deadline = time.time() + 60
            while time.time() < deadline and srv.get("/health")[0] != 200:
                time.sleep(0.2)
            status, text = srv.get("/metrics")
            self.assertEqual(status, 200)
            s = self.check_host_series(text, "serve")
            self.assertIn("vllm:num_requests_running", s)  # the server's own series are still there
            self.promtool(text, "serve")
        finally:
            srv.close()

    def test_bad_port(self):
        for port in ("70000", "-1", "abc"):
            p = subprocess.run([ARGS.binary, "exporter", "--port", port], capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 2, f"--port {port}: {p.stderr}")
            self.assertTrue(p.stderr.strip(), f"--port {port}: no message")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--shared", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
