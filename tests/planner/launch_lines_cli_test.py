"""`parallm plan --json` launch lines through Python's shlex (an independent
shell lexer) against the flag lists of tests/planner/data/cli_flags/: every
word of every line (launch_all: per node, per replica) is a known flag of its
tool with an accepted value, a flag's value, the tool's positional model, an
environment assignment, or a launcher (ray, mpirun + trtllm-llmapi-launch,
printf > FILE). The C++ twin is launch_lines_test.cpp (its own splitter).

Usage: launch_lines_cli_test.py --binary build/parallm --source .
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import unittest

ARGS = None

PLANS = [
    ["--model", "llama-2-13b", "--weights", "fp16", "--gpu", "RTX-4090", "--gpus", "2", "--interconnect", "pcie4",
     "--concurrency", "16"],
    ["--model", "llama-2-70b", "--weights", "fp16", "--gpu", "A100-80G", "--gpus", "4", "--interconnect", "nvlink",
     "--concurrency", "64", "--tpot-slo", "50"],
    ["--model", "llama-2-70b", "--weights", "fp16", "--gpu", "A100-80G", "--gpus", "4", "--tp", "2", "--pp", "2"],
    ["--model", "llama-2-70b", "--weights", "int4", "--gpu", "A100-80G"],
    ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--weights", "fp8", "--gpu", "L4", "--gpus", "4",
     "--tp", "1", "--dp", "4", "--kv-dtype", "fp8", "--concurrency", "64"],
    ["--model", "Qwen/Qwen2.5-7B-Instruct", "--weights", "int8", "--gpu", "A10", "--gpus", "2", "--concurrency", "32"],
    ["--model", "qwen3-8b", "--weights", "q4_k", "--gpu", "RTX-4090", "--gpus", "2", "--dp", "2"],
    ["--model", "deepseek-v3", "--weights", "fp8", "--gpu", "H200", "--gpus", "8", "--concurrency", "64"],
    ["--model", "deepseek-v3", "--weights", "fp8", "--gpu", "H100-SXM", "--gpus", "8", "--nodes", "2"],
    ["--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--gpus", "8", "--nodes", "2", "--tp", "2", "--dp", "8",
     "--concurrency", "2000"],
    ["--model", "llama-3.1-8b", "--gpu", "A100-80G", "--tp", "2", "--dp", "4", "--concurrency", "256",
     "--topology", "{src}/tests/planner/data/pairs_8gpu_topo.txt"],
]

PROGRAMS = {"vllm": "vllm", "python": "sglang", "trtllm-serve": "trtllm", "llama-server": "llamacpp",
            "parallm": "parallm", "ray": "ray", "mpirun": "mpirun"}


def load_tool(name):
    tool = {"program": [], "positional": 0, "flags": {}}
    with open(os.path.join(ARGS.source, "tests", "planner", "data", "cli_flags", name + ".txt")) as f:
        for line in f:
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if words[0] == "program":
                tool["program"] = words[1:]
            elif words[0] == "positional":
                tool["positional"] = int(words[1])
            else:
                spec = {"value": True, "choices": None}
                if len(words) > 1 and words[1] == "bool":
                    spec["value"] = False
                elif len(words) > 1 and words[1] == "=":
                    spec["choices"] = set(words[2:])
                tool["flags"][words[0]] = spec
    return tool


class LaunchLines(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tools = {n: load_tool(n) for n in set(PROGRAMS.values())}

    def check_tool(self, name, words, i, line, stop=None):
        tool = self.tools[name]
        self.assertEqual(words[i:i + len(tool["program"])], tool["program"], line)
        i += len(tool["program"])
        positional = 0
        while i < len(words) and words[i] != stop:
            w = words[i]
            if w.startswith("-") and len(w) > 1:
                self.assertIn(w, tool["flags"], f"{name} has no flag {w}: {line}")
                spec = tool["flags"][w]
                if spec["value"]:
                    i += 1
                    self.assertLess(i, len(words), f"{w} needs a value: {line}")
                    if spec["choices"] is not None:
                        self.assertIn(words[i], spec["choices"], f"{name} {w}: {line}")
            else:
                positional += 1
            i += 1
        self.assertEqual(positional, tool["positional"], f"{name} positional arguments: {line}")
        return i

    def check_line(self, line):
        words = shlex.split(line)
        i = 0
        while i < len(words) and "=" in words[i] and not words[i].startswith("-"):
            var, val = words[i].split("=", 1)
            self.assertEqual(var, "CUDA_VISIBLE_DEVICES", line)
            self.assertRegex(val, r"^[0-9]+(,[0-9]+)*$", line)
            i += 1
        prog = words[i]
        if prog == "printf":
            self.assertEqual(len(words), i + 4, line)
            self.assertEqual(words[i + 2], ">", line)
            return "printf"
        self.assertIn(prog, PROGRAMS, line)
        if prog == "mpirun":
            i = self.check_tool("mpirun", words, i, line, stop="trtllm-llmapi-launch")
            self.assertEqual(words[i], "trtllm-llmapi-launch", line)
            self.check_tool("trtllm", words, i + 1, line)
            return "trtllm"
        self.check_tool(PROGRAMS[prog], words, i, line)
        return PROGRAMS[prog]

    def test_every_line_of_every_plan(self):
        checked = 0
        for args in PLANS:
            args = [a.replace("{src}", ARGS.source) for a in args]
            with self.subTest(plan=" ".join(args)):
                r = subprocess.run([ARGS.binary, "plan", *args, "--json"], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                j = json.loads(r.stdout)
                for engine, e in j["launch_all"].items():
                    if not e["lines"]:
                        self.assertTrue(e["note"], f"{engine}: no line and no reason")
                        self.assertEqual(j["launch"][engine], "")
                    for line in e["lines"]:
                        self.check_line(line["command"])
                        checked += 1
                    if e["lines"]:
                        # the summary string is one of the serve commands (minus its device group)
                        self.assertTrue(any(l["command"].endswith(j["launch"][engine]) for l in e["lines"]), engine)
        self.assertGreater(checked, 60)

    def test_the_checker_can_fail(self):
        for bad in ["vllm serve m --no-such-flag 1", "vllm serve m --quantization int4",
                    "python -m sglang.launch_server --model-path m --tp 2 --dp 1",
                    "llama-server -m meta-llama/Llama-3.1-8B extra"]:
            with self.assertRaises(AssertionError):
                self.check_line(bad)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--source", required=True)
    ARGS, rest = p.parse_known_args()
    if not os.path.exists(ARGS.binary):
        print("parallm binary not built", file=sys.stderr)
        sys.exit(77)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
