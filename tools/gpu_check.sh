#!/usr/bin/env bash
# The GPU machine's check of the CUDA backend (issue #25 "The device check"):
# one script of at most about 5 minutes over the prebuilt binaries and models
# that tools/gpu_bundle.sh packs into gpu_bundle/ (this file is copied there).
#
#   bash gpu_bundle/gpu_check.sh [--bundle DIR] [--out DIR] [--dry-run] [--only S1,S2]
#
#   --bundle   the bundle (default: this script's folder)
#   --out      where the logs and summary.txt go (default: $OUT, the device
#              tool's folder that comes back, else ./gpu_check_out)
#   --dry-run  no GPU needed: checks the bundle, prints each stage's command
#              lines, and runs what runs on CPU devices (the comparators on a
#              CPU run, a CPU serve smoke test, the emulated-device tests)
#   --only     run these stages only (names as in the summary)
#
# Stages (each in `timeout`, budget in seconds; 310 s in all):
#   bundle 10    the bundle's checksums, binaries, libraries, the GPU
#   kernels 40   cuda_gpu_test (kernels vs the emulated device, outputs
#                poisoned) with PARALLM_EXPECT_GPU=1
#   memcheck 25, racecheck 25   compute-sanitizer on the small kernel cases
#   model 50     device_model_test with PARALLM_TEST_DEVICE=cuda:0:
#                teacher-forced logits per preset x weight dtype x KV dtype
#   greedy 30    stories260K greedy tokens (.bin and .gguf) against
#                reference/stories260K_greedy.json
#   serve 30     parallm serve: a mixed batch of concurrent requests,
#                streamed and not, then SIGTERM and a clean exit
#   parallel 30  tp = 2 and pp = 2 on one GPU give the tp = 1 tokens
#   bench_small 30   bench-model on llama-110m (made here with make-model)
#   bench_8b 40      bench-model --synthetic on the 8B shape
# Each stage's log is in OUT/logs/ (on the device machine, where only 8 files
# come back: packed as OUT/logs.tgz and concatenated as OUT/logs.txt). The
# summary table is printed last and written to OUT/summary.txt. Exit 0 only
# if every stage that was not skipped passed (a dry run: none failed).
#
# Statuses: PASS, FAIL, SKIP (could not run here, e.g. the sanitizer refuses
# the device), MISSING (a binary or tool is not there), DRY (dry run: the
# GPU commands were printed, their CPU counterparts passed).
#
# Environment:
#   GPU_CHECK_SANITIZER_FILTER  gtest filter of the sanitizer stages
#   GPU_CHECK_8B_PRESET         make-model preset of the 8B shape (default:
#                               the first preset whose name has "8b")
#   GPU_CHECK_BENCH_DTYPE       weight dtype of the llama-110m file (bf16)
#   GPU_CHECK_TIMEOUT_SCALE     multiplies every budget (default 1; 3 in a
#                               dry run: CPU runs on a small machine)
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")

# Stage names and budgets (seconds), in order.
STAGES=(bundle kernels memcheck racecheck model greedy serve parallel bench_small bench_8b)
# NOTE: each CUDA process pays ~1-3 s of context and cuBLAS start-up, which
# the greedy (4 runs) and parallel (3 runs) budgets allow for.
declare -A BUDGET=([bundle]=10 [kernels]=40 [memcheck]=25 [racecheck]=25 [model]=50 [greedy]=30 [serve]=30
  [parallel]=30 [bench_small]=30 [bench_8b]=40)

# Exit codes of a stage (its process), beside 0 = PASS and 124 = timeout.
RC_SKIP=77
RC_MISSING=78
RC_DRY=79

# ============================================================================
# Helpers shared by the stages (they run in `bash gpu_check.sh __stage NAME`).
# ============================================================================

detail() { printf '%s' "$*" >"$GC_WORK/$STAGE.detail"; }
# Records a command line in the stage's list (printed in a dry run), shell-quoted.
record() {
  [[ ${GC_NORECORD:-0} == 1 ]] && return 0
  local q
  q=$(printf '%q ' "$@")
  echo "${q% }" >>"$GC_WORK/$STAGE.cmds"
  echo "+ ${q% }" >&3 # fd 3: the stage's log, whatever stdout is redirected to
}
# A GPU command: run for real, only recorded in a dry run.
gpu() {
  record "$@"
  [[ $GC_DRY == 1 ]] && return 0
  "$@"
}
# A command that runs in both modes (the CPU side of a dry run).
run() {
  record "$@"
  "$@"
}
dry() { [[ $GC_DRY == 1 ]]; }
finish_pass() {
  detail "$*"
  if dry; then exit "$RC_DRY"; fi
  exit 0
}
fail() {
  detail "$*"
  echo "FAIL: $*"
  exit 1
}

# The device of the GPU commands, and of their CPU counterparts in a dry run.
dev() { if dry; then echo "cpu:$1"; else echo "cuda:0"; fi; }
devs2() { if dry; then echo "cpu:0,cpu:1"; else echo "cuda:0,cuda:0"; fi; }

# gtest's closing lines -> "P passed, F failed, S skipped".
gtest_counts() {
  local p f s
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -n 1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -n 1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$1" | tail -n 1)
  echo "${p:-0} passed, ${f:-0} failed, ${s:-0} skipped"
}

# JSON without jq (the GPU machine may lack it): arrays of integers and
# strings by key, on the whitespace-free text. Good for parallm's and the
# reference's JSON (the keys used here hold integers or plain strings).
json_int_arrays() { # KEY FILE: each occurrence's items, comma-separated, one per line
  tr -d ' \t\r\n' <"$2" | grep -o "\"$1\":\[[-0-9,]*\]" | sed -e 's/^[^[]*\[//' -e 's/\]$//' || true
}
json_number() { # KEY FILE: the first occurrence's value
  tr -d ' \t\r\n' <"$2" | grep -o "\"$1\":[-0-9.eE+]*" | head -n 1 | cut -d: -f2 || true
}
json_string() { # KEY FILE: the first occurrence's value (no escapes)
  tr -d '\r\n' <"$2" | grep -o "\"$1\": *\"[^\"]*\"" | head -n 1 | sed -e 's/^[^:]*: *"//' -e 's/"$//' || true
}
# The first index where two comma lists differ, "" when equal.
first_mismatch() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    na = split(a, x, ","); nb = split(b, y, ",");
    n = na > nb ? na : nb;
    for (i = 1; i <= n; i++) if (x[i] != y[i]) { printf "%d (reference %s, got %s)", i - 1, (i <= na ? x[i] : "end"), (i <= nb ? y[i] : "end"); exit }
  }'
}
list_len() { if [[ -z $1 ]]; then echo 0; else awk -F, '{print NF}' <<<"$1"; fi; }
fmt() { awk -v v="$1" -v f="$2" 'BEGIN {if (v == "") print "?"; else printf f, v}'; }

# HTTP without assuming curl: curl, else python3's standard library
# (GPU_CHECK_NO_CURL=1 takes the python3 path, to test it).
have_curl() { [[ ${GPU_CHECK_NO_CURL:-0} != 1 ]] && command -v curl >/dev/null; }
http_post() { # URL BODYFILE OUTFILE -> prints the status code
  if have_curl; then
    curl -sS -m 60 -o "$3" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$2" "$1" || echo 000
  else
    python3 - "$1" "$2" "$3" <<'PY'
import sys, urllib.request, urllib.error
url, body, out = sys.argv[1:4]
req = urllib.request.Request(url, data=open(body, "rb").read(), headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        data, code = r.read(), r.status
except urllib.error.HTTPError as e:
    data, code = e.read(), e.code
except Exception as e:
    data, code = str(e).encode(), 0
open(out, "wb").write(data)
print(f"{code:03d}", end="")
PY
  fi
}
http_get_code() { # URL -> prints the status code
  if have_curl; then
    curl -s -m 5 -o /dev/null -w '%{http_code}' "$1" || true
  else
    python3 -c 'import sys, urllib.request, urllib.error
try: print(urllib.request.urlopen(sys.argv[1], timeout=5).status)
except urllib.error.HTTPError as e: print(e.code)
except Exception: print("000")' "$1"
  fi
}

# ============================================================================
# The stages. Each exits 0 (PASS), RC_DRY, RC_SKIP, RC_MISSING or non-zero.
# ============================================================================

stage_bundle() {
  local b missing=0 f
  for f in bin/parallm bin/cuda_gpu_test gpu_check.sh MANIFEST SHA256SUMS models/stories260K/stories260K.bin \
    models/stories260K/stories260K.gguf models/stories260K/tok512.bin reference/stories260K_greedy.json; do
    [[ -e $GC_BUNDLE/$f ]] || {
      echo "missing: $f"
      missing=1
    }
  done
  ((missing == 0)) || fail "files missing from $GC_BUNDLE (run tools/gpu_bundle.sh)"
  for b in "$GC_BUNDLE"/bin/*; do [[ -x $b ]] || fail "$b is not executable"; done
  local sums
  sums=$(cd "$GC_BUNDLE" && run sha256sum --quiet -c SHA256SUMS 2>&1) ||
    fail "checksums differ from SHA256SUMS (rerun tools/gpu_bundle.sh): $(grep -v '^+ ' <<<"$sums" | tr '\n' ' ')"
  sed 's/^/  /' "$GC_BUNDLE/MANIFEST"
  # Every library resolves (through the gap-filling folder of setup_libs).
  local unresolved
  unresolved=$(ldd "$GC_BUNDLE"/bin/* 2>&1 | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
  [[ -z $unresolved ]] || fail "libraries not found: $unresolved"
  run "$PARALLM" --help >/dev/null || fail "parallm --help failed"
  local size gpu="none (dry run)" model_test="device_model_test present"
  size=$(du -sh "$GC_BUNDLE" | cut -f1)
  [[ -x $GC_BUNDLE/bin/device_model_test ]] || model_test="no device_model_test"
  if ! dry; then
    # Information only: the kernels stage is what proves the GPU works.
    local smi
    smi=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)
    gpu=$("$smi" --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1 || true)
    "$smi" || true
  fi
  # PASS in both modes: a dry run checks the same bundle.
  detail "$size, sums OK, libs resolve, $model_test; GPU: $gpu"
  exit 0
}

stage_kernels() {
  local bin=$GC_BUNDLE/bin/cuda_gpu_test out=$GC_WORK/kernels.out rc=0
  gpu env PARALLM_EXPECT_GPU=1 "$bin" --gtest_color=no 2>&1 | tee "$out" || rc=$?
  if dry; then
    local listed
    run "$bin" --gtest_list_tests >"$GC_WORK/list.txt" || fail "cuda_gpu_test --gtest_list_tests failed"
    listed=$(grep -c '^  ' "$GC_WORK/list.txt" || true)
    # Without a GPU the device cases skip; the error-path cases still run.
    run "$bin" --gtest_color=no 2>&1 | tee "$out" || fail "cuda_gpu_test without a GPU: $(gtest_counts "$out")"
    finish_pass "$listed tests listed; no-GPU run: $(gtest_counts "$out")"
  fi
  ((rc == 0)) || fail "$(gtest_counts "$out")"
  finish_pass "$(gtest_counts "$out")"
}

find_sanitizer() {
  command -v compute-sanitizer 2>/dev/null && return 0
  local c
  for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [[ -x $c ]] && echo "$c" && return 0
  done
  return 1
}

# memcheck (bad accesses) or racecheck (shared-memory hazards) over the small
# kernel cases: the sanitizer slows kernels 10-100x, so not the whole suite.
sanitizer_stage() {
  local tool=$1 san out=$GC_WORK/$1.out rc=0
  local filter=${GPU_CHECK_SANITIZER_FILTER:-'CudaGpu.*:CudaGpuAttention.*:CudaGpuLinear.*-*Large*:*Long*:*Big*'}
  san=$(find_sanitizer) || san=""
  if [[ -z $san ]]; then
    record compute-sanitizer --tool "$tool" --error-exitcode 86 "$GC_BUNDLE/bin/cuda_gpu_test" \
      "--gtest_filter=$filter"
    detail "no compute-sanitizer (PATH, /usr/local/cuda/bin)"
    exit "$RC_MISSING"
  fi
  gpu env PARALLM_EXPECT_GPU=1 "$san" --tool "$tool" --error-exitcode 86 "$GC_BUNDLE/bin/cuda_gpu_test" \
    --gtest_color=no "--gtest_filter=$filter" 2>&1 | tee "$out" || rc=$?
  if dry; then
    run "$san" --version | tail -n 1
    finish_pass "$(basename "$san") found here; filter $filter"
  fi
  # gVisor machines refuse it ("Device not supported"): nothing was checked.
  if grep -q 'Device not supported' "$out"; then
    detail "compute-sanitizer: Device not supported on this machine"
    exit "$RC_SKIP"
  fi
  local summary
  summary=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$out" | tail -n 1 | sed 's/^=* *//')
  ((rc == 0)) || fail "rc $rc: ${summary:-no summary}; $(gtest_counts "$out")"
  finish_pass "${summary:-no errors}; $(gtest_counts "$out")"
}
stage_memcheck() { sanitizer_stage memcheck; }
stage_racecheck() { sanitizer_stage racecheck; }

stage_model() {
  local bin=$GC_BUNDLE/bin/device_model_test out=$GC_WORK/model.out rc=0
  if [[ ! -x $bin ]]; then
    record env PARALLM_TEST_DEVICE=cuda:0 PARALLM_EXPECT_GPU=1 "PARALLM_SHARED=$GC_BUNDLE" "$bin" '--gtest_filter=DeviceModel*'
    detail "bin/device_model_test is not in the bundle (not built yet?)"
    exit "$RC_MISSING"
  fi
  gpu env PARALLM_TEST_DEVICE=cuda:0 PARALLM_EXPECT_GPU=1 "PARALLM_SHARED=$GC_BUNDLE" "$bin" --gtest_color=no \
    '--gtest_filter=DeviceModel*' 2>&1 | tee "$out" || rc=$?
  if dry; then
    # The same comparisons on the emulated device (its default).
    run env "PARALLM_SHARED=$GC_BUNDLE" "$bin" --gtest_color=no '--gtest_filter=DeviceModel*' 2>&1 | tee "$out" ||
      fail "emulated device: $(gtest_counts "$out")"
  else
    ((rc == 0)) || fail "$(gtest_counts "$out")"
  fi
  # The largest error the tests print, if they print one ("max ... err...: X").
  local err
  err=$(grep -ioE 'max[a-z_ ]*err[a-z_]*[ =:]+[-0-9.eE+]+' "$out" |
    awk '{v = $NF; sub(/^[=:]+/, "", v); if (v + 0 > m) m = v + 0} END {if (NR) printf "max error %.3g", m}' || true)
  finish_pass "$(dry && echo "emulated: ")$(gtest_counts "$out")${err:+; $err}"
}

# Greedy decoding of each reference case in both forms of stories260K.
# Compares the prompt's token ids and the generated ids with the reference's;
# a reference that ends in BOS (1) stopped there: the run must stop too.
greedy_compare() { # REF OUT_PREFIX DEVICE -> "ok N" per run, or a FAIL line; returns 1 on a mismatch
  local ref=$1 prefix=$2 device=$3 m=$GC_BUNDLE/models/stories260K
  local -a prompts gens pids
  mapfile -t prompts < <(tr -d '\r\n' <"$ref" | grep -o '"prompt": *"[^"]*"' | sed -e 's/^[^:]*: *"//' -e 's/"$//')
  mapfile -t gens < <(json_int_arrays generated_token_ids "$ref")
  mapfile -t pids < <(json_int_arrays prompt_token_ids "$ref")
  ((${#prompts[@]} > 0 && ${#prompts[@]} == ${#gens[@]} && ${#gens[@]} == ${#pids[@]})) || {
    echo "FAIL: cannot read the cases of $ref (${#prompts[@]} prompts, ${#gens[@]} token lists)"
    return 1
  }
  local i form bad=0 tokens=0 tps_sum=0 runs=0
  for i in "${!prompts[@]}"; do
    local gen=${gens[$i]} n stop=0 expect
    n=$(list_len "$gen")
    if [[ ${gen##*,} == 1 ]]; then
      stop=1
      n=$((n - 1))
      expect=${gen%,*}
    else
      expect=$gen
    fi
    for form in bin gguf; do
      local -a margs
      if [[ $form == bin ]]; then
        margs=(--model "$m/stories260K.bin" --tokenizer "$m/tok512.bin")
      else
        margs=(--model "$m/stories260K.gguf" --ctx-size 512)
      fi
      local out=$prefix.$i.$form.json
      # A stopping case gets room past the stop, so that stopping is checked.
      run "$PARALLM" generate --json --devices "$device" "${margs[@]}" --temperature 0 --kv-dtype f32 \
        -n $((stop ? n + 5 : n)) --prompt "${prompts[$i]}" >"$out" 2>"$out.err" || {
        echo "FAIL: case $i ($form): generate failed: $(tail -n 3 "$out.err")"
        bad=1
        continue
      }
      local got_p got finish
      got_p=$(json_int_arrays prompt_token_ids "$out" | head -n 1)
      got=$(json_int_arrays token_ids "$out" | head -n 1)
      finish=$(json_string finish_reason "$out")
      if [[ $got_p != "${pids[$i]}" ]]; then
        echo "FAIL: case $i ($form): prompt ids differ at $(first_mismatch "${pids[$i]}" "$got_p")"
        bad=1
      elif [[ $got != "$expect" ]]; then
        echo "FAIL: case $i ($form) '${prompts[$i]}': tokens differ at index $(first_mismatch "$expect" "$got")"
        bad=1
      elif ((stop)) && [[ $finish != stop ]]; then
        echo "FAIL: case $i ($form): the reference stops on BOS, the run ended '$finish'"
        bad=1
      else
        echo "ok case $i ($form): $n tokens equal$( ((stop)) && echo ", stopped")"
        tokens=$((tokens + n))
        tps_sum=$(awk -v a="$tps_sum" -v b="$(json_number generation_tokens_per_s "$out")" 'BEGIN {print a + b}')
        runs=$((runs + 1))
      fi
    done
  done
  echo "SUMMARY: $runs/$((2 * ${#prompts[@]})) runs equal, $tokens tokens, $(fmt "$(awk -v s="$tps_sum" -v r="$runs" 'BEGIN {if (r) print s / r}')" '%.0f') tokens/s"
  return "$bad"
}

stage_greedy() {
  local ref=$GC_BUNDLE/reference/stories260K_greedy.json res=$GC_WORK/greedy.res rc=0
  greedy_compare "$ref" "$GC_WORK/greedy" "$(dev 0)" | tee "$res" || rc=$?
  ((rc == 0)) || fail "$(grep -m1 '^FAIL' "$res" | sed 's/^FAIL: //')"
  if dry; then
    # The comparator must also see a difference: one token changed.
    local bad_ref=$GC_WORK/corrupt_ref.json
    tr -d '\r\n' <"$ref" | sed 's/"generated_token_ids": *\[ *\([0-9]*\)/"generated_token_ids": [ 7/' >"$bad_ref"
    if GC_NORECORD=1 greedy_compare "$bad_ref" "$GC_WORK/greedy_bad" "$(dev 0)" >"$GC_WORK/greedy_bad.res"; then
      fail "the comparator accepted a changed reference"
    fi
    grep -m1 '^FAIL' "$GC_WORK/greedy_bad.res" | sed 's/^/caught as expected: /'
    finish_pass "cpu:0: $(sed -n 's/^SUMMARY: //p' "$res"); a changed token is caught"
  fi
  finish_pass "$(sed -n 's/^SUMMARY: //p' "$res")"
}

stage_serve() {
  local m=$GC_BUNDLE/models/stories260K/stories260K.gguf slog=$GC_WORK/serve.log pid port="" t
  # NOTE: background processes of this stage share `timeout`'s process group,
  # so a stage that runs out of time takes the server with it.
  record "$PARALLM" serve --devices "$(dev 0)" --model "$m" --ctx-size 512 --host 127.0.0.1 --port 0 \
    --served-model-name stories --max-num-seqs 8
  : >"$slog" # polled below before the server writes it
  "$PARALLM" serve --devices "$(dev 0)" --model "$m" --ctx-size 512 --host 127.0.0.1 --port 0 \
    --served-model-name stories --max-num-seqs 8 2>"$slog" &
  pid=$!
  # The server drains on SIGTERM (up to 30 s): when this stage is timed out,
  # or fails, it is killed at once instead of outliving the stage.
  trap 'kill -KILL "$pid" 2>/dev/null || true' EXIT
  trap 'exit 143' TERM INT
  for ((t = 0; t < 100; t++)); do
    port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$slog" | head -n 1)
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || fail "serve exited before listening: $(tail -n 3 "$slog")"
    sleep 0.1
  done
  [[ -n $port ]] || fail "serve printed no port in 10 s"
  local base=http://127.0.0.1:$port code
  for ((t = 0; t < 200; t++)); do
    code=$(http_get_code "$base/health")
    [[ $code == 200 ]] && break
    kill -0 "$pid" 2>/dev/null || fail "serve exited while loading: $(tail -n 3 "$slog")"
    sleep 0.1
  done
  [[ $code == 200 ]] || fail "/health never answered 200 (last: $code)"
  echo "serving on $base"
  # A mixed batch: long and short prompts, short and long outputs, greedy and
  # sampled, streamed and not, all at once, so prefill and decode share steps.
  local long_prompt="" k # ~280 tokens: the context is 512
  for ((k = 0; k < 12; k++)); do long_prompt+="The little cat sat on the warm mat and looked at the sun. "; done
  local -a bodies=(
    '{"model":"stories","prompt":"Once upon a time","max_tokens":64,"temperature":0}'
    "{\"model\":\"stories\",\"prompt\":\"$long_prompt\",\"max_tokens\":16,\"temperature\":0}"
    '{"model":"stories","prompt":"The dog","max_tokens":128,"temperature":0.8,"seed":1}'
    '{"model":"stories","prompt":"Lily went to the park","max_tokens":48,"temperature":0,"stream":true}'
    '{"model":"stories","prompt":"One day","max_tokens":96,"temperature":0.7,"seed":2,"stream":true}'
    '{"model":"stories","prompt":"Tom had a red ball","max_tokens":32,"temperature":0}'
  )
  local -a rpids=()
  for k in "${!bodies[@]}"; do
    printf '%s' "${bodies[$k]}" >"$GC_WORK/req$k.json"
    record curl -sS -H 'Content-Type: application/json' --data-binary "@$GC_WORK/req$k.json" "$base/v1/completions"
    (http_post "$base/v1/completions" "$GC_WORK/req$k.json" "$GC_WORK/resp$k.txt" >"$GC_WORK/code$k") &
    rpids+=($!)
  done
  for k in "${rpids[@]}"; do wait "$k" || true; done
  local ok=0 streamed=0 bad=""
  for k in "${!bodies[@]}"; do
    code=$(cat "$GC_WORK/code$k" 2>/dev/null || echo none)
    echo "request $k: HTTP $code: $(head -c 300 "$GC_WORK/resp$k.txt" 2>/dev/null)"
    if [[ $code != 200 ]]; then
      bad+=" #$k:HTTP-$code"
    elif [[ ${bodies[$k]} == *'"stream":true'* ]]; then
      # SSE: text chunks, then the closing [DONE].
      if grep -q '"text":"[^"]' "$GC_WORK/resp$k.txt" && grep -q '^data: \[DONE\]' "$GC_WORK/resp$k.txt"; then
        ok=$((ok + 1))
        streamed=$((streamed + 1))
      else
        bad+=" #$k:empty-stream"
      fi
    elif grep -q '"text":"[^"]' "$GC_WORK/resp$k.txt"; then
      ok=$((ok + 1))
    else
      bad+=" #$k:empty-text"
    fi
  done
  # SIGTERM drains and exits 0 (docs/server.md "Shutdown").
  local t0 rc=0
  t0=$(date +%s.%N)
  kill -TERM "$pid"
  for ((t = 0; t < 150; t++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    fail "serve did not exit within 15 s of SIGTERM; $ok/${#bodies[@]} requests ok"
  fi
  wait "$pid" || rc=$?
  local exit_s
  exit_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  echo "--- serve stderr"
  cat "$slog"
  [[ -z $bad ]] || fail "$ok/${#bodies[@]} requests ok; failed:$bad"
  ((rc == 0)) || fail "all ${#bodies[@]} requests ok, but serve exited $rc after SIGTERM"
  finish_pass "$(dry && echo "cpu:0: ")$ok/${#bodies[@]} requests 200 with text ($streamed streamed), exit 0 ${exit_s} s after SIGTERM"
}

stage_parallel() {
  local m=$GC_BUNDLE/models/stories260K/stories260K.gguf base tp pp
  local -a common=(generate --json --model "$m" --ctx-size 512 --temperature 0 --kv-dtype f32 -n 100
    --prompt "Once upon a time")
  # A dry run proves the comparison on CPU ranks (cpu:0,cpu:1).
  local one=$GC_WORK/tp1.json two=$GC_WORK/tp2.json pipe=$GC_WORK/pp2.json cmd
  cmd=gpu
  dry && cmd=run
  $cmd "$PARALLM" "${common[@]}" --devices "$(dev 0)" >"$one" 2>"$one.err" || fail "tp=1: $(tail -n 2 "$one.err")"
  $cmd "$PARALLM" "${common[@]}" --tp 2 --devices "$(devs2)" --comm local >"$two" 2>"$two.err" ||
    fail "tp=2: $(tail -n 2 "$two.err")"
  $cmd "$PARALLM" "${common[@]}" --pp 2 --devices "$(devs2)" --comm local >"$pipe" 2>"$pipe.err" ||
    fail "pp=2: $(tail -n 2 "$pipe.err")"
  base=$(json_int_arrays token_ids "$one" | head -n 1)
  tp=$(json_int_arrays token_ids "$two" | head -n 1)
  pp=$(json_int_arrays token_ids "$pipe" | head -n 1)
  [[ -n $base ]] || fail "tp=1 gave no tokens"
  [[ $tp == "$base" ]] || fail "tp=2 differs from tp=1 at index $(first_mismatch "$base" "$tp")"
  [[ $pp == "$base" ]] || fail "pp=2 differs from tp=1 at index $(first_mismatch "$base" "$pp")"
  finish_pass "$(dry && echo "$(devs2): ")tp=2 and pp=2 equal tp=1 ($(list_len "$base") tokens)"
}

# bench-model's numbers -> one line. The probe keys are the ones that
# bench-model --devices cuda:N reports beside prefill and decode (read
# bandwidth, GEMM TFLOP/s, launch µs); any key naming them is picked up.
bench_line() {
  local j=$1 line probes
  line="prefill $(fmt "$(json_number prompt_tokens_per_s "$j")" '%.0f') tok/s"
  line+=" ($(fmt "$(json_number prefill_peak_fraction "$j")" '%.2f') of peak)"
  line+=", decode $(fmt "$(json_number decode_tokens_per_s "$j")" '%.1f') tok/s"
  line+=" ($(fmt "$(json_number decode_roofline_fraction "$j")" '%.2f') of roofline)"
  probes=$(tr -d ' \t\r\n' <"$j" | grep -oE '"[a-z0-9_]*(gb_per_s|tflops|launch_us)[a-z0-9_]*":[-0-9.eE+]+' |
    grep -vE 'one_stream|"decode_' | sed -e 's/"//g' | awk -F: '{printf "%s%s=%.4g", (NR > 1 ? ", " : ""), $1, $2}' || true)
  echo "$line${probes:+; $probes}"
}

stage_bench_small() {
  local dtype=${GPU_CHECK_BENCH_DTYPE:-bf16} model j=$GC_WORK/bench_small.json
  if dry; then
    # The same steps on the tiny preset and a CPU device: make-model, the
    # bench, and the parsing of its JSON.
    model=$GC_WORK/tiny.gguf
    gpu "$PARALLM" make-model --preset llama-110m --dtype "$dtype" --seed 1 --out "$GC_WORK/llama-110m-$dtype.gguf"
    gpu "$PARALLM" bench-model --devices cuda:0 --model "$GC_WORK/llama-110m-$dtype.gguf" --json
    run "$PARALLM" make-model --preset tiny --dtype f32 --seed 1 --out "$model" || fail "make-model failed"
    run "$PARALLM" bench-model --devices cpu:0 --model "$model" --prompt-len 16 --gen-len 8 --repetitions 1 \
      --json >"$j" || fail "bench-model on cpu:0 failed"
    cat "$j"
    [[ -n $(json_number decode_tokens_per_s "$j") ]] || fail "no decode_tokens_per_s in bench-model's JSON"
    finish_pass "cpu:0 tiny: $(bench_line "$j")"
  fi
  # ~120 MiB at q8_0, too much to carry: made here, a few seconds.
  model=$GC_WORK/llama-110m-$dtype.gguf
  gpu "$PARALLM" make-model --preset llama-110m --dtype "$dtype" --seed 1 --out "$model" || fail "make-model failed"
  gpu "$PARALLM" bench-model --devices cuda:0 --model "$model" --json >"$j" 2>"$j.err" ||
    fail "bench-model failed: $(tail -n 2 "$j.err")"
  cat "$j.err"
  cat "$j"
  [[ -n $(json_number decode_tokens_per_s "$j") ]] || fail "no decode_tokens_per_s in bench-model's JSON"
  finish_pass "llama-110m $dtype: $(bench_line "$j")"
}

stage_bench_8b() {
  local preset=${GPU_CHECK_8B_PRESET:-} j=$GC_WORK/bench_8b.json notes=""
  local help
  if [[ -z $preset ]]; then
    # make-model --help lists the presets, one per line, name first.
    help=$("$PARALLM" make-model --help 2>&1 || true)
    preset=$(awk '$1 ~ /8[bB]/ {print $1; exit}' <<<"$help")
  fi
  help=$("$PARALLM" bench-model --help 2>&1 || true)
  [[ $help == *--synthetic* ]] || notes+="bench-model has no --synthetic yet; "
  if [[ -z $preset ]]; then
    record "$PARALLM" bench-model --synthetic '<8B preset>' --devices cuda:0 --json
    detail "${notes}no make-model preset with '8b' in its name (set GPU_CHECK_8B_PRESET)"
    dry && exit "$RC_DRY"
    exit "$RC_MISSING"
  fi
  gpu "$PARALLM" bench-model --synthetic "$preset" --devices cuda:0 --json >"$j" 2>"$j.err" ||
    fail "${notes}bench-model failed: $(tail -n 2 "$j.err")"
  if dry; then
    # The same flag on a small preset and the emulated device: the weights
    # are filled on the device there too, and the JSON parses.
    run "$PARALLM" bench-model --synthetic tiny-256 --devices emu:0 --prompt-len 8 --gen-len 4 --repetitions 1 \
      --json >"$j" 2>"$j.err" || fail "bench-model --synthetic on emu:0 failed: $(tail -n 2 "$j.err")"
    [[ -n $(json_number decode_tokens_per_s "$j") ]] || fail "no decode_tokens_per_s in bench-model's JSON"
    finish_pass "${notes}preset $preset; emu:0 --synthetic tiny-256: $(bench_line "$j")"
  fi
  cat "$j.err" "$j"
  [[ -n $(json_number decode_tokens_per_s "$j") ]] || fail "no decode_tokens_per_s in bench-model's JSON"
  finish_pass "$preset: $(bench_line "$j")"
}

# ============================================================================
# Libraries: the bundle packs the non-CUDA libraries its build machine
# resolved (bundle/lib); here only those this machine's loader lacks are put
# on LD_LIBRARY_PATH (through symlinks in WORK/lib), so that no bundled copy
# shadows one of this machine's (compute-sanitizer, python3 and curl load
# their own). CUDA's come from this machine's toolkit.
# ============================================================================
setup_libs() {
  local libdir=$GC_WORK/lib pass name c found
  mkdir -p "$libdir"
  export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # A missing library's own needs show up once it resolves: a few rounds.
  for pass in 1 2 3 4; do
    local -a missing
    mapfile -t missing < <(ldd "$GC_BUNDLE"/bin/* 2>/dev/null | awk '/not found/ {print $1}' | sort -u)
    ((${#missing[@]} > 0)) || return 0
    found=0
    for name in "${missing[@]}"; do
      for c in "$GC_BUNDLE/lib" /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
        /usr/lib/x86_64-linux-gnu/openmpi/lib; do
        if [[ -e $c/$name && ! -e $libdir/$name ]]; then
          ln -s "$c/$name" "$libdir/$name"
          echo "gpu_check: using $c/$name (pass $pass)"
          found=1
          break
        fi
      done
    done
    ((found)) || return 0
  done
}

# ============================================================================
# Main.
# ============================================================================

if [[ ${1:-} == __stage ]]; then
  STAGE=$2
  PARALLM=$GC_BUNDLE/bin/parallm
  exec 3>&1
  cd "$GC_WORK"
  "stage_$STAGE"
  exit 0
fi

usage() { sed -n '2,/^set -euo/p' "$SELF" | sed -e '$d' -e 's/^# \{0,1\}//'; }
BUNDLE=$(dirname "$SELF")
OUTDIR=""
DRY=0
ONLY=""
while (($#)); do
  case $1 in
    --bundle) BUNDLE=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --only) ONLY=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
PACK_LOGS=0
if [[ -z $OUTDIR ]]; then
  if [[ -n ${OUT:-} ]]; then
    OUTDIR=$OUT
    PACK_LOGS=1 # the device tool brings back at most 8 files
  else
    OUTDIR=./gpu_check_out
  fi
fi
[[ -d $BUNDLE/bin ]] || { echo "gpu_check: $BUNDLE is no bundle (no bin/): run tools/gpu_bundle.sh" >&2; exit 2; }
BUNDLE=$(cd "$BUNDLE" && pwd)
mkdir -p "$OUTDIR/logs"
OUTDIR=$(cd "$OUTDIR" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export GC_BUNDLE=$BUNDLE GC_WORK=$WORK GC_DRY=$DRY
setup_libs
SCALE=${GPU_CHECK_TIMEOUT_SCALE:-$([[ $DRY == 1 ]] && echo 3 || echo 1)}
mode=$([[ $DRY == 1 ]] && echo "dry run (no GPU)" || echo "GPU run")
echo "gpu_check: $mode; bundle $BUNDLE ($(sed -n 's/^commit: //p' "$BUNDLE/MANIFEST" 2>/dev/null)); out $OUTDIR"

declare -A STATUS SECS DETAIL
total_budget=0
n=0
for s in "${STAGES[@]}"; do
  if [[ -n $ONLY && ",$ONLY," != *",$s,"* ]]; then continue; fi
  n=$((n + 1))
  budget=$(awk -v b="${BUDGET[$s]}" -v k="$SCALE" 'BEGIN {t = int(b * k); print (t < 1 ? 1 : t)}')
  total_budget=$((total_budget + budget))
  logf=$OUTDIR/logs/$(printf '%02d' "$n")_$s.log
  echo "== $s (budget ${budget} s)"
  t0=$(date +%s.%N)
  rc=0
  # -k: a stage that ignores SIGTERM (a hung CUDA call) is killed 5 s later.
  timeout -k 5 "$budget" bash "$SELF" __stage "$s" >"$logf" 2>&1 || rc=$?
  SECS[$s]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  # One line of the table: newlines folded, long texts cut (the log has all).
  DETAIL[$s]=$(tr '\n' ' ' <"$WORK/$s.detail" 2>/dev/null | cut -c1-240 || true)
  case $rc in
    0) STATUS[$s]=PASS ;;
    "$RC_DRY") STATUS[$s]=DRY ;;
    "$RC_SKIP") STATUS[$s]=SKIP ;;
    "$RC_MISSING") STATUS[$s]=MISSING ;;
    124 | 137)
      STATUS[$s]=FAIL
      DETAIL[$s]="timed out after ${budget} s${DETAIL[$s]:+; ${DETAIL[$s]}}"
      ;;
    *)
      STATUS[$s]=FAIL
      [[ -n ${DETAIL[$s]} ]] || DETAIL[$s]="exit $rc: $(grep -v '^+ ' "$logf" | tail -n 1 | cut -c1-160)"
      ;;
  esac
  echo "   ${STATUS[$s]} in ${SECS[$s]} s: ${DETAIL[$s]}"
  if [[ $DRY == 1 && -s $WORK/$s.cmds ]]; then
    # The exact command lines this stage runs on the GPU machine (and, in a
    # dry run, their CPU counterparts).
    sed 's/^/   $ /' "$WORK/$s.cmds"
  fi
  if [[ ${STATUS[$s]} == FAIL ]]; then
    echo "   --- last lines of $logf:"
    tail -n 15 "$logf" | sed 's/^/   | /'
  fi
done

summary=$OUTDIR/summary.txt
{
  echo "gpu_check $mode: $(sed -n 's/^commit: //p' "$BUNDLE/MANIFEST" 2>/dev/null); $(date -u +%Y-%m-%dT%H:%M:%SZ); budgets ${total_budget} s"
  printf '%-12s %-8s %7s  %s\n' stage status seconds detail
  printf '%-12s %-8s %7s  %s\n' ------------ -------- ------- ------
  for s in "${STAGES[@]}"; do
    [[ -n ${STATUS[$s]:-} ]] || continue
    printf '%-12s %-8s %7s  %s\n' "$s" "${STATUS[$s]}" "${SECS[$s]}" "${DETAIL[$s]}"
  done
} >"$summary"

if ((PACK_LOGS)); then
  for f in "$OUTDIR"/logs/*.log; do
    echo "===== $(basename "$f")"
    cat "$f"
  done >"$OUTDIR/logs.txt"
  tar -czf "$OUTDIR/logs.tgz" -C "$OUTDIR" logs
  rm -rf "$OUTDIR/logs"
fi

echo
cat "$summary"
n_failed=0
n_missing=0
for s in "${!STATUS[@]}"; do
  if [[ ${STATUS[$s]} == FAIL ]]; then n_failed=$((n_failed + 1)); fi
  if [[ ${STATUS[$s]} == MISSING ]]; then n_missing=$((n_missing + 1)); fi
done
if [[ $DRY == 1 ]]; then
  # A dry run checks the tooling: what is not built yet is reported, not failed.
  ((n_missing == 0)) || echo "gpu_check: $n_missing stage(s) MISSING (not built or not installed here)"
  ((n_failed == 0)) || { echo "gpu_check: dry run FAILED ($n_failed stage(s))"; exit 1; }
  echo "gpu_check: dry run passed"
  exit 0
fi
((n_failed + n_missing == 0)) || { echo "gpu_check: FAILED ($n_failed failed, $n_missing missing)"; exit 1; }
echo "gpu_check: all stages passed (skipped ones say why)"
