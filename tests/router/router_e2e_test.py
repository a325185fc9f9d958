#!/usr/bin/env python3
"""`parallm router` end to end with real backends: two `parallm serve`
(stories260K) and one scripted OpenAI server in this process.

Checks: answers through the router equal direct answers token for token
(greedy); concurrent streamed and whole requests spread by policy and none is
lost; a backend killed mid-run is ejected, requests go elsewhere, and it is
re-admitted after a restart on the same port; the router's per-backend
request counters equal the backends' parallm:request_success_total; and
prefix-affinity raises the backends' prefix-cache hit rate over round-robin
(both printed)."""
import argparse
import http.server
import json
import os
import re
import socketserver
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ARGS = None


def start(cmd):
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, int(m.group(1))
    p.kill()
    raise RuntimeError("no 'listening on' line from " + " ".join(cmd))


def serve(port=0):
    model = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
    return start([ARGS.binary, "serve", "--model", model, "--port", str(port), "--threads", "1",
                  "--max-model-len", "256"])


def wait_health(port, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"port {port} never healthy")


def post(port, body, timeout=60):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def metric(text, name, label=None):
    total = 0.0
    found = False
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if line.startswith(name + " ") or line.startswith(name + "{"):
            if label is not None and label not in line:
                continue
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else None


def stream_text(body):
    out = ""
    for line in body.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            d = json.loads(line[6:])
            if "error" in d:
                raise AssertionError("error event: " + line)
            out += d["choices"][0].get("text", "")
    return out


class Scripted(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    count = 0
    lock = threading.Lock()

    def log_message(self, *a):
        pass

    def reply(self, status, body, ctype="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, "{}")
        if self.path == "/v1/models":
            return self.reply(200, json.dumps({"object": "list", "data": [{"id": "scripted"}]}))
        self.reply(404, "{}")

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with Scripted.lock:
            Scripted.count += 1
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(3):
                self.wfile.write(f'data: {{"choices":[{{"text":"s{i}"}}]}}\n\n'.encode())
                self.wfile.flush()
                time.sleep(0.01)
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True
            return
        self.reply(200, json.dumps({"choices": [{"text": "scripted"}]}))


def router(backends, policy):
    cmd = [ARGS.binary, "router", "--port", "0", "--policy", policy]
    for b in backends:
        cmd += ["--backend", f"http://127.0.0.1:{b}"]
    return start(cmd)


def check_bad_input():
    for args, what in ([["router"], "no --backend"],
                       [["router", "--backend", "ftp://x"], "bad URL"],
                       [["router", "--backend", "http://127.0.0.1:1", "--policy", "x"], "bad policy"],
                       [["router", "--backend", "http://127.0.0.1:notaport"], "malformed port"],
                       [["router", "--backend", "http://no-such-host.invalid:8000"], "host does not resolve"]):
        r = subprocess.run([ARGS.binary] + args, capture_output=True, text=True, timeout=10)
        assert r.returncode == 2, (what, r.returncode, r.stderr)
        # One line of ours, or CLI11's usage error and its "Run with --help" hint.
        lines = [x for x in r.stderr.strip().splitlines() if not x.startswith("Run with --help")]
        assert len(lines) == 1, (what, r.stderr)
        assert "--url" not in lines[0], lines[0]  # the router's flag is --backend
        print(f"  bad input ({what}): exit 2: {r.stderr.strip().splitlines()[-1]}")
    # A backend that refuses connections at start is down, not bad input: the
    # router serves (503 until some backend answers).
    rp, rport = router([1], "round-robin")
    try:
        try:
            status = urllib.request.urlopen(f"http://127.0.0.1:{rport}/health", timeout=5).status
        except urllib.error.HTTPError as e:
            status = e.code
        assert status == 503, status
        assert rp.poll() is None
        print("  backend refusing at start: router up, /health 503")
    finally:
        rp.terminate()
        rp.wait(10)


def hit_rate_run(ports, policy, prompts):
    """Fresh backends per run would be cleaner; instead each run uses distinct
    prefixes, and the hit rate is the delta of vllm:prefix_cache_* counters."""
    before = [(metric(get(p, "/metrics"), "vllm:prefix_cache_hits_total") or 0,
               metric(get(p, "/metrics"), "vllm:prefix_cache_queries_total") or 0) for p in ports]
    rp, rport = router(ports, policy)
    try:
        wait_health(rport)
        time.sleep(0.3)
        for prompt in prompts:  # sequential: the cache sees each earlier request
            s, b = post(rport, {"prompt": prompt, "max_tokens": 4, "temperature": 0})
            assert s == 200, b
    finally:
        rp.terminate()
        rp.wait(10)
    hits = queries = 0
    for p, (h0, q0) in zip(ports, before):
        m = get(p, "/metrics")
        hits += (metric(m, "vllm:prefix_cache_hits_total") or 0) - h0
        queries += (metric(m, "vllm:prefix_cache_queries_total") or 0) - q0
    return hits / queries if queries else 0.0


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--shared", required=True)
    ARGS = ap.parse_args()
    check_bad_input()

    scripted = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Scripted)
    scripted.daemon_threads = True
    threading.Thread(target=scripted.serve_forever, daemon=True).start()
    sport = scripted.server_address[1]
    s1, p1 = serve()
    s2, p2 = serve()
    procs = [s1, s2]
    try:
        wait_health(p1)
        wait_health(p2)
        # 1. Greedy answers through the router equal direct ones.
        rp, rport = router([p1, p2], "round-robin")
        procs.append(rp)
        wait_health(rport)
        time.sleep(0.3)
        req = {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "seed": 7}
        _, direct = post(p1, req)
        direct_text = json.loads(direct)["choices"][0]["text"]
        for _ in range(4):
            s, b = post(rport, req)
            assert s == 200 and json.loads(b)["choices"][0]["text"] == direct_text, b
            s, b = post(rport, dict(req, stream=True))
            assert s == 200 and stream_text(b) == direct_text, b
        print(f"  greedy through the router == direct: {direct_text!r}")
        rp.terminate()
        rp.wait(10)
        procs.remove(rp)

        # 2. Three backends, concurrent load, one killed mid-run and restarted.
        base = {p: metric(get(p, "/metrics"), "parallm:request_success_total") for p in (p1, p2)}
        rp, rport = router([p1, p2, sport], "least-tokens")
        procs.append(rp)
        wait_health(rport)
        time.sleep(0.3)
        models = json.loads(get(rport, "/v1/models"))
        assert {"scripted"} <= {m["id"] for m in models["data"]} and len(models["data"]) >= 2, models

        def one(i):
            body = {"prompt": f"Lily had a {i}", "max_tokens": 16, "temperature": 0, "stream": i % 2 == 0}
            return post(rport, body)

        with ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(one, i) for i in range(96)]
            for f in futures[:32]:
                f.result()
            s2.kill()  # backend 2 dies mid-run, requests in flight on it
            s2.wait()
            results = [f.result() for f in futures]
        cut = 0
        for s, b in results:
            assert s == 200, (s, b)  # none lost: whole answers were retried elsewhere
            if b.startswith("data:"):
                assert b.rstrip().endswith("data: [DONE]"), b
                cut += '"error"' in b  # a stream already under way ends with an error event
        m = get(rport, "/metrics")
        assert metric(m, "parallm:router_backend_up", f":{p2}\"") == 0, m
        print(f"  96 requests, backend :{p2} killed after 32: all 200 ({cut} streams cut with an error event)")
        s2, _ = serve(p2)  # back on the same port
        procs.append(s2)
        wait_health(p2)
        deadline = time.time() + 5
        while time.time() < deadline and metric(get(rport, "/metrics"), "parallm:router_backend_up", f":{p2}\"") != 1:
            time.sleep(0.1)
        assert metric(get(rport, "/metrics"), "parallm:router_backend_up", f":{p2}\"") == 1
        print(f"  backend :{p2} re-admitted after restart")
        m = get(rport, "/metrics")
        routed1 = metric(m, "parallm:router_requests_total", f":{p1}\"")
        served1 = metric(get(p1, "/metrics"), "parallm:request_success_total") - base[p1]
        assert routed1 == served1, (routed1, served1)
        routed_s = metric(m, "parallm:router_requests_total", f":{sport}\"")
        assert routed_s == Scripted.count, (routed_s, Scripted.count)
        print(f"  router_requests_total agrees: :{p1} {routed1:.0f} == {served1:.0f}, scripted {routed_s:.0f} == {Scripted.count}")
        rp.terminate()
        rp.wait(10)
        procs.remove(rp)

        # 3. Prefix-cache hit rate: shared prefixes, affinity vs round-robin.
        def prompts(tag):
            # Five shared prefixes longer than the 256 characters affinity
            # hashes; five is odd, so round-robin over two backends sends
            # each prefix to both.
            story = ("Once upon a time, in a land far away, there lived a little girl named Lily who loved to "
                     "play in the park with her friends every day. One day she saw a big red ball under a tree "
                     "and she ran to get it. Her mom said to be careful and to share the ball with the other kids "
                     "because sharing is good.")
            heads = [f"{tag} {k}. {story}" for k in range(5)]
            return [heads[i % 5] + f" Then {i}" for i in range(30)]

        rr = hit_rate_run([p1, p2], "round-robin", prompts("Alpha"))
        pa = hit_rate_run([p1, p2], "prefix-affinity", prompts("Beta"))
        print(f"  prefix-cache hit rate: round-robin {rr:.3f}, prefix-affinity {pa:.3f}")
        assert pa >= rr, (pa, rr)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        scripted.shutdown()
    print("router e2e: ok")


if __name__ == "__main__":
    main()
