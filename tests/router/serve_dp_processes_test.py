#!/usr/bin/env python3
"""`parallm serve --dp 2 --dp-processes` end to end (stories260K).

The parent fronts two child `parallm serve` with the router. Checks:
- answers through it equal each prompt's greedy answer (taken before any failure);
- a replica killed with SIGKILL mid-load loses no request: each one gets its whole answer (equal to the
  reference) or an error status / an SSE error event, never a dropped connection or a hang;
- the killed replica is restarted (a new pid), re-admitted by the router, and serves again;
- SIGTERM to the parent drains both: streams in flight finish with [DONE], the parent exits 0, and
  no child is left.
usage: serve_dp_processes_test.py --binary build/parallm --shared ../shared"""
import argparse
from http.client import HTTPConnection
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ARGS = None
PROMPTS = ["Once upon a time", "The little dog", "She went to the park", "One day a bird", "Tom had a red ball"]


class Parent:
    def __init__(self):
        model = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        cmd = [ARGS.binary, "serve", "--model", model, "--dp", "2", "--dp-processes", "--port", "0",
               "--threads", "1", "--max-model-len", "256", "--shutdown-timeout", "20"]
        self.p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        m = self.wait_line(r"listening on http://[^:]+:(\d+) \(router")
        self.port = int(m.group(1))

    def _read(self):
        for line in self.p.stderr:
            with self.cv:
                self.lines.append(line)
                self.cv.notify_all()

    def wait_line(self, pattern, timeout=60, after=0):
        deadline = time.time() + timeout
        with self.cv:
            while True:
                for line in self.lines[after:]:
                    m = re.search(pattern, line)
                    if m:
                        return m
                left = deadline - time.time()
                if left <= 0 or self.p.poll() is not None:
                    raise AssertionError(f"no line /{pattern}/ in:\n" + "".join(self.lines[-40:]))
                self.cv.wait(left)

    def pids(self):
        """replica -> latest pid, from the 'replica i: pid P, started' lines."""
        out = {}
        with self.cv:
            for line in self.lines:
                m = re.search(r"replica (\d+): pid (\d+), started", line)
                if m:
                    out[int(m.group(1))] = int(m.group(2))
        return out


def http(port, method, path, body=None, timeout=60):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def backends_up(port):
    _, text = http(port, "GET", "/metrics")
    return [float(v) for v in re.findall(r'^parallm:router_backend_up\{[^}]*\} (\S+)$', text, re.M)]


def wait_until(cond, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(what)


def complete(port, prompt, stream, max_tokens=48):
    """(kind, text): 'ok' with the generated text, or 'error' with why. Anything else raises."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream, "ignore_eos": True}
    status, text = http(port, "POST", "/v1/completions", body)
    if status != 200:
        err = json.loads(text)["error"]  # an OpenAI-style error body, not a dropped connection
        return "error", f"{status}: {err['message']}"
    if not stream:
        return "ok", json.loads(text)["choices"][0]["text"]
    events = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
    assert events and events[-1] == "[DONE]", text[-300:]
    parts = [json.loads(e) for e in events[:-1]]
    if any("error" in p for p in parts):
        return "error", "stream error event: " + json.dumps([p for p in parts if "error" in p][0])
    return "ok", "".join(p["choices"][0]["text"] for p in parts)


def check_bad_input():
    model = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
    for extra, what in ((["--dp", "1"], "one replica"), (["--dp", "2", "--devices", "cpu:0"], "devices do not split"),
                        (["--dp", "2", "--routing", "nope"], "unknown routing")):
        r = subprocess.run([ARGS.binary, "serve", "--model", model, "--dp-processes", "--port", "0", *extra],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and r.stderr.startswith("parallm: error:") and r.stderr.count("\n") == 1, \
            (what, r.returncode, r.stderr)
        assert "--policy" not in r.stderr, r.stderr  # serve's flag is --routing
        print(f"  bad input ({what}): exit 2: {r.stderr.strip()}")


def main():
    check_bad_input()
    parent = Parent()
    port = parent.port
    try:
        wait_until(lambda: backends_up(port) == [1.0, 1.0], 60, "both replicas never came up")
        pids = parent.pids()
        assert sorted(pids) == [0, 1] and pids[0] != pids[1], pids
        reference = {p: complete(port, p, False) for p in PROMPTS}
        assert all(k == "ok" for k, _ in reference.values()), reference
        for p in PROMPTS:  # streamed the same as whole
            assert complete(port, p, True) == reference[p], p

        # Mid-load: SIGKILL replica 0.
        jobs = [(PROMPTS[i % len(PROMPTS)], i % 3 == 0) for i in range(60)]
        done = []
        killed = threading.Event()

        def run(job):
            r = complete(port, *job)
            done.append(1)
            if len(done) == 10 and not killed.is_set():
                os.kill(pids[0], signal.SIGKILL)
                killed.set()
            return job, r

        with ThreadPoolExecutor(6) as ex:
            results = list(ex.map(run, jobs))
        assert killed.is_set()
        errors = 0
        for (prompt, stream), (kind, text) in results:
            if kind == "ok":
                assert text == reference[prompt][1], (prompt, stream, text)
            else:
                errors += 1
        print(f"  kill -9 mid-load: {len(results)} requests, {len(results) - errors} answered whole and equal to "
              f"the reference, {errors} ended with an error status or event, none lost")

        # The replica comes back (a new pid), is re-admitted, and serves.
        m = parent.wait_line(r"replica 0: pid (\d+), started", 60, after=0)
        wait_until(lambda: parent.pids()[0] != pids[0], 30, "replica 0 was not restarted")
        wait_until(lambda: backends_up(port) == [1.0, 1.0], 60, "restarted replica never re-admitted")
        new_pid = parent.pids()[0]
        before = re.findall(r'^parallm:router_requests_total\{[^}]*\} (\S+)$', http(port, "GET", "/metrics")[1], re.M)
        for i in range(8):
            assert complete(port, PROMPTS[i % len(PROMPTS)], False) == reference[PROMPTS[i % len(PROMPTS)]]
        after = re.findall(r'^parallm:router_requests_total\{[^}]*\} (\S+)$', http(port, "GET", "/metrics")[1], re.M)
        assert float(after[0]) > float(before[0]), (before, after)
        print(f"  replica 0 restarted (pid {pids[0]} -> {new_pid}) and serving again")

        # SIGTERM drains both: streams whose first event has arrived (so they are in a replica) finish.
        streams = []
        for i in range(4):
            c = HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("POST", "/v1/completions", json.dumps(
                {"prompt": PROMPTS[i], "max_tokens": 230, "temperature": 0, "stream": True, "ignore_eos": True}),
                {"Content-Type": "application/json"})
            r = c.getresponse()
            assert r.status == 200, r.status
            first = r.readline()
            assert first.startswith(b"data: {"), first
            streams.append((c, r, first))
        t0 = time.time()
        parent.p.send_signal(signal.SIGTERM)
        drained = []
        for c, r, first in streams:
            text = (first + r.read()).decode()
            c.close()
            events = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
            ok = events[-1] == "[DONE]" and not any("error" in json.loads(e) for e in events[:-1])
            drained.append(("ok" if ok else "error", text[-200:]))
        assert all(k == "ok" for k, _ in drained), drained
        rc = parent.p.wait(timeout=60)
        assert rc == 0, rc
        for pid in parent.pids().values():
            try:
                os.kill(pid, 0)
                raise AssertionError(f"replica pid {pid} still running after the parent exited")
            except ProcessLookupError:
                pass
        print(f"  SIGTERM: 4 streams finished, parent exited 0 after {time.time() - t0:.1f} s, no replica left")
    finally:
        if parent.p.poll() is None:
            parent.p.kill()
            parent.p.wait(10)
    print("ok")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--shared", required=True)
    ARGS = ap.parse_args()
    main()
