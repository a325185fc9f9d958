"""Structured outputs end to end (structured_output_test.mjs does the checking, with ajv and the
OpenAI Node SDK). Two servers, on models that would never write JSON by themselves:
  - stories260K (../shared/models/stories260K/stories260K.gguf, a 512-token vocabulary);
  - a random-weight model from `parallm make-model --preset tiny` with the 32,000-token Llama
    SentencePiece vocabulary copied in (../shared/models/vocab/ggml-vocab-llama-spm.gguf), so the
    masks run over a real-sized vocabulary.
Prints "... skipped" (ctest's skip pattern) when node or the npm packages are missing.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from serve_process import ServeProcess  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--npm-dir", required=True)
    ap.add_argument("--schemas", required=True)
    a = ap.parse_args()
    script = os.path.join(a.npm_dir, "structured_output_test.mjs")
    for need in ("node_modules/openai/package.json", "node_modules/ajv/package.json", "node_modules/ajv-formats/package.json"):
        if not os.path.exists(os.path.join(a.npm_dir, need)):
            print(f"{need} is missing (npm install at configure time failed) ... skipped")
            return 0
    if shutil.which("node") is None:
        print("node is not installed ... skipped")
        return 0
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        random_model = os.path.join(tmp, "random32k.gguf")
        subprocess.run([a.binary, "make-model", "--preset", "tiny", "--seed", "5", "--out", random_model, "--vocab-from",
                        os.path.join(a.shared, "models/vocab/ggml-vocab-llama-spm.gguf")], check=True,
                       stdout=subprocess.DEVNULL)
        models = [("stories260K", os.path.join(a.shared, "models/stories260K/stories260K.gguf")),
                  ("random-32k-vocab", random_model)]
        for label, model in models:
            srv = ServeProcess(a.binary, ["--model", model, "--max-model-len", "512"], tmp)
            try:
                r = subprocess.run(["node", script, str(srv.port), a.schemas, label], timeout=240)
                failed += r.returncode != 0
                if not srv.alive():
                    print(f"FAIL [{label}] the server died:\n{srv.log_text()[-2000:]}")
                    failed += 1
            finally:
                srv.close()
    print("structured outputs: " + ("FAILED" if failed else "passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
