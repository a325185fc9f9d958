"""`parallm plan --emit k8s|compose|systemd --out DIR`: the files it writes, for a few plans.

- k8s: every document validates against its kind's strict schema in shared/schemas/kubernetes/, and the
  plan's numbers are in it: Deployment replicas = `capacity.replicas` of `parallm plan --json` for the
  same flags, nvidia.com/gpu = tp x pp of the recommended layout, the container command is the engine's
  launch line for one replica with those tp/pp flags; Service, PDB and HPA select / target the Deployment.
- compose: one service per replica, each with its own tp x pp device_ids; systemd: one unit per replica
  with its own CUDA_VISIBLE_DEVICES.
- bad input (unknown --emit or --engine, no --out, a folder that cannot be made): exit 2, one message.

usage: plan_emit_test.py --binary build/parallm [--source REPO] [--shared SHARED]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_common as dc  # noqa: E402
from k8s_schema_test import DNS_NAME, SCHEMAS, flag, subset  # noqa: E402

ARGS = None
# (label, plan flags): one GPU, tp = 2, and replicas > 1.
PLANS = [
    ("single", ["--model", "llama-2-7b", "--weights", "fp16", "--gpu", "A100-80G", "--gpus", "1",
                "--concurrency", "4"]),
    ("tp2", ["--model", "llama-2-70b", "--weights", "fp16", "--gpu", "H100-SXM", "--gpus", "2",
             "--concurrency", "4"]),
    ("dp", ["--model", "llama-2-7b", "--weights", "fp16", "--gpu", "A100-80G", "--gpus", "2",
            "--concurrency", "300"]),
]
TP_FLAG = {"vllm": ("tensor-parallel-size", "pipeline-parallel-size"), "parallm": ("tp", "pp"),
           "trtllm": ("tp_size", "pp_size")}


def plan(args, *extra):
    return subprocess.run([ARGS.binary, "plan", *args, *extra], capture_output=True, text=True, timeout=60)


def plan_json(args):
    r = plan(args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def emit(args, kind, out, engine=None):
    extra = ["--emit", kind, "--out", out] + (["--engine", engine] if engine else [])
    r = plan(args, *extra)
    assert r.returncode == 0, f"{args} {extra}: {r.stderr}"
    return r


class K8s(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import jsonschema
        cls.validators = {}
        for key, name in SCHEMAS.items():
            with open(os.path.join(ARGS.shared, "schemas", "kubernetes", name)) as f:
                cls.validators[key] = jsonschema.Draft7Validator(json.load(f))

    def check(self, label, args, engine):
        p = plan_json(args)
        lay = p["recommendation"]["layout"]
        replicas = p["capacity"]["replicas"]
        with tempfile.TemporaryDirectory() as out:
            emit(args, "k8s", out, engine)
            files = sorted(os.listdir(out))
            self.assertEqual(files, ["deployment.yaml", "hpa.yaml", "pdb.yaml", "service.yaml"])
            docs = {}
            for name in files:
                for d in dc.load_yaml_docs(os.path.join(out, name)):
                    key = (d.get("apiVersion"), d.get("kind"))
                    self.assertIn(key, self.validators, f"{label}/{name}")
                    errors = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                              for e in self.validators[key].iter_errors(d)]
                    self.assertEqual(errors, [], f"{label}/{engine}/{name}")
                    self.assertRegex(d["metadata"]["name"], DNS_NAME)
                    docs[d["kind"]] = d
        dep = docs["Deployment"]
        self.assertEqual(dep["spec"]["replicas"], replicas)
        pod = dep["spec"]["template"]
        c = pod["spec"]["containers"][0]
        gpus = lay["tp"] * lay["pp"]
        self.assertEqual(c["resources"]["limits"]["nvidia.com/gpu"], gpus)
        self.assertEqual(c["resources"]["requests"]["nvidia.com/gpu"], gpus)
        argv = c.get("command", []) + c.get("args", [])
        launch = p["launch"][engine].split("#")[0].split()
        self.assertEqual(argv[:2], launch[:2], "the engine's launch line")
        if engine in TP_FLAG:
            tp, pp = TP_FLAG[engine]
            self.assertEqual(flag(argv, tp), str(lay["tp"]))
            self.assertEqual(flag(argv, pp), str(lay["pp"]))
        if engine == "parallm":
            self.assertEqual(flag(argv, "dp"), "1", "one replica per pod")
        if engine == "vllm":
            self.assertIsNone(flag(argv, "data-parallel-size"), "one replica per pod")
        self.assertEqual(flag(argv, "port"), str(c["ports"][0]["containerPort"]))
        self.assertEqual(flag(argv, "host"), "0.0.0.0")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            self.assertEqual(c[probe]["httpGet"]["path"], "/health")
            self.assertEqual(c[probe]["httpGet"]["port"], "http")
        drain = float(flag(argv, "shutdown-timeout", "30"))
        sleep_s = float(c["lifecycle"]["preStop"]["exec"]["command"][1])
        self.assertGreaterEqual(pod["spec"]["terminationGracePeriodSeconds"], sleep_s + drain + 5)
        labels = pod["metadata"]["labels"]
        self.assertTrue(subset(dep["spec"]["selector"]["matchLabels"], labels))
        self.assertTrue(subset(docs["Service"]["spec"]["selector"], labels))
        self.assertTrue(subset(docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"], labels))
        hpa = docs["HorizontalPodAutoscaler"]["spec"]
        self.assertEqual(hpa["scaleTargetRef"]["name"], dep["metadata"]["name"])
        self.assertEqual(hpa["maxReplicas"], replicas)
        metric = hpa["metrics"][0]["pods"]["metric"]["name"]
        self.assertRegex(metric, r"^[a-z][a-z0-9_]*$", "a prometheus-adapter name (no ':')")
        self.assertTrue(metric.startswith(engine), metric)

    def test_plans_and_engines(self):
        for label, args in PLANS:
            for engine in ("vllm", "sglang", "trtllm", "llamacpp"):
                with self.subTest(plan=label, engine=engine):
                    self.check(label, args, engine)
            # parallm serves local files on the CPU (no CUDA backend yet): a GPU
            # plan of a catalog model has no parallm line, so nothing to deploy.
            with self.subTest(plan=label, engine="parallm"), tempfile.TemporaryDirectory() as out:
                r = plan(args, "--emit", "k8s", "--out", out, "--engine", "parallm")
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("No parallm line", r.stderr)

    def test_default_engine_is_vllm(self):
        with tempfile.TemporaryDirectory() as out:
            emit(PLANS[0][1], "k8s", out)
            dep = dc.load_yaml_docs(os.path.join(out, "deployment.yaml"))[0]
            self.assertEqual(dep["spec"]["template"]["spec"]["containers"][0]["command"][:2], ["vllm", "serve"])

    def test_the_layouts_differ(self):
        lays = [(plan_json(a)["recommendation"]["layout"], plan_json(a)["capacity"]["replicas"]) for _, a in PLANS]
        self.assertEqual((lays[0][0]["tp"], lays[0][1]), (1, 1))
        self.assertEqual(lays[1][0]["tp"], 2)
        self.assertGreater(lays[2][1], 1)


class OneHost(unittest.TestCase):
    def test_compose_one_service_per_replica(self):
        for label, args in PLANS:
            with self.subTest(plan=label), tempfile.TemporaryDirectory() as out:
                p = plan_json(args)
                lay, replicas = p["recommendation"]["layout"], p["capacity"]["replicas"]
                emit(args, "compose", out)
                self.assertEqual(os.listdir(out), ["compose.yaml"])
                doc = dc.load_yaml_docs(os.path.join(out, "compose.yaml"))[0]
                services = doc["services"]
                self.assertEqual(len(services), replicas)
                seen, ports = [], set()
                for name, s in services.items():
                    dev = s["deploy"]["resources"]["reservations"]["devices"]
                    self.assertEqual(len(dev), 1)
                    self.assertEqual(dev[0]["capabilities"], ["gpu"])
                    self.assertEqual(len(dev[0]["device_ids"]), lay["tp"] * lay["pp"])
                    seen += dev[0]["device_ids"]
                    ports.add(s["ports"][0].split(":")[0])
                    self.assertEqual(flag(s["entrypoint"], "tensor-parallel-size"), str(lay["tp"]))
                self.assertEqual(len(set(seen)), len(seen), "a GPU in two replicas")
                self.assertEqual(len(ports), replicas, "a host port in two replicas")

    def test_systemd_one_unit_per_replica(self):
        for label, args in PLANS:
            with self.subTest(plan=label), tempfile.TemporaryDirectory() as out:
                p = plan_json(args)
                lay, replicas = p["recommendation"]["layout"], p["capacity"]["replicas"]
                emit(args, "systemd", out, "vllm")
                names = sorted(os.listdir(out))
                self.assertEqual(names, [f"parallm-{i}.service" for i in range(replicas)])
                seen = []
                for n in names:
                    with open(os.path.join(out, n), encoding="utf-8") as f:
                        text = f.read()
                    for section in ("[Unit]", "[Service]", "[Install]"):
                        self.assertIn(section, text)
                    devs = re.search(r"^Environment=CUDA_VISIBLE_DEVICES=([0-9,]+)$", text, re.M).group(1).split(",")
                    self.assertEqual(len(devs), lay["tp"] * lay["pp"])
                    seen += devs
                    exec_start = re.search(r"^ExecStart=(.*)$", text, re.M).group(1).split()
                    self.assertEqual(exec_start[:3], ["/usr/bin/env", "vllm", "serve"])
                    self.assertEqual(flag(exec_start, "tensor-parallel-size"), str(lay["tp"]))
                    self.assertIsNone(flag(exec_start, "data-parallel-size"), "one replica per unit")
                    if shutil.which("systemd-analyze"):  # systemd's own parser, where it is installed
                        v = subprocess.run(["systemd-analyze", "verify", os.path.join(out, n)],
                                           capture_output=True, text=True, timeout=30)
                        self.assertEqual(v.returncode, 0, v.stderr)
                self.assertEqual(len(set(seen)), len(seen), "a GPU in two units")
                self.assertEqual(sorted(map(int, seen)), list(range(replicas * lay["tp"] * lay["pp"])))


class BadInput(unittest.TestCase):
    def assert_fails(self, extra, words):
        r = plan(PLANS[0][1], *extra)
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(words, lines[0])

    def test_unknown_kind(self):
        with tempfile.TemporaryDirectory() as out:
            self.assert_fails(["--emit", "helm", "--out", out], "--emit 'helm'")

    def test_unknown_engine(self):
        with tempfile.TemporaryDirectory() as out:
            self.assert_fails(["--emit", "k8s", "--out", out, "--engine", "tgi"], "--engine 'tgi'")

    def test_missing_out(self):
        self.assert_fails(["--emit", "k8s"], "--out")

    def test_out_without_emit(self):
        with tempfile.TemporaryDirectory() as out:
            self.assert_fails(["--out", out], "--emit")

    def test_folder_that_cannot_be_made(self):
        with tempfile.TemporaryDirectory() as tmp:
            blocker = os.path.join(tmp, "a-file")
            open(blocker, "w").close()
            self.assert_fails(["--emit", "systemd", "--out", os.path.join(blocker, "sub")], "--out")

    def test_unwritable_folder(self):
        if os.geteuid() == 0:
            self.skipTest("root writes anywhere")
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o500)
            try:
                self.assert_fails(["--emit", "compose", "--out", tmp], "cannot write")
            finally:
                os.chmod(tmp, 0o700)


if __name__ == "__main__":
    ARGS = dc.parse_args(binary=True)
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        dc.skip("python3-jsonschema is not installed (tools/install_deps.sh installs it)")
    dc.yaml_module()
    unittest.main(verbosity=2)
