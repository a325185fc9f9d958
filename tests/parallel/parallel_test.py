#!/usr/bin/env python3
"""Parallel layouts give the single-device answer (issue 3 acceptance).

Every layout must produce the same greedy tokens as one device and logits
within 1e-4 (relative to the row's largest magnitude), on the local backend
(ranks are threads) and under `mpirun --oversubscribe` (ranks are processes).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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
