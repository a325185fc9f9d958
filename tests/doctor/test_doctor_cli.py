"""parallm doctor end to end: the binary over the saved fixtures, text and JSON,
exit 2 on bad input, and the live checks: --processes through the stand-in
NVML (and without one), --comm-check over threads and, when MPIRUN is given,
over MPI processes. Usage: test_doctor_cli.py PARALLM_BINARY FAKE_NVML [MPIRUN]"""
import json
import os
import subprocess
import sys

BIN = sys.argv[1]
FAKE_NVML = sys.argv[2]
MPIRUN = sys.argv[3].split() if len(sys.argv) > 3 else []
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def run(*args, nvml="/nonexistent/libnvidia-ml.so.1", prefix=()):
    env = dict(os.environ, PARALLM_NVML_LIBRARY=nvml)
    return subprocess.run([*prefix, BIN, "doctor", *args], capture_output=True, text=True, timeout=60, env=env)


def check_live():
    r = run("--processes", "--json", nvml=FAKE_NVML)
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)
    assert [x["severity"] for x in f] == ["warning", "warning"], f
    assert any("pid 4242 (python3" in e for e in f[0]["evidence"]), f
    assert "kill 4242 4343" in f[0]["fixes"][0], f
    r = run("--processes", "--json")  # no NVML at that path
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)
    assert f[0]["title"] == "NVML not available: cannot list other processes", f

    r = run("--comm-check", "--tp", "2", "--pp", "2", "--json")
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)
    assert len(f) == 1 and f[0]["severity"] in ("info", "warning"), f
    assert any("bus bandwidth" in e for e in f[0]["evidence"]), f
    print("  comm-check local:", f[0]["title"])
    if MPIRUN:
        r = run("--comm-check", "--comm", "mpi", "--tp", "2", "--comm-timeout", "20", "--json",
                prefix=[*MPIRUN, "-np", "2"])
        assert r.returncode == 0, (r.stdout, r.stderr)
        f = json.loads(r.stdout)  # one array: only rank 0 prints
        assert len(f) == 1 and "2 mpi rank(s)" in f[0]["title"], f
        print("  comm-check mpi:", f[0]["title"])
    for bad in (["--comm-check", "--comm", "nccl"], ["--comm-check", "--comm", "carrier-pigeon"],
                ["--comm-check", "--comm-timeout", "0"]):
        r = run(*bad)
        assert r.returncode == 2 and r.stderr.startswith("parallm: error:"), (bad, r.returncode, r.stderr)


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
    check_live()
    print("ok")


if __name__ == "__main__":
    main()
