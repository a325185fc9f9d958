#!/usr/bin/env bash
# Decode tokens/s at 32 streams with and without a JSON-schema constraint
# (docs/PERFORMANCE.md, "Structured outputs"). One `parallm serve` of the
# random llama-110m (q4_0, 32,000-token vocabulary), `parallm bench` three
# times: no constraint, the invoice schema (a warm mask cache after the
# first requests), and guided_regex free text (the worst case for masks:
# almost every token allowed at every step).
#   bench/structured_output_bench.sh [BUILD_DIR] [STREAMS] [REQUESTS]
set -euo pipefail
BUILD=${1:-build}
STREAMS=${2:-32}
REQUESTS=${3:-64}
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'kill $SERVE_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$BUILD/parallm" make-model --preset llama-110m --dtype q4_0 --out "$WORK/m.gguf" >/dev/null
"$BUILD/parallm" serve --model "$WORK/m.gguf" --host 127.0.0.1 --port 0 --max-num-seqs "$STREAMS" 2>"$WORK/serve.log" &
SERVE_PID=$!
for _ in $(seq 600); do
  PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$WORK/serve.log" | grep -o '[0-9]*$' || true)
  [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
  sleep 0.2
done
SCHEMA=$(cat "$SRC/tests/server/data/json_schemas/invoice.json")
run() {  # label, extra body
  "$BUILD/parallm" bench --url "http://127.0.0.1:$PORT" --endpoint completions --concurrency "$STREAMS" \
    --num-requests "$REQUESTS" --input-len 32 --output-len 64 --ignore-eos --extra-body "$2" --json "$WORK/$1.json" >/dev/null
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); l=r['levels'][0] if 'levels' in r else r; print(sys.argv[2], json.dumps({k: l[k] for k in l if 'tok' in k and 'per_s' in k}))" "$WORK/$1.json" "$1"
}
run plain '{}'
run json_schema "{\"guided_json\": $SCHEMA}"
run regex_free_text '{"guided_regex": "[a-z ]{1,400}"}'
