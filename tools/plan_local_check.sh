#!/usr/bin/env bash
# Checks `parallm plan --local` against the engine on this machine (issue #4's
# acceptance: predicted decode speed and TTFT within 25% of what the engine
# measures). For llama-110m in f16, q8_0 and q4_0 it compares
#   TPOT: the planner's time per output token at --input-len 128
#         --output-len 64 (mean context 160) with `bench-model`'s decode after
#         a 128-token prompt (context 128..192, the same workload); decode from
#         an empty context is printed too, for reference;
#   TTFT: the planner's time to first token with `bench-model`'s prefill of
#         the 128-token prompt.
# Usage: tools/plan_local_check.sh BUILD_DIR [THREADS]
# Models are cached in ${PARALLM_CHECK_DIR:-/tmp/parallm-plan-check}; the
# calibration goes to a file there, not to ~/.cache. Exit 1 if any error is
# above 25%, 2 on a usage or tool error. Needs python3 (stdlib only).
set -euo pipefail

if [[ $# -lt 1 || ! -x "$1/parallm" ]]; then
  echo "usage: $0 BUILD_DIR [THREADS]   (BUILD_DIR/parallm must exist)" >&2
  exit 2
fi
bin="$1/parallm"
threads="${2:-2}"
dir="${PARALLM_CHECK_DIR:-/tmp/parallm-plan-check}"
mkdir -p "$dir"
cal="$dir/calibration.json"
dtypes=(f16 q8_0 q4_0)

for d in "${dtypes[@]}"; do
  m="$dir/llama-110m-$d.gguf"
  if [[ ! -s "$m" ]]; then
    "$bin" make-model --preset llama-110m --dtype "$d" --out "$m.tmp" >/dev/null
    mv "$m.tmp" "$m"
  fi
done

# Other work on the cores skews both sides differently (spinning thread-pool
# barriers suffer most): say how busy the machine was when this started.
echo "== load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== plan --calibrate --threads $threads"
"$bin" plan --calibrate --threads "$threads" --calibration "$cal"

for d in "${dtypes[@]}"; do
  m="$dir/llama-110m-$d.gguf"
  "$bin" plan --local --calibration "$cal" --model "$m" --input-len 128 --output-len 64 --concurrency 1 --json \
    >"$dir/plan-$d.json"
  "$bin" bench-model --model "$m" --threads "$threads" --prompt-len 128 --gen-len 64 --json 2>/dev/null \
    >"$dir/bench-$d.json"
done

python3 - "$dir" "${dtypes[@]}" <<'EOF'
import json, sys

d, dtypes = sys.argv[1], sys.argv[2:]
limit = 25.0
print()
print(f"{'weights':8} {'TPOT pred':>10} {'TPOT meas':>10} {'err':>7}   {'TPOT@ctx0':>9}   "
      f"{'TTFT pred':>10} {'TTFT meas':>10} {'err':>7}")
worst = 0.0
for t in dtypes:
    plan = json.load(open(f"{d}/plan-{t}.json"))
    bench = json.load(open(f"{d}/bench-{t}.json"))
    best = plan["candidates"][plan["recommendation"]["candidate_index"]]["predicted"]
    tpot_pred, ttft_pred = best["tpot_ms"], best["ttft_ms"]
    tpot_meas = 1e3 / bench["decode_after_prompt_tokens_per_s"]
    tpot_ctx0 = 1e3 / bench["decode_tokens_per_s"]
    ttft_meas = 1e3 * bench["prompt_len"] / bench["prompt_tokens_per_s"]
    e_tpot = 100.0 * (tpot_pred - tpot_meas) / tpot_meas
    e_ttft = 100.0 * (ttft_pred - ttft_meas) / ttft_meas
    worst = max(worst, abs(e_tpot), abs(e_ttft))
    print(f"{t:8} {tpot_pred:8.2f}ms {tpot_meas:8.2f}ms {e_tpot:+6.1f}%   {tpot_ctx0:7.2f}ms   "
          f"{ttft_pred:8.1f}ms {ttft_meas:8.1f}ms {e_ttft:+6.1f}%")
# The same limits measured by --calibrate and by each bench-model run: when they
# disagree, something else was using the cores and the comparison is unfair.
cal = json.load(open(f"{d}/calibration.json"))
print(f"\nlimits  calibration {cal['mem_bw_gbps']:.1f} GB/s {cal['fma_gflops']:.0f} GFLOP/s", end="")
busy = False
for t in dtypes:
    bench = json.load(open(f"{d}/bench-{t}.json"))
    bw, fma = bench["bandwidth_gb_per_s"], bench["fma_peak_gflops"]
    busy = busy or abs(bw / cal["mem_bw_gbps"] - 1) > 0.15 or abs(fma / cal["fma_gflops"] - 1) > 0.15
    print(f"; {t} bench {bw:.1f} GB/s {fma:.0f} GFLOP/s", end="")
print()
if busy:
    print("WARNING: the limits differ by more than 15% between runs: the machine was busy, rerun when idle")
print(f"worst error {worst:.1f}% (limit {limit:.0f}%)")
sys.exit(1 if worst > limit else 0)
EOF
