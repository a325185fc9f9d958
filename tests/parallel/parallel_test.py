#!/usr/bin/env python3
"""Parallel layouts give the single-device answer (issue 3 acceptance).

Every layout must produce the same greedy tokens as one device and logits
within 1e-4 (relative to the row's largest magnitude), on the local backend
(ranks are threads) and under `mpirun --oversubscribe` (ranks are processes).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

ARGS = None
TMP = None
PROMPT = "Once upon a time"
MPIRUN = shutil.which("mpirun")


def mpi_prefix(n):
    return [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(n)]


def generate(model_args, layout, n=24, launcher=(), dump=None, extra=()):
    cmd = [*launcher, ARGS.binary, "generate", *model_args, "--prompt", PROMPT, "-n", str(n), "--temperature", "0",
           "--kv-dtype", "f32", "--json", "--threads", "1", "--comm-timeout", "30", *layout, *extra]
    if dump:
        cmd += ["--dump-logits", dump]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-3000:]}")
    return json.loads(out.stdout)


class Layouts(unittest.TestCase):
    def compare(self, model_args, layouts, use_mpi):
        base_dump = os.path.join(TMP, "base.f32")
        base = generate(model_args, [], dump=base_dump)
        base_logits = np.fromfile(base_dump, dtype=np.float32).reshape(len(base["prompt_token_ids"]), -1)
        self.assertEqual(len(base["token_ids"]), 24)
        for layout in layouts:
            world = max(int(layout[layout.index("--tp") + 1]) if "--tp" in layout else 1,
                        int(layout[layout.index("--ep") + 1]) if "--ep" in layout else 1) * \
                    (int(layout[layout.index("--pp") + 1]) if "--pp" in layout else 1)
            backends = [("local", ())]
            if use_mpi and MPIRUN:
                backends.append(("mpi", mpi_prefix(world)))
            for comm, launcher in backends:
                with self.subTest(layout=" ".join(layout), comm=comm):
                    dump = os.path.join(TMP, "layout.f32")
                    got = generate(model_args, [*layout, "--comm", comm], launcher=launcher, dump=dump)
                    self.assertEqual(got["token_ids"], base["token_ids"])
                    logits = np.fromfile(dump, dtype=np.float32).reshape(base_logits.shape)
                    rel = np.abs(logits - base_logits).max(axis=1) / np.abs(base_logits).max(axis=1)
                    self.assertLess(rel.max(), 1e-4)

    def test_stories260k(self):
        m = os.path.join(ARGS.shared, "models", "stories260K")
        model = ["--model", os.path.join(m, "stories260K.bin"), "--tokenizer", os.path.join(m, "tok512.bin")]
        layouts = [["--tp", "2"], ["--tp", "4"], ["--pp", "2"], ["--pp", "3"], ["--tp", "2", "--pp", "2"],
                   ["--pp", "2", "--pp-layers", "3,2"]]
        self.compare(model, layouts, use_mpi=True)

    def test_generated_gqa(self):
        # tiny: 4 query heads over 2 KV heads; tp 4 replicates each KV head on two ranks.
        model = os.path.join(TMP, "gqa.gguf")
        subprocess.run([ARGS.binary, "make-model", "--preset", "tiny", "--dtype", "f32", "--out", model], check=True,
                       capture_output=True)
        self.compare(["--model", model], [["--tp", "2"], ["--tp", "4"], ["--pp", "2"], ["--tp", "2", "--pp", "2"]],
                     use_mpi=True)

    def test_generated_moe(self):
        model = os.path.join(TMP, "moe.gguf")
        subprocess.run([ARGS.binary, "make-model", "--preset", "mixtral-tiny", "--dtype", "f32", "--out", model],
                       check=True, capture_output=True)
        self.compare(["--model", model], [["--ep", "2"], ["--ep", "4"], ["--tp", "2", "--ep", "2"],
                                          ["--tp", "4", "--ep", "4"], ["--tp", "2"], ["--pp", "2", "--ep", "2"]],
                     use_mpi=True)

    def test_generated_qwen_gemma_phi3_and_deepseek_families(self):
        # Qwen3's q/k norms, the Qwen-MoE routers and shared expert, Gemma's
        # windows, soft-caps and post-norms, Phi-3's fused matrices (each
        # rank slices its rows of Q, K, V, gate and up), DeepSeek's latent
        # attention (heads split, the latent cached whole on every rank) and
        # grouped routing under each split the math allows
        # (the shared expert is tp-split, replicated under ep; Gemma 3's one
        # KV head is replicated under tp).
        for preset, layouts in (("tiny-qwen3", [["--tp", "2"], ["--pp", "2"], ["--tp", "2", "--pp", "2"]]),
                                ("tiny-qwen3moe", [["--tp", "2"], ["--pp", "2"], ["--ep", "2"]]),
                                ("tiny-qwen2moe", [["--tp", "2"], ["--pp", "2"], ["--ep", "2"],
                                                   ["--tp", "2", "--ep", "2"]]),
                                ("tiny-gemma2", [["--tp", "2"], ["--pp", "2"]]),
                                ("tiny-gemma3", [["--tp", "2"], ["--pp", "2"], ["--tp", "2", "--pp", "3"]]),
                                ("tiny-phi3", [["--tp", "2"], ["--pp", "2"], ["--tp", "2", "--pp", "2"]]),
                                ("tiny-deepseek2", [["--tp", "2"], ["--pp", "3"], ["--ep", "2"],
                                                    ["--tp", "2", "--ep", "2"], ["--pp", "2", "--ep", "2"]]),
                                ("tiny-deepseek2-lite", [["--tp", "4"], ["--ep", "2"]])):
            model = os.path.join(TMP, preset + ".gguf")
            subprocess.run([ARGS.binary, "make-model", "--preset", preset, "--dtype", "f32", "--out", model],
                           check=True, capture_output=True)
            self.compare(["--model", model], layouts, use_mpi=True)


class DoesntFit(unittest.TestCase):
    def test_tp2_fits_where_tp1_does_not(self):
        m = os.path.join(ARGS.shared, "models", "stories260K")
        model = ["--model", os.path.join(m, "stories260K.bin"), "--tokenizer", os.path.join(m, "tok512.bin")]
        cmd = [ARGS.binary, "generate", *model, "--prompt", PROMPT, "-n", "16", "--temperature", "0",
               "--kv-dtype", "f32", "--json", "--device-memory", "1300K"]
        one = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(one.returncode, 2, one.stderr)
        self.assertIn("per device at tp=1", one.stderr)
        self.assertIn("try --tp 2", one.stderr)
        self.assertEqual(len(one.stderr.strip().splitlines()), 1, one.stderr)
        two = subprocess.run(cmd + ["--tp", "2"], capture_output=True, text=True, timeout=120)
        self.assertEqual(two.returncode, 0, two.stderr)
        free = subprocess.run(cmd[:-2], capture_output=True, text=True, timeout=120)
        self.assertEqual(json.loads(two.stdout)["token_ids"], json.loads(free.stdout)["token_ids"])


class TensorParallelTraffic(unittest.TestCase):
    def test_bytes_per_token_match_ring_formula(self):
        model = os.path.join(TMP, "traffic.gguf")
        subprocess.run([ARGS.binary, "make-model", "--preset", "tiny", "--dtype", "f32", "--out", model], check=True,
                       capture_output=True)
        for tp in (2, 4):
            out = subprocess.run([ARGS.binary, "bench-model", "--model", model, "--tp", str(tp), "--threads", "1",
                                  "--prompt-len", "8", "--gen-len", "8", "--repetitions", "1", "--json"],
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(out.returncode, 0, out.stderr)
            j = json.loads(out.stdout)
            # tiny: 2 layers, n_embd 64, f32 activations. Two all-reduces per layer of
            # n_embd x 4 bytes; a ring sends 2(tp-1)/tp of that per rank.
            want = 2 * 2 * 64 * 4 * 2 * (tp - 1) / tp
            for r in j["ranks"]:
                self.assertAlmostEqual(r["tp_bytes_sent_per_token"], want, delta=1e-6)


@unittest.skipIf(MPIRUN is None, "mpirun not installed")
class LostRank(unittest.TestCase):
    def test_killed_rank_is_named_within_timeout(self):
        # tp: the driver waits in an all-reduce; pp: in the recv of the last stage's logits.
        for layout in (["--tp", "2"], ["--pp", "2"]):
            with self.subTest(layout=" ".join(layout)):
                self.check_killed_rank(layout)

    def check_killed_rank(self, layout):
        m = os.path.join(ARGS.shared, "models", "stories260K")
        cmd = [*mpi_prefix(2), ARGS.binary, "generate", "--model", os.path.join(m, "stories260K.bin"),
               "--tokenizer", os.path.join(m, "tok512.bin"), "--prompt", PROMPT, "-n", "60000", "--ctx-size", "60000",
               "--ignore-eos", "--temperature", "0", *layout, "--comm", "mpi", "--comm-timeout", "5",
               "--threads", "1"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # Find rank 1 (OMPI_COMM_WORLD_RANK=1 in its environment) once generation runs.
        victim = None
        deadline = time.time() + 60
        while victim is None and time.time() < deadline:
            time.sleep(0.5)
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        env = f.read().split(b"\0")
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read()
                except OSError:
                    continue
                if b"OMPI_COMM_WORLD_RANK=1" in env and b"generate" in cmdline and b"parallm" in cmdline:
                    victim = int(pid)
        self.assertIsNotNone(victim, "rank 1 never started")
        time.sleep(1.0)
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            self.fail("the surviving rank hung after its peer was killed")
        self.assertNotEqual(proc.returncode, 0)
        self.assertLess(time.time() - killed_at, 5 + 10)
        self.assertIn("rank 1", err)


def descendants_with_rank(root_pid, subcommand):
    """{rank: pid} of the MPI ranks (OMPI_COMM_WORLD_RANK in their environment) running `parallm <subcommand>`
    below root_pid, so that another test's ranks running at the same time are never touched."""
    parents = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    parents[int(pid)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    ranks = {}
    for pid in parents:
        p, depth = pid, 0
        while p in parents and p != root_pid and depth < 8:
            p, depth = parents[p], depth + 1
        if p != root_pid or pid == root_pid:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
        except OSError:
            continue
        rank = [e.split(b"=", 1)[1] for e in env if e.startswith(b"OMPI_COMM_WORLD_RANK=")]
        if rank and subcommand.encode() in cmdline and b"parallm" in cmdline[0]:
            ranks[int(rank[0])] = pid
    return ranks


@unittest.skipIf(MPIRUN is None, "mpirun not installed")
class LostRankServing(unittest.TestCase):
    """`parallm serve --comm mpi --tp 2` losing rank 1 mid-generation: every in-flight request gets an
    error (a 5xx JSON body, or for a stream an SSE error event and [DONE]), /health stops saying 200
    within 1 s (503, or refused once the process is gone), and the server exits non-zero."""

    N_STREAMS, N_PLAIN, MAX_TOKENS = 4, 4, 8000

    def test_killed_rank_fails_in_flight_requests(self):
        model = os.path.join(ARGS.shared, "models", "stories260K", "stories260K.gguf")
        log_path = os.path.join(TMP, "lost_rank_serve.log")
        cmd = [*mpi_prefix(2), ARGS.binary, "serve", "--comm", "mpi", "--tp", "2", "--comm-timeout", "5",
               "--model", model, "--host", "127.0.0.1", "--port", "0", "--threads", "1", "--ctx-size", "8192",
               "--max-num-seqs", "16", "--device-memory", "256M"]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)
        ranks = {}
        try:
            port = self.wait_ready(proc, log_path)
            ranks = descendants_with_rank(proc.pid, "serve")
            self.assertEqual(sorted(ranks), [0, 1], f"ranks below mpirun ({proc.pid}): {ranks}")
            results, threads = {}, []
            body = {"prompt": "Once upon a time", "max_tokens": self.MAX_TOKENS, "ignore_eos": True, "temperature": 0}
            for k in range(self.N_STREAMS + self.N_PLAIN):
                stream = k < self.N_STREAMS
                t = threading.Thread(target=self.client, args=(port, {**body, "stream": stream}, results, k),
                                     daemon=True)
                t.start()
                threads.append(t)
            # All of them generating (streams have their first token, the server counts them all running).
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                started = sum(1 for k in range(self.N_STREAMS) if results.get(k, {}).get("events"))
                if started == self.N_STREAMS and self.running(port) >= self.N_STREAMS + self.N_PLAIN:
                    break
                time.sleep(0.1)
            else:
                self.fail(f"the requests never ran together: {results}")
            killed_at = time.monotonic()
            os.kill(ranks[1], signal.SIGKILL)
            health_at, health_seen = None, []
            while health_at is None and time.monotonic() - killed_at < 3:
                status = self.health(port)
                health_seen.append((round(time.monotonic() - killed_at, 2), status))
                if status in (503, "refused"):
                    health_at = time.monotonic() - killed_at
                time.sleep(0.05)
            for t in threads:
                t.join(timeout=5 + 25)
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                rc = None
            with open(log_path, "rb") as f:
                log_tail = f.read().decode("utf-8", "replace")[-3000:]

            # Every expectation is checked, so one run says all that went wrong.
            problems = []
            if health_at is None or health_at > 1.0:
                problems.append(f"/health did not turn 503 (or refused) within 1 s; (s, status): {health_seen[:25]}")
            for k in range(self.N_STREAMS + self.N_PLAIN):
                r = results.get(k, {})
                if k < self.N_STREAMS:
                    events = r.get("events", [])
                    last = json.loads(events[-2]) if len(events) >= 2 and events[-2].startswith("{") else {}
                    if not events or events[-1] != "[DONE]" or "error" not in last:
                        problems.append(f"stream {k}: no error event then [DONE]; status {r.get('status')}, "
                                        f"{len(events)} events, last {events[-2:]}, {r.get('error', '')}")
                else:
                    status = r.get("status")
                    try:
                        has_error = "error" in json.loads(r.get("body", ""))
                    except ValueError:
                        has_error = False
                    if not isinstance(status, int) or status < 500 or not has_error:
                        problems.append(f"request {k}: want a 5xx JSON error, got {status} "
                                        f"{r.get('body', '')[:200]!r} {r.get('error', '')}")
            if rc is None:
                problems.append("the server did not exit within 30 s of losing a rank")
            elif rc == 0:
                problems.append("the server exited 0 after losing a rank")
            if problems:
                self.fail("\n".join(problems) + f"\nserver exit status {rc}; log tail:\n{log_tail}")
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            for pid in ranks.values():  # ranks that outlived mpirun
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if b"serve" in f.read():
                            os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def wait_ready(self, proc, log_path):
        deadline, port = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None:
            with open(log_path, "rb") as f:
                m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", f.read())
            port = int(m.group(1)) if m else None
            if port and self.health(port) == 200:
                return port
            time.sleep(0.1)
        with open(log_path, "rb") as f:
            self.fail(f"the MPI server never became healthy (rc {proc.poll()}):\n{f.read().decode()[-3000:]}")

    @staticmethod
    def health(port):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
            c.request("GET", "/health")
            status = c.getresponse().status
            c.close()
            return status
        except ConnectionRefusedError:
            return "refused"
        except (OSError, http.client.HTTPException) as e:
            return type(e).__name__

    @staticmethod
    def running(port):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
            c.close()
        except (OSError, http.client.HTTPException):
            return 0
        m = re.search(r"^parallm:num_requests_running (\S+)", text, re.M)
        return float(m.group(1)) if m else 0

    @staticmethod
    def client(port, body, results, k):
        """One request; results[k] gets its status and body (streams: the SSE data payloads as they come)."""
        out = results.setdefault(k, {})
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5 + 25)
            c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            r = c.getresponse()
            out["status"] = r.status
            if body["stream"] and r.status == 200:
                out["events"] = []
                for line in r:
                    if line.startswith(b"data:"):
                        out["events"].append(line[5:].strip().decode("utf-8", "replace"))
            else:
                out["body"] = r.read().decode("utf-8", "replace")
            c.close()
        except (OSError, http.client.HTTPException) as e:
            out["error"] = repr(e)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--shared", required=True)
    ARGS, rest = parser.parse_known_args()
    TMP = tempfile.mkdtemp(prefix="parallm_parallel_")
    try:
        unittest.main(argv=[sys.argv[0], "-v"] + rest)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
