#!/usr/bin/env bash
# Decode tokens/s at 32 streams with and without a JSON-schema constraint
# (docs/PERFORMANCE.md, "Structured outputs"). One `parallm serve` of the
# random llama-110m (q4_0, 32,000-token vocabulary), `parallm bench` three
# times: no constraint, the invoice schema (a warm mask cache after the
# first requests), guided_regex free text (almost every token allowed at
# every step, one position: the cache's best case) and the same text with a
# counted bound (every length its own position: a cache miss, a full walk of
# the vocabulary, until every length was seen once).
# Then bench/mask_bench (no model: the same constraints over the same
# vocabulary, 32 sequences in lock step) gives the mask's own cost per token,
# and that cost times the plain run's tokens/s is the share of decode time the
# masks take on this machine: the number that does not drown in run-to-run
# noise, and that carries to a faster engine (multiply by its tokens/s).
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
PLAIN_TPS=
run() {  # label, extra body: prints the label and bench's summary line (output tok/s)
  local line
  line=$("$BUILD/parallm" bench --url "http://127.0.0.1:$PORT" --endpoint completions --concurrency "$STREAMS" \
    --num-requests "$REQUESTS" --input-len 32 --output-len 128 --ignore-eos --extra-body "$2" 2>&1 | grep 'output tok/s')
  printf '%-16s %s\n' "$1" "${line#bench: }"
  [ "$1" = plain ] && PLAIN_TPS=$(echo "$line" | grep -o '[0-9.]* output tok/s' | grep -o '^[0-9.]*')
  return 0
}
run warm-up '{}'
for round in 1 2; do
  run plain '{}'
  run json_schema "{\"guided_json\": $SCHEMA}"
  run regex_free_text '{"guided_regex": "[a-z ]+"}'
  run regex_counted '{"guided_regex": "[a-z ]{1,400}"}'
done
mask() {  # label, kind, text: the mask's cost per token and its share of the plain run's decode time
  local line us
  line=$("$BUILD/bench/mask_bench" "$WORK/m.gguf" "$2" "$3" "$STREAMS" "$REQUESTS" 128)
  us=$(echo "$line" | grep -o '[0-9.]* us per token' | grep -o '^[0-9.]*')
  printf '%-16s %s\n%-16s %s us/token x %s tok/s = %s of decode time\n' "$1" "${line#mask_bench: }" "" "$us" \
    "$PLAIN_TPS" "$(awk -v u="$us" -v t="$PLAIN_TPS" 'BEGIN { printf "%.1f%%", u * t / 1e4 }')"
}
echo "$SCHEMA" >"$WORK/schema.json"
mask mask_json json_schema "$WORK/schema.json"
mask mask_free regex '[a-z ]+'
mask mask_counted regex '[a-z ]{1,400}'
