#!/usr/bin/env bash
# Fleet-scale speed of `parallm simulate` (issue #27: 10^6 requests on 1,000
# GPUs within 5 minutes on this machine). Llama-3.1-8B bf16 on 1,000 H100s as
# 500 replicas of tp=2, Poisson arrivals sized to keep the fleet busy but
# stable, mixed lengths. Prints the report and the wall time.
# Usage: bench/simulate_fleet.sh BUILD_DIR [REQUESTS] [QPS]
set -euo pipefail
if [[ $# -lt 1 || ! -x "$1/parallm" ]]; then
  echo "usage: $0 BUILD_DIR [REQUESTS] [QPS]   (BUILD_DIR/parallm must exist)" >&2
  exit 2
fi
bin="$1/parallm"
requests="${2:-1000000}"
qps="${3:-10000}"
out="${PARALLM_SIMFLEET_OUT:-/tmp/parallm-simulate-fleet.json}"
echo "== load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
/usr/bin/time -v "$bin" simulate --model llama-3.1-8b --gpu H100-SXM --layout tp=2,pp=1,dp=500 \
  --qps "$qps" --num-requests "$requests" --input-len 128:2048 --output-len 32:512 --seed 1 \
  --ttft-slo 500 --tpot-slo 50 --json "$out" 2>"$out.time"
end=$(date +%s.%N)
grep -E "Maximum resident|Elapsed|User time|Percent of CPU" "$out.time" || true
python3 -c "import sys; print(f'wall {float(sys.argv[2]) - float(sys.argv[1]):.1f} s for $requests requests on 1000 GPUs')" \
  "$start" "$end"
