"""parallm doctor end to end: the binary over the saved fixtures, text and JSON,
and exit 2 on bad input. Usage: test_doctor_cli.py PARALLM_BINARY"""
import json
import os
import subprocess
import sys

BIN = sys.argv[1]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def run(*args):
    return subprocess.run([BIN, "doctor", *args], capture_output=True, text=True, timeout=60)


def main():
    r = run("--log", os.path.join(DATA, "vllm_max_seq_len.log"), "--json")
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)
    assert f[0]["severity"] == "error", f
    assert any("45000" in e for e in f[0]["evidence"]), f
    assert "precision" in f[0]["fixes"][0], f

    # Several inputs: ranked error > warning > info.
    r = run("--log", os.path.join(DATA, "parallm_kv_blocks.log"), "--metrics", os.path.join(DATA, "small_kv_metrics.txt"),
            "--topology", os.path.join(DATA, "dgx_h100.txt"), "--tp", "4", "--json")
    assert r.returncode == 0, r.stderr
    sev = [x["severity"] for x in json.loads(r.stdout)]
    assert sev == sorted(sev, key=["error", "warning", "info"].index) and sev[0] == "error", sev

    r = run("--topology", os.path.join(DATA, "pcie_4x4090.txt"), "--tp", "4")
    assert r.returncode == 0 and r.stdout.startswith("warning: TP group 0"), r.stdout
    assert "evidence: GPU0-GPU2: SYS" in r.stdout and "fix 1:" in r.stdout, r.stdout

    r = run("--log", os.path.join(DATA, "unknown.log"), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["title"].startswith("nothing recognised"), r.stdout

    for bad in (["--log", "/nonexistent/doctor.log"], ["--topology", os.path.join(DATA, "unknown.log")],
                ["--url", "http://127.0.0.1:1"], []):
        r = run(*bad)
        assert r.returncode == 2, (bad, r.returncode, r.stdout)
        assert r.stderr.startswith("parallm: error:") and r.stderr.count("\n") == 1, (bad, r.stderr)
    print("ok")


if __name__ == "__main__":
    main()
