"""promtool on deploy/prometheus: the config, the alert rules, and the rules' unit tests.

- `promtool check config prometheus.yml` (which checks the rule files it names too),
- `promtool check rules alerts.yml`,
- `promtool test rules alerts_test.yml`: each alert fires past its threshold after its `for:` and not below.
Skips (exit 77) with the reason when promtool is missing (Debian's `prometheus` package brings it).

usage: promtool_test.py [--source REPO]
"""
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_common as dc  # noqa: E402

ARGS = None


def promtool(*args):
    d = os.path.join(ARGS.source, "deploy", "prometheus")
    r = subprocess.run(["promtool", *args], cwd=d, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


class Promtool(unittest.TestCase):
    def test_check_config(self):
        rc, out = promtool("check", "config", "prometheus.yml")
        self.assertEqual(rc, 0, out)
        self.assertIn("1 rule files found", out)

    def test_check_rules(self):
        rc, out = promtool("check", "rules", "alerts.yml")
        self.assertEqual(rc, 0, out)

    def test_rules_unit_tests(self):
        rc, out = promtool("test", "rules", "alerts_test.yml")
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    ARGS = dc.parse_args()
    if shutil.which("promtool") is None:
        dc.skip("promtool not found (Debian package `prometheus`, installed by tools/install_deps.sh)")
    unittest.main(verbosity=2)
