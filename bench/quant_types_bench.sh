#!/usr/bin/env bash
# Prefill (128 tokens) and decode (64 tokens) of the llama-110m preset in each
# GGUF type of issue 26, 2 threads, as fractions of the FMA peak and the
# memory-bandwidth roofline that bench-model measures in the same run.
# Prints one Markdown table row per type. The default list is the issue's:
# the mixes shaped like downloaded files (q4_k_m, q5_k_m, q3_k_m, and
# q2_k_mix, llama.cpp's Q2_K file type: llama.cpp's per-tensor choice,
# make-model --dtype), plain types (q6_k, iq4_xs, q4_1, q5_0: every matrix
# that type; plain q2_k is every matrix q2_k), and q8_0 / q4_0 for reference.
# make-model's own line goes to /dev/null.
#
# usage: bench/quant_types_bench.sh BUILD_DIR [TYPES...]
set -euo pipefail
build=${1:?usage: bench/quant_types_bench.sh BUILD_DIR [TYPES...]}
shift
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(q4_k_m q5_k_m q6_k q3_k_m q2_k_mix iq4_xs q4_1 q5_0 q8_0 q4_0)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| type | prefill tok/s | of FMA peak | decode tok/s | of roofline | probes: GB/s, GFLOP/s |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
for t in "${types[@]}"; do
  "$build/parallm" make-model --preset llama-110m --dtype "$t" --out "$work/m.gguf" --seed 1 > /dev/null 2>&1
  "$build/parallm" bench-model --model "$work/m.gguf" --threads 2 --prompt-len 128 --gen-len 64 --json \
    > "$work/r.json" 2> /dev/null
  python3 - "$t" "$work/r.json" <<'PY'
import json, sys
t, path = sys.argv[1], sys.argv[2]
j = json.load(open(path))
print(f"| {t} | {j['prompt_tokens_per_s']:.0f} | {j['prefill_peak_fraction']:.2f} | {j['decode_tokens_per_s']:.1f} |"
      f" {j['decode_roofline_fraction']:.2f} | {j['bandwidth_gb_per_s']:.1f}, {j['fma_peak_gflops']:.0f} |")
PY
  rm -f "$work/m.gguf"
done
