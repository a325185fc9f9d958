"""`parallm serve` as a process: binding, signals and shutdown.

- A second server on a port in use exits non-zero at once, naming the port,
  and the first keeps answering (no SO_REUSEPORT sharing).
- Ports out of range exit 2; --port 0 logs the port it took.
- SIGTERM with streams in flight: /health answers 503 during the drain, every
  stream ends with a chunk carrying finish_reason and `data: [DONE]`, and the
  process exits 0 within --shutdown-timeout (streams still running then end
  with finish_reason "abort").
- A second signal exits at once.
- `parallm --version`.

usage: lifecycle_test.py --binary build/parallm --shared ../shared
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_client as hc  # noqa: E402

ARGS = None


def model():
    return os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")


def stream_until_done(port, max_tokens, out, key, timeout_s=60):
    """Reads one streamed completion to its end; out[key] = (finish_reasons, saw_done, raw tail)."""
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": max_tokens, "ignore_eos": True, "stream": True})
    raw = hc.request("POST", "/v1/completions", body)
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    s.sendall(raw)
    data = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            b = s.recv(65536)
            if not b:
                break
            data += b
            if data.endswith(b"0\r\n\r\n"):
                break
    except OSError:
        pass
    s.close()
    reasons = re.findall(rb'"finish_reason":"(\w+)"', data)
    out[key] = ([r.decode() for r in reasons], b"data: [DONE]" in data, data[-300:])


class Binding(unittest.TestCase):
    def test_second_server_on_a_used_port_fails_and_the_first_is_unaffected(self):
        with tempfile.TemporaryDirectory() as tmp:
            first = hc.Server(ARGS.binary, model(), tmp)
            try:
                t0 = time.monotonic()
                second = subprocess.run([ARGS.binary, "serve", "--model", model(), "--port", str(first.port)],
                                        capture_output=True, text=True, timeout=60)
                self.assertNotEqual(second.returncode, 0)
                self.assertIn(str(first.port), second.stderr)
                self.assertIn("in use", second.stderr)
                self.assertLess(time.monotonic() - t0, 20)
                # The first still answers every request (none go to a second listener).
                for _ in range(20):
                    self.assertEqual(first.health(), 200)
                r, _, err = first.post("/v1/completions", json.dumps({"prompt": "Once", "max_tokens": 2}))
                self.assertIsNotNone(r, err)
                self.assertEqual(r.status, 200)
            finally:
                first.close()

    def test_ports_out_of_range_exit_2(self):
        for port in ("99999", "-1", "65536"):
            r = subprocess.run([ARGS.binary, "serve", "--model", model(), "--port", port], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("port", r.stderr)

    def test_port_zero_logs_the_port_taken(self):
        with tempfile.TemporaryDirectory() as tmp:
            s = hc.Server(ARGS.binary, model(), tmp)  # --port 0; it found the port in the log
            try:
                self.assertGreater(s.port, 0)
                self.assertEqual(s.health(), 200)
            finally:
                s.close()


class Shutdown(unittest.TestCase):
    def start(self, tmp, timeout_s):
        # A context long enough for streams that outlast the drain.
        return hc.Server(ARGS.binary, model(), tmp, extra=("--ctx-size", "8192", "--shutdown-timeout", str(timeout_s)),
                         max_model_len=8192)

    def test_sigterm_drains_streams_then_exits_0(self):
        with tempfile.TemporaryDirectory() as tmp:
            s = self.start(tmp, 3)
            try:
                results = {}
                threads = [threading.Thread(target=stream_until_done, args=(s.port, n, results, i))
                           for i, n in enumerate([300, 300, 300, 8000, 8000, 8000])]
                for t in threads:
                    t.start()
                time.sleep(0.3)
                t_kill = time.monotonic()
                s.proc.send_signal(signal.SIGTERM)
                saw_503 = False
                while time.monotonic() - t_kill < 2.5 and s.alive():
                    if s.health(timeout_s=1) == 503:
                        saw_503 = True
                        break
                    time.sleep(0.05)
                for t in threads:
                    t.join(timeout=30)
                rc = s.proc.wait(timeout=30)
                elapsed = time.monotonic() - t_kill
                self.assertTrue(saw_503, "no 503 from /health during the drain")
                self.assertEqual(rc, 0, s.log_text()[-2000:])
                self.assertLess(elapsed, 3 + 5)
                self.assertEqual(len(results), 6)
                for i, (reasons, done, tail) in results.items():
                    self.assertTrue(done, f"stream {i} has no [DONE]: {tail!r}")
                    self.assertTrue(reasons, f"stream {i} has no finish_reason: {tail!r}")
                long_reasons = [results[i][0][-1] for i in (3, 4, 5)]
                self.assertEqual(long_reasons, ["abort"] * 3)
                self.assertIn("draining", s.log_text())
            finally:
                s.close()

    def test_second_signal_exits_at_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            s = self.start(tmp, 60)
            try:
                results = {}
                t = threading.Thread(target=stream_until_done, args=(s.port, 8000, results, 0))
                t.start()
                time.sleep(0.3)
                s.proc.send_signal(signal.SIGTERM)
                time.sleep(0.3)
                self.assertTrue(s.alive(), "the first signal must drain, not exit")
                t0 = time.monotonic()
                s.proc.send_signal(signal.SIGINT)
                rc = s.proc.wait(timeout=10)
                self.assertLess(time.monotonic() - t0, 2)
                self.assertNotEqual(rc, 0)
                t.join(timeout=10)
            finally:
                s.close()


class Version(unittest.TestCase):
    def test_version(self):
        r = subprocess.run([ARGS.binary, "--version"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^parallm \d+\.\d+\.\d+")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--shared", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
