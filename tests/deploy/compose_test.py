"""deploy/compose.yaml parses, and every file it names exists and agrees with the others.

- The parallm service builds from deploy/Containerfile in the repository, serves on port 8000, and
  waits long enough on stop for the drain (stop_grace_period >= --shutdown-timeout).
- Every bind mount's source exists (relative to deploy/; ${VAR:-default} taken at its default).
- Prometheus gets deploy/prometheus/prometheus.yml, whose `parallm` job scrapes the compose service
  by name, and the rule file that config names; Grafana gets the provisioning folder and the dashboard
  where the dashboard provider looks, and the datasource points at the compose Prometheus.

usage: compose_test.py [--source REPO]
"""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_common as dc  # noqa: E402

ARGS = None
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def deploy_dir():
    return os.path.join(ARGS.source, "deploy")


def compose():
    docs = dc.load_yaml_docs(os.path.join(deploy_dir(), "compose.yaml"))
    assert len(docs) == 1
    return docs[0]


def expand(s):
    """Compose's variable interpolation with every variable unset: ${X:-default} -> default."""
    return VAR.sub(lambda m: m.group(2) or "", s).replace("$$", "$")


def mounts(service):
    """[(source, target)] of a service's bind mounts (named volumes left out)."""
    out = []
    for v in service.get("volumes", []):
        if isinstance(v, dict):
            if v.get("type") == "bind":
                out.append((expand(v["source"]), v["target"]))
            continue
        parts = expand(v).split(":")
        if parts[0].startswith((".", "/")):
            out.append((parts[0], parts[1]))
    return out


def duration_s(s):
    m = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", str(s))
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0)


def flag(argv, name, default=None):
    for i, a in enumerate(argv):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(argv):
            return argv[i + 1]
    return default


class Compose(unittest.TestCase):
    def test_services_and_their_mounts(self):
        c = compose()
        self.assertLessEqual({"parallm", "prometheus", "grafana"}, set(c["services"]))
        for name, svc in c["services"].items():
            for src, _ in mounts(svc):
                with self.subTest(service=name, source=src):
                    path = os.path.normpath(os.path.join(deploy_dir(), src))
                    if src.rstrip("/").endswith("models"):  # the models folder: its README is committed
                        path = os.path.join(path, "README.md")
                    self.assertTrue(os.path.exists(path), f"{name}: {src} does not exist")
            for vol in svc.get("volumes", []):
                if isinstance(vol, str) and not expand(vol).startswith((".", "/")):
                    self.assertIn(vol.split(":")[0], c.get("volumes", {}), f"{name}: named volume undeclared")

    def test_parallm_builds_from_the_containerfile_and_serves_on_8000(self):
        svc = compose()["services"]["parallm"]
        ctx = os.path.normpath(os.path.join(deploy_dir(), svc["build"]["context"]))
        self.assertEqual(ctx, os.path.normpath(ARGS.source))
        self.assertTrue(os.path.isfile(os.path.join(ctx, svc["build"]["dockerfile"])))
        self.assertIn("8000:8000", svc["ports"])
        argv = [expand(a) for a in svc.get("command", [])]
        self.assertEqual(flag(argv, "port", "8000"), "8000")
        drain_s = float(flag(argv, "shutdown-timeout", "30"))
        self.assertGreater(duration_s(svc["stop_grace_period"]), drain_s)
        self.assertEqual(svc["healthcheck"]["test"], ["CMD", "parallm-healthcheck"])  # in the image

    def test_prometheus_gets_its_config_and_rules_and_scrapes_the_service(self):
        c = compose()
        targets = dict((t, s) for s, t in mounts(c["services"]["prometheus"]))
        cfg_src = targets["/etc/prometheus/prometheus.yml"]
        self.assertEqual(os.path.normpath(cfg_src), os.path.join("prometheus", "prometheus.yml"))
        cfg = dc.load_yaml_docs(os.path.join(deploy_dir(), cfg_src))[0]
        for rule_file in cfg["rule_files"]:
            self.assertIn(os.path.join("/etc/prometheus", rule_file), targets, "rule file not mounted")
            self.assertTrue(os.path.isfile(os.path.join(deploy_dir(), "prometheus", rule_file)))
        job = [j for j in cfg["scrape_configs"] if j["job_name"] == "parallm"]
        self.assertEqual(len(job), 1)
        self.assertEqual(job[0]["static_configs"][0]["targets"], ["parallm:8000"])
        self.assertIn("--config.file=/etc/prometheus/prometheus.yml", c["services"]["prometheus"]["command"])

    def test_grafana_provisioning_finds_the_dashboard_and_prometheus(self):
        c = compose()
        targets = dict((t, s) for s, t in mounts(c["services"]["grafana"]))
        prov = os.path.join(deploy_dir(), targets["/etc/grafana/provisioning"])
        providers = dc.load_yaml_docs(os.path.join(prov, "dashboards", "parallm.yaml"))[0]["providers"]
        path = providers[0]["options"]["path"]
        dash_targets = [t for t in targets if t.startswith(path.rstrip("/") + "/")]
        self.assertEqual(len(dash_targets), 1, "no dashboard mounted where the provider looks")
        self.assertEqual(os.path.normpath(targets[dash_targets[0]]), os.path.join("grafana", "parallm.json"))
        ds = dc.load_yaml_docs(os.path.join(prov, "datasources", "prometheus.yaml"))[0]["datasources"]
        self.assertEqual(ds[0]["type"], "prometheus")
        self.assertEqual(ds[0]["url"], "http://prometheus:9090")
        import json
        with open(os.path.join(deploy_dir(), "grafana", "parallm.json")) as f:
            dash = json.load(f)
        dsvar = [v for v in dash["templating"]["list"] if v["type"] == "datasource"][0]
        self.assertEqual(dsvar["current"]["value"], ds[0]["uid"], "the dashboard's default datasource uid")


if __name__ == "__main__":
    ARGS = dc.parse_args()
    unittest.main(verbosity=2)
