"""deploy/k8s/*.yaml: every document validates against its kind's strict schema, and the documents agree.

- Each document's apiVersion + kind has a schema in shared/schemas/kubernetes/ (a kind without one is a
  failure) and validates against it (Draft 7, as the schemas' README says). The two CRD schemas leave
  the top level and metadata open, so those are checked here.
- The objects fit together: the Service, PDB and ServiceMonitor select the Deployment's pods and ports;
  both autoscalers target the Deployment; the HPA's metric is the name prometheus-adapter's rule gives
  parallm:num_requests_waiting; the grace period covers the drain; the probes hit /health on port 8000.

usage: k8s_schema_test.py [--source REPO] [--shared SHARED]
"""
import glob
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_common as dc  # noqa: E402

ARGS = None
SCHEMAS = {
    ("apps/v1", "Deployment"): "deployment-apps-v1.json",
    ("v1", "Service"): "service-v1.json",
    ("v1", "ConfigMap"): "configmap-v1.json",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "horizontalpodautoscaler-autoscaling-v2.json",
    ("policy/v1", "PodDisruptionBudget"): "poddisruptionbudget-policy-v1.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject-keda-v1alpha1.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring-v1.json",
}
CRDS = {("keda.sh/v1alpha1", "ScaledObject"), ("monitoring.coreos.com/v1", "ServiceMonitor")}
DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def documents():
    """[(file name, document)] over deploy/k8s/*.yaml."""
    files = sorted(glob.glob(os.path.join(ARGS.source, "deploy", "k8s", "*.yaml")))
    return [(os.path.basename(f), d) for f in files for d in dc.load_yaml_docs(f)]


def one(kind):
    found = [d for _, d in documents() if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind} in deploy/k8s, found {len(found)}"
    return found[0]


def subset(small, big):
    return all(big.get(k) == v for k, v in small.items())


def flag(args, name, default=None):
    """The value of --name=V or --name V in a container's command + args."""
    for i, a in enumerate(args):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return default


class Schemas(unittest.TestCase):
    def test_every_document_has_a_schema_and_validates(self):
        import jsonschema
        docs = documents()
        self.assertGreaterEqual(len(docs), 7)
        cache = {}
        for name, doc in docs:
            key = (doc.get("apiVersion"), doc.get("kind"))
            with self.subTest(file=name, kind=key):
                self.assertIn(key, SCHEMAS, f"{name}: no schema for {key} in shared/schemas/kubernetes")
                if key not in cache:
                    with open(os.path.join(ARGS.shared, "schemas", "kubernetes", SCHEMAS[key])) as f:
                        cache[key] = jsonschema.Draft7Validator(json.load(f))
                errors = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                          for e in cache[key].iter_errors(doc)]
                self.assertEqual(errors, [], f"{name}")
                meta = doc.get("metadata", {})
                self.assertRegex(meta.get("name", ""), DNS_NAME, f"{name}: metadata.name")
                if key in CRDS:  # their schemas leave these open
                    self.assertLessEqual(set(doc), {"apiVersion", "kind", "metadata", "spec"}, name)
                    self.assertLessEqual(set(meta), {"name", "namespace", "labels", "annotations"}, name)
                    for k, v in meta.get("labels", {}).items():
                        self.assertIsInstance(v, str, f"{name}: label {k}")

    def test_each_kind_the_issue_asks_for_is_there(self):
        kinds = sorted(d["kind"] for _, d in documents())
        for k in ("Deployment", "Service", "HorizontalPodAutoscaler", "ScaledObject", "PodDisruptionBudget",
                  "ServiceMonitor", "ConfigMap"):
            self.assertIn(k, kinds)


class Consistency(unittest.TestCase):
    def setUp(self):
        self.dep = one("Deployment")
        self.pod = self.dep["spec"]["template"]
        self.c = self.pod["spec"]["containers"][0]
        self.argv = self.c.get("command", []) + self.c.get("args", [])

    def test_deployment_selects_its_pods(self):
        self.assertTrue(subset(self.dep["spec"]["selector"]["matchLabels"], self.pod["metadata"]["labels"]))

    def test_port_gpu_and_resources(self):
        ports = {p["name"]: p["containerPort"] for p in self.c["ports"]}
        self.assertEqual(ports.get("http"), 8000)
        self.assertEqual(flag(self.argv, "port"), "8000")
        self.assertEqual(flag(self.argv, "host"), "0.0.0.0")
        self.assertIn("nvidia.com/gpu", self.c["resources"]["limits"])
        self.assertIn("memory", self.c["resources"]["limits"])
        self.assertIn("cpu", self.c["resources"]["requests"])

    def test_probes_hit_health_on_the_server_port(self):
        ports = {p["name"]: p["containerPort"] for p in self.c["ports"]}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            with self.subTest(probe=probe):
                get = self.c[probe]["httpGet"]
                self.assertEqual(get["path"], "/health")
                self.assertEqual(ports.get(get["port"], get["port"]), 8000)

    def test_grace_period_covers_pre_stop_and_drain(self):
        drain_s = float(flag(self.argv, "shutdown-timeout", "30"))  # serve's default
        pre_stop = self.c.get("lifecycle", {}).get("preStop", {})
        sleep_s = 0.0
        if "exec" in pre_stop and pre_stop["exec"]["command"][0] == "sleep":
            sleep_s = float(pre_stop["exec"]["command"][1])
        elif "sleep" in pre_stop:
            sleep_s = float(pre_stop["sleep"]["seconds"])
        grace = self.pod["spec"]["terminationGracePeriodSeconds"]
        self.assertGreaterEqual(grace, sleep_s + drain_s + 5, "grace < preStop + --shutdown-timeout + 5 s margin")

    def test_service_pdb_and_service_monitor_select_the_pods(self):
        labels = self.pod["metadata"]["labels"]
        svc = one("Service")
        self.assertTrue(subset(svc["spec"]["selector"], labels))
        pod_ports = {p["name"] for p in self.c["ports"]} | {p["containerPort"] for p in self.c["ports"]}
        for p in svc["spec"]["ports"]:
            self.assertIn(p["targetPort"], pod_ports)
        self.assertTrue(subset(one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"], labels))
        sm = one("ServiceMonitor")
        self.assertTrue(subset(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]))
        svc_ports = {p["name"] for p in svc["spec"]["ports"]}
        for e in sm["spec"]["endpoints"]:
            self.assertIn(e["port"], svc_ports)
            self.assertEqual(e.get("path", "/metrics"), "/metrics")

    def test_autoscalers_target_the_deployment(self):
        for kind in ("HorizontalPodAutoscaler", "ScaledObject"):
            ref = one(kind)["spec"]["scaleTargetRef"]
            self.assertEqual((ref.get("apiVersion", "apps/v1"), ref.get("kind", "Deployment"), ref["name"]),
                             ("apps/v1", "Deployment", self.dep["metadata"]["name"]), kind)

    def test_hpa_metric_is_the_adapters_name_for_the_waiting_queue(self):
        yaml = dc.yaml_module()
        rules = yaml.safe_load(one("ConfigMap")["data"]["config.yaml"])["rules"]
        exposed = {}
        for r in rules:
            series = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)", r["seriesQuery"].strip("'\"")).group(1)
            m = re.match(r["name"]["matches"], series)
            self.assertIsNotNone(m, r)
            exposed[series] = m.expand(r["name"]["as"].replace("${", "\\g<").replace("}", ">"))
            self.assertNotIn(":", exposed[series], "Kubernetes metric names cannot hold ':'")
            self.assertEqual(set(r["resources"]["overrides"]), {"namespace", "pod"})
        self.assertIn("parallm:num_requests_waiting", exposed)
        hpa_metrics = [m for m in one("HorizontalPodAutoscaler")["spec"]["metrics"] if m["type"] == "Pods"]
        self.assertEqual([m["pods"]["metric"]["name"] for m in hpa_metrics],
                         [exposed["parallm:num_requests_waiting"]])

    def test_keda_queries_the_waiting_queue(self):
        trig = one("ScaledObject")["spec"]["triggers"]
        self.assertEqual([t["type"] for t in trig], ["prometheus"])
        self.assertIn("parallm:num_requests_waiting", trig[0]["metadata"]["query"])
        float(trig[0]["metadata"]["threshold"])


if __name__ == "__main__":
    ARGS = dc.parse_args()
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        dc.skip("python3-jsonschema is not installed (tools/install_deps.sh installs it)")
    unittest.main(verbosity=2)
