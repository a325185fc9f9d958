"""Shared by the tests/deploy scripts: the command line, paths, YAML documents and the skip exit code."""
import argparse
import os
import sys

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests (tests/deploy/CMakeLists.txt)
HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(binary=False, fake_nvml=False):
    """--source (the repository, default: two folders up), --shared, --binary where a test runs parallm, and
    --fake-nvml (the stand-in libnvidia-ml of tests/hwmetrics) where it reads GPUs. Leaves the rest of sys.argv
    to unittest."""
    p = argparse.ArgumentParser()
    p.add_argument("--source", default=os.path.dirname(os.path.dirname(HERE)))
    p.add_argument("--shared", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "..", "shared"))
    if binary:
        p.add_argument("--binary", required=True)
    if fake_nvml:
        p.add_argument("--fake-nvml", required=True)
    args, rest = p.parse_known_args()
    sys.argv = [sys.argv[0]] + rest
    return args


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def yaml_module():
    try:
        import yaml
    except ImportError:
        skip("python3-yaml is not installed (tools/install_deps.sh installs it)")
    return yaml


def load_yaml_docs(path):
    """Every non-empty document of a YAML file."""
    yaml = yaml_module()
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]
