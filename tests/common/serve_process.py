"""One `parallm serve` child process for the Python tests: started with
`--host 127.0.0.1 --port 0`, its port read from the "listening on" line of its
log, ready once /health answers 200; close() sends SIGTERM (then SIGKILL).

Every wait has a deadline: a server that never starts or never becomes
healthy fails the test with the tail of its log, it never hangs it.
"""
import http.client
import os
import re
import signal
import subprocess
import time


class ServeProcess:
    def __init__(self, binary, args, log_dir, start_timeout_s=60, launcher=(), env=None):
        self.log_path = os.path.join(log_dir, f"serve_{time.monotonic_ns()}.log")
        self.log = open(self.log_path, "wb")
        cmd = [*launcher, binary, "serve", *args, "--host", "127.0.0.1", "--port", "0"]
        self.cmd = " ".join(cmd)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, stdin=subprocess.DEVNULL, env=env)
        self.port = 0
        try:
            self._wait_ready(time.monotonic() + start_timeout_s)
        except BaseException:
            self.close()
            raise

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def alive(self):
        return self.proc.poll() is None

    def health_status(self, timeout_s=2.0):
        """The status of GET /health, or None (no answer in time)."""
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            c.close()
            return r.status
        except OSError:
            return None

    def _wait_ready(self, deadline):
        while self.port == 0:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log_text())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.cmd} did not start:\n{self.log_text()[-3000:]}")
            time.sleep(0.05)
        while self.health_status() != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.cmd} never became healthy:\n{self.log_text()[-3000:]}")
            time.sleep(0.05)

    def close(self, timeout_s=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout_s)
        self.log.close()
